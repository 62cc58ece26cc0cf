//! What `template.yaml` means, beyond what `sam validate --lint` and `cfn-lint` check.
//!
//! The linters accept a misspelled optional property inside a SAM event, a route bound to the wrong
//! function, a `DynamoDBCrudPolicy` that grants deletes, or a `CALLER_MODE=local` that would make
//! the local header mode deployable. These tests read the template (CloudFormation short tags such
//! as `!Ref` / `!GetAtt` / `!Sub` arrive as `serde_yaml::Value::Tagged`) and assert the contract:
//! the routes and their authorizer, the stream mapping, the environment, the IAM actions per
//! function and table, the build settings, runtime, architecture and logging.
//!
//! Every check is a function returning the list of problems it found; the `*_fail` tests mutate a
//! copy of the template and assert that the check notices, so none of them can pass vacuously.
//! Pure: no DynamoDB, no AWS, no network.
//!
//! What SAM adds by itself (the managed policies of generated roles, the stage, the event source
//! mapping) is checked on the transformed template in `sam_transformed.rs`.

use std::collections::{BTreeMap, BTreeSet};

use cqrs_testkit::template::service_template;
use serde_yaml::{Mapping, Value};

// ---------------------------------------------------------------------------------------------
// The contract.

const COMMAND_FN: &str = "CommandHandlerFunction";
const DATA_SYNC_FN: &str = "DataSyncFunction";
const QUERY_FN: &str = "QueryHandlerFunction";

/// Logical id of each function and the cargo binary it is built from.
const FUNCTIONS: [(&str, &str); 3] = [
    (COMMAND_FN, "command-handler"),
    (DATA_SYNC_FN, "data-sync"),
    (QUERY_FN, "query-handler"),
];

/// The relational read model's function (deployed when `SqlReadModel` is not `none`), and its
/// binary: built like the others; what it may do is checked on the transformed template
/// (`sam_transformed.rs`).
const SQL_SYNC: (&str, &str) = ("SqlSyncFunction", "sql-sync");

/// The change feed's publisher (deployed when `ChangeEvents` is on), and its binary; what it may do
/// is checked on the transformed template (`tools/cli/tests/template.rs`).
const EVENT_PUBLISHER: (&str, &str) = ("EventPublisherFunction", "event-publisher");
/// The realtime publisher (RealtimeEvents=on, a consumer of the change feed).
const REALTIME: (&str, &str) = ("RealtimeFunction", "realtime");
/// The change log (ChangeLog=on, a consumer of the change feed).
const CHANGE_LOG: (&str, &str) = ("ChangeLogFunction", "change-log");

/// Every route of the HTTP API: method, path, function.
const ROUTES: [(&str, &str, &str); 10] = [
    ("POST", "/commands", COMMAND_FN),
    ("PATCH", "/commands", COMMAND_FN),
    ("POST", "/sequences/{typeCode}/next", COMMAND_FN),
    ("POST", "/master-data/copy", COMMAND_FN),
    ("GET", "/settings/{category}/{code}", QUERY_FN),
    ("GET", "/items/{pk}", QUERY_FN),
    ("GET", "/items/{pk}/{sk}", QUERY_FN),
    ("GET", "/items/{pk}/{sk}/versions", QUERY_FN),
    ("GET", "/items/{pk}/{sk}/versions/{v}", QUERY_FN),
    ("GET", "/query/{pattern}", QUERY_FN),
];

/// The environment every function needs (`cqrs_store::Tables::from_env` reads all four).
const TABLE_VARIABLES: [(&str, &str); 4] = [
    ("COMMAND_TABLE", "${CommandTable}"),
    ("DATA_TABLE", "${DataTable}"),
    ("HISTORY_TABLE", "${HistoryTable}"),
    ("IDEMPOTENCY_TABLE", "${IdempotencyTable}"),
];

/// Variables that must never be deployed: the local caller mode and a local DynamoDB endpoint.
const FORBIDDEN_VARIABLES: [&str; 3] = [
    "CALLER_MODE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
];

/// The explicit role of data-sync (SAM's generated role would get the account-wide
/// `AWSLambdaDynamoDBExecutionRole` for the stream event).
const DATA_SYNC_ROLE: &str = "DataSyncRole";

/// Exactly the IAM grants of each function: (action, resource) pairs, resources in the
/// canonical form of [`canon`].
fn expected_grants(function: &str) -> BTreeSet<(String, String)> {
    let grants: &[(&[&str], &[&str])] = match function {
        // Each new version in one TransactWriteItems with the item's head record (idempotency
        // table: Put, Update or ConditionCheck) and, with an Idempotency-Key, the idempotency
        // record; a missing head is seeded from the command rows, the history index and the data
        // table.
        COMMAND_FN => &[
            (
                &["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"],
                &["${CommandTable.Arn}"],
            ),
            (
                &[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:ConditionCheckItem",
                ],
                &["${IdempotencyTable.Arn}"],
            ),
            (
                &["dynamodb:Query"],
                &["${HistoryTable.Arn}/index/id-version-index"],
            ),
            (&["dynamodb:GetItem"], &["${DataTable.Arn}"]),
            // Sequences: one UpdateItem per draw; master items (formats, time zone, TTL
            // policies) with their `common` fallback in one BatchGetItem.
            (&["dynamodb:UpdateItem"], &["${SequencesTable.Arn}"]),
            (
                &["dynamodb:BatchGetItem", "dynamodb:Query"],
                &["${DataTable.Arn}"],
            ),
        ],
        // Its own role: the command table's stream only, conditional puts into both projections
        // (reads to compare on a conflict), parked records, the mapping's failure queue, its log
        // group, X-Ray.
        DATA_SYNC_FN => &[
            (
                &[
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                ],
                &["${CommandTable.StreamArn}"],
            ),
            (&["dynamodb:ListStreams"], &["${CommandTable.Arn}/stream/*"]),
            (
                &["dynamodb:GetItem", "dynamodb:PutItem"],
                &["${DataTable.Arn}", "${HistoryTable.Arn}"],
            ),
            (&["dynamodb:PutItem"], &["${ParkedTable.Arn}"]),
            (&["sqs:SendMessage"], &["${DataSyncFailureQueue.Arn}"]),
            (
                &["logs:CreateLogStream", "logs:PutLogEvents"],
                &["${DataSyncLogs.Arn}"],
            ),
            (
                &["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
                &["*"],
            ),
        ],
        QUERY_FN => &[
            (
                &["dynamodb:GetItem", "dynamodb:Query"],
                &[
                    "${DataTable.Arn}",
                    "${DataTable.Arn}/index/*",
                    "${HistoryTable.Arn}",
                    "${HistoryTable.Arn}/index/*",
                    "${CommandTable.Arn}",
                ],
            ),
            // minVersion: one read of the item's head record.
            (&["dynamodb:GetItem"], &["${IdempotencyTable.Arn}"]),
            // GET /settings/...: the tenant's and common's setting in one BatchGetItem.
            (&["dynamodb:BatchGetItem"], &["${DataTable.Arn}"]),
        ],
        other => panic!("no expected grants for {other}"),
    };
    grants
        .iter()
        .flat_map(|(actions, resources)| {
            actions.iter().flat_map(move |a| {
                resources
                    .iter()
                    .map(move |r| ((*a).to_owned(), (*r).to_owned()))
            })
        })
        .collect()
}

/// Properties SAM knows on an `HttpApi` event (anything else is a typo SAM would reject only at
/// deploy time, or silently ignore).
const HTTP_API_EVENT_PROPERTIES: &[&str] = &[
    "ApiId",
    "Auth",
    "Method",
    "Path",
    "PayloadFormatVersion",
    "RouteSettings",
    "TimeoutInMillis",
];

/// Properties SAM knows on a `DynamoDB` event.
const DYNAMODB_EVENT_PROPERTIES: &[&str] = &[
    "BatchSize",
    "BisectBatchOnFunctionError",
    "DestinationConfig",
    "Enabled",
    "FilterCriteria",
    "FunctionResponseTypes",
    "KmsKeyArn",
    "MaximumBatchingWindowInSeconds",
    "MaximumRecordAgeInSeconds",
    "MaximumRetryAttempts",
    "MetricsConfig",
    "ParallelizationFactor",
    "StartingPosition",
    "StartingPositionTimestamp",
    "Stream",
    "TumblingWindowInSeconds",
];

// ---------------------------------------------------------------------------------------------
// Reading the template.

fn workspace() -> Value {
    let path = service_template();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).expect("template.yaml is YAML")
}

