//! `cqrs template`: `--check` finds drift (template.yaml against the model, the framework and the
//! own part; the cargo lambda watch router) and exits 1 naming it and the fix, or exits 0 when
//! clean, writing nothing either way; a service written before routes were declared is refused
//! with the declarations to add, and upgraded by adding them; the own routes deploy behind the
//! JWT authorizer with least-privilege roles (checked on SAM's transform of the template).

use std::path::{Path, PathBuf};
use std::process::Command;

use cqrs_testkit::own_routes::{self, OwnRoute};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn cqrs(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(args)
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cqrs-template-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn template(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["template", "--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    cqrs(&args)
}

/// The files of `dir` `cqrs template` reads or writes, as they are.
fn snapshot(dir: &Path) -> Vec<(String, Option<String>)> {
    [
        "template.yaml",
        "Cargo.toml",
        "model.toml",
        "template.own.yaml",
    ]
    .iter()
    .map(|n| (n.to_string(), std::fs::read_to_string(dir.join(n)).ok()))
    .collect()
}

#[test]
fn check_names_what_drifted_and_passes_when_clean() {
    let dir = scratch("check").join("library");
    let (code, out, err) = cqrs(&["new", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = template(&dir, &["--check"]);
    assert_eq!(code, 0, "a new service is up to date: {out}{err}");
    assert!(dir.join("template.own.yaml").is_file());

    // template.yaml edited by hand: found, placed, the fix named, nothing written.
    let path = dir.join("template.yaml");
    let edited = read(&path).replace(
        "      Description: GET /items/... - latest state, partitions, history.\n",
        "      Description: GET /items/... - edited by hand.\n",
    );
    std::fs::write(&path, &edited).unwrap();
    let before = snapshot(&dir);
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    for needle in [
        "template.yaml differs",
        "in Resources.QueryHandlerFunction",
        "the framework's template",
        "edited by hand",
        &format!("cqrs template --dir {}", dir.display()),
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert_eq!(snapshot(&dir), before, "--check writes nothing");

    // The router without one of the framework's routes.
    let manifest = dir.join("Cargo.toml");
    let text = read(&manifest);
    std::fs::write(
        &manifest,
        text.replace("\"/query/{pattern}\" = \"query-handler\"\n", ""),
    )
    .unwrap();
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cargo lambda watch router differs"), "{err}");
    assert!(err.contains("/query/{pattern}"), "{err}");

    // Written, it is clean again; the manifest is what it was.
    let (code, out, err) = template(&dir, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read(&manifest), text);
    assert_eq!(template(&dir, &["--check"]).0, 0);

    // The own part changed: named as its origin; written, kept.
    std::fs::write(
        dir.join("template.own.yaml"),
        "Resources:\n  CoverBucket:\n    Type: AWS::S3::Bucket\n",
    )
    .unwrap();
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Resources.CoverBucket"), "{err}");
    assert!(err.contains("(from template.own.yaml)"), "{err}");
    assert_eq!(template(&dir, &[]).0, 0);
    assert!(read(&path).contains("  CoverBucket:\n    Type: AWS::S3::Bucket\n"));

    // A new route in the model: named as its origin, then deployed and routed locally.
    let model = dir.join("model.toml");
    let mut text = read(&model);
    text.push_str(
        "\n[routes.member-loans]\nreads = [\"data\"]\n\
         [routes.member-loans.operations.memberLoans]\nmethod = \"GET\"\npath = \"/members/{memberId}/loans\"\n",
    );
    std::fs::write(&model, text).unwrap();
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[routes.member-loans]"), "{err}");
    assert_eq!(template(&dir, &[]).0, 0);
    assert!(read(&path).contains("  MemberLoansFunction:\n"));
    assert!(read(&manifest).contains(
        "\"/members/{memberId}/loans\" = [{ method = \"GET\", function = \"member-loans\" }]\n"
    ));
    assert!(
        read(&path).contains("  CoverBucket:\n"),
        "the own part is kept"
    );
    let problems = cqrs_testkit::routers::differences(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// The starter as `cqrs new` wrote it at 48d8ccf (`tests/upgrade/48d8ccf`): its report route is
/// in the router only. `cqrs template` refuses it with the declaration to add, writing nothing;
/// with the declaration added, it writes the route's function and keeps the manifest's other bytes.
#[test]
fn a_route_in_the_router_only_is_refused_with_its_declaration() {
    let dir = scratch("upgrade");
    let old = Path::new(ROOT).join("tests/upgrade/48d8ccf");
    for name in ["model.toml", "Cargo.toml", "template.yaml"] {
        std::fs::copy(old.join(name), dir.join(name)).unwrap();
    }
    let before = snapshot(&dir);
    let (code, out, err) = template(&dir, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("(every method) /tasks/report -> task-report"),
        "{err}"
    );
    assert_eq!(snapshot(&dir), before, "nothing is written");
    let (code, _, check) = template(&dir, &["--check"]);
    assert_eq!(code, 1);
    assert!(check.contains("[routes.task-report]"), "{check}");

    // The author says what it reads, and adds the declaration as printed.
    let declaration = &err[err.find("[routes.task-report]").unwrap()..];
    let declaration = declaration.replace("reads = []", "reads = [\"sql\"]");
    let model = dir.join("model.toml");
    std::fs::write(&model, read(&model) + "\n" + &declaration + "\n").unwrap();
    let (code, out, err) = template(&dir, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(template(&dir, &["--check"]).0, 0);
    let written = read(&dir.join("template.yaml"));
    assert!(written.contains("  TaskReportFunction:\n"));
    assert!(
        written.contains("    Default: tasks\n"),
        "the prefix is kept"
    );
    // Only the router's own lines changed in the manifest.
    let old_manifest = read(&old.join("Cargo.toml"));
    let new_manifest = read(&dir.join("Cargo.toml"));
    let cut = old_manifest.find("# The service's own route").unwrap();
    assert_eq!(new_manifest[..cut], old_manifest[..cut]);
    assert_eq!(
        &new_manifest[cut..],
        "# The service's own routes (model.toml [routes]).\n\
         \"/tasks/report\" = [{ method = \"GET\", function = \"task-report\" }]\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Python that runs `scripts/sam-transform.py`, as `shared/testkit/tests/sam_transformed.rs`
/// chooses it; `None` when told to skip (never under CI).
fn python() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("SAM_TRANSFORM_PYTHON") {
        return Some(explicit.into());
    }
    let venv = Path::new(ROOT).join(".venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    let skip = std::env::var("CQRS_SKIP_SAM_TRANSFORMED").is_ok_and(|v| v == "1");
    if skip && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED (CQRS_SKIP_SAM_TRANSFORMED=1): no .venv to transform the template");
        return None;
    }
    panic!(
        "{} is missing: run scripts/tools.sh, name a Python with aws-sam-translator in \
         SAM_TRANSFORM_PYTHON, or set CQRS_SKIP_SAM_TRANSFORMED=1",
        venv.display()
    );
}

fn transform(python: &Path, template: &Path) -> serde_json::Value {
    let out = Command::new(python)
        .arg(Path::new(ROOT).join("scripts/sam-transform.py"))
        .arg(template)
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const OWN_ROUTES: &str = r#"
[routes.shelf-data]
reads = ["data"]
[routes.shelf-data.operations.shelfItems]
method = "GET"
path = "/shelf/{shelfId}/items"

[routes.shelf-history]
reads = ["history"]
[routes.shelf-history.operations.shelfHistory]
method = "GET"
path = "/shelf/{shelfId}/history"
[routes.shelf-history.operations.shelfHistoryNote]
method = "POST"
path = "/shelf/{shelfId}/history"

[routes.shelf-sql]
reads = ["sql", "data"]
timeout = 20
[routes.shelf-sql.operations.shelfReport]
method = "GET"
path = "/shelf/report"
"#;

#[test]
fn own_routes_deploy_behind_the_authorizer_with_least_privilege() {
    let Some(python) = python() else { return };
    let dir = scratch("transformed");
    let example = read(&Path::new(ROOT).join("model.toml"));
    std::fs::write(dir.join("model.toml"), format!("{example}\n{OWN_ROUTES}")).unwrap();
    let (code, out, err) = template(&dir, &["--prefix", "shop"]);
    assert_eq!(code, 0, "{out}{err}");
    let model = cqrs_model::Model::parse(&read(&dir.join("model.toml"))).unwrap();
    let routes: Vec<OwnRoute> = model
        .routes()
        .iter()
        .map(|r| OwnRoute {
            name: r.name.clone(),
            reads: r.reads.iter().map(|a| a.as_str().to_string()).collect(),
            routes: r
                .operations
                .iter()
                .map(|op| (op.method.clone(), op.path.clone()))
                .collect(),
        })
        .collect();
    assert!(routes.len() >= 3);
    let path = dir.join("template.yaml");
    let t = transform(&python, &path);
    let problems = own_routes::problems(&t, &routes);
    assert!(problems.is_empty(), "{problems:#?}");

    // Each check notices: a write grant, a route without the authorizer, a missing function.
    let text = read(&path);
    let mutations = [
        (
            "                  - dynamodb:BatchGetItem\n",
            "                  - dynamodb:BatchGetItem\n                  - dynamodb:PutItem\n",
            "dynamodb:PutItem",
        ),
        (
            "            Path: /shelf/report\n",
            "            Path: /shelf/report\n            Auth:\n              Authorizer: NONE\n",
            "expected the JWT authorizer",
        ),
        (
            "                    - rds-db:connect\n",
            "                    - rds-db:connect\n                    - secretsmanager:GetSecretValue\n",
            "secretsmanager:GetSecretValue",
        ),
        (
            "          SQL_USER: cqrs_routes\n",
            "          SQL_USER: cqrs_sync\n",
            "SQL_USER cqrs_routes",
        ),
    ];
    for (from, to, needle) in mutations {
        assert!(text.contains(from), "{from:?}");
        let mutated = dir.join("mutated.yaml");
        std::fs::write(&mutated, text.replacen(from, to, 1)).unwrap();
        let problems = own_routes::problems(&transform(&python, &mutated), &routes);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    let mut missing = routes.clone();
    missing.push(OwnRoute {
        name: "absent".into(),
        reads: vec![],
        routes: vec![],
    });
    let problems = own_routes::problems(&t, &missing);
    assert!(
        problems.iter().any(|p| p.contains("AbsentFunction")),
        "{problems:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
