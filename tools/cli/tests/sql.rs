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

/// `cqrs verify --sql` / `rebuild --sql` against a PostgreSQL that requires TLS (as RDS Proxy does):
/// a throwaway cluster with TLS on (a certificate authority made for the test by `openssl`), every
/// unencrypted connection refused by its `pg_hba.conf`.
mod tls {
    use std::path::PathBuf;
    use std::process::{Command, Output};

    use cqrs_local_stack::postgres::Throwaway;
    use tokio_postgres::NoTls;

    /// The database user the proxy-form test signs in as, with the IAM token as its password.
    pub const IAM_USER: &str = "cqrs_iam";

    /// A cluster with TLS on that refuses every unencrypted TCP connection; [`IAM_USER`] signs in
    /// with a password (scram), everyone else is trusted once encrypted. Answers the cluster, an
    /// (unencrypted, already open) superuser connection, and the folder holding `ca.crt`.
    pub async fn cluster(name: &str) -> (Throwaway, tokio_postgres::Client, PathBuf) {
        let pg = Throwaway::start(name).unwrap();
        let (admin, connection) = tokio_postgres::connect(&pg.url(), NoTls).await.unwrap();
        tokio::spawn(connection);
        // First match wins: these lines go before the cluster's own.
        let work = pg
            .enable_tls(&format!(
                "hostnossl all all all reject\n\
                 hostssl all {IAM_USER} all scram-sha-256\n\
                 hostssl all all all trust\n"
            ))
            .await
            .unwrap();
        // An unencrypted connection is refused now.
        assert!(
            tokio_postgres::connect(&pg.url(), NoTls).await.is_err(),
            "pg_hba.conf still lets an unencrypted connection in"
        );
        let model = cqrs_model::Model::example();
        let ddl = cqrs_sql::migrate::plan(None, &cqrs_sql::schema::Schema::of(&model))
            .unwrap()
            .unwrap();
        admin.batch_execute(&ddl).await.unwrap();
        (pg, admin, work)
    }

    /// Runs `cqrs <args>` on the tables of `t`, with `env` set, where the example's `model.toml` is.
    pub fn cqrs(t: &cqrs_testkit::TestTables, args: &[&str], env: &[(&str, &str)]) -> Output {
        let service = std::env::temp_dir().join(format!("cqrs-cli-sql-tls-{}", t.data));
        std::fs::create_dir_all(&service).unwrap();
        std::fs::write(service.join("model.toml"), cqrs_model::EXAMPLE_TOML).unwrap();
        Command::new(env!("CARGO_BIN_EXE_cqrs"))
            .current_dir(&service)
            .args(args)
            .args(["--endpoint-url", &cqrs_testkit::endpoint::endpoint()])
            .env("DATA_TABLE", &t.data)
            .env_remove("SQL_URL")
            .envs(env.iter().copied())
            .output()
            .expect("the cqrs binary runs")
    }