/// YAML text (with CloudFormation tags) as a value, for mutations.
fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("bad test YAML {text:?}: {e}"))
}

fn get<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| match v {
        Value::Mapping(m) => m.get(*key),
        _ => None,
    })
}

/// The value at `path`, created (as mappings) where missing: for mutations.
fn at<'a>(value: &'a mut Value, path: &[&str]) -> &'a mut Value {
    path.iter().fold(value, |v, key| {
        if !v.is_mapping() {
            *v = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(m) = v else { unreachable!() };
        m.entry(Value::String((*key).to_owned()))
            .or_insert(Value::Null)
    })
}

fn resources(t: &Value) -> Vec<(&str, &Value)> {
    match get(t, &["Resources"]) {
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?, v)))
            .collect(),
        _ => Vec::new(),
    }
}

fn resources_of_type<'a>(t: &'a Value, ty: &str) -> Vec<(&'a str, &'a Value)> {
    resources(t)
        .into_iter()
        .filter(|(_, r)| get(r, &["Type"]).and_then(Value::as_str) == Some(ty))
        .collect()
}

fn resource<'a>(t: &'a Value, id: &str) -> Option<&'a Value> {
    get(t, &["Resources", id])
}

/// A scalar or intrinsic as one comparable string: `!Ref X` and `{Ref: X}` are `${X}`,
/// `!GetAtt A.B` / `!GetAtt [A, B]` / `{Fn::GetAtt: [A, B]}` are `${A.B}`, `!Sub 'text'` and
/// `{Fn::Sub: text}` are `text`, plain scalars their text. Anything else is debug output, which
/// never equals an expected value.
fn canon(value: &Value) -> String {
    let get_att = |v: &Value| match v {
        Value::String(s) => format!("${{{s}}}"),
        Value::Sequence(parts) => {
            let parts: Vec<String> = parts.iter().map(canon).collect();
            format!("${{{}}}", parts.join("."))
        }
        other => format!("{other:?}"),
    };
    let sub = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => format!("{other:?}"),
    };
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Tagged(t) if t.tag == "Ref" => format!("${{{}}}", canon(&t.value)),
        Value::Tagged(t) if t.tag == "GetAtt" => get_att(&t.value),
        Value::Tagged(t) if t.tag == "Sub" => sub(&t.value),
        Value::Mapping(m) if m.len() == 1 => {
            let (k, v) = m.iter().next().expect("one entry");
            match k.as_str() {
                Some("Ref") => format!("${{{}}}", canon(v)),
                Some("Fn::GetAtt") => get_att(v),
                Some("Fn::Sub") => sub(v),
                _ => format!("{value:?}"),
            }
        }
        other => format!("{other:?}"),
    }
}

/// A string or a list of strings (IAM `Action` / `Resource`), canonical.
fn one_or_many(value: Option<&Value>) -> Vec<String> {
    match value {
        None => Vec::new(),
        Some(Value::Sequence(items)) => items.iter().map(canon).collect(),
        Some(v) => vec![canon(v)],
    }
}

