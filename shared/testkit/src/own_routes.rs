//! What a service's own route functions (`[routes.<name>]` of its model, written into
//! `template.yaml` by `cqrs template`) deploy, read on the template *after* SAM's transform
//! (`scripts/sam-transform.py`): each operation is a route of the one HTTP API behind its JWT
//! authorizer, integrated with its own function; the function runs with its own role, which
//! holds exactly what the route reads (its log group, X-Ray, the tables it reads without any
//! write, its database user's `rds-db:connect` only when the read model is deployed, and no
//! secret); its log group has the stack's retention; an alarm watches its errors.
//!
//! ```
//! use cqrs_testkit::own_routes::{OwnRoute, problems};
//! let route = OwnRoute {
//!     name: "task-report".into(),
//!     reads: vec!["sql".into()],
//!     routes: vec![("GET".into(), "/tasks/report".into())],
//! };
//! // An empty template has none of it.
//! let found = problems(&serde_json::json!({"Resources": {}}), &[route]);
//! assert!(found.iter().any(|p| p.contains("TaskReportFunction")));
//! ```

use std::collections::BTreeSet;

use crate::iam::{canon, list};
use serde_json::{Value, json};

/// One route function as its model declares it.
#[derive(Debug, Clone)]
pub struct OwnRoute {
    /// Its name (`[routes.<name>]`), its binary's.
    pub name: String,
    /// What it reads: `"data"`, `"history"`, `"counters"`, `"sql"`.
    pub reads: Vec<String>,
    /// Its operations' (method, path).
    pub routes: Vec<(String, String)>,
}

/// PascalCase of a function name (`task-report` -> `TaskReport`), the prefix of its logical ids.
pub fn pascal(name: &str) -> String {
    name.split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// (condition or "", action, resource) of every Allow of a role's inline policies; a policy
/// under `Fn::If [C, policy, AWS::NoValue]` counts under condition C.
fn grants(
    role: &Value,
    problems: &mut Vec<String>,
    id: &str,
) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for policy in list(&role["Properties"]["Policies"]) {
        let (condition, policy) = match policy.get("Fn::If").and_then(Value::as_array) {
            Some(branches) if branches.len() == 3 => {
                if branches[2] != json!({"Ref": "AWS::NoValue"}) {
                    problems.push(format!(
                        "{id}: a conditional policy's else branch must be AWS::NoValue"
                    ));
                }
                (canon(&branches[0]), branches[1].clone())
            }
            _ => (String::new(), policy),
        };
        for statement in list(&policy["PolicyDocument"]["Statement"]) {
            if statement["Effect"] != "Allow" {
                problems.push(format!("{id}: only Allow statements, got {statement}"));
                continue;
            }
            for loose in ["NotAction", "NotResource", "Principal"] {
                if statement.get(loose).is_some() {
                    problems.push(format!("{id}: {loose} is not allowed"));
                }
            }
            // A statement's IAM condition narrows its resources: it is part of the grant.
            let narrowed = statement
                .get("Condition")
                .map(|c| format!(" where {c}"))
                .unwrap_or_default();
            for action in list(&statement["Action"]) {
                for resource in list(&statement["Resource"]) {
                    out.insert((
                        condition.clone(),
                        canon(&action),
                        canon(&resource) + &narrowed,
                    ));
                }
            }
        }
    }
    out
}

