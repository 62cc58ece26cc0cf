//! The example service's model checks, and is the framework's example fixture
//! ([`cqrs_model::Model::example`] is this file: `model.toml` links to the model crate's fixture).

#[test]
fn the_service_model_checks_and_is_the_framework_example() {
    let text = include_str!("../model.toml");
    let model = cqrs_model::Model::parse(text).unwrap_or_else(|e| panic!("model.toml: {e}"));
    assert_eq!(text, cqrs_model::EXAMPLE_TOML);
    assert_eq!(model, cqrs_model::Model::example());
}