/// SAM's merge of `Globals.Function` into a function's properties: maps merge key by key
/// (recursively), lists are appended to the global ones, anything else is replaced.
fn merge(global: &Value, local: &Value) -> Value {
    match (global, local) {
        (Value::Mapping(g), Value::Mapping(l)) => {
            let mut out = g.clone();
            for (k, v) in l {
                let merged = match g.get(k) {
                    Some(gv) => merge(gv, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Mapping(out)
        }
        (Value::Sequence(g), Value::Sequence(l)) => {
            Value::Sequence(g.iter().chain(l).cloned().collect())
        }
        (_, l) => l.clone(),
    }
}

/// The properties a function ends up with after the `Globals` section.
fn effective(t: &Value, function: &str) -> Value {
    let global = get(t, &["Globals", "Function"])
        .cloned()
        .unwrap_or(Value::Mapping(Mapping::new()));
    let local = resource(t, function)
        .and_then(|r| get(r, &["Properties"]))
        .cloned()
        .unwrap_or(Value::Mapping(Mapping::new()));
    merge(&global, &local)
}

fn events(t: &Value, function: &str) -> Vec<(String, Value)> {
    match resource(t, function).and_then(|r| get(r, &["Properties", "Events"])) {
        Some(Value::Mapping(m)) => m.iter().map(|(k, v)| (canon(k), v.clone())).collect(),
        _ => Vec::new(),
    }
}

/// Every string anywhere in the value (keys included).
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Mapping(m) => m.iter().for_each(|(k, v)| {
            strings(k, out);
            strings(v, out);
        }),
        Value::Tagged(t) => strings(&t.value, out),
        _ => {}
    }
}

type Problems = Vec<String>;

/// Records a problem when `actual != expected`.
fn expect_eq(problems: &mut Problems, what: &str, actual: Option<&Value>, expected: &str) {
    let actual = actual.map(canon);
    if actual.as_deref() != Some(expected) {
        problems.push(format!("{what}: expected {expected:?}, got {actual:?}"));
    }
}

fn int(value: Option<&Value>) -> Option<i64> {
    match value {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
}

/// Unknown keys of an event's `Properties`.
fn unknown_properties(props: &Value, known: &[&str]) -> Vec<String> {
    match props {
        Value::Mapping(m) => m
            .keys()
            .map(canon)
            .filter(|k| !known.contains(&k.as_str()))
            .collect(),
        _ => Vec::new(),
    }
}

fn assert_ok(check: fn(&Value) -> Problems, t: &Value) {
    let problems = check(t);
    assert!(
        problems.is_empty(),
        "template.yaml breaks the contract:\n  - {}",
        problems.join("\n  - ")
    );
}

fn assert_fails(check: fn(&Value) -> Problems, t: &Value, needle: &str) {
    let problems = check(t);
    assert!(
        problems.iter().any(|p| p.contains(needle)),
        "expected a problem mentioning {needle:?}, got {problems:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// Exactly the three functions, each built by cargo-lambda from its own binary of the workspace,
/// from the workspace root, as `bootstrap` on provided.al2023 / arm64, traced, JSON logs into a
/// log group with a retention.
fn check_functions(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let ids: BTreeSet<&str> = resources_of_type(t, "AWS::Serverless::Function")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    // The framework's, and one per route function the service's model declares.
    let own = own_functions();
    let all: Vec<(String, String)> = FUNCTIONS
        .iter()
        .chain([&SQL_SYNC, &EVENT_PUBLISHER, &REALTIME, &CHANGE_LOG])
        .map(|(id, binary)| ((*id).to_owned(), (*binary).to_owned()))
        .chain(own.iter().map(|f| (f.id.clone(), f.binary.clone())))
        .chain(consumer_functions())
        .collect();
    let expected: BTreeSet<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    if ids != expected {
        problems.push(format!("functions: expected {expected:?}, got {ids:?}"));
    }
    let raw_lambdas = resources_of_type(t, "AWS::Lambda::Function");
    if !raw_lambdas.is_empty() {
        problems.push(format!("unexpected AWS::Lambda::Function: {raw_lambdas:?}"));
    }
    for (id, binary) in &all {
        let (id, binary) = (id.as_str(), binary.as_str());
        let Some(res) = resource(t, id) else {
            problems.push(format!("{id}: missing"));
            continue;
        };
        let p = effective(t, id);
        let at = |k: &str| format!("{id}.{k}");
        expect_eq(
            &mut problems,
            &at("Metadata.BuildMethod"),
            get(res, &["Metadata", "BuildMethod"]),
            "rust-cargolambda",
        );
        expect_eq(
            &mut problems,
            &at("Metadata.BuildProperties.Binary"),
            get(res, &["Metadata", "BuildProperties", "Binary"]),
            binary,
        );
        expect_eq(&mut problems, &at("CodeUri"), get(&p, &["CodeUri"]), ".");
        expect_eq(
            &mut problems,
            &at("Runtime"),
            get(&p, &["Runtime"]),
            "provided.al2023",
        );
        expect_eq(
            &mut problems,
            &at("Handler"),
            get(&p, &["Handler"]),
            "bootstrap",
        );
        let arch = one_or_many(get(&p, &["Architectures"]));
        if arch != ["arm64"] {
            problems.push(format!(
                "{}: expected [\"arm64\"], got {arch:?}",
                at("Architectures")
            ));
        }
        expect_eq(
            &mut problems,
            &at("Tracing"),
            get(&p, &["Tracing"]),
            "Active",
        );
        expect_eq(
            &mut problems,
            &at("LoggingConfig.LogFormat"),
            get(&p, &["LoggingConfig", "LogFormat"]),
            "JSON",
        );
        if get(&p, &["LoggingConfig", "ApplicationLogLevel"]).is_none() {
            problems.push(format!(
                "{}: missing",
                at("LoggingConfig.ApplicationLogLevel")
            ));
        }
        // The log group: a resource of this template with a retention.
        let group = get(&p, &["LoggingConfig", "LogGroup"]).map(canon);
        let group_res = group
            .as_deref()
            .and_then(|g| g.strip_prefix("${"))
            .and_then(|g| g.strip_suffix('}'))
            .and_then(|g| resource(t, g));
        match group_res {
            Some(g) if get(g, &["Type"]).and_then(Value::as_str) == Some("AWS::Logs::LogGroup") => {
                if get(g, &["Properties", "RetentionInDays"]).is_none() {
                    problems.push(format!("{id}: log group {group:?} has no RetentionInDays"));
                }
            }
            _ => problems.push(format!(
                "{}: expected !Ref to an AWS::Logs::LogGroup, got {group:?}",
                at("LoggingConfig.LogGroup")
            )),
        }
        // The binary is the service's: `src/bin/<binary>.rs` beside the template, or a `[[bin]]` of
        // its Cargo.toml.
        let root = service_template()
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let source = root.join("src").join("bin").join(format!("{binary}.rs"));
        let manifest = root.join("Cargo.toml");
        let declared = source.is_file()
            || std::fs::read_to_string(&manifest)
                .map(|text| declares_bin(&text, binary))
                .unwrap_or(false);
        if !declared {
            problems.push(format!(
                "{id}: the service has no binary {binary:?} ({} nor a [[bin]] in {})",
                source.display(),
                manifest.display()
            ));
        }
    }
    problems
}

/// One of the service's own route functions (`[routes.<name>]` of the model.toml beside the
/// template), as `cqrs template` writes it.
struct OwnFunction {
    id: String,
    role: String,
    binary: String,
    routes: BTreeSet<(String, String)>,
}

/// The route functions the service's model declares (none without a model.toml).
fn own_functions() -> Vec<OwnFunction> {
    let Some(dir) = service_template()
        .parent()
        .map(std::path::Path::to_path_buf)
    else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(dir.join("model.toml")) else {
        return Vec::new();
    };
    let model = cqrs_model::Model::parse(&text).expect("model.toml checks");
    model
        .routes()
        .iter()
        .map(|r| {
            let base = cqrs_testkit::own_routes::pascal(&r.name);
            OwnFunction {
                id: format!("{base}Function"),
                role: format!("{base}Role"),
                binary: r.name.clone(),
                routes: r
                    .operations
                    .iter()
                    .map(|op| (op.method.clone(), op.path.clone()))
                    .collect(),
            }
        })
        .collect()
}

/// The consumers the service's model declares (`[consumers.<name>]`): (function id, binary).
fn consumer_functions() -> Vec<(String, String)> {
    let Some(dir) = service_template()
        .parent()
        .map(std::path::Path::to_path_buf)
    else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(dir.join("model.toml")) else {
        return Vec::new();
    };
    let model = cqrs_model::Model::parse(&text).expect("model.toml checks");
    model
        .consumers()
        .iter()
        .map(|c| {
            let base = cqrs_testkit::own_routes::pascal(&c.name);
            (format!("{base}Function"), c.name.clone())
        })
        .collect()
}

/// Each route function of the model serves exactly its declared operations, each an HttpApi
/// event of the one API (payload 2.0), behind the JWT authorizer (none overrides the default),
/// and runs with its own role, an `AWS::IAM::Role` of the template (what that role holds is
/// checked on the transformed template, `sam_transformed.rs`).
fn check_own_routes(t: &Value) -> Problems {
    check_own_routes_of(t, &own_functions())
}

fn check_own_routes_of(t: &Value, own: &[OwnFunction]) -> Problems {
    let mut problems = Problems::new();
    for f in own {
        let id = f.id.as_str();
        let mut served = BTreeSet::new();
        for (name, event) in events(t, id) {
            let at = format!("{id}.Events.{name}");
            let ty = get(&event, &["Type"]).map(canon).unwrap_or_default();
            if ty != "HttpApi" {
                problems.push(format!("{at}: expected an HttpApi event, got {ty:?}"));
                continue;
            }
            let props = get(&event, &["Properties"]).cloned().unwrap_or(Value::Null);
            for unknown in unknown_properties(&props, HTTP_API_EVENT_PROPERTIES) {
                problems.push(format!("{at}: unknown HttpApi event property {unknown:?}"));
            }
            expect_eq(
                &mut problems,
                &format!("{at}.ApiId"),
                get(&props, &["ApiId"]),
                "${HttpApi}",
            );
            expect_eq(
                &mut problems,
                &format!("{at}.PayloadFormatVersion"),
                get(&props, &["PayloadFormatVersion"]),
                "2.0",
            );
            if let Some(authorizer) = get(&props, &["Auth", "Authorizer"]).map(canon)
                && authorizer != "JwtAuthorizer"
            {
                problems.push(format!(
                    "{at}: authorizer must be JwtAuthorizer, got {authorizer:?}"
                ));
            }
            let method = get(&props, &["Method"]).map(canon).unwrap_or_default();
            let path = get(&props, &["Path"]).map(canon).unwrap_or_default();
            served.insert((method.to_uppercase(), path));
        }
        if served != f.routes {
            problems.push(format!(
                "{id}: routes expected {:?} (model.toml), got {served:?}",
                f.routes
            ));
        }
        let p = effective(t, id);
        expect_eq(
            &mut problems,
            &format!("{id}.Role"),
            get(&p, &["Role"]),
            &format!("${{{}.Arn}}", f.role),
        );
        if get(&p, &["Policies"]).is_some() {
            problems.push(format!(
                "{id}.Policies: put them in {} (SAM ignores Policies next to a Role)",
                f.role
            ));
        }
        if resource(t, &f.role)
            .and_then(|r| get(r, &["Type"]))
            .and_then(Value::as_str)
            != Some("AWS::IAM::Role")
        {
            problems.push(format!("{}: missing, or not an AWS::IAM::Role", f.role));
        }
    }
    problems
}

/// Whether a Cargo manifest has a `[[bin]]` table with `name = "<name>"`.
fn declares_bin(manifest: &str, name: &str) -> bool {
    let wanted = format!("\"{name}\"");
    manifest.split("[[bin]]").skip(1).any(|section| {
        section
            .lines()
            .take_while(|l| !l.trim_start().starts_with('['))
            .filter_map(|l| l.split_once('='))
            .any(|(k, v)| k.trim() == "name" && v.trim() == wanted)
    })
}

/// Each function gets the four table names, as references to the template's tables, and never
/// a variable that only local runs may use (nowhere in the template, in fact).
fn check_environment(t: &Value) -> Problems {
    let mut problems = Problems::new();
    for (id, _) in FUNCTIONS {
        let p = effective(t, id);
        let vars = get(&p, &["Environment", "Variables"]);
        for (name, table) in TABLE_VARIABLES {
            expect_eq(
                &mut problems,
                &format!("{id}.Environment.Variables.{name}"),
                vars.and_then(|v| get(v, &[name])),
                table,
            );
        }
        for name in FORBIDDEN_VARIABLES {
            if vars.and_then(|v| get(v, &[name])).is_some() {
                problems.push(format!("{id}: {name} must never be deployed"));
            }
        }
    }
    // data-sync parks what it can never project.
    expect_eq(
        &mut problems,
        &format!("{DATA_SYNC_FN}.Environment.Variables.PARKED_TABLE"),
        get(
            &effective(t, DATA_SYNC_FN),
            &["Environment", "Variables", "PARKED_TABLE"],
        ),
        "${ParkedTable}",
    );
    // The command handler draws sequence numbers from its own table.
    expect_eq(
        &mut problems,
        &format!("{COMMAND_FN}.Environment.Variables.SEQUENCES_TABLE"),
        get(
            &effective(t, COMMAND_FN),
            &["Environment", "Variables", "SEQUENCES_TABLE"],
        ),
        "${SequencesTable}",
    );
    let mut all = Vec::new();
    strings(t, &mut all);
    if let Some(s) = all.iter().find(|s| s.contains("CALLER_MODE")) {
        problems.push(format!("CALLER_MODE appears in the template: {s:?}"));
    }
    problems
}

/// Exactly the routes of the contract, each to its function through the one HTTP API, with the
/// JWT authorizer (payload format 2.0: the claims arrive at requestContext.authorizer.jwt.claims).
fn check_routes(t: &Value) -> Problems {
    let mut problems = Problems::new();

    // The API and its authorizer.
    let apis = resources_of_type(t, "AWS::Serverless::HttpApi");
    let [(api_id, api)] = apis.as_slice() else {
        return vec![format!(
            "expected exactly one AWS::Serverless::HttpApi, got {apis:?}"
        )];
    };
    for other in [
        "AWS::Serverless::Api",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGatewayV2::Api",
        "AWS::ApiGatewayV2::Route",
        "AWS::Lambda::Url",
    ] {
        if !resources_of_type(t, other).is_empty() {
            problems.push(format!(
                "unexpected {other}: every route belongs to {api_id}"
            ));
        }
    }
    let default_authorizer = get(api, &["Properties", "Auth", "DefaultAuthorizer"]).map(canon);
    if default_authorizer.as_deref() != Some("JwtAuthorizer") {
        problems.push(format!(
            "{api_id}: DefaultAuthorizer must be JwtAuthorizer, got {default_authorizer:?}"
        ));
    }
    let authorizer = get(api, &["Properties", "Auth", "Authorizers", "JwtAuthorizer"]);
    let Some(authorizer) = authorizer else {
        problems.push(format!("{api_id}: no Auth.Authorizers.JwtAuthorizer"));
        return problems;
    };
    expect_eq(
        &mut problems,
        "JwtAuthorizer.IdentitySource",
        get(authorizer, &["IdentitySource"]),
        "$request.header.Authorization",
    );
    // SAM accepts issuer/audience in either case.
    let jwt = |key: &str| {
        let upper = format!("{}{}", key[..1].to_uppercase(), &key[1..]);
        get(authorizer, &["JwtConfiguration", key])
            .or_else(|| get(authorizer, &["JwtConfiguration", upper.as_str()]))
    };
    expect_eq(
        &mut problems,
        "JwtConfiguration.issuer",
        jwt("issuer"),
        "${JwtIssuer}",
    );
    expect_eq(
        &mut problems,
        "JwtConfiguration.audience",
        jwt("audience"),
        "${JwtAudience}",
    );
    for parameter in ["JwtIssuer", "JwtAudience"] {
        if get(t, &["Parameters", parameter, "Description"]).is_none() {
            problems.push(format!(
                "Parameters.{parameter}: missing or without Description"
            ));
        }
    }

    // The routes.
    let mut routes: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (function, _) in FUNCTIONS {
        for (name, event) in events(t, function) {
            let at = format!("{function}.Events.{name}");
            let ty = get(&event, &["Type"]).map(canon).unwrap_or_default();
            if ty == "Api" {
                problems.push(format!(
                    "{at}: REST API event; only HttpApi routes are allowed"
                ));
            }
            if ty != "HttpApi" {
                continue;
            }
            let props = get(&event, &["Properties"]).cloned().unwrap_or(Value::Null);
            for unknown in unknown_properties(&props, HTTP_API_EVENT_PROPERTIES) {
                problems.push(format!("{at}: unknown HttpApi event property {unknown:?}"));
            }
            expect_eq(
                &mut problems,
                &format!("{at}.ApiId"),
                get(&props, &["ApiId"]),
                &format!("${{{api_id}}}"),
            );
            expect_eq(
                &mut problems,
                &format!("{at}.PayloadFormatVersion"),
                get(&props, &["PayloadFormatVersion"]),
                "2.0",
            );
            let route_authorizer = get(&props, &["Auth", "Authorizer"])
                .map(canon)
                .or_else(|| default_authorizer.clone());
            if route_authorizer.as_deref() != Some("JwtAuthorizer") {
                problems.push(format!(
                    "{at}: authorizer must be JwtAuthorizer, got {route_authorizer:?}"
                ));
            }
            let method = get(&props, &["Method"]).map(canon).unwrap_or_default();
            let path = get(&props, &["Path"]).map(canon).unwrap_or_default();
            routes
                .entry((method.to_uppercase(), path))
                .or_default()
                .push(function.to_owned());
        }
    }
    let expected: BTreeMap<(String, String), Vec<String>> = ROUTES
        .iter()
        .map(|(m, p, f)| (((*m).to_owned(), (*p).to_owned()), vec![(*f).to_owned()]))
        .collect();
    if routes != expected {
        problems.push(format!("routes: expected {expected:#?}\ngot {routes:#?}"));
    }
    problems
}

/// data-sync reads the command table's stream in order, reports partial failures, retries a
/// bounded number of times and then hands the batch to an encrypted queue.
fn check_stream(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let all_events = events(t, DATA_SYNC_FN);
    let [(name, event)] = all_events.as_slice() else {
        return vec![format!(
            "{DATA_SYNC_FN}: expected exactly one event, got {all_events:?}"
        )];
    };
    let at = |k: &str| format!("{DATA_SYNC_FN}.Events.{name}.{k}");
    expect_eq(
        &mut problems,
        &at("Type"),
        get(event, &["Type"]),
        "DynamoDB",
    );
    let props = get(event, &["Properties"]).cloned().unwrap_or(Value::Null);
    let prop = |k: &str| get(&props, &[k]);
    for unknown in unknown_properties(&props, DYNAMODB_EVENT_PROPERTIES) {
        problems.push(format!(
            "{}: unknown DynamoDB event property {unknown:?}",
            at("Properties")
        ));
    }
    expect_eq(
        &mut problems,
        &at("Stream"),
        prop("Stream"),
        "${CommandTable.StreamArn}",
    );
    expect_eq(
        &mut problems,
        &at("StartingPosition"),
        prop("StartingPosition"),
        "TRIM_HORIZON",
    );
    let response_types = one_or_many(prop("FunctionResponseTypes"));
    if response_types != ["ReportBatchItemFailures"] {
        problems.push(format!(
            "{}: expected [\"ReportBatchItemFailures\"], got {response_types:?}",
            at("FunctionResponseTypes")
        ));
    }
    expect_eq(
        &mut problems,
        &at("BisectBatchOnFunctionError"),
        prop("BisectBatchOnFunctionError"),
        "true",
    );
    // Per-item order: one batch at a time per shard.
    expect_eq(
        &mut problems,
        &at("ParallelizationFactor"),
        prop("ParallelizationFactor"),
        "1",
    );
    if let Some(enabled) = prop("Enabled")
        && canon(enabled) != "true"
    {
        problems.push(format!("{}: the mapping is disabled", at("Enabled")));
    }
    let bounded =
        |k: &str, range: std::ops::RangeInclusive<i64>, problems: &mut Problems| match int(prop(k))
        {
            Some(n) if range.contains(&n) => {}
            other => problems.push(format!(
                "{}: expected a number in {range:?}, got {other:?}",
                at(k)
            )),
        };
    // -1 (the default for both) means forever: a poison record would block its shard for the
    // whole stream retention. The age stays below the 24 h retention, to leave time to replay.
    bounded("MaximumRetryAttempts", 1..=100, &mut problems);
    bounded("MaximumRecordAgeInSeconds", 60..=43_200, &mut problems);
    bounded("BatchSize", 1..=1000, &mut problems);
    bounded("MaximumBatchingWindowInSeconds", 0..=5, &mut problems);

    // The on-failure destination: an SQS queue of this template, SSE, 14 days.
    expect_eq(
        &mut problems,
        &at("DestinationConfig.OnFailure.Type"),
        get(&props, &["DestinationConfig", "OnFailure", "Type"]),
        "SQS",
    );
    let destination = get(&props, &["DestinationConfig", "OnFailure", "Destination"]).map(canon);
    let queue_id = destination
        .as_deref()
        .and_then(|d| d.strip_prefix("${"))
        .and_then(|d| d.strip_suffix(".Arn}"));
    let queue = queue_id.and_then(|q| resource(t, q));
    match queue {
        Some(q) if get(q, &["Type"]).and_then(Value::as_str) == Some("AWS::SQS::Queue") => {
            let sse = get(q, &["Properties", "SqsManagedSseEnabled"]).map(canon)
                == Some("true".into())
                || get(q, &["Properties", "KmsMasterKeyId"]).is_some();
            if !sse {
                problems.push(format!("{queue_id:?}: the failure queue is not encrypted"));
            }
            if int(get(q, &["Properties", "MessageRetentionPeriod"])) != Some(1_209_600) {
                problems.push(format!(
                    "{queue_id:?}: MessageRetentionPeriod must be 14 days"
                ));
            }
        }
        _ => problems.push(format!(
            "{}: expected !GetAtt <SQS queue>.Arn, got {destination:?}",
            at("DestinationConfig.OnFailure.Destination")
        )),
    }

    // The stream carries what data-sync needs: the new image of every command.
    match cqrs_testkit::template::workspace_tables() {
        Ok(tables) => {
            let command = cqrs_testkit::template::find(&tables, "CommandTable");
            let view = command.and_then(|c| c.stream_view_type.clone());
            if view != Some(aws_sdk_dynamodb::types::StreamViewType::NewImage) {
                problems.push(format!(
                    "CommandTable: stream view must be NEW_IMAGE, got {view:?}"
                ));
            }
        }
        Err(e) => problems.push(format!("table parser: {e}")),
    }
    problems
}

/// Each function's own grants are exactly the expected (action, table) pairs: inline statements
/// only, no policy templates or managed policies (they grant more, e.g. deletes), no own role.
fn check_policies(t: &Value) -> Problems {
    let mut problems = Problems::new();
    if get(t, &["Globals", "Function", "Policies"]).is_some()
        || get(t, &["Globals", "Function", "Role"]).is_some()
    {
        problems.push("Globals.Function: no Policies or Role for every function".into());
    }
    for (id, _) in FUNCTIONS {
        let p = effective(t, id);
        if get(&p, &["PermissionsBoundary"]).is_some() {
            problems.push(format!("{id}.PermissionsBoundary: not used"));
        }
        let policies = if id == DATA_SYNC_FN {
            match data_sync_role_policies(t, &p) {
                Ok(policies) => policies,
                Err(problem) => {
                    problems.push(problem);
                    continue;
                }
            }
        } else {
            if get(&p, &["Role"]).is_some() {
                problems.push(format!("{id}.Role: use the SAM role and Policies"));
            }
            match get(&p, &["Policies"]) {
                Some(Value::Sequence(list)) => list.clone(),
                other => {
                    problems.push(format!("{id}.Policies: expected a list, got {other:?}"));
                    continue;
                }
            }
        };
        let mut grants = BTreeSet::new();
        for (i, policy) in policies.iter().enumerate() {
            let at = format!("{id}.Policies[{i}]");
            let Some(Value::Sequence(statements)) = get(policy, &["Statement"]) else {
                problems.push(format!(
                    "{at}: only inline policy documents (no managed policies or SAM policy templates), got {policy:?}"
                ));
                continue;
            };
            if let Value::Mapping(m) = policy
                && let Some(extra) = m
                    .keys()
                    .map(canon)
                    .find(|k| k != "Version" && k != "Statement")
            {
                problems.push(format!("{at}: unexpected key {extra:?}"));
            }
            for (j, statement) in statements.iter().enumerate() {
                let at = format!("{at}.Statement[{j}]");
                expect_eq(
                    &mut problems,
                    &format!("{at}.Effect"),
                    get(statement, &["Effect"]),
                    "Allow",
                );
                for loose in ["NotAction", "NotResource", "Principal"] {
                    if get(statement, &[loose]).is_some() {
                        problems.push(format!("{at}: {loose} is not allowed"));
                    }
                }
                let actions = one_or_many(get(statement, &["Action"]));
                let resources = one_or_many(get(statement, &["Resource"]));
                if actions.is_empty() || resources.is_empty() {
                    problems.push(format!("{at}: needs Action and Resource"));
                }
                for action in &actions {
                    for resource in &resources {
                        grants.insert((action.clone(), resource.clone()));
                    }
                }
            }
        }
        let expected = expected_grants(id);
        let missing: Vec<_> = expected.difference(&grants).collect();
        let extra: Vec<_> = grants.difference(&expected).collect();
        if !missing.is_empty() || !extra.is_empty() {
            problems.push(format!(
                "{id}: grants differ; missing {missing:?}, extra {extra:?}"
            ));
        }
    }
    problems
}

/// The policy documents of data-sync's explicit role: the function names `!GetAtt
/// DataSyncRole.Arn` and has no `Policies` of its own (SAM ignores them next to a `Role`), the role
/// is assumed by Lambda only and has only inline policies (no managed policy, no boundary).
fn data_sync_role_policies(t: &Value, p: &Value) -> Result<Vec<Value>, String> {
    let role = get(p, &["Role"]).map(canon);
    if role.as_deref() != Some("${DataSyncRole.Arn}") {
        return Err(format!(
            "{DATA_SYNC_FN}.Role: expected !GetAtt {DATA_SYNC_ROLE}.Arn, got {role:?}"
        ));
    }
    if get(p, &["Policies"]).is_some() {
        return Err(format!(
            "{DATA_SYNC_FN}.Policies: put them in {DATA_SYNC_ROLE} (SAM ignores Policies next to a Role)"
        ));
    }
    let Some(resource) = resource(t, DATA_SYNC_ROLE) else {
        return Err(format!("{DATA_SYNC_ROLE}: missing"));
    };
    if get(resource, &["Type"]).and_then(Value::as_str) != Some("AWS::IAM::Role") {
        return Err(format!("{DATA_SYNC_ROLE}: not an AWS::IAM::Role"));
    }
    for extra in ["ManagedPolicyArns", "PermissionsBoundary"] {
        if get(resource, &["Properties", extra]).is_some() {
            return Err(format!("{DATA_SYNC_ROLE}.{extra}: inline policies only"));
        }
    }
    let principals = match get(
        resource,
        &["Properties", "AssumeRolePolicyDocument", "Statement"],
    ) {
        Some(Value::Sequence(statements)) => statements
            .iter()
            .flat_map(|s| one_or_many(get(s, &["Principal", "Service"])))
            .collect::<Vec<_>>(),
        _ => Vec::new(),
    };
    if principals != ["lambda.amazonaws.com"] {
        return Err(format!(
            "{DATA_SYNC_ROLE}: must be assumed by lambda.amazonaws.com only, got {principals:?}"
        ));
    }
    match get(resource, &["Properties", "Policies"]) {
        Some(Value::Sequence(list)) => Ok(list
            .iter()
            .map(|policy| {
                get(policy, &["PolicyDocument"])
                    .cloned()
                    .unwrap_or(Value::Null)
            })
            .collect()),
        other => Err(format!(
            "{DATA_SYNC_ROLE}.Policies: expected a list, got {other:?}"
        )),
    }
}

/// The outputs a deployment needs.
fn check_outputs(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let expected = [
        (
            "ApiUrl",
            "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}",
        ),
        ("CommandTableName", "${CommandTable}"),
        ("DataTableName", "${DataTable}"),
        ("HistoryTableName", "${HistoryTable}"),
        ("IdempotencyTableName", "${IdempotencyTable}"),
        ("ParkedTableName", "${ParkedTable}"),
        ("CommandTableStreamArn", "${CommandTable.StreamArn}"),
        ("DataSyncFailureQueueUrl", "${DataSyncFailureQueue}"),
    ];
    for (name, value) in expected {
        expect_eq(
            &mut problems,
            &format!("Outputs.{name}"),
            get(t, &["Outputs", name, "Value"]),
            value,
        );
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// The workspace template keeps the contract.

#[test]
fn functions_are_built_by_cargo_lambda_for_al2023_arm64_with_json_logs() {
    assert_ok(check_functions, &workspace());
}

#[test]
fn every_function_has_the_four_tables_and_no_local_settings() {
    assert_ok(check_environment, &workspace());
}

#[test]
fn routes_are_exactly_the_contract_behind_the_jwt_authorizer() {
    assert_ok(check_routes, &workspace());
}

#[test]
fn data_sync_reads_the_command_stream_in_order_with_bounded_retries() {
    assert_ok(check_stream, &workspace());
}

/// sql-sync's mapping: partial failures, bisection, retried without a count until the record's age
/// (`MaximumRetryAttempts: -1`: sql-sync parks every record PostgreSQL refuses and reports a batch
/// only when the database failed it, and every write is idempotent, so a retry can only help), an
/// age below the stream's 24 h retention, and the on-failure queue.
fn check_sql_stream(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let (id, _) = SQL_SYNC;
    let all_events = events(t, id);
    let [(name, event)] = all_events.as_slice() else {
        return vec![format!(
            "{id}: expected exactly one event, got {all_events:?}"
        )];
    };
    let at = |k: &str| format!("{id}.Events.{name}.{k}");
    let props = get(event, &["Properties"]).cloned().unwrap_or(Value::Null);
    let prop = |k: &str| get(&props, &[k]);
    expect_eq(
        &mut problems,
        &at("Stream"),
        prop("Stream"),
        "${DataTable.StreamArn}",
    );
    if one_or_many(prop("FunctionResponseTypes")) != ["ReportBatchItemFailures"] {
        problems.push(format!(
            "{}: expected [\"ReportBatchItemFailures\"]",
            at("FunctionResponseTypes")
        ));
    }
    expect_eq(
        &mut problems,
        &at("BisectBatchOnFunctionError"),
        prop("BisectBatchOnFunctionError"),
        "true",
    );
    expect_eq(
        &mut problems,
        &at("ParallelizationFactor"),
        prop("ParallelizationFactor"),
        "1",
    );
    if int(prop("MaximumRetryAttempts")) != Some(-1) {
        problems.push(format!(
            "{}: expected -1 (until the record's age), got {:?}",
            at("MaximumRetryAttempts"),
            prop("MaximumRetryAttempts")
        ));
    }
    match int(prop("MaximumRecordAgeInSeconds")) {
        Some(age) if (60..=43_200).contains(&age) => {}
        other => problems.push(format!(
            "{}: expected a number in 60..=43200 (below the stream's 24 h), got {other:?}",
            at("MaximumRecordAgeInSeconds")
        )),
    }
    expect_eq(
        &mut problems,
        &at("DestinationConfig.OnFailure.Destination"),
        get(&props, &["DestinationConfig", "OnFailure", "Destination"]),
        "${SqlSyncFailureQueue.Arn}",
    );
    problems
}

#[test]
fn sql_sync_retries_until_the_record_age_and_keeps_its_on_failure_queue() {
    assert_ok(check_sql_stream, &workspace());
}

#[test]
fn sql_stream_check_fails() {
    for (key, value, needle) in [
        ("MaximumRetryAttempts", "10", "MaximumRetryAttempts"),
        (
            "MaximumRecordAgeInSeconds",
            "-1",
            "MaximumRecordAgeInSeconds",
        ),
        (
            "BisectBatchOnFunctionError",
            "false",
            "BisectBatchOnFunctionError",
        ),
        ("DestinationConfig", "{}", "DestinationConfig"),
    ] {
        let mut t = workspace();
        *at(
            &mut t,
            &[
                "Resources",
                SQL_SYNC.0,
                "Properties",
                "Events",
                "DataStream",
                "Properties",
                key,
            ],
        ) = yaml(value);
        assert_fails(check_sql_stream, &t, needle);
    }
}

#[test]
fn each_function_may_do_exactly_what_it_uses() {
    assert_ok(check_policies, &workspace());
}

#[test]
fn outputs_name_the_api_tables_stream_and_failure_queue() {
    assert_ok(check_outputs, &workspace());
}

#[test]
fn the_tables_still_parse_for_dynamodb_local() {
    let tables = cqrs_testkit::template::workspace_tables().expect("tables parse");
    let ids: Vec<_> = tables.iter().map(|s| s.logical_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "CommandTable",
            "DataTable",
            "HistoryTable",
            "IdempotencyTable",
            "ParkedTable",
            "SequencesTable"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The checks notice breakage (each mutation must be reported).

const STREAM_PROPS: [&str; 5] = [
    "Resources",
    DATA_SYNC_FN,
    "Properties",
    "Events",
    "CommandStream",
];

fn stream_prop<'a>(t: &'a mut Value, key: &str) -> &'a mut Value {
    let path: Vec<&str> = STREAM_PROPS
        .iter()
        .copied()
        .chain(["Properties", key])
        .collect();
    at(t, &path)
}

#[test]
fn functions_check_fails() {
    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Resources",
            QUERY_FN,
            "Metadata",
            "BuildProperties",
            "Binary",
        ],
    ) = yaml("command-handler");
    assert_fails(
        check_functions,
        &t,
        "QueryHandlerFunction.Metadata.BuildProperties.Binary",
    );

    let mut t = workspace();
    *at(
        &mut t,
        &["Resources", COMMAND_FN, "Properties", "Architectures"],
    ) = yaml("[x86_64]");
    assert_fails(check_functions, &t, "CommandHandlerFunction.Architectures");

    let mut t = workspace();
    *at(
        &mut t,
        &["Globals", "Function", "LoggingConfig", "LogFormat"],
    ) = yaml("Text");
    assert_fails(check_functions, &t, "LoggingConfig.LogFormat");

    let mut t = workspace();
    *at(
        &mut t,
        &["Resources", DATA_SYNC_FN, "Properties", "Runtime"],
    ) = yaml("provided.al2");
    assert_fails(check_functions, &t, "DataSyncFunction.Runtime");

    assert!(declares_bin(
        "[[bin]]\nname = \"data-sync\"\npath = \"src/main.rs\"\n",
        "data-sync"
    ));
    assert!(!declares_bin(
        "[package]\nname = \"data-sync\"\n",
        "data-sync"
    ));
}

#[test]
fn environment_check_fails() {
    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Resources",
            COMMAND_FN,
            "Properties",
            "Environment",
            "Variables",
            "CALLER_MODE",
        ],
    ) = yaml("local");
    assert_fails(check_environment, &t, "CALLER_MODE");

    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Globals",
            "Function",
            "Environment",
            "Variables",
            "HISTORY_TABLE",
        ],
    ) = yaml("!Ref DataTable");
    assert_fails(check_environment, &t, "HISTORY_TABLE");

    let mut t = workspace();
    if let Value::Mapping(vars) = at(&mut t, &["Globals", "Function", "Environment", "Variables"]) {
        vars.remove("IDEMPOTENCY_TABLE");
    }
    assert_fails(check_environment, &t, "IDEMPOTENCY_TABLE");
}