/// Exactly the grants a route function's role holds for what it reads.
fn expected_grants(route: &OwnRoute) -> BTreeSet<(String, String, String)> {
    let id = pascal(&route.name);
    let mut out = BTreeSet::new();
    let mut add = |condition: &str, actions: &[&str], resource: &str| {
        for action in actions {
            out.insert((
                condition.to_string(),
                action.to_string(),
                resource.to_string(),
            ));
        }
    };
    add(
        "",
        &["logs:CreateLogStream", "logs:PutLogEvents"],
        &format!("${{{id}Logs.Arn}}"),
    );
    add(
        "",
        &["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
        "*",
    );
    for read in &route.reads {
        match read.as_str() {
            "data" => {
                add(
                    "",
                    &[
                        "dynamodb:GetItem",
                        "dynamodb:Query",
                        "dynamodb:BatchGetItem",
                    ],
                    "${DataTable.Arn}",
                );
                add("", &["dynamodb:Query"], "${DataTable.Arn}/index/*");
            }
            "history" => add(
                "",
                &["dynamodb:GetItem", "dynamodb:Query"],
                "${HistoryTable.Arn}",
            ),
            "counters" => add(
                "",
                &["dynamodb:GetItem"],
                &format!(
                    "${{IdempotencyTable.Arn}} where {}",
                    json!({"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["COUNTER#*"]}})
                ),
            ),
            "sql" => {
                add(
                    "SqlOn",
                    &["rds-db:connect"],
                    "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${ProxyId}/cqrs_routes",
                );
                add(
                    "SqlOn",
                    &[
                        "ec2:CreateNetworkInterface",
                        "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeSubnets",
                        "ec2:DeleteNetworkInterface",
                        "ec2:AssignPrivateIpAddresses",
                        "ec2:UnassignPrivateIpAddresses",
                    ],
                    "*",
                );
            }
            _ => {}
        }
    }
    out
}

/// Actions no route function may hold: writes to the tables, secrets.
fn forbidden(action: &str) -> bool {
    let writes = [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:PartiQL",
        "dynamodb:*",
    ];
    action.starts_with("secretsmanager:")
        || writes.iter().any(|w| action.starts_with(w))
        || action == "*"
}

/// Everything the transformed template `t` gets wrong about the route functions `routes`.
pub fn problems(t: &Value, routes: &[OwnRoute]) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = &t["Resources"];
    let body = &resources["HttpApi"]["Properties"]["Body"];
    for route in routes {
        let id = pascal(&route.name);
        let function_id = format!("{id}Function");
        let role_id = format!("{id}Role");
        let function = &resources[&function_id];
        if function["Type"] != "AWS::Lambda::Function" {
            problems.push(format!("{function_id}: missing (or not a function)"));
            continue;
        }
        let role_ref = canon(&function["Properties"]["Role"]);
        if role_ref != format!("${{{role_id}.Arn}}") {
            problems.push(format!(
                "{function_id}.Role: expected its own {role_id}, got {role_ref}"
            ));
        }
        // Its routes: on the HTTP API, behind the JWT authorizer, into this function.
        for (method, path) in &route.routes {
            let op = &body["paths"][path][method.to_lowercase()];
            if op.is_null() {
                problems.push(format!("{method} {path}: not a route of HttpApi"));
                continue;
            }
            if op["security"] != json!([{"JwtAuthorizer": []}]) {
                problems.push(format!(
                    "{method} {path}: expected the JWT authorizer, got {}",
                    op["security"]
                ));
            }
            let uri = canon(&op["x-amazon-apigateway-integration"]["uri"]);
            if !uri.contains(&format!("${{{function_id}.Arn}}")) {
                problems.push(format!(
                    "{method} {path}: integrated with {uri}, not {function_id}"
                ));
            }
        }
        // Its role: assumed by Lambda only, inline policies only, exactly what it reads.
        let role = &resources[&role_id];
        if role["Type"] != "AWS::IAM::Role" {
            problems.push(format!("{role_id}: missing (or not a role)"));
            continue;
        }
        for extra in ["ManagedPolicyArns", "PermissionsBoundary"] {
            if role["Properties"].get(extra).is_some() {
                problems.push(format!("{role_id}.{extra}: inline policies only"));
            }
        }
        let principals: Vec<String> =
            list(&role["Properties"]["AssumeRolePolicyDocument"]["Statement"])
                .iter()
                .flat_map(|s| list(&s["Principal"]["Service"]))
                .map(|p| canon(&p))
                .collect();
        if principals != ["lambda.amazonaws.com"] {
            problems.push(format!(
                "{role_id}: assumed by {principals:?}, expected Lambda only"
            ));
        }
        let held = grants(role, &mut problems, &role_id);
        for (_, action, resource) in &held {
            if forbidden(action) {
                problems.push(format!("{role_id}: {action} on {resource} is not a read"));
            }
        }
        let expected = expected_grants(route);
        let missing: Vec<_> = expected.difference(&held).collect();
        let extra: Vec<_> = held.difference(&expected).collect();
        if !missing.is_empty() || !extra.is_empty() {
            problems.push(format!(
                "{role_id}: grants differ; missing {missing:?}, extra {extra:?}"
            ));
        }
        // Its log group, with the stack's retention.
        let logs = &resources[format!("{id}Logs")];
        if canon(&function["Properties"]["LoggingConfig"]["LogGroup"]) != format!("${{{id}Logs}}")
            || canon(&logs["Properties"]["RetentionInDays"]) != "${LogRetentionInDays}"
        {
            problems.push(format!(
                "{id}Logs: the function's log group, with LogRetentionInDays"
            ));
        }
        // An alarm on its errors, notifying the topic when one is given.
        let alarm = &resources[format!("{id}ErrorsAlarm")]["Properties"];
        let conditional = json!({"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]});
        let watches = alarm["Namespace"] == "AWS/Lambda"
            && alarm["MetricName"] == "Errors"
            && list(&alarm["Dimensions"]).iter().any(|d| {
                d["Name"] == "FunctionName" && canon(&d["Value"]) == format!("${{{function_id}}}")
            });
        if !watches || alarm["AlarmActions"] != conditional || alarm["OKActions"] != conditional {
            problems.push(format!(
                "{id}ErrorsAlarm: expected an alarm on {function_id}'s Errors notifying AlarmTopicArn when given"
            ));
        }
        // The database only through the read model's VPC, when it is deployed.
        let sql = route.reads.iter().any(|r| r == "sql");
        let env = &function["Properties"]["Environment"]["Variables"];
        if sql {
            if env["SQL_USER"] != "cqrs_routes"
                || env["SQL_HOST"]
                    != json!({"Fn::If": ["SqlOn", {"Fn::GetAtt": ["SqlProxy", "Endpoint"]}, ""]})
            {
                problems.push(format!(
                    "{function_id}: SQL_USER cqrs_routes and SQL_HOST the proxy's endpoint when SqlOn, got {env}"
                ));
            }
            let vpc = &function["Properties"]["VpcConfig"]["Fn::If"];
            if vpc[0] != "SqlOn" || vpc[2] != json!({"Ref": "AWS::NoValue"}) {
                problems.push(format!("{function_id}.VpcConfig: only when SqlOn"));
            }
        } else if env.get("SQL_HOST").is_some() || function["Properties"].get("VpcConfig").is_some()
        {
            problems.push(format!(
                "{function_id}: reads no SQL, yet has a VPC or SQL_HOST"
            ));
        }
    }
    problems
}
