//! The service's model checks (the functions compile it in and check it again at start), every
//! command hook is on an entity of the model, and what is generated from the model (the typed
//! entities of src/model.rs, the migrations, template.yaml's routes and the local router) is up to
//! date.

use cqrs_dynamo::testkit;

#[test]
fn the_model_checks_and_the_hooks_are_on_its_entities() {
    testkit::assert_model::<{{crate}}::{{service}}>();
}

/// src/model.rs is what `cqrs model rust --crate cqrs_dynamo::item` prints for model.toml (it is
/// committed, so a model change shows its Rust consequence in the diff).
#[test]
fn the_typed_entities_are_up_to_date() {
    testkit::assert_typed_entities::<{{crate}}::{{service}}>(include_str!("../src/model.rs"));
}

/// migrations/ is up to date with model.toml, and src/lib.rs's MIGRATIONS lists all its files:
/// sql-sync applies them.
#[test]
fn the_migrations_are_up_to_date_and_all_applied_by_sql_sync() {
    testkit::assert_migrations::<{{crate}}::{{service}}>(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations"
    ));
}

/// template.yaml's HTTP API routes (AWS) and Cargo.toml's cargo lambda watch router (local) route
/// the same paths to the same functions: `cqrs template` writes both from model.toml.
#[test]
fn the_template_and_the_local_router_route_alike() {
    testkit::assert_routers(env!("CARGO_MANIFEST_DIR"));
}