#[test]
fn routes_check_fails() {
    let events = ["Resources", QUERY_FN, "Properties", "Events"];

    // A route without the authorizer.
    let mut t = workspace();
    let first = match at(&mut t, &events) {
        Value::Mapping(m) => canon(m.keys().next().expect("an event")),
        _ => panic!("no events"),
    };
    let path: Vec<&str> = events
        .iter()
        .copied()
        .chain([first.as_str(), "Properties", "Auth"])
        .collect();
    *at(&mut t, &path) = yaml("{Authorizer: NONE}");
    assert_fails(check_routes, &t, "authorizer must be JwtAuthorizer");

    // A misspelled event property.
    let mut t = workspace();
    let path: Vec<&str> = events
        .iter()
        .copied()
        .chain([first.as_str(), "Properties", "PayloadFormatVersoin"])
        .collect();
    *at(&mut t, &path) = yaml("'2.0'");
    assert_fails(check_routes, &t, "PayloadFormatVersoin");

    // An extra route.
    let mut t = workspace();
    let path: Vec<&str> = events.iter().copied().chain(["Scan"]).collect();
    *at(&mut t, &path) = yaml(
        "{Type: HttpApi, Properties: {ApiId: !Ref HttpApi, Method: GET, Path: /items, PayloadFormatVersion: '2.0'}}",
    );
    assert_fails(check_routes, &t, "routes: expected");

    // A route bound to the wrong function.
    let mut t = workspace();
    let moved = match at(&mut t, &events) {
        Value::Mapping(m) => m.remove(first.as_str()).expect("the event"),
        _ => panic!("no events"),
    };
    *at(
        &mut t,
        &["Resources", COMMAND_FN, "Properties", "Events", "Moved"],
    ) = moved;
    assert_fails(check_routes, &t, "routes: expected");

    // The audience not from the parameter.
    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Resources",
            "HttpApi",
            "Properties",
            "Auth",
            "Authorizers",
            "JwtAuthorizer",
            "JwtConfiguration",
            "audience",
        ],
    ) = yaml("[anything]");
    assert_fails(check_routes, &t, "JwtConfiguration.audience");
}

