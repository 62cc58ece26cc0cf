//! The two routers of the HTTP API agree: template.yaml's `HttpApi` events (what API Gateway routes
//! on AWS) and the `cargo lambda watch` router in the workspace Cargo.toml's
//! `[workspace.metadata.lambda.watch.router]` (what `make dev` routes locally). A route added to
//! one and not the other fails here, before a developer finds it missing on one side.

use std::collections::BTreeSet;

use serde_yaml::Value as Yaml;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// (method, path, binary) of every HttpApi event of every function in template.yaml.
fn template_routes() -> BTreeSet<(String, String, String)> {
    let text = std::fs::read_to_string(format!("{ROOT}/template.yaml")).unwrap();
    let template: Yaml = serde_yaml::from_str(&text).unwrap();
    let mut routes = BTreeSet::new();
    let resources = template["Resources"].as_mapping().unwrap();
    for (_, resource) in resources {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let binary = resource["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .expect("every function names its binary")
            .to_string();
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for (_, event) in events {
            if event["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let props = &event["Properties"];
            routes.insert((
                props["Method"].as_str().unwrap().to_uppercase(),
                props["Path"].as_str().unwrap().to_string(),
                binary.clone(),
            ));
        }
    }
    routes
}

/// (method or `None` for every method, path, binary) of the cargo lambda watch router.
fn watch_routes() -> BTreeSet<(Option<String>, String, String)> {
    let text = std::fs::read_to_string(format!("{ROOT}/Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let router = manifest["workspace"]["metadata"]["lambda"]["watch"]["router"]
        .as_table()
        .expect("Cargo.toml has [workspace.metadata.lambda.watch.router]");
    let mut routes = BTreeSet::new();
    for (path, target) in router {
        match target {
            toml::Value::String(binary) => {
                routes.insert((None, path.clone(), binary.clone()));
            }
            toml::Value::Array(entries) => {
                for entry in entries {
                    routes.insert((
                        Some(entry["method"].as_str().unwrap().to_uppercase()),
                        path.clone(),
                        entry["function"].as_str().unwrap().to_string(),
                    ));
                }
            }
            other => panic!("router entry {path}: unexpected {other:?}"),
        }
    }
    routes
}

/// The differences between the two routers, as sentences.
fn differences(
    aws: &BTreeSet<(String, String, String)>,
    local: &BTreeSet<(Option<String>, String, String)>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (method, path, binary) in aws {
        let routed = local.contains(&(Some(method.clone()), path.clone(), binary.clone()))
            || local.contains(&(None, path.clone(), binary.clone()));
        if !routed {
            problems.push(format!(
                "{method} {path} -> {binary} is in template.yaml but not in the cargo lambda watch router"
            ));
        }
    }
    for (method, path, binary) in local {
        match method {
            Some(method) => {
                if !aws.contains(&(method.clone(), path.clone(), binary.clone())) {
                    problems.push(format!(
                        "{method} {path} -> {binary} is in the cargo lambda watch router but not in template.yaml"
                    ));
                }
            }
            None => {
                let on_aws: Vec<&String> = aws
                    .iter()
                    .filter(|(_, p, _)| p == path)
                    .map(|(_, _, b)| b)
                    .collect();
                if on_aws.is_empty() || on_aws.iter().any(|b| *b != binary) {
                    problems.push(format!(
                        "{path} -> {binary} in the cargo lambda watch router does not match template.yaml ({on_aws:?})"
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn template_and_local_router_route_the_same_paths_to_the_same_functions() {
    let aws = template_routes();
    let local = watch_routes();
    assert!(aws.len() >= 7, "{aws:?}");
    let problems = differences(&aws, &local);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        aws.contains(&(
            "GET".into(),
            "/query/{pattern}".into(),
            "query-handler".into()
        )),
        "the access-pattern route is served"
    );
}

#[test]
fn a_route_on_one_side_only_is_found() {
    let aws = template_routes();
    let local = watch_routes();
    let mut fewer = local.clone();
    let removed = fewer.iter().next().cloned().unwrap();
    fewer.remove(&removed);
    assert!(!differences(&aws, &fewer).is_empty(), "removed {removed:?}");
    let mut more = local;
    more.insert((
        Some("DELETE".into()),
        "/items/{pk}".into(),
        "query-handler".into(),
    ));
    assert!(!differences(&aws, &more).is_empty());
    let mut elsewhere = aws.clone();
    elsewhere.insert(("GET".into(), "/extra".into(), "query-handler".into()));
    assert!(!differences(&elsewhere, &watch_routes()).is_empty());
}
