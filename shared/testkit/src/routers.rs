//! The two routers of a service's HTTP API agree: `template.yaml`'s `HttpApi` events (what API
//! Gateway routes on AWS) and the `cargo lambda watch` router of its `Cargo.toml` (what the local
//! stack routes): `[package.metadata.lambda.watch.router]`, or
//! `[workspace.metadata.lambda.watch.router]` at the root of a workspace. A route on one side and
//! not the other is found before a developer finds it missing there. `cqrs template` writes both
//! from the same declarations; this checks what was committed.
//!
//! A generated service runs it from its own tests:
//!
//! ```no_run
//! let problems = cqrs_testkit::routers::differences(env!("CARGO_MANIFEST_DIR")).unwrap();
//! assert!(problems.is_empty(), "{}", problems.join("\n"));
//! ```

use std::collections::BTreeSet;
use std::path::Path;

use serde_yaml::Value as Yaml;

/// (method, path, binary) of an `HttpApi` event of the template.
pub type AwsRoute = (String, String, String);

/// (method, or `None` for every method; path; binary) of the `cargo lambda watch` router.
pub type LocalRoute = (Option<String>, String, String);

/// Every `HttpApi` event of every function of a template's text, with the function's binary.
///
/// ```
/// let routes = cqrs_testkit::routers::template_routes(r#"
/// Resources:
///   F:
///     Type: AWS::Serverless::Function
///     Metadata: {BuildProperties: {Binary: reports}}
///     Properties:
///       Events:
///         Get: {Type: HttpApi, Properties: {ApiId: !Ref HttpApi, Method: get, Path: /reports}}
/// "#).unwrap();
/// assert!(routes.contains(&("GET".into(), "/reports".into(), "reports".into())));
/// ```
pub fn template_routes(text: &str) -> Result<BTreeSet<AwsRoute>, String> {
    let template: Yaml =
        serde_yaml::from_str(text).map_err(|e| format!("template.yaml is not YAML: {e}"))?;
    let mut routes = BTreeSet::new();
    let Some(resources) = template["Resources"].as_mapping() else {
        return Err("template.yaml has no Resources".into());
    };
    for (id, resource) in resources {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for (_, event) in events {
            if event["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let binary = resource["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .ok_or_else(|| format!("{id:?}: a routed function names its binary"))?;
            let props = &event["Properties"];
            let (Some(method), Some(path)) = (props["Method"].as_str(), props["Path"].as_str())
            else {
                return Err(format!("{id:?}: an HttpApi event without Method and Path"));
            };
            routes.insert((method.to_uppercase(), path.to_string(), binary.to_string()));
        }
    }
    Ok(routes)
}

/// The `cargo lambda watch` router of a manifest's text (the package's, else the workspace's).
///
/// ```
/// let routes = cqrs_testkit::routers::watch_routes(r#"
/// [package]
/// name = "x"
/// [package.metadata.lambda.watch.router]
/// "/items/{pk}" = "query-handler"
/// "/reports" = [{ method = "GET", function = "reports" }]
/// "#).unwrap();
/// assert!(routes.contains(&(None, "/items/{pk}".into(), "query-handler".into())));
/// assert!(routes.contains(&(Some("GET".into()), "/reports".into(), "reports".into())));
/// ```
pub fn watch_routes(text: &str) -> Result<BTreeSet<LocalRoute>, String> {
    let manifest: toml::Table =
        toml::from_str(text).map_err(|e| format!("Cargo.toml is not TOML: {e}"))?;
    let router = ["package", "workspace"]
        .iter()
        .find_map(|top| {
            manifest
                .get(*top)?
                .get("metadata")?
                .get("lambda")?
                .get("watch")?
                .get("router")?
                .as_table()
        })
        .ok_or("Cargo.toml has no [package.metadata.lambda.watch.router] (nor the workspace's)")?;
    let mut routes = BTreeSet::new();
    for (path, target) in router {
        match target {
            toml::Value::String(binary) => {
                routes.insert((None, path.clone(), binary.clone()));
            }
            toml::Value::Array(entries) => {
                for entry in entries {
                    let method = entry.get("method").and_then(toml::Value::as_str);
                    let function = entry.get("function").and_then(toml::Value::as_str);
                    let (Some(method), Some(function)) = (method, function) else {
                        return Err(format!(
                            "router entry {path}: expected {{ method, function }}"
                        ));
                    };
                    routes.insert((
                        Some(method.to_uppercase()),
                        path.clone(),
                        function.to_string(),
                    ));
                }
            }
            other => return Err(format!("router entry {path}: unexpected {other:?}")),
        }
    }
    Ok(routes)
}

/// The differences between the two routers, as sentences (empty when they agree).
///
/// ```
/// use std::collections::BTreeSet;
/// let aws = BTreeSet::from([("GET".to_string(), "/r".to_string(), "r".to_string())]);
/// let local = BTreeSet::from([(None, "/r".to_string(), "r".to_string())]);
/// assert!(cqrs_testkit::routers::compare(&aws, &local).is_empty());
/// assert_eq!(cqrs_testkit::routers::compare(&aws, &BTreeSet::new()).len(), 1);
/// ```
pub fn compare(aws: &BTreeSet<AwsRoute>, local: &BTreeSet<LocalRoute>) -> Vec<String> {
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

/// The differences between the routers of the service in `dir` (its `template.yaml` and
/// `Cargo.toml`), each with the way to fix it; `Err` when a file cannot be read.
pub fn differences(dir: impl AsRef<Path>) -> Result<Vec<String>, String> {
    let dir = dir.as_ref();
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
    };
    let aws = template_routes(&read("template.yaml")?)?;
    let local = watch_routes(&read("Cargo.toml")?)?;
    Ok(compare(&aws, &local)
        .into_iter()
        .map(|p| {
            format!(
                "{p} (declare the service's routes in model.toml [routes] and run `cqrs template`)"
            )
        })
        .collect())
}
