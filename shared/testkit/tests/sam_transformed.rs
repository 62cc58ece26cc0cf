//! What `template.yaml` means after SAM's transform: the CloudFormation that would be deployed.
//!
//! Some of what SAM deploys is not in the YAML at all: the roles it generates and the managed
//! policies it attaches to them (for a DynamoDB event it attaches `AWSLambdaDynamoDBExecutionRole`,
//! which reads every stream of the account, whatever `Policies` says), the event source mapping,
//! the API's `$default` stage. These tests transform the template offline with
//! `scripts/sam-transform.py` (aws-sam-translator, pinned in requirements-tools.txt) and check:
//! no role has `AWSLambdaDynamoDBExecutionRole`; data-sync's stream reads name only the command
//! table's stream, sql-sync's only the data table's; no function has `CALLER_MODE` in its
//! environment; the stage is throttled from the parameters; the alarms watch what they should and
//! notify only when a topic is given; the relational read model (`SqlReadModel`) is off by default,
//! and when on, its roles hold exactly what they use, its proxy takes IAM tokens over TLS only, and
//! no security group opens to the world.
//!
//! The transform needs the project's `.venv` (`scripts/tools.sh`; `make test` creates it before
//! the cargo tests run, in `scripts/check-template.sh`). Without it the tests fail, naming the way
//! out: `SAM_TRANSFORM_PYTHON` names another interpreter with aws-sam-translator, and
//! `CQRS_SKIP_SAM_TRANSFORMED=1` skips them knowingly (each then passes, printing `SKIPPED`: stable
//! libtest cannot mark a test skipped at run time), except under CI (`CI` set), which must run them.
//! Each check also runs on a mutated template (the YAML, transformed again, or the transformed
//! JSON) and must notice, so none passes vacuously.

use std::path::{Path, PathBuf};
use std::process::Command;

