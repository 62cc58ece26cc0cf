//! How the relational read model is signed in to, on the template SAM's transform makes of
//! `template.yaml` (what would be deployed): RDS Proxy with end-to-end IAM authentication, no
//! secret anywhere.
//!
//! - the proxy's default authentication scheme is `IAM_AUTH`, with no `Auth` entry (no secret
//!   to sign in to the database with), and TLS is required;
//! - no role of the template (a function's, the proxy's, one SAM generates) may read a secret
//!   (`secretsmanager:*`, or every action), nor holds a managed policy that could;
//! - the proxy's role holds `rds-db:connect` on the cluster's two database users alone (sql-sync's,
//!   `cqrs_sync` or `SqlExistingUser`, and the routes', `cqrs_routes`), and nothing else;
//! - any other role that signs in to the database (a service's route that reads sql) does so only
//!   as `cqrs_routes`, through the proxy (`dbuser:<proxy id>/cqrs_routes`);
//! - the cluster (aurora) takes IAM sign-in, its master user (`cqrs_sync`, sql-sync's) by IAM;
//! - the routes' security group (`SqlRoutesSecurityGroup`, only when `SqlOn`) reaches the proxy's
//!   group on PostgreSQL's port and nothing else, and the proxy's group lets it in;
//! - an output names the routes' database user.
//!
//! Transformed with `scripts/sam-transform.py` and the project's `.venv`, as
//! `sam_transformed.rs` does (`SAM_TRANSFORM_PYTHON` names another interpreter; without either
//! the tests fail, unless `CQRS_SKIP_SAM_TRANSFORMED=1` skips them outside CI). `SQL_AUTH_TEMPLATE`
//! names another template to check (a generated service's). Each check also runs on a mutated
//! template and must notice, so none passes vacuously.

use std::path::{Path, PathBuf};
use std::process::Command;

