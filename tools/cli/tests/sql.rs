//! `cqrs model sql`: the example service's migrations (`migrations/` at the workspace's root) are up
//! to date with its model (drift fails the test and says how to write the next migration), and a
//! model change becomes a new migration through the command, as a service's developer runs it.

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn cqrs(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_example_services_migrations_are_up_to_date_with_its_model() {
    let (code, out, err) = cqrs(&[
        "model",
        "sql",
        "--file",
        &format!("{ROOT}/model.toml"),
        "--migrations",
        &format!("{ROOT}/migrations"),
        "--check",
    ]);
    assert_eq!(
        code, 0,
        "the model changed since the last migration: run `cargo run -p cqrs-cli -- model sql \
         --migrations migrations` in the workspace's root and commit the new file\n{out}{err}"
    );
}

#[test]
fn a_model_change_becomes_the_next_migration() {
    let dir = std::env::temp_dir().join(format!("cqrs-cli-sql-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.toml");
    let migrations = dir.join("migrations");
    let (file, folder) = (model.to_str().unwrap(), migrations.to_str().unwrap());
    let v1 = "[entities.task]\npk = \"TASK#{tenant}\"\nsk = \"{taskId}\"\n\
              attributes.taskId = { type = \"string\", required = true }\n";
    std::fs::write(&model, v1).unwrap();
    assert_eq!(
        cqrs(&[
            "model",
            "sql",
            "--file",
            file,
            "--migrations",
            folder,
            "--check"
        ])
        .0,
        1
    );
    let (code, out, _) = cqrs(&["model", "sql", "--file", file, "--migrations", folder]);
    assert_eq!(
        (code, out.trim_end()),
        (0, format!("wrote {folder}/V1__model.sql").as_str())
    );
    assert_eq!(
        cqrs(&[
            "model",
            "sql",
            "--file",
            file,
            "--migrations",
            folder,
            "--check"
        ])
        .0,
        0
    );

    std::fs::write(
        &model,
        format!("{v1}attributes.done = {{ type = \"boolean\" }}\n"),
    )
    .unwrap();
    let (code, _, err) = cqrs(&[
        "model",
        "sql",
        "--file",
        file,
        "--migrations",
        folder,
        "--check",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"ALTER TABLE "task" ADD COLUMN IF NOT EXISTS "done" boolean;"#),
        "{err}"
    );
    let (code, out, _) = cqrs(&["model", "sql", "--file", file, "--migrations", folder]);
    assert_eq!(
        (code, out.trim_end()),
        (0, format!("wrote {folder}/V2__model.sql").as_str())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_model_whose_names_could_become_sql_is_refused_and_nothing_is_written() {
    let dir = std::env::temp_dir().join(format!("cqrs-cli-sql-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.toml");
    let migrations = dir.join("migrations");
    let (file, folder) = (model.to_str().unwrap(), migrations.to_str().unwrap());
    // A newline in an attribute's name would end a `--` comment of a later migration, and what
    // follows would run; a name longer than 63 bytes PostgreSQL would cut.
    for attribute in [r#""x\nDROP TABLE task; --""#.to_string(), "y".repeat(64)] {
        std::fs::write(
            &model,
            format!(
                "[entities.task]\npk = \"TASK#{{tenant}}\"\nsk = \"{{taskId}}\"\n\
                 attributes.taskId = {{ type = \"string\", required = true }}\n\
                 attributes.{attribute} = {{ type = \"string\" }}\n"
            ),
        )
        .unwrap();
        let (code, out, err) = cqrs(&["model", "sql", "--file", file, "--migrations", folder]);
        assert_ne!(code, 0, "{out}{err}");
        assert!(
            err.contains("control character") || err.contains("63 bytes"),
            "{err}"
        );
        assert!(!migrations.exists(), "nothing written");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