use cqrs_testkit::iam::{canon, list};
use serde_json::{Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The variable that skips these tests when `.venv` is missing (outside CI).
const SKIP: &str = "CQRS_SKIP_SAM_TRANSFORMED";

/// The Python that runs the transform, or `None` when [`SKIP`] says to skip; panics when there is
/// none and nothing says to skip.
fn python() -> Option<PathBuf> {
    match choose_python(Path::new(ROOT), |name| std::env::var_os(name)) {
        Ok(Some(python)) => Some(python),
        Ok(None) => {
            eprintln!(
                "SKIPPED ({SKIP}=1): {}/.venv/bin/python is missing, so the transformed template was not checked",
                ROOT
            );
            None
        }
        Err(message) => panic!("{message}"),
    }
}

/// Which Python runs the transform for the workspace at `root`, reading the environment through
/// `var`: `SAM_TRANSFORM_PYTHON`, else `root/.venv/bin/python` when it exists; `Ok(None)` when it
/// does not and [`SKIP`] is `1` (never under CI); otherwise the refusal, naming the ways out.
fn choose_python(
    root: &Path,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<PathBuf>, String> {
    if let Some(explicit) = var("SAM_TRANSFORM_PYTHON") {
        return Ok(Some(PathBuf::from(explicit)));
    }
    let venv = root.join(".venv/bin/python");
    if venv.exists() {
        return Ok(Some(venv));
    }
    let skip = var(SKIP).is_some_and(|v| v == "1");
    if var("CI").is_some() {
        return Err(format!(
            "{} is missing: CI must run the transformed-template tests (scripts/tools.sh installs it; {SKIP} is not honoured under CI)",
            venv.display()
        ));
    }
    if skip {
        return Ok(None);
    }
    Err(format!(
        "{} is missing, so the transformed template cannot be checked: run scripts/tools.sh (make test does), \
         name a Python with aws-sam-translator in SAM_TRANSFORM_PYTHON, or set {SKIP}=1 to skip these tests knowingly",
        venv.display()
    ))
}

/// The transformed template of the YAML file `template`.
fn transform_file(python: &Path, template: &Path) -> Value {
    let output = Command::new(python)
        .arg(Path::new(ROOT).join("scripts/sam-transform.py"))
        .arg(template)
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        output.status.success(),
        "sam-transform.py failed on {}: {}",
        template.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("sam-transform.py prints JSON")
}

/// The transformed workspace template (transformed once per test run).
fn transformed(python: &Path) -> Value {
    static TRANSFORMED: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    TRANSFORMED
        .get_or_init(|| transform_file(python, &Path::new(ROOT).join("template.yaml")))
        .clone()
}

/// The workspace template with `edit` applied to its text, transformed.
fn transformed_edit(python: &Path, edit: impl FnOnce(String) -> String) -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join("template.yaml")).expect("template");
    let edited = edit(text.clone());
    assert_ne!(edited, text, "the edit changed nothing");
    let dir = std::env::temp_dir().join(format!("sam-transformed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("template-{}.yaml", ulid::Ulid::new()));
    std::fs::write(&path, edited).expect("write template");
    let t = transform_file(python, &path);
    let _ = std::fs::remove_file(&path);
    t
}

fn resources(t: &Value) -> Vec<(&str, &Value)> {
    t["Resources"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

fn of_type<'a>(t: &'a Value, ty: &str) -> Vec<(&'a str, &'a Value)> {
    resources(t)
        .into_iter()
        .filter(|(_, r)| r["Type"] == ty)
        .collect()
}

type Problems = Vec<String>;

/// No role anywhere attaches `AWSLambdaDynamoDBExecutionRole` (nor names it at all).
fn check_no_dynamodb_execution_role(t: &Value) -> Problems {
    let text = t.to_string();
    if text.contains("AWSLambdaDynamoDBExecutionRole") {
        let holders: Vec<&str> = resources(t)
            .into_iter()
            .filter(|(_, r)| r.to_string().contains("AWSLambdaDynamoDBExecutionRole"))
            .map(|(id, _)| id)
            .collect();
        return vec![format!(
            "AWSLambdaDynamoDBExecutionRole (every stream of the account) is attached in {holders:?}"
        )];
    }
    Vec::new()
}

/// Every (action, resource) a role's inline policies allow, and its managed policy ARNs.
fn role_grants(role: &Value) -> (Vec<(String, String)>, Vec<String>) {
    let mut grants = Vec::new();
    for policy in list(&role["Properties"]["Policies"]) {
        for statement in list(&policy["PolicyDocument"]["Statement"]) {
            if statement["Effect"] != "Allow" {
                continue;
            }
            for action in list(&statement["Action"]) {
                for resource in list(&statement["Resource"]) {
                    grants.push((canon(&action), canon(&resource)));
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

/// The stream actions a Lambda event source mapping reads a DynamoDB stream with.
const STREAM_ACTIONS: [&str; 4] = [
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
];

/// The stream readers: each function, the table whose stream it alone reads (the data table's:
/// sql-sync and the change feed's publisher, its two readers).
const STREAM_READERS: [(&str, &str); 3] = [
    ("DataSyncFunction", "CommandTable"),
    ("SqlSyncFunction", "DataTable"),
    ("EventPublisherFunction", "DataTable"),
];

/// The role a function of the template runs with (its `Role`), by id.
fn function_role<'a>(t: &'a Value, function: &str) -> Result<(String, &'a Value), String> {
    let role_ref = canon(&t["Resources"][function]["Properties"]["Role"]);
    let Some(role_id) = role_ref
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix(".Arn}"))
    else {
        return Err(format!(
            "{function}.Role: expected a role of the template, got {role_ref}"
        ));
    };
    let role = &t["Resources"][role_id];
    if role["Type"] != "AWS::IAM::Role" {
        return Err(format!("{role_id}: not an AWS::IAM::Role"));
    }
    Ok((role_id.to_string(), role))
}

/// data-sync's role reads only the command table's stream, sql-sync's only the data table's; the
/// two mappings read those streams into those functions; no other role reads any stream.
fn check_stream_reads(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let mut readers = Vec::new();
    for (function, table) in STREAM_READERS {
        match function_role(t, function) {
            Ok((role_id, role)) => {
                problems.extend(check_stream_reader(&role_id, role, table));
                readers.push(role_id);
            }
            Err(problem) => problems.push(problem),
        }
    }
    // The mappings: each table's stream into its one reader.
    let mappings = of_type(t, "AWS::Lambda::EventSourceMapping");
    let mut pairs: Vec<(String, String)> = mappings
        .iter()
        // The streams' (the consumers' read their SQS queues).
        .filter(|(_, m)| canon(&m["Properties"]["EventSourceArn"]).ends_with(".StreamArn}"))
        .map(|(_, m)| {
            (
                canon(&m["Properties"]["EventSourceArn"]),
                canon(&m["Properties"]["FunctionName"]),
            )
        })
        .collect();
    pairs.sort();
    let mut expected: Vec<(String, String)> = STREAM_READERS
        .iter()
        .map(|(function, table)| {
            (
                format!("${{{table}.StreamArn}}"),
                format!("${{{function}}}"),
            )
        })
        .collect();
    expected.sort();
    if pairs != expected {
        problems.push(format!(
            "the mappings read {pairs:?}, expected {expected:?}"
        ));
    }
    // No other role reads a stream.
    for (id, other) in of_type(t, "AWS::IAM::Role") {
        if readers.iter().any(|r| r == id) {
            continue;
        }
        let (grants, _) = role_grants(other);
        if let Some((action, resource)) = grants
            .iter()
            .find(|(a, _)| STREAM_ACTIONS.contains(&a.as_str()) || a == "dynamodb:*")
        {
            problems.push(format!("{id}: {action} on {resource}"));
        }
    }
    problems
}

/// A stream reader's role: inline grants only, every stream action on `table`'s stream alone.
fn check_stream_reader(role_id: &str, role: &Value, table: &str) -> Problems {
    let mut problems = Problems::new();
    let (grants, managed) = role_grants(role);
    if !managed.is_empty() {
        problems.push(format!(
            "{role_id}: managed policies {managed:?} (inline grants only)"
        ));
    }
    for action in STREAM_ACTIONS {
        let resources: Vec<&str> = grants
            .iter()
            .filter(|(a, _)| a == action || a == "dynamodb:*" || a == "*")
            .map(|(_, r)| r.as_str())
            .collect();
        let allowed = if action == "dynamodb:ListStreams" {
            format!("${{{table}.Arn}}/stream/*")
        } else {
            format!("${{{table}.StreamArn}}")
        };
        if resources.is_empty() {
            problems.push(format!("{role_id}: {action} is not granted"));
        }
        for resource in resources {
            if resource != allowed {
                problems.push(format!(
                    "{role_id}: {action} on {resource} (only {table}'s stream)"
                ));
            }
        }
    }
    problems
}

/// No function of the deployed template has `CALLER_MODE` (so never `local`), nor a local
/// DynamoDB endpoint.
fn check_no_local_caller_mode(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let functions = of_type(t, "AWS::Lambda::Function");
    // The framework's seven (event-publisher with the change feed, realtime with RealtimeEvents,
    // change-log with ChangeLog), and one per route function and per consumer of the model.
    let own = std::fs::read_to_string(Path::new(ROOT).join("model.toml"))
        .ok()
        .and_then(|text| cqrs_model::Model::parse(&text).ok())
        .map_or(0, |model| model.routes().len() + model.consumers().len());
    if functions.len() != 7 + own {
        problems.push(format!(
            "expected the {} functions, got {:?}",
            7 + own,
            functions.iter().map(|(id, _)| id).collect::<Vec<_>>()
        ));
    }
    for (id, function) in functions {
        let vars = &function["Properties"]["Environment"]["Variables"];
        for name in [
            "CALLER_MODE",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_DYNAMODB",
        ] {
            if let Some(value) = vars.get(name) {
                problems.push(format!("{id}: {name}={value} must never be deployed"));
            }
        }
        if vars.get("COMMAND_TABLE").is_none() {
            problems.push(format!("{id}: no environment (COMMAND_TABLE missing)"));
        }
    }
    problems
}

/// The API's `$default` stage throttles every route with the two parameters.
fn check_stage_throttling(t: &Value) -> Problems {
    let stages = of_type(t, "AWS::ApiGatewayV2::Stage");
    let [(id, stage)] = stages.as_slice() else {
        return vec![format!("expected one stage, got {stages:?}")];
    };
    let mut problems = Problems::new();
    if stage["Properties"]["StageName"] != "$default" {
        problems.push(format!("{id}: not the $default stage"));
    }
    let settings = &stage["Properties"]["DefaultRouteSettings"];
    for (key, parameter) in [
        ("ThrottlingBurstLimit", "ApiThrottlingBurstLimit"),
        ("ThrottlingRateLimit", "ApiThrottlingRateLimit"),
    ] {
        if canon(&settings[key]) != format!("${{{parameter}}}") {
            problems.push(format!(
                "{id}.DefaultRouteSettings.{key}: expected !Ref {parameter}, got {}",
                settings[key]
            ));
        }
        if t["Parameters"][parameter]["Type"] != "Number" {
            problems.push(format!("Parameters.{parameter}: missing or not a Number"));
        }
    }
    problems
}

/// The three alarms, each on its metric and dimension, alarming on any failure (or the age
/// parameter), and notifying the topic only when one is given.
fn check_alarms(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let alarms = of_type(t, "AWS::CloudWatch::Alarm");
    let expected = [
        (
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "QueueName",
            "${DataSyncFailureQueue.QueueName}",
            "0",
        ),
        (
            "AWS/Lambda",
            "IteratorAge",
            "FunctionName",
            "${DataSyncFunction}",
            "${IteratorAgeAlarmMilliseconds}",
        ),
        ("AWS/ApiGateway", "5xx", "ApiId", "${HttpApi}", "0"),
        (
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "QueueName",
            "${SqlSyncFailureQueue.QueueName}",
            "0",
        ),
        (
            "AWS/Lambda",
            "IteratorAge",
            "FunctionName",
            "${SqlSyncFunction}",
            "${IteratorAgeAlarmMilliseconds}",
        ),
    ];
    for (namespace, metric, dimension, target, threshold) in expected {
        let found = alarms.iter().find(|(_, a)| {
            let p = &a["Properties"];
            p["Namespace"] == namespace
                && p["MetricName"] == metric
                && list(&p["Dimensions"])
                    .iter()
                    .any(|d| d["Name"] == dimension && canon(&d["Value"]) == target)
        });
        let Some((id, alarm)) = found else {
            problems.push(format!(
                "no alarm on {namespace} {metric} of {dimension}={target}"
            ));
            continue;
        };
        let p = &alarm["Properties"];
        let threshold_now = match &p["Threshold"] {
            Value::Number(n) => n.to_string(),
            other => canon(other),
        };
        if threshold_now != threshold || p["ComparisonOperator"] != "GreaterThanThreshold" {
            problems.push(format!(
                "{id}: expected > {threshold}, got {} {threshold_now}",
                p["ComparisonOperator"]
            ));
        }
        let conditional = json!({"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]});
        for actions in ["AlarmActions", "OKActions"] {
            if p[actions] != conditional {
                problems.push(format!(
                    "{id}.{actions}: expected the topic only when given, got {}",
                    p[actions]
                ));
            }
        }
    }
    if t["Parameters"]["AlarmTopicArn"]["Default"] != "" {
        problems.push("Parameters.AlarmTopicArn: must be optional (Default '')".into());
    }
    let condition = &t["Conditions"]["HasAlarmTopic"];
    if *condition != json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}) {
        problems.push(format!(
            "Conditions.HasAlarmTopic: expected AlarmTopicArn != '', got {condition}"
        ));
    }
    problems
}

/// The conditions the relational read model's resources are deployed under.
const SQL_CONDITIONS: [&str; 3] = ["SqlOn", "SqlAurora", "SqlExisting"];

/// The relational read model: off by default; when on, sql-sync's role holds exactly what it
/// uses, the proxy takes IAM tokens over TLS only and signs in with IAM (its role: sql_auth.rs),
/// sql-sync is given no password, its mapping reports partial failures, bisects and parks
/// on a queue, and no security group of the template opens to the world.
fn check_sql_read_model(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let parameter = &t["Parameters"]["SqlReadModel"];
    if parameter["Default"] != "none" {
        problems.push(format!(
            "Parameters.SqlReadModel: the default must be none, got {}",
            parameter["Default"]
        ));
    }
    let on = json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "SqlReadModel"}, "none"]}]});
    if t["Conditions"]["SqlOn"] != on {
        problems.push(format!(
            "Conditions.SqlOn: expected SqlReadModel != none, got {}",
            t["Conditions"]["SqlOn"]
        ));
    }
    // Every resource of the read model exists only when it is on.
    let mut sql = 0;
    for (id, resource) in resources(t) {
        let named = id.starts_with("Sql");
        let condition = resource["Condition"].as_str().unwrap_or("");
        if named {
            sql += 1;
            if !SQL_CONDITIONS.contains(&condition) {
                problems.push(format!(
                    "{id}: no condition of the read model ({condition:?})"
                ));
            }
        } else if SQL_CONDITIONS.contains(&condition) {
            problems.push(format!("{id}: under {condition} but not named Sql*"));
        }
    }
    if sql < 15 {
        problems.push(format!("only {sql} resources of the read model"));
    }

    // sql-sync's role: exactly these grants.
    match function_role(t, "SqlSyncFunction") {
        Err(problem) => problems.push(problem),
        Ok((role_id, role)) => {
            let (grants, managed) = role_grants(role);
            if !managed.is_empty() {
                problems.push(format!("{role_id}: managed policies {managed:?}"));
            }
            let database = canon(&json!({"Fn::Sub": [
                "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${ProxyId}/${User}",
                {
                    "ProxyId": {"Fn::Select": [6, {"Fn::Split": [":", {"Fn::GetAtt": ["SqlProxy", "DBProxyArn"]}]}]},
                    "User": {"Fn::If": ["SqlAurora", "cqrs_sync", {"Ref": "SqlExistingUser"}]}
                }
            ]}));
            let mut allowed: Vec<(String, String)> = vec![
                (
                    "dynamodb:DescribeStream".into(),
                    "${DataTable.StreamArn}".into(),
                ),
                (
                    "dynamodb:GetRecords".into(),
                    "${DataTable.StreamArn}".into(),
                ),
                (
                    "dynamodb:GetShardIterator".into(),
                    "${DataTable.StreamArn}".into(),
                ),
                (
                    "dynamodb:ListStreams".into(),
                    "${DataTable.Arn}/stream/*".into(),
                ),
                ("rds-db:connect".into(), database),
                (
                    "sqs:SendMessage".into(),
                    "${SqlSyncFailureQueue.Arn}".into(),
                ),
                ("logs:CreateLogStream".into(), "${SqlSyncLogs.Arn}".into()),
                ("logs:PutLogEvents".into(), "${SqlSyncLogs.Arn}".into()),
                ("xray:PutTraceSegments".into(), "*".into()),
                ("xray:PutTelemetryRecords".into(), "*".into()),
            ];
            // Lambda's network interfaces in the VPC: EC2 scopes these to no resource.
            for action in [
                "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSubnets",
                "ec2:DeleteNetworkInterface",
                "ec2:AssignPrivateIpAddresses",
                "ec2:UnassignPrivateIpAddresses",
            ] {
                allowed.push((action.into(), "*".into()));
            }
            for (action, resource) in &grants {
                if !allowed.contains(&(action.clone(), resource.clone())) {
                    problems.push(format!("{role_id}: {action} on {resource} is not needed"));
                }
            }
            for (action, resource) in &allowed {
                if !grants.contains(&(action.clone(), resource.clone())) {
                    problems.push(format!("{role_id}: {action} on {resource} is missing"));
                }
            }
        }
    }

    // The proxy's role and how it signs in (IAM end to end, no secret): sql_auth.rs.
    if canon(&t["Resources"]["SqlProxy"]["Properties"]["RoleArn"]) != "${SqlProxyRole.Arn}" {
        problems.push("SqlProxy: not run with SqlProxyRole".into());
    }

    // The proxy: TLS and IAM tokens only.
    let proxy = &t["Resources"]["SqlProxy"]["Properties"];
    if proxy["RequireTLS"] != true {
        problems.push(format!("SqlProxy.RequireTLS: {}", proxy["RequireTLS"]));
    }
    if proxy["DefaultAuthScheme"] != "IAM_AUTH" {
        problems.push(format!(
            "SqlProxy.DefaultAuthScheme: {}",
            proxy["DefaultAuthScheme"]
        ));
    }

    // sql-sync: no password, the proxy's endpoint, in the VPC.
    let function = &t["Resources"]["SqlSyncFunction"]["Properties"];
    let vars = &function["Environment"]["Variables"];
    if let Some(vars) = vars.as_object() {
        for name in vars.keys() {
            if name == "SQL_URL" || name.contains("PASSWORD") || name.contains("SECRET") {
                problems.push(format!("SqlSyncFunction: {name} in its environment"));
            }
        }
    }
    if canon(&vars["SQL_HOST"]) != "${SqlProxy.Endpoint}" {
        problems.push(format!("SqlSyncFunction: SQL_HOST is {}", vars["SQL_HOST"]));
    }
    if function["VpcConfig"]["SubnetIds"].is_null() {
        problems.push("SqlSyncFunction: not in the VPC".into());
    }

    // Its mapping: partial failures, bisection, the on-failure queue.
    let mapping = of_type(t, "AWS::Lambda::EventSourceMapping")
        .into_iter()
        .find(|(_, m)| canon(&m["Properties"]["FunctionName"]) == "${SqlSyncFunction}");
    match mapping {
        None => problems.push("no mapping into SqlSyncFunction".into()),
        Some((id, m)) => {
            let p = &m["Properties"];
            if !list(&p["FunctionResponseTypes"]).contains(&json!("ReportBatchItemFailures")) {
                problems.push(format!("{id}: no ReportBatchItemFailures"));
            }
            if p["BisectBatchOnFunctionError"] != true {
                problems.push(format!("{id}: no BisectBatchOnFunctionError"));
            }
            let destination = canon(&p["DestinationConfig"]["OnFailure"]["Destination"]);
            if destination != "${SqlSyncFailureQueue.Arn}" {
                problems.push(format!("{id}: on failure to {destination}"));
            }
        }
    }

    // No security group rule of the template opens to the world.
    for (id, resource) in resources(t) {
        let rules: Vec<Value> = match resource["Type"].as_str() {
            Some("AWS::EC2::SecurityGroup") => {
                list(&resource["Properties"]["SecurityGroupIngress"])
                    .into_iter()
                    .chain(list(&resource["Properties"]["SecurityGroupEgress"]))
                    .collect()
            }
            Some("AWS::EC2::SecurityGroupIngress" | "AWS::EC2::SecurityGroupEgress") => {
                vec![resource["Properties"].clone()]
            }
            _ => continue,
        };
        if resource["Properties"]["SecurityGroupEgress"].is_null()
            && resource["Type"] == "AWS::EC2::SecurityGroup"
        {
            problems.push(format!("{id}: the default egress (everywhere) is kept"));
        }
        for rule in rules {
            let cidr = rule["CidrIp"].as_str().unwrap_or("");
            if cidr == "0.0.0.0/0" || rule["CidrIpv6"].as_str() == Some("::/0") {
                problems.push(format!("{id}: a rule open to the world"));
            }
        }
    }
    problems
}

