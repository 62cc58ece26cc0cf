//! `cqrs template`: `--check` finds drift (template.yaml against the model, the framework and the
//! own part; the cargo lambda watch router) and exits 1 naming it and the fix, or exits 0 when
//! clean, writing nothing either way; a service written before routes were declared is refused
//! with the declarations to add, and upgraded by adding them; the own routes deploy behind the
//! JWT authorizer with least-privilege roles (checked on SAM's transform of the template); the change
//! feed deploys least-privileged too: event-publisher's role holds exactly what it uses, a consumer's
//! reaches its own queues and markers (`CONSUMER#<name>#*`) only, the data table's stream has exactly
//! two readers (sql-sync's and the publisher's), and `ChangeEvents=off` removes every resource of the
//! feed. Each of these checks runs on a mutated template too and must notice.

use std::path::{Path, PathBuf};
use std::process::Command;

use cqrs_testkit::iam::{canon, list};
use cqrs_testkit::own_routes::{self, OwnRoute};
use serde_json::{Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn cqrs(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(args)
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cqrs-template-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn template(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["template", "--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    cqrs(&args)
}

/// The files of `dir` `cqrs template` reads or writes, as they are.
fn snapshot(dir: &Path) -> Vec<(String, Option<String>)> {
    [
        "template.yaml",
        "Cargo.toml",
        "model.toml",
        "template.own.yaml",
    ]
    .iter()
    .map(|n| (n.to_string(), std::fs::read_to_string(dir.join(n)).ok()))
    .collect()
}

#[test]
fn check_names_what_drifted_and_passes_when_clean() {
    let dir = scratch("check").join("library");
    let (code, out, err) = cqrs(&["new", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = template(&dir, &["--check"]);
    assert_eq!(code, 0, "a new service is up to date: {out}{err}");
    assert!(dir.join("template.own.yaml").is_file());

    // template.yaml edited by hand: found, placed, the fix named, nothing written.
    let path = dir.join("template.yaml");
    let edited = read(&path).replace(
        "      Description: GET /items/... - latest state, partitions, history.\n",
        "      Description: GET /items/... - edited by hand.\n",
    );
    std::fs::write(&path, &edited).unwrap();
    let before = snapshot(&dir);
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    for needle in [
        "template.yaml differs",
        "in Resources.QueryHandlerFunction",
        "the framework's template",
        "edited by hand",
        &format!("cqrs template --dir {}", dir.display()),
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert_eq!(snapshot(&dir), before, "--check writes nothing");

    // The router without one of the framework's routes.
    let manifest = dir.join("Cargo.toml");
    let text = read(&manifest);
    std::fs::write(
        &manifest,
        text.replace("\"/query/{pattern}\" = \"query-handler\"\n", ""),
    )
    .unwrap();
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cargo lambda watch router differs"), "{err}");
    assert!(err.contains("/query/{pattern}"), "{err}");

    // Written, it is clean again; the manifest is what it was.
    let (code, out, err) = template(&dir, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read(&manifest), text);
    assert_eq!(template(&dir, &["--check"]).0, 0);

    // The own part changed: named as its origin; written, kept.
    std::fs::write(
        dir.join("template.own.yaml"),
        "Resources:\n  CoverBucket:\n    Type: AWS::S3::Bucket\n",
    )
    .unwrap();
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Resources.CoverBucket"), "{err}");
    assert!(err.contains("(from template.own.yaml)"), "{err}");
    assert_eq!(template(&dir, &[]).0, 0);
    assert!(read(&path).contains("  CoverBucket:\n    Type: AWS::S3::Bucket\n"));

    // A new route in the model: named as its origin, then deployed and routed locally.
    let model = dir.join("model.toml");
    let mut text = read(&model);
    text.push_str(
        "\n[routes.member-loans]\nreads = [\"data\"]\n\
         [routes.member-loans.operations.memberLoans]\nmethod = \"GET\"\npath = \"/members/{memberId}/loans\"\n",
    );
    std::fs::write(&model, text).unwrap();
    let (code, _, err) = template(&dir, &["--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[routes.member-loans]"), "{err}");
    assert_eq!(template(&dir, &[]).0, 0);
    assert!(read(&path).contains("  MemberLoansFunction:\n"));
    assert!(read(&manifest).contains(
        "\"/members/{memberId}/loans\" = [{ method = \"GET\", function = \"member-loans\" }]\n"
    ));
    assert!(
        read(&path).contains("  CoverBucket:\n"),
        "the own part is kept"
    );
    let problems = cqrs_testkit::routers::differences(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// The starter as `cqrs new` wrote it at 48d8ccf (`tests/upgrade/48d8ccf`): its report route is
/// in the router only. `cqrs template` refuses it with the declaration to add, writing nothing;
/// with the declaration added, it writes the route's function and keeps the manifest's other bytes.
#[test]
fn a_route_in_the_router_only_is_refused_with_its_declaration() {
    let dir = scratch("upgrade");
    let old = Path::new(ROOT).join("tests/upgrade/48d8ccf");
    for name in ["model.toml", "Cargo.toml", "template.yaml"] {
        std::fs::copy(old.join(name), dir.join(name)).unwrap();
    }
    let before = snapshot(&dir);
    let (code, out, err) = template(&dir, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("(every method) /tasks/report -> task-report"),
        "{err}"
    );
    assert_eq!(snapshot(&dir), before, "nothing is written");
    let (code, _, check) = template(&dir, &["--check"]);
    assert_eq!(code, 1);
    assert!(check.contains("[routes.task-report]"), "{check}");

    // The author says what it reads, and adds the declaration as printed.
    let declaration = &err[err.find("[routes.task-report]").unwrap()..];
    let declaration = declaration.replace("reads = []", "reads = [\"sql\"]");
    let model = dir.join("model.toml");
    std::fs::write(&model, read(&model) + "\n" + &declaration + "\n").unwrap();
    let (code, out, err) = template(&dir, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(template(&dir, &["--check"]).0, 0);
    let written = read(&dir.join("template.yaml"));
    assert!(written.contains("  TaskReportFunction:\n"));
    assert!(
        written.contains("    Default: tasks\n"),
        "the prefix is kept"
    );
    // Only the router's own lines changed in the manifest.
    let old_manifest = read(&old.join("Cargo.toml"));
    let new_manifest = read(&dir.join("Cargo.toml"));
    let cut = old_manifest.find("# The service's own route").unwrap();
    assert_eq!(new_manifest[..cut], old_manifest[..cut]);
    assert_eq!(
        &new_manifest[cut..],
        "# The service's own routes (model.toml [routes]).\n\
         \"/tasks/report\" = [{ method = \"GET\", function = \"task-report\" }]\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Python that runs `scripts/sam-transform.py`, as `shared/testkit/tests/sam_transformed.rs`
/// chooses it; `None` when told to skip (never under CI).
fn python() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("SAM_TRANSFORM_PYTHON") {
        return Some(explicit.into());
    }
    let venv = Path::new(ROOT).join(".venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    let skip = std::env::var("CQRS_SKIP_SAM_TRANSFORMED").is_ok_and(|v| v == "1");
    if skip && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED (CQRS_SKIP_SAM_TRANSFORMED=1): no .venv to transform the template");
        return None;
    }
    panic!(
        "{} is missing: run scripts/tools.sh, name a Python with aws-sam-translator in \
         SAM_TRANSFORM_PYTHON, or set CQRS_SKIP_SAM_TRANSFORMED=1",
        venv.display()
    );
}

fn transform(python: &Path, template: &Path) -> serde_json::Value {
    let out = Command::new(python)
        .arg(Path::new(ROOT).join("scripts/sam-transform.py"))
        .arg(template)
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const OWN_ROUTES: &str = r#"
[routes.shelf-data]
reads = ["data"]
[routes.shelf-data.operations.shelfItems]
method = "GET"
path = "/shelf/{shelfId}/items"

[routes.shelf-history]
reads = ["history"]
[routes.shelf-history.operations.shelfHistory]
method = "GET"
path = "/shelf/{shelfId}/history"
[routes.shelf-history.operations.shelfHistoryNote]
method = "POST"
path = "/shelf/{shelfId}/history"

[routes.shelf-sql]
reads = ["sql", "data"]
timeout = 20
[routes.shelf-sql.operations.shelfReport]
method = "GET"
path = "/shelf/report"
"#;

#[test]
fn own_routes_deploy_behind_the_authorizer_with_least_privilege() {
    let Some(python) = python() else { return };
    let dir = scratch("transformed");
    let example = read(&Path::new(ROOT).join("model.toml"));
    std::fs::write(dir.join("model.toml"), format!("{example}\n{OWN_ROUTES}")).unwrap();
    let (code, out, err) = template(&dir, &["--prefix", "shop"]);
    assert_eq!(code, 0, "{out}{err}");
    let model = cqrs_model::Model::parse(&read(&dir.join("model.toml"))).unwrap();
    let routes: Vec<OwnRoute> = model
        .routes()
        .iter()
        .map(|r| OwnRoute {
            name: r.name.clone(),
            reads: r.reads.iter().map(|a| a.as_str().to_string()).collect(),
            routes: r
                .operations
                .iter()
                .map(|op| (op.method.clone(), op.path.clone()))
                .collect(),
        })
        .collect();
    assert!(routes.len() >= 3);
    let path = dir.join("template.yaml");
    let t = transform(&python, &path);
    let problems = own_routes::problems(&t, &routes);
    assert!(problems.is_empty(), "{problems:#?}");

    // Each check notices: a write grant, a route without the authorizer, a missing function.
    let text = read(&path);
    let mutations = [
        (
            "                  - dynamodb:BatchGetItem\n                Resource: !GetAtt DataTable.Arn\n",
            "                  - dynamodb:BatchGetItem\n                  - dynamodb:PutItem\n                Resource: !GetAtt DataTable.Arn\n",
            "dynamodb:PutItem",
        ),
        (
            "            Path: /shelf/report\n",
            "            Path: /shelf/report\n            Auth:\n              Authorizer: NONE\n",
            "expected the JWT authorizer",
        ),
        (
            "                    - rds-db:connect\n",
            "                    - rds-db:connect\n                    - secretsmanager:GetSecretValue\n",
            "secretsmanager:GetSecretValue",
        ),
        (
            "          SQL_USER: cqrs_routes\n",
            "          SQL_USER: cqrs_sync\n",
            "SQL_USER cqrs_routes",
        ),
    ];
    for (from, to, needle) in mutations {
        assert!(text.contains(from), "{from:?}");
        let mutated = dir.join("mutated.yaml");
        std::fs::write(&mutated, text.replacen(from, to, 1)).unwrap();
        let problems = own_routes::problems(&transform(&python, &mutated), &routes);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    let mut missing = routes.clone();
    missing.push(OwnRoute {
        name: "absent".into(),
        reads: vec![],
        routes: vec![],
    });
    let problems = own_routes::problems(&t, &missing);
    assert!(
        problems.iter().any(|p| p.contains("AbsentFunction")),
        "{problems:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// The change feed (ChangeEvents): the publisher, the consumers, on SAM's transform.

/// A consumer beside the example's `order-audit`: reads the data table, takes every entity.
const OWN_CONSUMER: &str = r#"
[consumers.shelf-watch]
reads = ["data"]
batch_size = 5
max_receive = 3
"#;

/// The example service's model with [`OWN_CONSUMER`], rendered by `cqrs template` (prefix shop)
/// in a scratch folder: the folder and the template's path.
fn feed_template(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let example = read(&Path::new(ROOT).join("model.toml"));
    assert!(
        example.contains("[consumers.order-audit]"),
        "the example's consumer"
    );
    std::fs::write(dir.join("model.toml"), format!("{example}\n{OWN_CONSUMER}")).unwrap();
    let (code, out, err) = template(&dir, &["--prefix", "shop"]);
    assert_eq!(code, 0, "{out}{err}");
    let path = dir.join("template.yaml");
    (dir, path)
}

/// The template at `path` with `from` replaced by `to` once (it must be there), transformed.
fn transform_mutated(python: &Path, path: &Path, from: &str, to: &str) -> Value {
    let text = read(path);
    assert!(text.contains(from), "{from:?} not in the template");
    let mutated = path.with_file_name("mutated.yaml");
    std::fs::write(&mutated, text.replacen(from, to, 1)).unwrap();
    transform(python, &mutated)
}

/// Every (action, resource, condition) an inline policy of `role` allows, canonical; and its
/// managed policies.
fn role_grants(role: &Value) -> (Vec<(String, String, String)>, Vec<String>) {
    let mut grants = Vec::new();
    for policy in list(&role["Properties"]["Policies"]) {
        for statement in list(&policy["PolicyDocument"]["Statement"]) {
            if statement["Effect"] != "Allow" {
                continue;
            }
            for action in list(&statement["Action"]) {
                for resource in list(&statement["Resource"]) {
                    grants.push((
                        canon(&action),
                        canon(&resource),
                        if statement["Condition"].is_null() {
                            String::new()
                        } else {
                            statement["Condition"].to_string()
                        },
                    ));
                }
            }
        }
    }
    let managed = list(&role["Properties"]["ManagedPolicyArns"])
        .iter()
        .map(canon)
        .collect();
    (grants, managed)
}

/// A grant as problems name it: `action on resource`, and its condition when it has one.
fn shown((action, resource, condition): &(String, String, String)) -> String {
    if condition.is_empty() {
        format!("{action} on {resource}")
    } else {
        format!("{action} on {resource} when {condition}")
    }
}

/// Problems of `role_id`'s grants against exactly `expected` ((actions, resource, condition)).
fn exact_grants(t: &Value, role_id: &str, expected: &[(&[&str], &str, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    let role = &t["Resources"][role_id];
    if role["Type"] != "AWS::IAM::Role" {
        return vec![format!("{role_id}: no such role")];
    }
    let (grants, managed) = role_grants(role);
    if !managed.is_empty() {
        problems.push(format!(
            "{role_id}: managed policies {managed:?} (inline grants only)"
        ));
    }
    let want: Vec<(String, String, String)> = expected
        .iter()
        .flat_map(|(actions, resource, condition)| {
            actions
                .iter()
                .map(|a| (a.to_string(), resource.to_string(), condition.to_string()))
        })
        .collect();
    for grant in &grants {
        if !want.contains(grant) {
            problems.push(format!("{role_id}: {} is not needed", shown(grant)));
        }
        if grant.1 == "*" && !grant.0.starts_with("xray:") {
            problems.push(format!("{role_id}: {} on every resource", grant.0));
        }
    }
    for grant in &want {
        if !grants.contains(grant) {
            problems.push(format!("{role_id}: {} is missing", shown(grant)));
        }
    }
    problems
}

/// The role a function of the transformed template runs with.
fn role_of(t: &Value, function: &str) -> String {
    canon(&t["Resources"][function]["Properties"]["Role"])
        .trim_start_matches("${")
        .trim_end_matches(".Arn}")
        .to_string()
}

/// event-publisher: its own role with exactly what it uses, its mapping as design 2.2 says.
fn publisher_problems(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if role_of(t, "EventPublisherFunction") != "EventPublisherRole" {
        problems.push(format!(
            "EventPublisherFunction runs with {}",
            role_of(t, "EventPublisherFunction")
        ));
    }
    problems.extend(exact_grants(
        t,
        "EventPublisherRole",
        &[
            (
                &[
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                ],
                "${DataTable.StreamArn}",
                "",
            ),
            (&["dynamodb:ListStreams"], "${DataTable.Arn}/stream/*", ""),
            (
                &[
                    "dynamodb:BatchGetItem",
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                ],
                "${HistoryTable.Arn}",
                "",
            ),
            (&["dynamodb:PutItem"], "${ParkedTable.Arn}", ""),
            (&["sns:Publish"], "${EventsTopic}", ""),
            (
                &["sqs:SendMessage"],
                "${EventPublisherFailureQueue.Arn}",
                "",
            ),
            (
                &["logs:CreateLogStream", "logs:PutLogEvents"],
                "${EventPublisherLogs.Arn}",
                "",
            ),
            (
                &["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
                "*",
                "",
            ),
        ],
    ));
    let mapping = t["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, r)| canon(&r["Properties"]["FunctionName"]) == "${EventPublisherFunction}");
    match mapping {
        None => problems.push("no mapping into EventPublisherFunction".into()),
        Some((id, m)) => {
            let p = &m["Properties"];
            for (key, want) in [
                ("EventSourceArn", json!("${DataTable.StreamArn}")),
                ("BisectBatchOnFunctionError", json!(true)),
                ("MaximumRetryAttempts", json!(-1)),
                ("MaximumRecordAgeInSeconds", json!(21600)),
                ("ParallelizationFactor", json!(1)),
                ("FunctionResponseTypes", json!(["ReportBatchItemFailures"])),
                (
                    "DestinationConfig",
                    json!("${EventPublisherFailureQueue.Arn}"),
                ),
            ] {
                let got = match key {
                    "EventSourceArn" => json!(canon(&p[key])),
                    "DestinationConfig" => {
                        json!(canon(&p[key]["OnFailure"]["Destination"]))
                    }
                    _ => p[key].clone(),
                };
                if got != want {
                    problems.push(format!("{id}.{key}: {got}, expected {want}"));
                }
            }
        }
    }
    let env = &t["Resources"]["EventPublisherFunction"]["Properties"]["Environment"]["Variables"];
    for (name, want) in [
        ("EVENTS_TOPIC_ARN", "${EventsTopic}"),
        ("PARKED_TABLE", "${ParkedTable}"),
        ("HISTORY_TABLE", "${HistoryTable}"),
        ("CQRS_EVENT_SOURCE", "${AWS::StackName}"),
    ] {
        if canon(&env[name]) != want {
            problems.push(format!("EventPublisherFunction: {name} is {}", env[name]));
        }
    }
    problems
}

#[test]
fn the_event_publisher_holds_exactly_what_it_uses() {
    let Some(python) = python() else { return };
    let (dir, path) = feed_template("publisher");
    let t = transform(&python, &path);
    let problems = publisher_problems(&t);
    assert!(problems.is_empty(), "{problems:#?}");
    // Each check notices: a wider topic grant, a write to the history table, a lost bisection.
    for (from, to, needle) in [
        (
            "                  - sns:Publish\n",
            "                  - sns:Publish\n                  - sns:Subscribe\n",
            "sns:Subscribe on ${EventsTopic} is not needed",
        ),
        (
            "                  - dynamodb:BatchGetItem\n                  - dynamodb:GetItem\n                  - dynamodb:Query\n                Resource: !GetAtt HistoryTable.Arn\n              # A record",
            "                  - dynamodb:BatchGetItem\n                  - dynamodb:GetItem\n                  - dynamodb:Query\n                  - dynamodb:PutItem\n                Resource: !GetAtt HistoryTable.Arn\n              # A record",
            "dynamodb:PutItem on ${HistoryTable.Arn}",
        ),
        (
            "                Resource: !Ref EventsTopic\n",
            "                Resource: '*'\n",
            "sns:Publish on every resource",
        ),
        (
            "            MaximumRetryAttempts: -1\n            MaximumRecordAgeInSeconds: 21600\n            DestinationConfig:\n              OnFailure:\n                Type: SQS\n                Destination: !GetAtt EventPublisherFailureQueue.Arn\n",
            "            MaximumRetryAttempts: 3\n            MaximumRecordAgeInSeconds: 21600\n            DestinationConfig:\n              OnFailure:\n                Type: SQS\n                Destination: !GetAtt EventPublisherFailureQueue.Arn\n",
            "MaximumRetryAttempts: 3",
        ),
    ] {
        let problems = publisher_problems(&transform_mutated(&python, &path, from, to));
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A consumer's role: its queue, its dead-letter queue, its own markers (LeadingKeys
/// `CONSUMER#<name>#*`), the history table, its log group, X-Ray, and what its `reads` grant;
/// its queues take messages from the events topic alone.
fn consumer_problems(
    t: &Value,
    pascal: &str,
    name: &str,
    reads_data: bool,
    extra: &[(&[&str], &str, &str)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let function = format!("{pascal}Function");
    let role = format!("{pascal}Role");
    if role_of(t, &function) != role {
        problems.push(format!("{function} runs with {}", role_of(t, &function)));
    }
    let queue = format!("${{{pascal}Queue.Arn}}");
    let dlq = format!("${{{pascal}DeadLetterQueue.Arn}}");
    let logs = format!("${{{pascal}Logs.Arn}}");
    let markers = json!({"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [format!("CONSUMER#{name}#*")]}})
        .to_string();
    let mut expected: Vec<(&[&str], &str, &str)> = vec![
        (
            &[
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueAttributes",
            ],
            &queue,
            "",
        ),
        (&["sqs:SendMessage"], &dlq, ""),
        (
            &[
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
            ],
            "${IdempotencyTable.Arn}",
            &markers,
        ),
        (
            &[
                "dynamodb:BatchGetItem",
                "dynamodb:GetItem",
                "dynamodb:Query",
            ],
            "${HistoryTable.Arn}",
            "",
        ),
        (&["logs:CreateLogStream", "logs:PutLogEvents"], &logs, ""),
        (
            &["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
            "*",
            "",
        ),
    ];
    if reads_data {
        expected.push((
            &[
                "dynamodb:GetItem",
                "dynamodb:Query",
                "dynamodb:BatchGetItem",
            ],
            "${DataTable.Arn}",
            "",
        ));
        expected.push((&["dynamodb:Query"], "${DataTable.Arn}/index/*", ""));
    }
    expected.extend_from_slice(extra);
    problems.extend(exact_grants(t, &role, &expected));
    // Its queues: the events topic alone may send.
    let policy = &t["Resources"][format!("{pascal}QueuePolicy")]["Properties"];
    let statements = list(&policy["PolicyDocument"]["Statement"]);
    for s in &statements {
        let principal = &s["Principal"];
        let source = canon(&s["Condition"]["ArnEquals"]["aws:SourceArn"]);
        if principal != &json!({"Service": "sns.amazonaws.com"})
            || canon(&s["Action"]) != "sqs:SendMessage"
            || source != "${EventsTopic}"
        {
            problems.push(format!("{pascal}QueuePolicy: {s}"));
        }
    }
    if statements.is_empty() {
        problems.push(format!("{pascal}QueuePolicy: no statement"));
    }
    problems
}

#[test]
fn a_consumer_reaches_its_own_queues_markers_and_reads_only() {
    let Some(python) = python() else { return };
    let (dir, path) = feed_template("consumer");
    let t = transform(&python, &path);
    let mut problems = consumer_problems(&t, "OrderAudit", "order-audit", false, &[]);
    problems.extend(consumer_problems(
        &t,
        "ShelfWatch",
        "shelf-watch",
        true,
        &[],
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    // The subscription, the queue and the mapping, as declared.
    let r = &t["Resources"];
    let subscription = &r["OrderAuditSubscription"]["Properties"];
    assert_eq!(subscription["FilterPolicy"], json!({"entity": ["order"]}));
    assert_eq!(subscription["RawMessageDelivery"], json!(true));
    assert!(r["ShelfWatchSubscription"]["Properties"]["FilterPolicy"].is_null());
    assert_eq!(
        r["ShelfWatchQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"],
        json!(5)
    );
    let variables = &r["ShelfWatchFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(variables["CONSUMER_MAX_RECEIVE"], json!("3"));
    assert_eq!(
        canon(&variables["CONSUMER_DLQ_URL"]),
        "${ShelfWatchDeadLetterQueue}"
    );
    // Each check notices: another consumer's markers, every queue, a send from anyone.
    for (from, to, needle) in [
        (
            "                      - 'CONSUMER#order-audit#*'\n",
            "                      - 'CONSUMER#*'\n",
            "CONSUMER#*\"",
        ),
        (
            "                Resource: !GetAtt OrderAuditQueue.Arn\n",
            "                Resource: '*'\n",
            "sqs:ReceiveMessage on every resource",
        ),
        (
            "                aws:SourceArn: !Ref EventsTopic\n",
            "                aws:SourceArn: !Sub 'arn:${AWS::Partition}:sns:${AWS::Region}:${AWS::AccountId}:*'\n",
            "OrderAuditQueuePolicy",
        ),
    ] {
        let problems = consumer_problems(
            &transform_mutated(&python, &path, from, to),
            "OrderAudit",
            "order-audit",
            false,
            &[],
        );
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The functions whose event source mappings read the data table's stream.
fn data_stream_readers(t: &Value) -> Vec<String> {
    let mut readers: Vec<String> = t["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| {
            r["Type"] == "AWS::Lambda::EventSourceMapping"
                && canon(&r["Properties"]["EventSourceArn"]) == "${DataTable.StreamArn}"
        })
        .map(|r| canon(&r["Properties"]["FunctionName"]))
        .collect();
    readers.sort();
    readers
}

#[test]
fn the_data_table_stream_has_exactly_two_readers() {
    let Some(python) = python() else { return };
    let (dir, path) = feed_template("readers");
    let mut t = transform(&python, &path);
    assert_eq!(
        data_stream_readers(&t),
        ["${EventPublisherFunction}", "${SqlSyncFunction}"],
        "a shard of a DynamoDB stream serves at most two readers"
    );
    // The consumers read their queues, never the stream.
    let consumers: Vec<String> = t["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| {
            r["Type"] == "AWS::Lambda::EventSourceMapping"
                && canon(&r["Properties"]["FunctionName"]) == "${OrderAuditFunction}"
        })
        .map(|r| canon(&r["Properties"]["EventSourceArn"]))
        .collect();
    assert_eq!(consumers, ["${OrderAuditQueue.Arn}"]);
    // A third reader is seen.
    let resources = t["Resources"].as_object_mut().unwrap();
    let (_, publisher) = resources
        .iter()
        .find(|(_, r)| canon(&r["Properties"]["FunctionName"]) == "${EventPublisherFunction}")
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    let mut third = publisher;
    third["Properties"]["FunctionName"] = json!({"Ref": "OrderAuditFunction"});
    resources.insert("ThirdReader".into(), third);
    assert_eq!(data_stream_readers(&t).len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The resources and outputs that ChangeEvents=off must remove: the topic, the publisher's, every
/// consumer's, and whatever refers to one of them; each problem names one deployed without the
/// condition.
fn events_off_problems(t: &Value, consumers: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    if t["Parameters"]["ChangeEvents"]["Default"] != "on"
        || t["Parameters"]["ChangeEvents"]["AllowedValues"] != json!(["on", "off"])
    {
        problems.push(format!(
            "Parameters.ChangeEvents: {}",
            t["Parameters"]["ChangeEvents"]
        ));
    }
    if t["Conditions"]["ChangeEventsOn"] != json!({"Fn::Equals": [{"Ref": "ChangeEvents"}, "on"]}) {
        problems.push(format!(
            "Conditions.ChangeEventsOn: {}",
            t["Conditions"]["ChangeEventsOn"]
        ));
    }
    let resources = t["Resources"].as_object().unwrap();
    let mut prefixes = vec!["EventsTopic".to_string(), "EventPublisher".to_string()];
    prefixes.extend(consumers.iter().map(|c| c.to_string()));
    // The events resources by name, then what refers to one of them, to a fixed point.
    let mut events: std::collections::BTreeSet<String> = resources
        .keys()
        .filter(|id| prefixes.iter().any(|p| id.starts_with(p.as_str())))
        .cloned()
        .collect();
    let refers = |value: &Value, ids: &std::collections::BTreeSet<String>| {
        let text = value.to_string();
        ids.iter().any(|id| {
            text.contains(&format!("\"Ref\":\"{id}\""))
                || text.contains(&format!("[\"{id}\","))
                || text.contains(&format!("${{{id}}}"))
                || text.contains(&format!("${{{id}."))
        })
    };
    loop {
        let more: Vec<String> = resources
            .iter()
            .filter(|(id, r)| !events.contains(*id) && refers(r, &events))
            .map(|(id, _)| id.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        events.extend(more);
    }
    let needed = [
        "EventsTopic",
        "EventPublisherFunction",
        "EventPublisherRole",
    ];
    for id in needed {
        if !events.contains(id) {
            problems.push(format!("{id}: missing"));
        }
    }
    for consumer in consumers {
        for suffix in [
            "Function",
            "Role",
            "Queue",
            "DeadLetterQueue",
            "Subscription",
        ] {
            if !events.contains(&format!("{consumer}{suffix}")) {
                problems.push(format!("{consumer}{suffix}: missing"));
            }
        }
    }
    // RealtimeOn and ChangeLogOn imply ChangeEventsOn (the rules RealtimeNeedsChangeEvents and
    // ChangeLogNeedsChangeEvents, checked by realtime_problems and change_log_problems).
    for id in &events {
        let realtime = id.starts_with("Realtime") && resources[id]["Condition"] == "RealtimeOn";
        let change_log = id.starts_with("ChangeLog") && resources[id]["Condition"] == "ChangeLogOn";
        if resources[id]["Condition"] != "ChangeEventsOn" && !realtime && !change_log {
            problems.push(format!("{id}: deployed with ChangeEvents off"));
        }
    }
    for (id, output) in t["Outputs"].as_object().unwrap() {
        if refers(&output["Value"], &events) && output["Condition"] != "ChangeEventsOn" {
            problems.push(format!("Outputs.{id}: deployed with ChangeEvents off"));
        }
    }
    problems
}

#[test]
fn change_events_off_removes_the_topic_the_publisher_and_every_consumer() {
    let Some(python) = python() else { return };
    let (dir, path) = feed_template("off");
    let t = transform(&python, &path);
    let consumers = ["OrderAudit", "ShelfWatch"];
    let problems = events_off_problems(&t, &consumers);
    assert!(problems.is_empty(), "{problems:#?}");
    // SAM's generated resources (the mappings) carry the condition too: counted among them.
    let mappings = t["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| {
            r["Type"] == "AWS::Lambda::EventSourceMapping" && r["Condition"] == "ChangeEventsOn"
        })
        .count();
    assert_eq!(
        mappings, 3,
        "the publisher's and the two consumers' mappings"
    );
    // Each check notices: an alarm, a dead-letter queue, the output left deployed.
    for (from, to, needle) in [
        (
            "  ShelfWatchDeadLetterAlarm:\n    Type: AWS::CloudWatch::Alarm\n    Condition: ChangeEventsOn\n",
            "  ShelfWatchDeadLetterAlarm:\n    Type: AWS::CloudWatch::Alarm\n",
            "ShelfWatchDeadLetterAlarm: deployed with ChangeEvents off",
        ),
        (
            "  EventPublisherFailureQueue:\n    Type: AWS::SQS::Queue\n    Condition: ChangeEventsOn\n",
            "  EventPublisherFailureQueue:\n    Type: AWS::SQS::Queue\n",
            "EventPublisherFailureQueue: deployed with ChangeEvents off",
        ),
        (
            "  EventsTopicArn:\n    Condition: ChangeEventsOn\n",
            "  EventsTopicArn:\n",
            "Outputs.EventsTopicArn",
        ),
    ] {
        let problems =
            events_off_problems(&transform_mutated(&python, &path, from, to), &consumers);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A feature of the change feed behind the parameter `parameter` (`on`/`off`, off by default), its
/// condition `condition` (`parameter` is `on`) and its rule `<parameter's stem>NeedsChangeEvents`
/// (only with `ChangeEvents=on`): each problem names the one that is not so.
fn switch_problems(t: &Value, parameter: &str, condition: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let declared = &t["Parameters"][parameter];
    if declared["Default"] != "off" || declared["AllowedValues"] != json!(["on", "off"]) {
        problems.push(format!("Parameters.{parameter}: {declared}"));
    }
    let on = json!({"Fn::Equals": [{"Ref": parameter}, "on"]});
    if t["Conditions"][condition] != on {
        problems.push(format!(
            "Conditions.{condition}: {}",
            t["Conditions"][condition]
        ));
    }
    let rule_id = format!("{}NeedsChangeEvents", condition.trim_end_matches("On"));
    let rule = &t["Rules"][&rule_id];
    if rule["RuleCondition"] != on
        || list(&rule["Assertions"])
            .iter()
            .map(|a| a["Assert"].clone())
            .collect::<Vec<_>>()
            != vec![json!({"Fn::Equals": [{"Ref": "ChangeEvents"}, "on"]})]
    {
        problems.push(format!("Rules.{rule_id}: {rule}"));
    }
    problems
}

/// `value` of the transformed template evaluated with the list parameter `name` set to `list`:
/// `Ref`, `Fn::Join` and `Fn::Split` (what the realtime API's client id pattern uses).
fn evaluate(value: &Value, name: &str, list_value: &Value) -> Value {
    if value["Ref"] == name {
        return list_value.clone();
    }
    if let Some([separator, items]) = value["Fn::Join"].as_array().map(Vec::as_slice) {
        let items = evaluate(items, name, list_value);
        let parts: Vec<String> = list(&items)
            .iter()
            .map(|item| match evaluate(item, name, list_value) {
                Value::String(s) => s,
                other => panic!("Fn::Join of {other}"),
            })
            .collect();
        return json!(parts.join(separator.as_str().unwrap()));
    }
    if let Some([separator, text]) = value["Fn::Split"].as_array().map(Vec::as_slice) {
        let text = evaluate(text, name, list_value);
        return json!(
            text.as_str()
                .unwrap()
                .split(separator.as_str().unwrap())
                .collect::<Vec<_>>()
        );
    }
    value.clone()
}

/// The realtime API (RealtimeEvents): off by default and only with the change feed (1), every
/// AppSync and Realtime* resource under RealtimeOn (2), IAM publishes and OIDC subscribes, nothing
/// else (3), each namespace's code handler is on-subscribe.js verbatim (4), one namespace per
/// entity as the publisher names them (5), `appsync:` actions only in RealtimeRole, only
/// EventPublish on exactly the namespaces (6), the function and its queue (7).
fn realtime_problems(t: &Value, model: &cqrs_model::Model) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = t["Resources"].as_object().unwrap();
    // 1. The parameter, its condition and its rule.
    problems.extend(switch_problems(t, "RealtimeEvents", "RealtimeOn"));
    // The claims' names sit in a JavaScript string of the handler: no quote, no backslash.
    for claim in ["TenantClaim", "RolesClaim"] {
        let pattern = &t["Parameters"][claim]["AllowedPattern"];
        if pattern != "^[!#-&(-\\[\\]-~]{1,256}$" {
            problems.push(format!("Parameters.{claim}.AllowedPattern: {pattern}"));
        }
    }
    // 2. Every AppSync or Realtime* resource (SAM's mapping included) under RealtimeOn.
    for (id, resource) in resources {
        let appsync = resource["Type"]
            .as_str()
            .is_some_and(|t| t.starts_with("AWS::AppSync::"));
        if (appsync || id.starts_with("Realtime")) && resource["Condition"] != "RealtimeOn" {
            problems.push(format!("{id}: deployed with RealtimeEvents off"));
        }
    }
    for (id, output) in t["Outputs"].as_object().unwrap() {
        if output["Value"].to_string().contains("Realtime") && output["Condition"] != "RealtimeOn" {
            problems.push(format!("Outputs.{id}: deployed with RealtimeEvents off"));
        }
    }
    // 3. Who connects, publishes and subscribes.
    fn auth_types(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    if key == "AuthType" {
                        out.push(canon(v));
                    }
                    auth_types(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| auth_types(v, out)),
            _ => {}
        }
    }
    let mut types = Vec::new();
    auth_types(&t["Resources"], &mut types);
    for kind in &types {
        if kind != "AWS_IAM" && kind != "OPENID_CONNECT" {
            problems.push(format!("AuthType {kind}: only AWS_IAM and OPENID_CONNECT"));
        }
    }
    let config = &t["Resources"]["RealtimeApi"]["Properties"]["EventConfig"];
    let iam = json!([{"AuthType": "AWS_IAM"}]);
    let oidc = json!([{"AuthType": "OPENID_CONNECT"}]);
    if config["DefaultPublishAuthModes"] != iam {
        problems.push(format!(
            "RealtimeApi publishes with {}",
            config["DefaultPublishAuthModes"]
        ));
    }
    if config["DefaultSubscribeAuthModes"] != oidc {
        problems.push(format!(
            "RealtimeApi subscribes with {}",
            config["DefaultSubscribeAuthModes"]
        ));
    }
    let issuers: Vec<Value> = list(&config["AuthProviders"])
        .iter()
        .filter(|p| p["AuthType"] == "OPENID_CONNECT")
        .map(|p| p["OpenIDConnectConfig"]["Issuer"].clone())
        .collect();
    if issuers != vec![json!({"Ref": "JwtIssuer"})] {
        problems.push(format!("RealtimeApi's OIDC issuers: {issuers:?}"));
    }
    // Its client id pattern accepts exactly the HTTP API's audiences: each one literally (a `.`
    // escaped), and the parameter refuses the other regular expression characters.
    let audiences = json!(["https://api.example.com", "7abc.client"]);
    for client_id in list(&config["AuthProviders"])
        .iter()
        .filter(|p| p["AuthType"] == "OPENID_CONNECT")
        .map(|p| &p["OpenIDConnectConfig"]["ClientId"])
    {
        let pattern = evaluate(client_id, "JwtAudience", &audiences);
        if pattern != json!(r"^(https://api\.example\.com|7abc\.client)$") {
            problems.push(format!(
                "RealtimeApi's ClientId pattern for audiences {audiences}: {pattern}"
            ));
        }
    }
    let audience = &t["Parameters"]["JwtAudience"];
    if audience["AllowedPattern"] != r"^[^\s+*?()\[\]{}^$|\\]{1,256}$" {
        problems.push(format!(
            "Parameters.JwtAudience allows regular expression characters: {audience}"
        ));
    }
    // 4 and 5. The namespaces: one per entity as the publisher names them, code handlers only.
    let handler = include_str!("../src/new/realtime/on-subscribe.js");
    let expected: Vec<(String, Value)> = cqrs_realtime::channel::namespaces(model)
        .iter()
        .map(|n| {
            let id = format!(
                "Realtime{}Namespace",
                n.name
                    .split('-')
                    .map(|w| w[..1].to_uppercase() + &w[1..])
                    .collect::<String>()
            );
            (
                id,
                json!({"Name": n.name, "CommonReaders": n.common_readers.as_str()}),
            )
        })
        .collect();
    let deployed: Vec<(String, Value)> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::AppSync::ChannelNamespace")
        .map(|(id, r)| {
            let sub = &r["Properties"]["CodeHandlers"]["Fn::Sub"];
            (
                id.clone(),
                json!({"Name": r["Properties"]["Name"], "CommonReaders": sub[1]["CommonReaders"]}),
            )
        })
        .collect();
    let mut sorted = expected.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    if deployed != sorted {
        problems.push(format!("namespaces: expected {sorted:?}, got {deployed:?}"));
    }
    for (id, r) in resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::AppSync::ChannelNamespace")
    {
        let p = &r["Properties"];
        if p["PublishAuthModes"] != iam || p["SubscribeAuthModes"] != oidc {
            problems.push(format!(
                "{id}: publishes with {}, subscribes with {}",
                p["PublishAuthModes"], p["SubscribeAuthModes"]
            ));
        }
        if !p["HandlerConfigs"].is_null() || !p["CodeS3Location"].is_null() {
            problems.push(format!("{id}: handlers other than its CodeHandlers"));
        }
        let sub = &p["CodeHandlers"]["Fn::Sub"];
        let keys: Vec<&String> = sub[1]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        if sub[0] != handler || keys != ["CommonReaders"] {
            problems.push(format!(
                "{id}: its CodeHandlers is not on-subscribe.js with CommonReaders"
            ));
        }
        if !handler.contains("export function onSubscribe") || handler.contains("onPublish") {
            problems.push(format!("{id}: an onPublish handler, or no onSubscribe"));
        }
    }
    // 6. appsync: actions only in RealtimeRole: EventPublish on exactly the namespaces.
    fn statements(value: &Value, out: &mut Vec<Value>) {
        match value {
            Value::Object(map) => {
                if map.contains_key("Effect") && map.contains_key("Action") {
                    out.push(value.clone());
                }
                map.values().for_each(|v| statements(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| statements(v, out)),
            _ => {}
        }
    }
    let arns: Vec<String> = expected
        .iter()
        .map(|(_, n)| {
            format!(
                "arn:${{AWS::Partition}}:appsync:${{AWS::Region}}:${{AWS::AccountId}}:apis/${{RealtimeApi.ApiId}}/channelNamespace/{}",
                n["Name"].as_str().unwrap()
            )
        })
        .collect();
    let mut published = Vec::new();
    for (id, resource) in resources {
        let mut found = Vec::new();
        statements(resource, &mut found);
        for statement in found {
            for action in list(&statement["Action"]).iter().map(canon) {
                let appsync = action.starts_with("appsync:") || action == "*";
                if !appsync {
                    continue;
                }
                if id != "RealtimeRole" || action != "appsync:EventPublish" {
                    problems.push(format!("{id}: {action}"));
                    continue;
                }
                published.extend(list(&statement["Resource"]).iter().map(canon));
            }
        }
    }
    if published != arns {
        problems.push(format!(
            "RealtimeRole: appsync:EventPublish on {published:?}, expected {arns:?}"
        ));
    }
    // 7. The function: its binary, the API's URL, its queue on the topic, every entity.
    let function = &t["Resources"]["RealtimeFunction"];
    if function["Metadata"]["BuildProperties"]["Binary"] != "realtime" {
        problems.push(format!(
            "RealtimeFunction's binary: {}",
            function["Metadata"]
        ));
    }
    let url = &function["Properties"]["Environment"]["Variables"]["REALTIME_API_URL"];
    if url != &json!({"Fn::Sub": "https://${RealtimeApi.Dns.Http}/event"}) {
        problems.push(format!("RealtimeFunction's REALTIME_API_URL: {url}"));
    }
    let mapping = &t["Resources"]["RealtimeFunctionQueue"]["Properties"];
    if canon(&mapping["EventSourceArn"]) != "${RealtimeQueue.Arn}"
        || mapping["FunctionResponseTypes"] != json!(["ReportBatchItemFailures"])
        || mapping["BatchSize"] != 10
    {
        problems.push(format!("RealtimeFunction's mapping: {mapping}"));
    }
    let subscription = &t["Resources"]["RealtimeSubscription"]["Properties"];
    if !subscription["FilterPolicy"].is_null()
        || canon(&subscription["TopicArn"]) != "${EventsTopic}"
    {
        problems.push(format!("RealtimeSubscription: {subscription}"));
    }
    problems
}

#[test]
fn realtime_is_off_by_default_publishes_by_iam_only_and_subscribes_by_the_read_rules() {
    let Some(python) = python() else { return };
    let (dir, path) = feed_template("realtime");
    let model = cqrs_model::Model::parse(&read(&dir.join("model.toml"))).unwrap();
    let t = transform(&python, &path);
    let problems = realtime_problems(&t, &model);
    assert!(problems.is_empty(), "{problems:#?}");
    // Its role: the consumers' grants on its own queues and markers, and the publishing.
    let arns: Vec<String> = cqrs_realtime::channel::namespaces(&model)
        .iter()
        .map(|n| format!("arn:${{AWS::Partition}}:appsync:${{AWS::Region}}:${{AWS::AccountId}}:apis/${{RealtimeApi.ApiId}}/channelNamespace/{}", n.name))
        .collect();
    let publish: Vec<(&[&str], &str, &str)> = arns
        .iter()
        .map(|a| (&["appsync:EventPublish"][..], a.as_str(), ""))
        .collect();
    let problems = consumer_problems(&t, "Realtime", "realtime", false, &publish);
    assert!(problems.is_empty(), "{problems:#?}");
    // Each check notices a widened template.
    let restricted = "        - CommonReaders: system_admin\n";
    for (from, to, needle) in [
        (
            "  RealtimeEvents:\n    Type: String\n    Default: 'off'\n",
            "  RealtimeEvents:\n    Type: String\n    Default: 'on'\n",
            "Parameters.RealtimeEvents",
        ),
        (
            "      - Assert: !Equals [!Ref ChangeEvents, 'on']\n        AssertDescription: RealtimeEvents",
            "      - Assert: !Equals [!Ref ChangeEvents, !Ref ChangeEvents]\n        AssertDescription: RealtimeEvents",
            "Rules.RealtimeNeedsChangeEvents",
        ),
        (
            "  RealtimeApi:\n    Type: AWS::AppSync::Api\n    Condition: RealtimeOn\n",
            "  RealtimeApi:\n    Type: AWS::AppSync::Api\n",
            "RealtimeApi: deployed with RealtimeEvents off",
        ),
        (
            "  RealtimeWebSocketDomain:\n    Condition: RealtimeOn\n",
            "  RealtimeWebSocketDomain:\n",
            "Outputs.RealtimeWebSocketDomain",
        ),
        (
            "        DefaultSubscribeAuthModes:\n          - AuthType: OPENID_CONNECT\n",
            "        DefaultSubscribeAuthModes:\n          - AuthType: API_KEY\n",
            "AuthType API_KEY",
        ),
        (
            "        DefaultPublishAuthModes:\n          - AuthType: AWS_IAM\n",
            "        DefaultPublishAuthModes:\n          - AuthType: OPENID_CONNECT\n",
            "RealtimeApi publishes with",
        ),
        (
            "      PublishAuthModes:\n        - AuthType: AWS_IAM\n",
            "      PublishAuthModes:\n        - AuthType: OPENID_CONNECT\n",
            "publishes with [{\"AuthType\":\"OPENID_CONNECT\"}]",
        ),
        (
            "          export function onSubscribe(ctx) {\n",
            "          export function onPublish(ctx) {\n            return ctx.events;\n          }\n          export function onSubscribe(ctx) {\n",
            "its CodeHandlers is not on-subscribe.js",
        ),
        (
            restricted,
            "        - CommonReaders: everyone\n",
            "namespaces: expected",
        ),
        (
            "                  - appsync:EventPublish\n",
            "                  - appsync:EventPublish\n                  - appsync:EventSubscribe\n",
            "RealtimeRole: appsync:EventSubscribe",
        ),
        (
            "/channelNamespace/order'\n",
            "/channelNamespace/*'\n",
            "RealtimeRole: appsync:EventPublish on",
        ),
        (
            "          REALTIME_API_URL: !Sub 'https://${RealtimeApi.Dns.Http}/event'\n",
            "          REALTIME_API_URL: !Sub 'http://${RealtimeApi.Dns.Http}/event'\n",
            "REALTIME_API_URL",
        ),
    ] {
        let problems = realtime_problems(&transform_mutated(&python, &path, from, to), &model);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_consumer_or_route_named_as_a_framework_consumer_is_refused() {
    for (name, says) in [
        (
            "realtime",
            "`realtime` is the framework's realtime publisher",
        ),
        ("change-log", "`change-log` is the framework's change log"),
    ] {
        for declaration in [
            format!("[consumers.{name}]\n"),
            format!(
                "[routes.{name}]\nreads = [\"data\"]\n[routes.{name}.operations.rt]\nmethod = \"GET\"\npath = \"/rt\"\n"
            ),
        ] {
            let dir = scratch(&format!("named-{name}"));
            let example = read(&Path::new(ROOT).join("model.toml"));
            std::fs::write(dir.join("model.toml"), format!("{example}\n{declaration}")).unwrap();
            let (code, out, err) = template(&dir, &["--prefix", "shop"]);
            assert_ne!(code, 0, "{declaration}: {out}{err}");
            assert!(err.contains(says), "{declaration}: {err}");
            assert!(!dir.join("template.yaml").exists(), "nothing written");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// The change log (ChangeLog): off by default and only with the change feed (1), every ChangeLog*
/// resource (SAM's mapping included) under ChangeLogOn (2), its function the binary `change-log`
/// on its own queue (3), and the data table written by no other consumer (4).
fn change_log_problems(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    // 1. The parameter, its condition and its rule.
    problems.extend(switch_problems(t, "ChangeLog", "ChangeLogOn"));
    // 2. Every ChangeLog* resource under ChangeLogOn.
    let resources = t["Resources"].as_object().unwrap();
    let ids: Vec<&String> = resources
        .keys()
        .filter(|id| id.starts_with("ChangeLog"))
        .collect();
    if ids.len() < 10 {
        problems.push(format!("ChangeLog resources: only {ids:?}"));
    }
    for id in ids {
        if resources[id]["Condition"] != "ChangeLogOn" {
            problems.push(format!("{id}: deployed with ChangeLog off"));
        }
    }
    // 3. Its binary, on its own queue.
    let function = &t["Resources"]["ChangeLogFunction"];
    if function["Metadata"]["BuildProperties"]["Binary"] != "change-log" {
        problems.push(format!(
            "ChangeLogFunction's binary: {}",
            function["Metadata"]["BuildProperties"]["Binary"]
        ));
    }
    let mapping = &t["Resources"]["ChangeLogFunctionQueue"]["Properties"];
    if canon(&mapping["EventSourceArn"]) != "${ChangeLogQueue.Arn}" {
        problems.push(format!("ChangeLogFunction's mapping: {mapping}"));
    }
    // 4. No other consumer (a role with a marker grant) writes the data table.
    for (id, role) in resources {
        if role["Type"] != "AWS::IAM::Role" || id == "ChangeLogRole" {
            continue;
        }
        let (grants, _) = role_grants(role);
        let consumer = grants.iter().any(|(_, _, c)| c.contains("CONSUMER#"));
        for grant in grants
            .iter()
            .filter(|g| consumer && g.1 == "${DataTable.Arn}")
        {
            if ![
                "dynamodb:GetItem",
                "dynamodb:Query",
                "dynamodb:BatchGetItem",
            ]
            .contains(&grant.0.as_str())
            {
                problems.push(format!("{id}: {}", shown(grant)));
            }
        }
    }
    problems
}

#[test]
fn the_change_log_is_off_by_default_and_writes_only_its_partitions_of_the_data_table() {
    let Some(python) = python() else { return };
    let (dir, path) = feed_template("change-log");
    let t = transform(&python, &path);
    let problems = change_log_problems(&t);
    assert!(problems.is_empty(), "{problems:#?}");
    // Its role: the consumers' grants on its own queues and markers, and PutItem on the data
    // table's change log partitions alone.
    let entries =
        json!({"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["CQRS_CHANGE_LOG#*"]}})
            .to_string();
    let write: [(&[&str], &str, &str); 1] = [(&["dynamodb:PutItem"], "${DataTable.Arn}", &entries)];
    let problems = consumer_problems(&t, "ChangeLog", "change-log", false, &write);
    assert!(problems.is_empty(), "{problems:#?}");
    // Each check notices a widened template.
    for (from, to, needle) in [
        (
            "  ChangeLog:\n    Type: String\n    Default: 'off'\n",
            "  ChangeLog:\n    Type: String\n    Default: 'on'\n",
            "Parameters.ChangeLog",
        ),
        (
            "      - Assert: !Equals [!Ref ChangeEvents, 'on']\n        AssertDescription: ChangeLog",
            "      - Assert: !Equals [!Ref ChangeEvents, !Ref ChangeEvents]\n        AssertDescription: ChangeLog",
            "Rules.ChangeLogNeedsChangeEvents",
        ),
        (
            "  ChangeLogQueue:\n    Type: AWS::SQS::Queue\n    Condition: ChangeLogOn\n",
            "  ChangeLogQueue:\n    Type: AWS::SQS::Queue\n",
            "ChangeLogQueue: deployed with ChangeLog off",
        ),
        (
            "        Binary: change-log\n",
            "        Binary: order-audit\n",
            "ChangeLogFunction's binary",
        ),
        (
            "                      - 'CONSUMER#order-audit#*'\n",
            "                      - 'CONSUMER#order-audit#*'\n              - Effect: Allow\n                Action: dynamodb:PutItem\n                Resource: !GetAtt DataTable.Arn\n",
            "OrderAuditRole: dynamodb:PutItem on ${DataTable.Arn}",
        ),
    ] {
        let problems = change_log_problems(&transform_mutated(&python, &path, from, to));
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    }
    // Its own grant, widened to every partition of the data table, is caught by the exact grants.
    let widened = transform_mutated(
        &python,
        &path,
        "                      - 'CQRS_CHANGE_LOG#*'\n",
        "                      - '*'\n",
    );
    let problems = consumer_problems(&widened, "ChangeLog", "change-log", false, &write);
    assert!(
        problems.iter().any(|p| p
            .starts_with("ChangeLogRole: dynamodb:PutItem on ${DataTable.Arn}")
            && p.ends_with("is not needed")),
        "{problems:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The code handler as the rendered template embeds it passes the onSubscribe table of
/// clients/typescript/test/realtime.test.mjs under Node.
#[test]
fn the_embedded_on_subscribe_handler_passes_the_node_table() {
    let Some(python) = python() else { return };
    let node = Command::new("node").arg("--version").output();
    if node.is_err() {
        eprintln!("SKIPPED: node is not installed, so the embedded onSubscribe handler is not run");
        if std::env::var_os("CI").is_some() {
            panic!("node is needed under CI");
        }
        return;
    }
    let (dir, path) = feed_template("realtime-node");
    let t = transform(&python, &path);
    let text = t["Resources"]["RealtimeOrderNamespace"]["Properties"]["CodeHandlers"]["Fn::Sub"][0]
        .as_str()
        .expect("RealtimeOrderNamespace's CodeHandlers text")
        .to_string();
    let file = dir.join("on-subscribe.js");
    std::fs::write(&file, &text).unwrap();
    let client = Path::new(ROOT).join("clients/typescript");
    let module = client.join("test/realtime.test.mjs");
    let script = format!(
        "import {{ readFileSync }} from 'node:fs';\n\
         import {{ checkOnSubscribe }} from '{}';\n\
         try {{\n\
           const count = await checkOnSubscribe(readFileSync(process.env.CQRS_HANDLER, 'utf8'));\n\
           console.log(`cases ${{count}}`);\n\
           process.exit(0);\n\
         }} catch (e) {{ console.error(String(e && e.stack || e)); process.exit(1); }}\n",
        url_of(&module)
    );
    let run = |handler: &Path| {
        Command::new("node")
            .args(["--input-type=module", "-e", &script])
            .current_dir(&client)
            .env("CQRS_HANDLER", handler)
            .output()
            .unwrap()
    };
    let out = run(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("cases "),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: u32 = stdout.trim()["cases ".len()..].parse().unwrap();
    assert!(cases >= 60, "ran {cases} cases");
    // The same run fails a widened handler.
    let widened = file.with_file_name("widened.js");
    let wide = text.replace(
        "} else if (tenant === own) {",
        "} else if (tenant !== \"\") {",
    );
    assert_ne!(wide, text, "the comparison to widen was found");
    std::fs::write(&widened, wide).unwrap();
    let out = run(&widened);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("expected unauthorized, got allowed"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `file://` URL of an absolute path (for an ES module import).
fn url_of(path: &Path) -> String {
    let path = path.canonicalize().unwrap();
    format!("file://{}", path.display())
}
