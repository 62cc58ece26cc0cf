//! The service's model checks (the functions compile it in and check it again at start), every
//! command hook is on an entity of the model, and what is generated from the model (the typed
//! entities of src/model.rs, the migrations) is up to date.

#[test]
fn the_model_checks_and_the_hooks_are_on_its_entities() {
    let model = match cqrs_model::Model::parse(library::MODEL) {
        Ok(model) => model,
        Err(errors) => panic!("model.toml: {errors}"),
    };
    if let Err(error) = library::hooks().check(&model) {
        panic!("{error}");
    }
}

/// src/model.rs is what `cqrs model rust` prints for model.toml (it is committed, so a model change
/// shows its Rust consequence in the diff).
#[test]
fn the_typed_entities_are_up_to_date() {
    let model = cqrs_model::Model::parse(library::MODEL).expect("model.toml checks");
    let generated = cqrs_model::rust::render(&model);
    let committed = include_str!("../src/model.rs");
    if generated != committed {
        let line = generated
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| generated.lines().count().min(committed.lines().count()));
        panic!(
            "src/model.rs does not match model.toml (from line {}): run `cqrs model rust > src/model.rs`",
            line + 1
        );
    }
}

#[test]
fn the_migrations_are_up_to_date_and_all_applied_by_sql_sync() {
    let model = cqrs_model::Model::parse(library::MODEL).expect("model.toml checks");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
    let recorded = cqrs_sql::migrate::recorded(dir.as_ref()).expect("migrations/schema.json");
    let next = cqrs_sql::migrate::plan(recorded.as_ref(), &cqrs_sql::schema::Schema::of(&model))
        .expect("a migration can be planned");
    assert!(
        next.is_none(),
        "model.toml changed since the last migration: run `cqrs model sql --migrations migrations`"
    );
    let folder = cqrs_sql::migrate::read_dir(dir.as_ref()).expect("migrations/");
    let files: Vec<(u32, &str, &str)> = folder
        .iter()
        .map(|(v, name, sql)| (*v, name.as_str(), sql.as_str()))
        .collect();
    assert_eq!(
        files,
        library::MIGRATIONS,
        "src/lib.rs's MIGRATIONS must list every file of migrations/, in order"
    );
}

/// template.yaml's HTTP API routes (AWS) and Cargo.toml's cargo lambda watch router (local) route
/// the same paths to the same functions: `cqrs template` writes both from model.toml.
#[test]
fn the_template_and_the_local_router_route_alike() {
    let problems = cqrs_testkit::routers::differences(env!("CARGO_MANIFEST_DIR"))
        .expect("template.yaml and Cargo.toml");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