fn assert_ok(problems: Problems) {
    assert!(
        problems.is_empty(),
        "the transformed template breaks the contract:\n  - {}",
        problems.join("\n  - ")
    );
}

fn assert_fails(problems: Problems, needle: &str) {
    assert!(
        problems.iter().any(|p| p.contains(needle)),
        "expected a problem mentioning {needle:?}, got {problems:#?}"
    );
}

// ---------------------------------------------------------------------------------------------

#[test]
fn no_role_gets_the_account_wide_stream_policy() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    assert_ok(check_no_dynamodb_execution_role(&t));
    // data-sync back on SAM's generated role: SAM attaches it by itself.
    let old = transformed_edit(&python, |text| {
        text.replace("      Role: !GetAtt DataSyncRole.Arn\n", "")
    });
    assert_fails(
        check_no_dynamodb_execution_role(&old),
        "AWSLambdaDynamoDBExecutionRole",
    );
    assert!(!check_stream_reads(&old).is_empty());
}

#[test]
fn data_sync_reads_only_the_command_table_stream() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    assert_ok(check_stream_reads(&t));

    let mut wide = t.clone();
    let statements = wide["Resources"]["DataSyncRole"]["Properties"]["Policies"][0]
        ["PolicyDocument"]["Statement"]
        .as_array_mut()
        .expect("statements");
    statements.push(json!({"Effect": "Allow", "Action": "dynamodb:GetRecords", "Resource": "*"}));
    assert_fails(check_stream_reads(&wide), "dynamodb:GetRecords on *");

    let mut managed = t.clone();
    managed["Resources"]["DataSyncRole"]["Properties"]["ManagedPolicyArns"] =
        json!(["arn:aws:iam::aws:policy/AmazonDynamoDBReadOnlyAccess"]);
    assert_fails(check_stream_reads(&managed), "managed policies");

    let mut other = t.clone();
    other["Resources"]["QueryHandlerFunctionRole"]["Properties"]["Policies"][0]["PolicyDocument"]
        ["Statement"]
        .as_array_mut()
        .expect("statements")
        .push(json!({"Effect": "Allow", "Action": ["dynamodb:GetShardIterator"],
                     "Resource": {"Fn::GetAtt": ["CommandTable", "StreamArn"]}}));
    assert_fails(
        check_stream_reads(&other),
        "QueryHandlerFunctionRole: dynamodb:GetShardIterator",
    );
}

