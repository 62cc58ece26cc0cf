//! `cqrs new`: what it writes is the committed snapshot (`tests/snapshots/new/library/`, regenerated
//! with `UPDATE_SNAPSHOTS=1`), its template is the framework's for the starter model, this
//! repository's `template.yaml` and router are what `cqrs template` writes for the example model (the
//! example is one such service), and a folder that is not empty is left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/new/library");

fn cqrs(args: &[&str]) -> (i32, String, String) {
    // Offline: a check of the registry (`--framework version:`) never reaches the network here.
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
    let dir = std::env::temp_dir().join(format!("cqrs-new-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Every file under `dir`, as paths relative to it, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_new_service_is_the_snapshot() {
    let dir = scratch("snapshot").join("library");
    // A checkout of the framework beside the service: the same text on every machine.
    let (code, out, err) = cqrs(&[
        "new",
        dir.to_str().unwrap(),
        "--framework",
        "path:../cqrs-dynamo",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("created service library"), "{out}");
    let written = files(&dir);
    // template.yaml is the framework's template (checked below), not a snapshot of its own.
    let compared: Vec<&PathBuf> = written
        .iter()
        .filter(|p| p.as_os_str() != "template.yaml")
        .collect();
    let snapshot = Path::new(SNAPSHOT);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        let _ = std::fs::remove_dir_all(snapshot);
        for path in &compared {
            let target = snapshot.join(path);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(dir.join(path), target).unwrap();
        }
        return;
    }
    let expected = files(snapshot);
    assert_eq!(
        compared.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        expected.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        "the files cqrs new writes changed; if that is intended: \
         UPDATE_SNAPSHOTS=1 cargo test -p cqrs-cli --test new"
    );
    for path in compared {
        let got = std::fs::read_to_string(dir.join(path)).unwrap();
        let want = std::fs::read_to_string(snapshot.join(path)).unwrap();
        assert!(
            got == want,
            "{} differs from its snapshot; if that is intended: \
             UPDATE_SNAPSHOTS=1 cargo test -p cqrs-cli --test new\n--- got\n{got}",
            path.display()
        );
    }
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_new_services_template_is_the_frameworks_for_its_model() {
    let dir = scratch("template").join("library");
    let (code, out, err) = cqrs(&["new", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    // template.yaml and the router are what `cqrs template` writes for the service.
    let (code, out, err) = cqrs(&["template", "--dir", dir.to_str().unwrap(), "--check"]);
    assert_eq!(code, 0, "{out}{err}");
    let template = std::fs::read_to_string(dir.join("template.yaml")).unwrap();
    assert!(template.starts_with("# Written by `cqrs template`"));
    assert!(template.contains("    Default: library\n"));
    // The starter model's one GSI, and not the example's five.
    assert!(template.contains("        - IndexName: gsi1\n"));
    assert!(!template.contains("IndexName: gsi2"));
    // The framework's part is `cqrs model sam`'s, up to the resources the service adds.
    let model = dir.join("model.toml");
    let (code, sam, err) = cqrs(&[
        "model",
        "sam",
        "--file",
        model.to_str().unwrap(),
        "--prefix",
        "library",
    ]);
    assert_eq!(code, 0, "{err}");
    let framework_resources = sam.split("\nOutputs:\n").next().unwrap();
    assert!(template.contains(framework_resources));
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn this_repositorys_template_is_what_the_model_renders() {
    let (code, out, err) = cqrs(&["template", "--dir", ROOT, "--check"]);
    assert_eq!(
        code, 0,
        "template.yaml or the router of Cargo.toml is not what model.toml, the framework's \
         template (tools/cli/src/new/template.yaml) and template.own.yaml give: regenerate with \
         `cargo run -p cqrs-cli -- template --dir .`\n{out}{err}"
    );
}

/// Run from a checkout (as this test's binary is), `cqrs new` takes the framework from it: an
/// absolute path to this repository, whose crates exist, and the README installs the operator
/// CLI from the same checkout (`cqrs-cli` is not on the registry).
#[test]
fn from_a_checkout_the_framework_is_the_checkout() {
    let dir = scratch("default").join("library");
    let (code, out, err) = cqrs(&["new", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let root = Path::new(ROOT).canonicalize().unwrap();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let facade = root.join("facade");
    assert!(facade.join("Cargo.toml").is_file());
    assert!(
        manifest.contains(&format!(
            "cqrs-dynamo = {{ path = \"{}\" }}",
            facade.display()
        )),
        "{manifest}"
    );
    assert!(!manifest.contains("cqrs-dynamo = \""), "{manifest}");
    assert!(err.contains(&format!("path:{}", root.display())), "{err}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let install = format!("cargo install --path {}/tools/cli", root.display());
    assert!(readme.contains(&install), "{readme}");
    assert!(!readme.contains("cargo install cqrs-cli"), "{readme}");
    let makefile = std::fs::read_to_string(dir.join("Makefile")).unwrap();
    assert!(
        makefile.contains(&format!("--path {}/tools/cli", root.display())),
        "{makefile}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// `version:` takes the crates from the registry, where they are not published yet: `cqrs new`
/// says so, and what to use instead, before it writes anything; `--no-registry-check` writes the
/// service anyway (for later), with a warning.
#[test]
fn version_fails_clearly_until_the_crates_are_published() {
    let dir = scratch("version").join("library");
    let (code, out, err) = cqrs(&["new", dir.to_str().unwrap(), "--framework", "version:0.1"]);
    assert_eq!(code, 2, "{out}{err}");
    for needle in [
        "version:0.1",
        "do not resolve from the registry",
        "not published",
        "--framework path:",
        "--framework git:",
        "--no-registry-check",
        // cargo's own reason.
        "cqrs-",
    ] {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    // The checkout this binary was built from is named as the way that works.
    let root = Path::new(ROOT).canonicalize().unwrap();
    assert!(
        err.contains(&format!("--framework path:{}", root.display())),
        "{err}"
    );
    assert!(!dir.exists(), "nothing is written");
    assert!(!dir.parent().unwrap().exists(), "nothing is written");

    let (code, out, err) = cqrs(&[
        "new",
        dir.to_str().unwrap(),
        "--framework",
        "version:0.1",
        "--no-registry-check",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("not checked"), "{err}");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("cqrs-dynamo = \"0.1\""), "{manifest}");
    assert!(
        manifest.contains("cqrs-dynamo = { version = \"0.1\", features = [\"testkit\"] }"),
        "{manifest}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_folder_that_is_not_empty_is_left_alone() {
    let dir = scratch("busy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep.txt"), "mine").unwrap();
    let (code, _, err) = cqrs(&["new", dir.to_str().unwrap(), "--name", "busy"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(files(&dir), vec![PathBuf::from("keep.txt")]);
    let (code, _, err) = cqrs(&["new", scratch("bad").to_str().unwrap(), "--name", "Bad"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("service name"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `cqrs model rust` prints `cqrs_model::rust::render` of the model file, and the library's
/// committed `src/model.rs` is what it prints for the library's model with the facade's path
/// (`--crate cqrs_dynamo::item`; its generated service's tests/model.rs checks the same, in CI's
/// generated-service run).
#[test]
fn cqrs_model_rust_prints_the_typed_entities_and_the_librarys_are_current() {
    let library = format!("{ROOT}/tests/library");
    let (code, out, err) = cqrs(&["model", "rust", "--file", &format!("{library}/model.toml")]);
    assert_eq!(code, 0, "{err}");
    let model = cqrs_model::Model::parse(
        &std::fs::read_to_string(format!("{library}/model.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(out, cqrs_model::rust::render(&model));
    assert!(out.contains("pub struct Loan {"), "{out}");
    let (code, out, err) = cqrs(&[
        "model",
        "rust",
        "--file",
        &format!("{library}/model.toml"),
        "--crate",
        "cqrs_dynamo::item",
    ]);
    assert_eq!(code, 0, "{err}");
    let committed = std::fs::read_to_string(format!("{library}/src/model.rs")).unwrap();
    assert!(
        out == committed,
        "tests/library/src/model.rs: run `cqrs model rust --crate cqrs_dynamo::item --file tests/library/model.toml > tests/library/src/model.rs`"
    );
    // A model that does not check is exit 1, naming the file.
    let (code, _, err) = cqrs(&["model", "rust", "--file", &format!("{ROOT}/Cargo.toml")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Cargo.toml"), "{err}");
}

/// A new service depends on the framework's facade alone (its tests on the facade's testkit),
/// with serde, serde_json and futures beside it (no lambda_http, lambda_runtime, tokio or tracing
/// of its own: the facade's); its code names no other framework crate and has no
/// `#[tokio::main]`: each binary is one call of `cqrs_dynamo::run`, and `src/lib.rs` implements
/// `cqrs_dynamo::Service`.
#[test]
fn a_new_service_depends_on_the_facade_alone() {
    let snapshot = Path::new(SNAPSHOT);
    let manifest: toml::Table = std::fs::read_to_string(snapshot.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let names = |table: &str| -> Vec<String> {
        manifest[table]
            .as_table()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(
        names("dependencies"),
        ["cqrs-dynamo", "serde", "serde_json"],
        "a new service's [dependencies]"
    );
    assert_eq!(
        names("dev-dependencies"),
        ["cqrs-dynamo", "futures"],
        "a new service's [dev-dependencies]"
    );
    assert_eq!(
        manifest["dev-dependencies"]["cqrs-dynamo"]["features"],
        toml::Value::Array(vec!["testkit".into()])
    );
    assert_eq!(
        manifest["dependencies"]["cqrs-dynamo"]["path"].as_str(),
        Some("../cqrs-dynamo/facade")
    );
    let lib = std::fs::read_to_string(snapshot.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("impl cqrs_dynamo::Service for Library {\n"),
        "{lib}"
    );
    for path in files(snapshot) {
        let text = std::fs::read_to_string(snapshot.join(&path)).unwrap();
        let is_rust = path.extension().is_some_and(|e| e == "rs");
        if !is_rust {
            continue;
        }
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
            let krate = word.split("::").next().unwrap_or_default();
            assert!(
                !krate.starts_with("cqrs_") || krate == "cqrs_dynamo",
                "{} names {word}: a new service's code reaches the framework through cqrs_dynamo",
                path.display()
            );
        }
        assert!(!text.contains("#[tokio::main]"), "{}", path.display());
        if path.starts_with("src/bin") {
            let calls = text.matches("cqrs_dynamo::run::").count();
            assert_eq!(calls, 1, "{}: one call of cqrs_dynamo::run", path.display());
        }
    }
}

/// `cqrs model rust --crate PATH` renders the typed entities against PATH (the starter's
/// src/model.rs is its output for `cqrs_dynamo::item`, and its header says so); the default
/// stays `cqrs_item`, what services generated before the facade check their file against; a
/// PATH that is not a Rust path is refused.
#[test]
fn cqrs_model_rust_takes_the_items_path() {
    let model = format!("{SNAPSHOT}/model.toml");
    let (code, out, err) = cqrs(&[
        "model",
        "rust",
        "--file",
        &model,
        "--crate",
        "cqrs_dynamo::item",
    ]);
    assert_eq!(code, 0, "{err}");
    let committed = std::fs::read_to_string(format!("{SNAPSHOT}/src/model.rs")).unwrap();
    assert!(out == committed, "--crate cqrs_dynamo::item:\n{out}");
    assert!(
        out.contains("run `cqrs model rust --crate cqrs_dynamo::item > src/model.rs`"),
        "{out}"
    );
    assert!(!out.contains("cqrs_item"), "{out}");
    let (code, default, err) = cqrs(&["model", "rust", "--file", &model]);
    assert_eq!(code, 0, "{err}");
    assert!(default.starts_with(cqrs_model::rust::HEADER), "{default}");
    assert!(
        default.contains("impl cqrs_item::TypedEntity for Task {"),
        "{default}"
    );
    for bad in ["cqrs-dynamo::item", "cqrs_dynamo::", "a b"] {
        let (code, out, err) = cqrs(&["model", "rust", "--file", &model, "--crate", bad]);
        assert_ne!(code, 0, "--crate {bad}: {out}");
        assert!(err.contains("--crate"), "{err}");
        assert!(out.is_empty(), "{out}");
    }
}
