//! The service's model checks (the functions compile it in and check it again at start), and every
//! command hook is on an entity of the model.

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