#[test]
fn no_function_is_deployed_with_the_local_caller_mode() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    assert_ok(check_no_local_caller_mode(&t));
    // Set through Globals, it reaches every function after the transform.
    let local = transformed_edit(&python, |text| {
        text.replace(
            "        IDEMPOTENCY_TABLE: !Ref IdempotencyTable\n",
            "        IDEMPOTENCY_TABLE: !Ref IdempotencyTable\n        CALLER_MODE: local\n",
        )
    });
    let problems = check_no_local_caller_mode(&local);
    assert_fails(
        problems.clone(),
        "CommandHandlerFunction: CALLER_MODE=\"local\"",
    );
    assert_fails(problems.clone(), "DataSyncFunction: CALLER_MODE=\"local\"");
    assert_fails(problems, "QueryHandlerFunction: CALLER_MODE=\"local\"");
}

#[test]
fn the_default_stage_is_throttled_from_the_parameters() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    assert_ok(check_stage_throttling(&t));
    let unthrottled = transformed_edit(&python, |text| {
        text.replace(
            "        ThrottlingBurstLimit: !Ref ApiThrottlingBurstLimit\n",
            "",
        )
    });
    assert_fails(
        check_stage_throttling(&unthrottled),
        "DefaultRouteSettings.ThrottlingBurstLimit",
    );
}