#[test]
fn stream_check_fails() {
    for (key, value, needle) in [
        ("ParallelizationFactor", "2", "ParallelizationFactor"),
        ("StartingPosition", "LATEST", "StartingPosition"),
        ("MaximumRetryAttempts", "-1", "MaximumRetryAttempts"),
        (
            "MaximumRecordAgeInSeconds",
            "-1",
            "MaximumRecordAgeInSeconds",
        ),
        (
            "BisectBatchOnFunctionError",
            "false",
            "BisectBatchOnFunctionError",
        ),
        ("FunctionResponseTypes", "[]", "FunctionResponseTypes"),
        ("Stream", "!GetAtt DataTable.StreamArn", "Stream"),
        ("Enabled", "false", "disabled"),
        // Misspelled: the linters accept it, SAM would ignore or reject it only at deploy time.
        ("MaximumRetryAttempt", "3", "MaximumRetryAttempt\""),
    ] {
        let mut t = workspace();
        *stream_prop(&mut t, key) = yaml(value);
        assert_fails(check_stream, &t, needle);
    }

    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Resources",
            "DataSyncFailureQueue",
            "Properties",
            "SqsManagedSseEnabled",
        ],
    ) = yaml("false");
    assert_fails(check_stream, &t, "not encrypted");

    let mut t = workspace();
    if let Value::Mapping(props) = at(
        &mut t,
        &STREAM_PROPS
            .iter()
            .copied()
            .chain(["Properties"])
            .collect::<Vec<_>>(),
    ) {
        props.remove("DestinationConfig");
    }
    assert_fails(check_stream, &t, "DestinationConfig.OnFailure");
}