use cqrs_testkit::iam::{canon, list};
use serde_json::{Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The routes' database user (`cqrs_sql::schema::ROUTES_USER`), spelled out.
const ROUTES_USER: &str = "cqrs_routes";

/// The Python that runs the transform, or `None` when the tests are to be skipped.
fn python() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("SAM_TRANSFORM_PYTHON") {
        return Some(PathBuf::from(explicit));
    }
    let venv = Path::new(ROOT).join(".venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    let skip = std::env::var("CQRS_SKIP_SAM_TRANSFORMED").is_ok_and(|v| v == "1");
    if skip && std::env::var_os("CI").is_none() {
        eprintln!(
            "SKIPPED (CQRS_SKIP_SAM_TRANSFORMED=1): {} is missing",
            venv.display()
        );
        return None;
    }
    panic!(
        "{} is missing, so the transformed template cannot be checked: run scripts/tools.sh, name a \
         Python with aws-sam-translator in SAM_TRANSFORM_PYTHON, or (outside CI) set \
         CQRS_SKIP_SAM_TRANSFORMED=1",
        venv.display()
    );
}

/// The template checked: `SQL_AUTH_TEMPLATE`, else the workspace's `template.yaml`.
fn template_path() -> PathBuf {
    std::env::var_os("SQL_AUTH_TEMPLATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("template.yaml"))
}

fn transformed(python: &Path) -> Value {
    let template = template_path();
    let output = Command::new(python)
        .arg(Path::new(ROOT).join("scripts/sam-transform.py"))
        .arg(&template)
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

fn resources(t: &Value) -> Vec<(&str, &Value)> {
    t["Resources"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

/// A role's inline policies, those under a condition (`Fn::If`, as a route's database policy is
/// under `SqlOn`) included: both branches.
fn policies(role: &Value) -> Vec<Value> {
    list(&role["Properties"]["Policies"])
        .into_iter()
        .flat_map(
            |policy| match policy.get("Fn::If").and_then(Value::as_array) {
                Some(branches) => branches.iter().skip(1).cloned().collect(),
                None => vec![policy],
            },
        )
        .collect()
}

/// Every (action, resource) a role's inline policies allow, and its managed policies.
fn role_grants(role: &Value) -> (Vec<(String, String)>, Vec<String>) {
    let mut grants = Vec::new();
    for policy in policies(role) {
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

type Problems = Vec<String>;

/// The proxy: `IAM_AUTH` by default, no `Auth` entry (no secret), TLS required.
fn check_proxy_auth(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let proxy = &t["Resources"]["SqlProxy"];
    if proxy["Type"] != "AWS::RDS::DBProxy" || proxy["Condition"] != "SqlOn" {
        problems.push(format!(
            "SqlProxy: expected an AWS::RDS::DBProxy under SqlOn, got {} {}",
            proxy["Type"], proxy["Condition"]
        ));
    }
    let p = &proxy["Properties"];
    if p["DefaultAuthScheme"] != "IAM_AUTH" {
        problems.push(format!(
            "SqlProxy.DefaultAuthScheme: expected IAM_AUTH, got {}",
            p["DefaultAuthScheme"]
        ));
    }
    if !p["Auth"].is_null() {
        problems.push(format!(
            "SqlProxy.Auth: expected none (no secret), got {}",
            p["Auth"]
        ));
    }
    if p["RequireTLS"] != true {
        problems.push(format!("SqlProxy.RequireTLS: {}", p["RequireTLS"]));
    }
    if canon(&p["RoleArn"]) != "${SqlProxyRole.Arn}" {
        problems.push(format!("SqlProxy.RoleArn: {}", canon(&p["RoleArn"])));
    }
    problems
}

/// No role may read a secret: no `secretsmanager:` action (nor `*`, nor `secretsmanager:*`) in
/// any inline policy, no managed policy (SAM adds none to the template's roles, which name theirs
/// inline), no function environment resolving a secret.
fn check_no_secret_reader(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let mut roles = 0;
    for (id, resource) in resources(t) {
        if resource["Type"] == "AWS::IAM::Role" {
            roles += 1;
            let (grants, managed) = role_grants(resource);
            for (action, target) in grants {
                let lower = action.to_ascii_lowercase();
                if lower.starts_with("secretsmanager:") || lower == "*" {
                    problems.push(format!("{id}: {action} on {target}: it can read a secret"));
                }
            }
            for arn in managed {
                if arn.contains("SecretsManager") || arn.contains("AdministratorAccess") {
                    problems.push(format!("{id}: managed policy {arn}: it can read a secret"));
                }
            }
        }
        if resource["Type"] == "AWS::Lambda::Function"
            && resource["Properties"]["Environment"]
                .to_string()
                .contains("resolve:secretsmanager")
        {
            problems.push(format!("{id}: a secret resolved into its environment"));
        }
    }
    if roles < 4 {
        problems.push(format!("only {roles} roles: not the template's"));
    }
    problems
}

/// The two `rds-db:connect` resources the proxy's role may have: the cluster's users sql-sync's
/// and the routes'.
fn proxy_role_allowed() -> Vec<(String, String)> {
    let cluster = json!({"Fn::If": ["SqlAurora", {"Fn::GetAtt": ["SqlCluster", "DBClusterResourceId"]},
                               {"Ref": "SqlExistingClusterResourceId"}]});
    let sync = json!({"Fn::Sub": [
        "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${ClusterResourceId}/${User}",
        {"ClusterResourceId": cluster, "User": {"Fn::If": ["SqlAurora", "cqrs_sync", {"Ref": "SqlExistingUser"}]}}
    ]});
    let routes = json!({"Fn::Sub": [
        format!("arn:${{AWS::Partition}}:rds-db:${{AWS::Region}}:${{AWS::AccountId}}:dbuser:${{ClusterResourceId}}/{ROUTES_USER}"),
        {"ClusterResourceId": cluster}
    ]});
    vec![
        ("rds-db:connect".to_string(), canon(&sync)),
        ("rds-db:connect".to_string(), canon(&routes)),
    ]
}

/// The proxy's role: assumed by RDS alone, `rds-db:connect` on the two users and nothing else.
fn check_proxy_role(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let role = &t["Resources"]["SqlProxyRole"];
    let principals: Vec<String> =
        list(&role["Properties"]["AssumeRolePolicyDocument"]["Statement"])
            .iter()
            .flat_map(|s| list(&s["Principal"]["Service"]))
            .map(|p| canon(&p))
            .collect();
    if principals != ["rds.amazonaws.com"] {
        problems.push(format!(
            "SqlProxyRole: assumed by {principals:?}, expected rds.amazonaws.com alone"
        ));
    }
    let (mut grants, managed) = role_grants(role);
    grants.sort();
    let mut allowed = proxy_role_allowed();
    allowed.sort();
    if grants != allowed || !managed.is_empty() {
        problems.push(format!(
            "SqlProxyRole: expected rds-db:connect on the cluster's users cqrs_sync (or \
             SqlExistingUser) and {ROUTES_USER} alone, got {grants:?} {managed:?}"
        ));
    }
    problems
}

/// The `rds-db:connect` a route's role may have: the proxy's routes' user.
fn route_database() -> String {
    canon(&json!({"Fn::Sub": [
        format!("arn:${{AWS::Partition}}:rds-db:${{AWS::Region}}:${{AWS::AccountId}}:dbuser:${{ProxyId}}/{ROUTES_USER}"),
        {"ProxyId": {"Fn::Select": [6, {"Fn::Split": [":", {"Fn::GetAtt": ["SqlProxy", "DBProxyArn"]}]}]}}
    ]}))
}

/// Every other role that may sign in to the database (a service's route that reads sql): only as
/// the routes' user, through the proxy.
fn check_route_roles(t: &Value) -> Problems {
    let mut problems = Problems::new();
    for (id, resource) in resources(t) {
        if resource["Type"] != "AWS::IAM::Role" || id == "SqlSyncRole" || id == "SqlProxyRole" {
            continue;
        }
        for (action, target) in role_grants(resource).0 {
            let lower = action.to_ascii_lowercase();
            if lower.starts_with("rds-db:")
                && (lower != "rds-db:connect" || target != route_database())
            {
                problems.push(format!(
                    "{id}: {action} on {target}: a route signs in only as {ROUTES_USER} through the proxy"
                ));
            }
        }
    }
    problems
}

/// The cluster (aurora): IAM sign-in, its master user by IAM.
fn check_cluster(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let cluster = &t["Resources"]["SqlCluster"]["Properties"];
    if cluster["EnableIAMDatabaseAuthentication"] != true {
        problems.push(format!(
            "SqlCluster.EnableIAMDatabaseAuthentication: {}",
            cluster["EnableIAMDatabaseAuthentication"]
        ));
    }
    if cluster["MasterUserAuthenticationType"] != "iam-db-auth" {
        problems.push(format!(
            "SqlCluster.MasterUserAuthenticationType: expected iam-db-auth, got {}",
            cluster["MasterUserAuthenticationType"]
        ));
    }
    if cluster["MasterUsername"] != "cqrs_sync" {
        problems.push(format!(
            "SqlCluster.MasterUsername: {}",
            cluster["MasterUsername"]
        ));
    }
    problems
}

/// The routes' security group: only when SqlOn; out, PostgreSQL to the proxy's group and nothing
/// else; in, nothing; the proxy's group lets it in on PostgreSQL's port.
fn check_routes_security_group(t: &Value) -> Problems {
    let mut problems = Problems::new();
    let group = &t["Resources"]["SqlRoutesSecurityGroup"];
    if group["Type"] != "AWS::EC2::SecurityGroup" || group["Condition"] != "SqlOn" {
        problems.push(format!(
            "SqlRoutesSecurityGroup: expected an AWS::EC2::SecurityGroup under SqlOn, got {} {}",
            group["Type"], group["Condition"]
        ));
    }
    let id = "${SqlRoutesSecurityGroup.GroupId}";
    let proxy = "${SqlProxySecurityGroup.GroupId}";
    let mut out = Vec::new();
    // Inline rules: the placeholder that replaces the default egress (loopback, every protocol)
    // and nothing else.
    if group["Properties"]["SecurityGroupEgress"].is_null() {
        problems.push("SqlRoutesSecurityGroup: the default egress (everywhere) is kept".into());
    }
    for rule in list(&group["Properties"]["SecurityGroupEgress"]) {
        if rule["CidrIp"] != "127.0.0.1/32" || !rule["CidrIpv6"].is_null() {
            out.push(rule);
        }
    }
    for rule in list(&group["Properties"]["SecurityGroupIngress"]) {
        problems.push(format!("SqlRoutesSecurityGroup: ingress {rule}"));
    }
    for (rid, resource) in resources(t) {
        let p = &resource["Properties"];
        match resource["Type"].as_str() {
            Some("AWS::EC2::SecurityGroupEgress") if canon(&p["GroupId"]) == id => {
                if resource["Condition"] != "SqlOn" {
                    problems.push(format!("{rid}: not under SqlOn"));
                }
                out.push(p.clone());
            }
            Some("AWS::EC2::SecurityGroupIngress") if canon(&p["GroupId"]) == id => {
                problems.push(format!("{rid}: ingress into SqlRoutesSecurityGroup"));
            }
            _ => {}
        }
    }
    let expected = json!({"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "to": proxy});
    let seen: Vec<Value> = out
        .iter()
        .map(|r| {
            json!({"IpProtocol": r["IpProtocol"], "FromPort": r["FromPort"], "ToPort": r["ToPort"],
                   "to": canon(&r["DestinationSecurityGroupId"])})
        })
        .collect();
    if seen != [expected.clone()] {
        problems.push(format!(
            "SqlRoutesSecurityGroup: egress {seen:?}, expected only {expected}"
        ));
    }
    let from_routes =
        list(&t["Resources"]["SqlProxySecurityGroup"]["Properties"]["SecurityGroupIngress"])
            .iter()
            .any(|r| {
                canon(&r["SourceSecurityGroupId"]) == id
                    && r["IpProtocol"] == "tcp"
                    && r["FromPort"] == 5432
                    && r["ToPort"] == 5432
            });
    if !from_routes {
        problems
            .push("SqlProxySecurityGroup: no ingress from SqlRoutesSecurityGroup on 5432".into());
    }
    problems
}

/// The output that names the routes' database user.
fn check_routes_user_output(t: &Value) -> Problems {
    let output = &t["Outputs"]["SqlRoutesUser"];
    if output["Value"] != ROUTES_USER || output["Condition"] != "SqlOn" {
        return vec![format!(
            "Outputs.SqlRoutesUser: expected {ROUTES_USER} under SqlOn, got {output}"
        )];
    }
    Vec::new()
}

fn check_all(t: &Value) -> Problems {
    [
        check_proxy_auth(t),
        check_no_secret_reader(t),
        check_proxy_role(t),
        check_route_roles(t),
        check_cluster(t),
        check_routes_security_group(t),
        check_routes_user_output(t),
    ]
    .concat()
}

fn assert_fails(problems: Problems, needle: &str) {
    assert!(
        problems.iter().any(|p| p.contains(needle)),
        "expected a problem mentioning {needle:?}, got {problems:#?}"
    );
}

#[test]
fn the_read_model_is_signed_in_to_with_iam_end_to_end_and_no_secret() {
    let Some(python) = python() else { return };
    let t = transformed(&python);
    let problems = check_all(&t);
    assert!(
        problems.is_empty(),
        "{}: the transformed template breaks the contract:\n  - {}",
        template_path().display(),
        problems.join("\n  - ")
    );

    // Each check notices what it is about.
    let mut secrets = t.clone();
    secrets["Resources"]["SqlProxy"]["Properties"]["Auth"] =
        json!([{"AuthScheme": "SECRETS", "IAMAuth": "REQUIRED", "SecretArn": "arn:x"}]);
    secrets["Resources"]["SqlProxy"]["Properties"]
        .as_object_mut()
        .expect("proxy")
        .remove("DefaultAuthScheme");
    let problems = check_proxy_auth(&secrets);
    assert_fails(problems.clone(), "SqlProxy.DefaultAuthScheme");
    assert_fails(problems, "SqlProxy.Auth");

    let mut reader = t.clone();
    reader["Resources"]["SqlSyncRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array_mut()
        .expect("statements")
        .push(
            json!({"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"}),
        );
    assert_fails(
        check_no_secret_reader(&reader),
        "SqlSyncRole: secretsmanager:GetSecretValue",
    );
    let mut everything = t.clone();
    everything["Resources"]["SqlSyncRole"]["Properties"]["ManagedPolicyArns"] =
        json!(["arn:aws:iam::aws:policy/SecretsManagerReadWrite"]);
    assert_fails(
        check_no_secret_reader(&everything),
        "managed policy arn:aws:iam::aws:policy/SecretsManagerReadWrite",
    );

    let mut wide = t.clone();
    wide["Resources"]["SqlProxyRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array_mut()
        .expect("statements")
        .push(json!({"Effect": "Allow", "Action": "rds-db:connect",
                     "Resource": {"Fn::Sub": "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:*/*"}}));
    assert_fails(
        check_proxy_role(&wide),
        "SqlProxyRole: expected rds-db:connect",
    );

    // A role of a route (whatever the template holds: one is made here) that signs in as another
    // user, or to the cluster itself, is noticed; as the routes' user through the proxy it is not.
    let mut route = t.clone();
    route["Resources"]["SomeRouteRole"] = json!({"Type": "AWS::IAM::Role", "Properties": {
        "Policies": [{"Fn::If": ["SqlOn", {"PolicyName": "sql", "PolicyDocument": {"Statement": [
            {"Effect": "Allow", "Action": "rds-db:connect", "Resource": {"Fn::Sub": [
                format!("arn:${{AWS::Partition}}:rds-db:${{AWS::Region}}:${{AWS::AccountId}}:dbuser:${{ProxyId}}/{ROUTES_USER}"),
                {"ProxyId": {"Fn::Select": [6, {"Fn::Split": [":", {"Fn::GetAtt": ["SqlProxy", "DBProxyArn"]}]}]}}
            ]}}]}}, {"Ref": "AWS::NoValue"}]}]}});
    assert_eq!(check_route_roles(&route), Problems::new());
    route["Resources"]["SomeRouteRole"]["Properties"]["Policies"][0]["Fn::If"][1]["PolicyDocument"]
        ["Statement"][0]["Resource"] = json!({"Fn::Sub": [
        "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${ProxyId}/cqrs_sync",
        {"ProxyId": {"Fn::Select": [6, {"Fn::Split": [":", {"Fn::GetAtt": ["SqlProxy", "DBProxyArn"]}]}]}}
    ]});
    assert_fails(check_route_roles(&route), "SomeRouteRole: rds-db:connect");

    let mut password = t.clone();
    password["Resources"]["SqlCluster"]["Properties"]["MasterUserAuthenticationType"] =
        json!("password");
    password["Resources"]["SqlCluster"]["Properties"]
        .as_object_mut()
        .expect("cluster")
        .remove("EnableIAMDatabaseAuthentication");
    let problems = check_cluster(&password);
    assert_fails(problems.clone(), "SqlCluster.MasterUserAuthenticationType");
    assert_fails(problems, "SqlCluster.EnableIAMDatabaseAuthentication");

    let mut open = t.clone();
    open["Resources"]["SqlRoutesToProxy"]["Properties"]["DestinationSecurityGroupId"] =
        json!({"Fn::GetAtt": ["SqlDatabaseSecurityGroup", "GroupId"]});
    assert_fails(
        check_routes_security_group(&open),
        "SqlRoutesSecurityGroup: egress",
    );
    let mut anywhere = t.clone();
    anywhere["Resources"]["SqlRoutesSecurityGroup"]["Properties"]["SecurityGroupEgress"] =
        json!([{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"}]);
    assert_fails(
        check_routes_security_group(&anywhere),
        "SqlRoutesSecurityGroup: egress",
    );
    let mut shut = t.clone();
    shut["Resources"]["SqlProxySecurityGroup"]["Properties"]["SecurityGroupIngress"]
        .as_array_mut()
        .expect("ingress")
        .retain(|r| canon(&r["SourceSecurityGroupId"]) != "${SqlRoutesSecurityGroup.GroupId}");
    assert_fails(
        check_routes_security_group(&shut),
        "no ingress from SqlRoutesSecurityGroup",
    );

    let mut unnamed = t;
    unnamed["Outputs"]
        .as_object_mut()
        .expect("outputs")
        .remove("SqlRoutesUser");
    assert_fails(check_routes_user_output(&unnamed), "Outputs.SqlRoutesUser");
}
