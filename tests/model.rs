//! The example service's model checks, and is the framework's example fixture
//! ([`cqrs_model::Model::example`] is this file: `model.toml` links to the model crate's fixture).

#[test]
fn the_service_model_checks_and_is_the_framework_example() {
    let text = include_str!("../model.toml");
    let model = cqrs_model::Model::parse(text).unwrap_or_else(|e| panic!("model.toml: {e}"));
    assert_eq!(text, cqrs_model::EXAMPLE_TOML);
    assert_eq!(model, cqrs_model::Model::example());
}

#[test]
fn the_sql_sync_function_applies_every_migration_of_the_folder() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
    let folder = cqrs_sql::migrate::read_dir(dir.as_ref()).unwrap();
    let files: Vec<(u32, &str, &str)> = folder
        .iter()
        .map(|(v, name, sql)| (*v, name.as_str(), sql.as_str()))
        .collect();
    assert_eq!(
        files,
        cqrs_example_shop::MIGRATIONS,
        "src/lib.rs's MIGRATIONS must list every file of migrations/, in order"
    );
}