#[test]
fn policies_check_fails() {
    let statement0 = |f: &'static str| ["Resources", f, "Properties", "Policies"];

    // An extra action.
    let mut t = workspace();
    if let Value::Sequence(policies) = at(
        &mut t,
        &["Resources", DATA_SYNC_ROLE, "Properties", "Policies"],
    ) {
        policies.push(yaml(
            "{PolicyName: more, PolicyDocument: {Statement: [{Effect: Allow, Action: dynamodb:DeleteItem, Resource: !GetAtt DataTable.Arn}]}}",
        ));
    }
    assert_fails(check_policies, &t, "extra [(\"dynamodb:DeleteItem\"");

    // The stream read on every stream of the account.
    let mut t = workspace();
    if let Value::Sequence(policies) = at(
        &mut t,
        &["Resources", DATA_SYNC_ROLE, "Properties", "Policies"],
    ) {
        policies.push(yaml(
            "{PolicyName: more, PolicyDocument: {Statement: [{Effect: Allow, Action: dynamodb:GetRecords, Resource: '*'}]}}",
        ));
    }
    assert_fails(
        check_policies,
        &t,
        "extra [(\"dynamodb:GetRecords\", \"*\")",
    );

    // data-sync back on SAM's generated role (which gets AWSLambdaDynamoDBExecutionRole).
    let mut t = workspace();
    if let Value::Mapping(props) = at(&mut t, &["Resources", DATA_SYNC_FN, "Properties"]) {
        props.remove("Role");
    }
    assert_fails(check_policies, &t, "DataSyncFunction.Role");

    // A managed policy on the role.
    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Resources",
            DATA_SYNC_ROLE,
            "Properties",
            "ManagedPolicyArns",
        ],
    ) = yaml("[arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole]");
    assert_fails(check_policies, &t, "inline policies only");

    // A policy template that grants more than used.
    let mut t = workspace();
    if let Value::Sequence(policies) = at(&mut t, &statement0(QUERY_FN)) {
        policies.push(yaml("{DynamoDBCrudPolicy: {TableName: !Ref DataTable}}"));
    }
    assert_fails(check_policies, &t, "only inline policy documents");

    // A managed policy.
    let mut t = workspace();
    if let Value::Sequence(policies) = at(&mut t, &statement0(COMMAND_FN)) {
        policies.push(yaml("AmazonDynamoDBFullAccess"));
    }
    assert_fails(check_policies, &t, "only inline policy documents");

    // A grant on the wrong table.
    let mut t = workspace();
    if let Value::Sequence(policies) = at(&mut t, &statement0(COMMAND_FN)) {
        policies.clear();
        policies.push(yaml(
            "{Statement: [{Effect: Allow, Action: [dynamodb:GetItem, dynamodb:Query, dynamodb:PutItem], Resource: !GetAtt DataTable.Arn}, {Effect: Allow, Action: [dynamodb:GetItem, dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:ConditionCheckItem], Resource: !GetAtt IdempotencyTable.Arn}]}",
        ));
    }
    assert_fails(
        check_policies,
        &t,
        "missing [(\"dynamodb:BatchGetItem\", \"${DataTable.Arn}\"), (\"dynamodb:GetItem\", \"${CommandTable.Arn}\")",
    );

    // The history index missing from the query handler.
    let mut t = workspace();
    if let Value::Sequence(policies) = at(&mut t, &statement0(QUERY_FN)) {
        policies.clear();
        policies.push(yaml(
            "{Statement: [{Effect: Allow, Action: [dynamodb:GetItem, dynamodb:Query], Resource: [!GetAtt DataTable.Arn, !GetAtt HistoryTable.Arn, !GetAtt CommandTable.Arn]}]}",
        ));
    }
    assert_fails(check_policies, &t, "${HistoryTable.Arn}/index/*");
}