    pub fn json(output: &Output) -> serde_json::Value {
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "not JSON: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }
}

/// A connection string to a server that requires TLS: `verify --sql` and `rebuild --sql` take
/// TLS, verified against the Amazon roots plus `--sql-ca-file`.
#[tokio::test]
async fn verify_sql_reaches_a_database_that_requires_tls() {
    let t = cqrs_testkit::fresh_tables().await;
    let (pg, _admin, work) = tls::cluster("cqrs-cli-sql-tls-url").await;
    let url = format!(
        "postgres://postgres@localhost:{}/postgres?sslmode=require&hostaddr=127.0.0.1",
        pg.instance().port
    );
    let ca = work.join("ca.crt");
    let output = tls::cqrs(
        &t,
        &["verify", "--sql", "--sql-url", &url, "--json"],
        &[("SQL_CA_FILE", ca.to_str().unwrap())],
    );
    let found = tls::json(&output);
    assert_eq!(
        (output.status.code(), found["differences"].as_u64()),
        (Some(0), Some(0)),
        "{found}"
    );
}

/// The proxy form: `--sql-host` … as sql-sync's variables say it; the password is the IAM token
/// `cqrs_sql::connect::Iam::token` (sql-sync's signer) signs with the CLI's AWS credentials (the
/// SDK's chain: here the environment's) for the given region, at a fixed instant (a hidden test
/// hook), over TLS verified against the Amazon roots plus `SQL_CA_FILE`. A test cannot reach AWS:
/// the cluster holds that token as the user's scram password, so the CLI gets in only if it
/// signed exactly that token and sent it as the password.
#[tokio::test]
async fn verify_and_rebuild_sql_sign_in_to_a_proxy_with_the_iam_token_over_tls() {
    let t = cqrs_testkit::fresh_tables().await;
    let (pg, admin, work) = tls::cluster("cqrs-cli-sql-tls-iam").await;
    let port = pg.instance().port;
    let (key, secret, session) = ("AKIDCLITEST", "cli/test+secret", "cli-session-token");
    let at = 1_795_666_800u64;
    let proxy = cqrs_sql::connect::Iam {
        host: "localhost".into(),
        port,
        database: "postgres".into(),
        user: tls::IAM_USER.into(),
        region: "eu-west-1".into(),
    };
    let credentials =
        cqrs_sql::connect::Credentials::new(key, secret, Some(session.into()), None, "test");
    let token = proxy
        .token(
            credentials,
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(at),
        )
        .unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {} LOGIN PASSWORD '{}'; GRANT ALL ON ALL TABLES IN SCHEMA public TO {};",
            tls::IAM_USER,
            token.replace('\'', "''"),
            tls::IAM_USER
        ))
        .await
        .unwrap();
    let ca = work.join("ca.crt");
    let port = port.to_string();
    let env = [
        ("SQL_HOST", "localhost"),
        ("SQL_PORT", port.as_str()),
        ("SQL_DATABASE", "postgres"),
        ("SQL_USER", tls::IAM_USER),
        ("SQL_CA_FILE", ca.to_str().unwrap()),
        ("AWS_ACCESS_KEY_ID", key),
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_SESSION_TOKEN", session),
    ];
    let at = at.to_string();
    for command in ["verify", "rebuild"] {
        let output = tls::cqrs(
            &t,
            &[
                command,
                "--sql",
                "--sql-region",
                "eu-west-1",
                "--sql-token-time",
                &at,
                "--json",
            ],
            &env,
        );
        let out = tls::json(&output);
        assert_eq!(
            (output.status.code(), out["differences"].as_u64()),
            (Some(0), Some(0)),
            "{command}: {out}"
        );
    }

    // Another instant is another token: refused by the server (the password is the token).
    let output = tls::cqrs(
        &t,
        &[
            "verify",
            "--sql",
            "--sql-region",
            "eu-west-1",
            "--sql-token-time",
            "1795666801",
        ],
        &env,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );

    // Without the test's CA, the server's certificate is not trusted (Amazon roots only).
    let without_ca: Vec<_> = env
        .iter()
        .copied()
        .filter(|(k, _)| *k != "SQL_CA_FILE")
        .collect();
    let output = tls::cqrs(
        &t,
        &[
            "verify",
            "--sql",
            "--sql-region",
            "eu-west-1",
            "--sql-token-time",
            &at,
        ],
        &without_ca,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("UnknownIssuer") || stderr.contains("certificate"),
        "{stderr}"
    );
}

/// An incomplete proxy form is a usage error (exit 2) naming the flag and its variable; nothing
/// is read (no table named, no database started).
#[test]
fn an_incomplete_sql_target_is_a_usage_error_naming_the_flag() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
            .args(args)
            .env_remove("SQL_URL")
            .env_remove("SQL_HOST")
            .env_remove("SQL_DATABASE")
            .env_remove("SQL_USER")
            .env_remove("SQL_REGION")
            .env("AWS_REGION", "eu-west-1")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["verify", "--sql"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--sql-url (SQL_URL)") && err.contains("--sql-host (SQL_HOST)"),
        "{err}"
    );
    let (code, err) = run(&[
        "rebuild",
        "--sql",
        "--sql-host",
        "p.example",
        "--sql-user",
        "u",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--sql-database (SQL_DATABASE)"), "{err}");
    let (code, err) = run(&[
        "verify",
        "--sql",
        "--sql-host",
        "p.example",
        "--sql-database",
        "d",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--sql-user (SQL_USER)"), "{err}");
    let (code, err) = run(&[
        "verify",
        "--sql",
        "--sql-host",
        "p.example",
        "--sql-database",
        "d",
        "--sql-user",
        "a b",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--sql-user (SQL_USER)") && err.contains("letters, digits"),
        "{err}"
    );
}
