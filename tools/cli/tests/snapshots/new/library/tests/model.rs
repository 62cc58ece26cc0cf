//! The service's model checks (the functions compile it in and check it again at start).

#[test]
fn the_model_checks() {
    if let Err(errors) = cqrs_model::Model::parse(include_str!("../model.toml")) {
        panic!("model.toml: {errors}");
    }
}