#[test]
fn data_sync_environment_names_the_parked_table() {
    let mut t = workspace();
    if let Value::Mapping(vars) = at(
        &mut t,
        &[
            "Resources",
            DATA_SYNC_FN,
            "Properties",
            "Environment",
            "Variables",
        ],
    ) {
        vars.remove("PARKED_TABLE");
    }
    assert_fails(check_environment, &t, "PARKED_TABLE");

    let mut t = workspace();
    if let Value::Mapping(vars) = at(
        &mut t,
        &[
            "Resources",
            COMMAND_FN,
            "Properties",
            "Environment",
            "Variables",
        ],
    ) {
        vars.remove("SEQUENCES_TABLE");
    }
    assert_fails(check_environment, &t, "SEQUENCES_TABLE");
}

/// The JWT claims the caller is read from are the stack's parameters (`TenantClaim`,
/// `RolesClaim`, defaults `custom:tenant` and `custom:roles`), reaching every function behind the
/// HTTP API as `JWT_TENANT_CLAIM` and `JWT_ROLES_CLAIM` (what `cqrs_caller::ClaimNames` reads).
fn check_claim_names(t: &Value) -> Problems {
    let mut problems = Problems::new();
    for (parameter, default) in [
        ("TenantClaim", "custom:tenant"),
        ("RolesClaim", "custom:roles"),
    ] {
        let at = format!("Parameters.{parameter}");
        expect_eq(
            &mut problems,
            &format!("{at}.Type"),
            get(t, &["Parameters", parameter, "Type"]),
            "String",
        );
        expect_eq(
            &mut problems,
            &format!("{at}.Default"),
            get(t, &["Parameters", parameter, "Default"]),
            default,
        );
    }
    // Every function an HTTP API route reaches, and at least the command and query handlers.
    let mut http: BTreeSet<String> = [COMMAND_FN, QUERY_FN].map(String::from).into();
    for (id, _) in resources_of_type(t, "AWS::Serverless::Function") {
        let routed = events(t, id)
            .iter()
            .any(|(_, event)| get(event, &["Type"]).map(canon).as_deref() == Some("HttpApi"));
        if routed {
            http.insert(id.to_string());
        }
    }
    for id in &http {
        let p = effective(t, id);
        for (name, parameter) in [
            ("JWT_TENANT_CLAIM", "${TenantClaim}"),
            ("JWT_ROLES_CLAIM", "${RolesClaim}"),
        ] {
            expect_eq(
                &mut problems,
                &format!("{id}.Environment.Variables.{name}"),
                get(&p, &["Environment", "Variables", name]),
                parameter,
            );
        }
    }
    problems
}

