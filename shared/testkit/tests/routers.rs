//! The two routers of this repository's HTTP API agree: template.yaml's `HttpApi` events (what API
//! Gateway routes on AWS) and the `cargo lambda watch` router in the workspace Cargo.toml's
//! `[workspace.metadata.lambda.watch.router]` (what `make dev` routes locally). The comparison is
//! `cqrs_testkit::routers`, which a generated service runs from its own tests too.

use cqrs_testkit::routers::{compare, differences, template_routes, watch_routes};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{name}")).unwrap()
}

#[test]
fn template_and_local_router_route_the_same_paths_to_the_same_functions() {
    let aws = template_routes(&read("template.yaml")).unwrap();
    assert!(aws.len() >= 7, "{aws:?}");
    let problems = differences(ROOT).unwrap();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        aws.contains(&(
            "GET".into(),
            "/query/{pattern}".into(),
            "query-handler".into()
        )),
        "the access-pattern route is served"
    );
    // Every route the model declares is on both sides.
    let model = cqrs_model::Model::parse(&read("model.toml")).unwrap();
    for route in model.routes() {
        for op in &route.operations {
            let entry = (op.method.clone(), op.path.clone(), route.name.clone());
            assert!(aws.contains(&entry), "{entry:?} is not in template.yaml");
        }
    }
}

#[test]
fn a_route_on_one_side_only_is_found() {
    let aws = template_routes(&read("template.yaml")).unwrap();
    let local = watch_routes(&read("Cargo.toml")).unwrap();
    let mut fewer = local.clone();
    let removed = fewer.iter().next().cloned().unwrap();
    fewer.remove(&removed);
    assert!(!compare(&aws, &fewer).is_empty(), "removed {removed:?}");
    let mut more = local.clone();
    more.insert((
        Some("DELETE".into()),
        "/items/{pk}".into(),
        "query-handler".into(),
    ));
    assert!(!compare(&aws, &more).is_empty());
    let mut elsewhere = aws.clone();
    elsewhere.insert(("GET".into(), "/extra".into(), "query-handler".into()));
    assert!(!compare(&elsewhere, &local).is_empty());
}

/// A generated service's manifest holds the package's router: found there, and a route the
/// template does not have is named (the starter's report route before routes were declared).
#[test]
fn a_package_router_is_read_and_its_extra_route_found() {
    let dir = std::env::temp_dir().join(format!("cqrs-routers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let upgrade = format!("{ROOT}/tests/upgrade/48d8ccf");
    for name in ["template.yaml", "Cargo.toml"] {
        std::fs::copy(format!("{upgrade}/{name}"), dir.join(name)).unwrap();
    }
    let problems = differences(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("/tasks/report -> task-report"),
        "{problems:#?}"
    );
    assert!(problems[0].contains("cqrs template"), "{problems:#?}");
}
