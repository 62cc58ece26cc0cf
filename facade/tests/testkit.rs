//! The checks a service's tests/model.rs runs (`cqrs_dynamo::testkit`, feature `testkit`): each
//! passes on what is current and fails, saying what to run, on what is not. The starter's model
//! and migrations are those of `cqrs new`'s snapshot; the routers are this repository's (the
//! example shop is a service).
//!
//! `cargo test -p cqrs-dynamo --features testkit --test testkit`

use std::panic::{AssertUnwindSafe, catch_unwind};

use cqrs_dynamo::Service;
use cqrs_dynamo::hooks::Hooks;
use cqrs_dynamo::testkit;

const STARTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tools/cli/tests/snapshots/new/library"
);

/// The starter of `cqrs new`, as its snapshot holds it.
struct Starter;

impl Service for Starter {
    const MODEL: &'static str =
        include_str!("../../tools/cli/tests/snapshots/new/library/model.toml");
    const MIGRATIONS: &'static [cqrs_dynamo::Migration] = &[(
        1,
        "V1__model.sql",
        include_str!("../../tools/cli/tests/snapshots/new/library/migrations/V1__model.sql"),
    )];
    fn hooks() -> Hooks {
        Hooks::new().on_fn("task", |_| Ok(()))
    }
}

/// The starter with a hook on an entity its model does not have.
struct StrayHook;

impl Service for StrayHook {
    const MODEL: &'static str = Starter::MODEL;
    fn hooks() -> Hooks {
        Hooks::new().on_fn("lending", |_| Ok(()))
    }
}

/// The starter whose MIGRATIONS forgot the folder's file.
struct Unlisted;

impl Service for Unlisted {
    const MODEL: &'static str = Starter::MODEL;
}

/// Another model (the example's) beside the starter's migrations.
struct Changed;

impl Service for Changed {
    const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML;
    const MIGRATIONS: &'static [cqrs_dynamo::Migration] = Starter::MIGRATIONS;
}

/// A model that does not check.
struct Broken;

impl Service for Broken {
    const MODEL: &'static str = "[entities.task]\npk = \"TASK#{tenant}\"\n";
}

/// The panic message of `check`, which must fail.
fn failure(check: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(check)).expect_err("the check must fail");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn the_model_check_names_its_problems_and_stray_hooks() {
    testkit::assert_model::<Starter>();
    let stray = failure(testkit::assert_model::<StrayHook>);
    assert!(stray.contains("lending"), "{stray}");
    let broken = failure(testkit::assert_model::<Broken>);
    assert!(broken.starts_with("model.toml: "), "{broken}");
}

#[test]
fn the_typed_entities_check_says_what_to_run() {
    let starter = std::fs::read_to_string(format!("{STARTER}/src/model.rs")).unwrap();
    testkit::assert_typed_entities::<Starter>(&starter);
    // A file for another model, and the starter's rendered for cqrs_item (a service generated
    // before the facade): both stale for a service on the facade.
    let stale = starter.replace("pub title: String,", "pub heading: String,");
    let message = failure(|| testkit::assert_typed_entities::<Starter>(&stale));
    assert!(
        message.contains(
            "does not match model.toml (from line 15): run `cqrs model rust --crate \
             cqrs_dynamo::item > src/model.rs`"
        ),
        "{message}"
    );
    let model = cqrs_dynamo::model::Model::parse(Starter::MODEL).unwrap();
    let old = cqrs_model::rust::render(&model);
    let message = failure(|| testkit::assert_typed_entities::<Starter>(&old));
    assert!(message.contains("(from line 2)"), "{message}");
}

#[test]
fn the_migrations_check_wants_them_current_and_listed() {
    let dir = format!("{STARTER}/migrations");
    testkit::assert_migrations::<Starter>(&dir);
    let unlisted = failure(|| testkit::assert_migrations::<Unlisted>(&dir));
    assert!(
        unlisted.contains("MIGRATIONS must list every file of migrations/")
            && unlisted.contains("[\"V1__model.sql\"]"),
        "{unlisted}"
    );
    let changed = failure(|| testkit::assert_migrations::<Changed>(&dir));
    assert!(
        changed.contains("run `cqrs model sql --migrations migrations`"),
        "{changed}"
    );
}

#[test]
fn the_routers_check_names_a_route_one_router_lacks() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    testkit::assert_routers(root);
    let dir = std::env::temp_dir().join(format!("cqrs-dynamo-routers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(format!("{root}/template.yaml"), dir.join("template.yaml")).unwrap();
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let without: String = manifest
        .lines()
        .filter(|line| !line.starts_with("\"/orders/summary\""))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(without, manifest);
    std::fs::write(dir.join("Cargo.toml"), without).unwrap();
    let message = failure(|| testkit::assert_routers(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(message.contains("/orders/summary"), "{message}");
}