#[test]
fn http_functions_read_the_claim_names_from_the_parameters() {
    assert_ok(check_claim_names, &workspace());
}

#[test]
fn claim_names_check_fails() {
    // A function that names the claim itself instead of taking the parameter.
    let mut t = workspace();
    *at(
        &mut t,
        &[
            "Resources",
            QUERY_FN,
            "Properties",
            "Environment",
            "Variables",
            "JWT_TENANT_CLAIM",
        ],
    ) = yaml("custom:tenant");
    assert_fails(
        check_claim_names,
        &t,
        "QueryHandlerFunction.Environment.Variables.JWT_TENANT_CLAIM",
    );

    let mut t = workspace();
    if let Value::Mapping(vars) = at(&mut t, &["Globals", "Function", "Environment", "Variables"]) {
        vars.remove("JWT_ROLES_CLAIM");
    }
    assert_fails(
        check_claim_names,
        &t,
        "CommandHandlerFunction.Environment.Variables.JWT_ROLES_CLAIM",
    );

    let mut t = workspace();
    *at(&mut t, &["Parameters", "RolesClaim", "Default"]) = yaml("cognito:groups");
    assert_fails(check_claim_names, &t, "Parameters.RolesClaim.Default");
}

#[test]
fn outputs_check_fails() {
    let mut t = workspace();
    if let Value::Mapping(outputs) = at(&mut t, &["Outputs"]) {
        outputs.remove("ApiUrl");
    }
    assert_fails(check_outputs, &t, "Outputs.ApiUrl");
}

#[test]
fn canon_reads_short_and_long_intrinsics() {
    assert_eq!(canon(&yaml("!Ref X")), "${X}");
    assert_eq!(canon(&yaml("{Ref: X}")), "${X}");
    assert_eq!(canon(&yaml("!GetAtt A.Arn")), "${A.Arn}");
    assert_eq!(canon(&yaml("!GetAtt [A, Arn]")), "${A.Arn}");
    assert_eq!(canon(&yaml("{'Fn::GetAtt': [A, Arn]}")), "${A.Arn}");
    assert_eq!(canon(&yaml("!Sub '${A.Arn}/index/*'")), "${A.Arn}/index/*");
    assert_eq!(canon(&yaml("{'Fn::Sub': 'x-${P}'}")), "x-${P}");
    assert_eq!(canon(&yaml("true")), "true");
    assert_eq!(canon(&yaml("'2.0'")), "2.0");
    assert_ne!(canon(&yaml("!Join ['', [a]]")), "a");
}

#[test]
fn merge_follows_sam_globals() {
    let merged = merge(
        &yaml("{A: 1, M: {x: 1, y: 1}, L: [1]}"),
        &yaml("{A: 2, M: {y: 2}, L: [2]}"),
    );
    assert_eq!(merged, yaml("{A: 2, M: {x: 1, y: 2}, L: [1, 2]}"));
}

#[test]
fn own_routes_are_the_models_behind_the_jwt_authorizer_with_their_own_roles() {
    assert_ok(check_own_routes, &workspace());
}

#[test]
fn own_routes_check_fails() {
    let own = [OwnFunction {
        id: "ReportsFunction".into(),
        role: "ReportsRole".into(),
        binary: "reports".into(),
        routes: [("GET".to_string(), "/reports".to_string())].into(),
    }];
    let good = yaml(
        "{Resources: {ReportsRole: {Type: AWS::IAM::Role}, ReportsFunction: {Type: AWS::Serverless::Function, Properties: {Role: !GetAtt ReportsRole.Arn, Events: {Get: {Type: HttpApi, Properties: {ApiId: !Ref HttpApi, Method: GET, Path: /reports, PayloadFormatVersion: '2.0'}}}}}}}",
    );
    assert!(
        check_own_routes_of(&good, &own).is_empty(),
        "{:?}",
        check_own_routes_of(&good, &own)
    );
    let failing = |t: &Value, needle: &str| {
        let problems = check_own_routes_of(t, &own);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {problems:#?}"
        );
    };
    // No authorizer on the route.
    let mut t = good.clone();
    *at(
        &mut t,
        &[
            "Resources",
            "ReportsFunction",
            "Properties",
            "Events",
            "Get",
            "Properties",
            "Auth",
            "Authorizer",
        ],
    ) = yaml("NONE");
    failing(&t, "authorizer must be JwtAuthorizer");
    // A route the model does not declare.
    let mut t = good.clone();
    *at(
        &mut t,
        &[
            "Resources",
            "ReportsFunction",
            "Properties",
            "Events",
            "Get",
            "Properties",
            "Path",
        ],
    ) = yaml("/other");
    failing(&t, "routes expected");
    // SAM's generated role instead of its own.
    let mut t = good.clone();
    if let Value::Mapping(p) = at(&mut t, &["Resources", "ReportsFunction", "Properties"]) {
        p.remove("Role");
        p.insert(yaml("Policies"), yaml("[AWSLambdaBasicExecutionRole]"));
    }
    failing(&t, "ReportsFunction.Role");
    // Another API.
    let mut t = good;
    *at(
        &mut t,
        &[
            "Resources",
            "ReportsFunction",
            "Properties",
            "Events",
            "Get",
            "Properties",
            "ApiId",
        ],
    ) = yaml("!Ref OtherApi");
    failing(&t, "ApiId");
}