#[test]
fn alarms_watch_failures_lag_and_5xx_and_notify_only_a_given_topic() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    assert_ok(check_alarms(&t));
    let mut always = t.clone();
    always["Resources"]["HttpApi5xxAlarm"]["Properties"]["AlarmActions"] =
        json!([{"Ref": "AlarmTopicArn"}]);
    assert_fails(check_alarms(&always), "HttpApi5xxAlarm.AlarmActions");
    let mut lenient = t.clone();
    lenient["Resources"]["DataSyncFailureQueueAlarm"]["Properties"]["Threshold"] = json!(10);
    assert_fails(
        check_alarms(&lenient),
        "DataSyncFailureQueueAlarm: expected > 0",
    );
    let mut gone = t;
    if let Some(resources) = gone["Resources"].as_object_mut() {
        resources.remove("DataSyncIteratorAgeAlarm");
    }
    assert_fails(check_alarms(&gone), "IteratorAge");
}

#[test]
fn the_relational_read_model_is_off_by_default_and_least_privileged_when_on() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    assert_ok(check_sql_read_model(&t));

    let mut on = t.clone();
    on["Parameters"]["SqlReadModel"]["Default"] = json!("aurora");
    assert_fails(check_sql_read_model(&on), "the default must be none");

    let mut always = t.clone();
    always["Resources"]["SqlCluster"]
        .as_object_mut()
        .expect("SqlCluster")
        .remove("Condition");
    assert_fails(check_sql_read_model(&always), "SqlCluster: no condition");

    let mut wide = t.clone();
    wide["Resources"]["SqlSyncRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array_mut()
        .expect("statements")
        .push(json!({"Effect": "Allow", "Action": "rds-db:connect", "Resource": "*"}));
    assert_fails(
        check_sql_read_model(&wide),
        "rds-db:connect on * is not needed",
    );

    let mut secrets = t.clone();
    secrets["Resources"]["SqlSyncRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array_mut()
        .expect("statements")
        .push(
            json!({"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                     "Resource": {"Ref": "SqlExistingSecretArn"}}),
        );
    assert_fails(
        check_sql_read_model(&secrets),
        "SqlSyncRole: secretsmanager:GetSecretValue",
    );

    let mut plain = t.clone();
    plain["Resources"]["SqlProxy"]["Properties"]["RequireTLS"] = json!(false);
    assert_fails(check_sql_read_model(&plain), "SqlProxy.RequireTLS");

    let mut passwords = t.clone();
    passwords["Resources"]["SqlProxy"]["Properties"]["DefaultAuthScheme"] = json!("NONE");
    passwords["Resources"]["SqlSyncFunction"]["Properties"]["Environment"]["Variables"]["SQL_PASSWORD"] =
        json!("hunter2");
    let problems = check_sql_read_model(&passwords);
    assert_fails(problems.clone(), "SqlProxy.DefaultAuthScheme");
    assert_fails(problems, "SQL_PASSWORD in its environment");

    let unbisected = transformed_edit(&python, |text| {
        text.replace(
            "                Destination: !GetAtt SqlSyncFailureQueue.Arn\n",
            "                Destination: !GetAtt DataSyncFailureQueue.Arn\n",
        )
    });
    assert_fails(
        check_sql_read_model(&unbisected),
        "on failure to ${DataSyncFailureQueue.Arn}",
    );

    let open = transformed_edit(&python, |text| {
        text.replacen(
            "          CidrIp: 127.0.0.1/32\n",
            "          CidrIp: 0.0.0.0/0\n",
            1,
        )
    });
    assert_fails(check_sql_read_model(&open), "a rule open to the world");

    // sql-sync reads no stream but the data table's.
    let mut command = t;
    command["Resources"]["SqlSyncRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array_mut()
        .expect("statements")
        .push(json!({"Effect": "Allow", "Action": "dynamodb:GetRecords",
                     "Resource": {"Fn::GetAtt": ["CommandTable", "StreamArn"]}}));
    assert_fails(
        check_stream_reads(&command),
        "SqlSyncRole: dynamodb:GetRecords on ${CommandTable.StreamArn}",
    );
}

/// Without `.venv` the tests fail, naming the variable that skips them; the variable skips them
/// only outside CI; `.venv` or `SAM_TRANSFORM_PYTHON` runs them.
#[test]
fn without_the_venv_the_tests_fail_unless_told_to_skip() {
    let root = std::env::temp_dir().join(format!("sam-transformed-root-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&root).expect("temp dir");
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| std::ffi::OsString::from(v))
        }
    };

    let refused = choose_python(&root, env(&[])).expect_err("no .venv, nothing says to skip");
    assert!(
        refused.contains(SKIP) && refused.contains("scripts/tools.sh"),
        "{refused}"
    );
    assert_eq!(choose_python(&root, env(&[(SKIP, "1")])), Ok(None));
    assert!(choose_python(&root, env(&[(SKIP, "0")])).is_err());
    let ci = choose_python(&root, env(&[(SKIP, "1"), ("CI", "true")])).expect_err("CI runs them");
    assert!(ci.contains("CI must run"), "{ci}");
    assert_eq!(
        choose_python(&root, env(&[("SAM_TRANSFORM_PYTHON", "/usr/bin/python3")])),
        Ok(Some(PathBuf::from("/usr/bin/python3")))
    );

    let venv = root.join(".venv/bin");
    std::fs::create_dir_all(&venv).expect("venv dir");
    std::fs::write(venv.join("python"), "").expect("python");
    assert_eq!(
        choose_python(&root, env(&[(SKIP, "1")])),
        Ok(Some(venv.join("python"))),
        "a present .venv is used, whatever the variable says"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The service's own route functions (model.toml `[routes]`): each operation is a route of the
/// HTTP API behind the JWT authorizer into its own function, whose role holds exactly what it
/// reads (its log group, X-Ray, the tables it reads without a write, its database user's
/// `rds-db:connect` only when SqlOn, no secret), with a log group and an errors alarm
/// (`cqrs_testkit::own_routes`; `tools/cli/tests/template.rs` runs it on a template with every
/// kind of read, and mutates it).
#[test]
fn own_routes_are_behind_the_jwt_authorizer_with_least_privilege_roles() {
    let Some(python) = python() else { return };
    let text = std::fs::read_to_string(Path::new(ROOT).join("model.toml")).expect("model.toml");
    let model = cqrs_model::Model::parse(&text).expect("model.toml checks");
    let routes: Vec<cqrs_testkit::own_routes::OwnRoute> = model
        .routes()
        .iter()
        .map(|r| cqrs_testkit::own_routes::OwnRoute {
            name: r.name.clone(),
            reads: r.reads.iter().map(|a| a.as_str().to_string()).collect(),
            routes: r
                .operations
                .iter()
                .map(|op| (op.method.clone(), op.path.clone()))
                .collect(),
        })
        .collect();
    let t = transformed(&python);
    assert_ok(cqrs_testkit::own_routes::problems(&t, &routes));
    // A write grant on the data table is found.
    if let Some(route) = routes.iter().find(|r| r.reads.iter().any(|a| a == "data")) {
        let t = transformed_edit(&python, |text| {
            text.replacen(
                "                  - dynamodb:BatchGetItem\n                Resource: !GetAtt DataTable.Arn\n              - Sid: DataTableIndexes",
                "                  - dynamodb:BatchGetItem\n                  - dynamodb:PutItem\n                Resource: !GetAtt DataTable.Arn\n              - Sid: DataTableIndexes",
                1,
            )
        });
        assert_fails(
            cqrs_testkit::own_routes::problems(&t, std::slice::from_ref(route)),
            "dynamodb:PutItem",
        );
    }
}
