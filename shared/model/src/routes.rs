//! A service's own routes, declared once in `model.toml` (`[routes.<function>]`): each table is one
//! Lambda function of the service (its binary `src/bin/<function>.rs`), and its operations are HTTP
//! API routes beside the framework's. From this one declaration the CLI writes the function's
//! deployed resources (`cqrs template`: the function, its routes behind the JWT authorizer, its
//! least-privilege role, log group and alarm), the local router (`cargo lambda watch`), and the
//! operations of the service's OpenAPI document; the route crate (`cqrs-routes`) serves each
//! operation by its id, so the path and method are written nowhere else.
//!
//! ```toml
//! [routes.task-report]
//! description = "The service's reports, from the relational read model"
//! reads = ["sql"]                 # what its role may reach: "data", "history", "counters", "sql"
//!
//! [routes.task-report.operations.taskReport]
//! method = "GET"
//! path = "/tasks/report"
//! summary = "The caller's tenant's tasks, filtered, sorted and counted"
//! problems = [400, 401, 503]      # the problem documents it answers besides 200
//! query = { status = { enum = ["open", "done"] }, limit = { type = "integer", minimum = 1 } }
//! response = { type = "object", required = ["count"], properties = { count = { type = "integer" } } }
//! ```
//!
//! Every key but `method` and `path` is optional; a model without `[routes]` declares none.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::model::ModelError;

/// `[routes.<function>]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouteFunction {
    pub description: Option<String>,
    #[serde(default)]
    pub reads: Vec<String>,
    pub memory: Option<u32>,
    pub timeout: Option<u32>,
    #[serde(default)]
    pub operations: BTreeMap<String, RawOperation>,
}

/// `[routes.<function>.operations.<operationId>]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOperation {
    pub method: String,
    pub path: String,
    pub summary: Option<String>,
    pub description: Option<String>,
    #[serde(default)]
    pub problems: Vec<u16>,
    #[serde(default)]
    pub query: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub required_query: Vec<String>,
    pub response: Option<toml::Value>,
}

/// What a route function's role may reach, besides its own logs.
///
/// ```
/// use cqrs_model::Access;
/// assert_eq!(Access::parse("sql"), Some(Access::Sql));
/// assert_eq!(Access::Sql.as_str(), "sql");
/// assert_eq!(Access::parse("everything"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Access {
    /// The data table and its indexes: `GetItem`, `Query`, `BatchGetItem`.
    Data,
    /// The history table: `GetItem`, `Query`.
    History,
    /// The framework's counters (`COUNTER#` items of the idempotency table, what
    /// `cqrs_store::Store::counter` reads and a hook's counter guard keeps): `GetItem` on those
    /// keys alone.
    Counters,
    /// The relational read model, through RDS Proxy as the routes' database user (IAM
    /// authentication and TLS, from the read model's VPC).
    Sql,
}

impl Access {
    /// Every kind of access, in the order the model file names them.
    pub const ALL: [Access; 4] = [Access::Data, Access::History, Access::Counters, Access::Sql];

    /// `"data"`, `"history"` or `"sql"`.
    pub fn parse(text: &str) -> Option<Access> {
        Access::ALL.into_iter().find(|a| a.as_str() == text)
    }

    /// The name the model file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Data => "data",
            Access::History => "history",
            Access::Counters => "counters",
            Access::Sql => "sql",
        }
    }
}

/// One of the service's own Lambda functions serving HTTP API routes (`[routes.<name>]`).
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [routes.task-report]
/// reads = ["sql"]
/// [routes.task-report.operations.taskReport]
/// method = "GET"
/// path = "/tasks/report"
/// "#).unwrap();
/// let route = &model.routes()[0];
/// assert_eq!(route.name, "task-report");
/// assert_eq!(route.reads, vec![cqrs_model::Access::Sql]);
/// assert_eq!(route.operations[0].id, "taskReport");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteFunction {
    /// The function's name: its binary (`src/bin/<name>.rs`) and, after the stack's prefix, its
    /// deployed name.
    pub name: String,
    /// What it does, for its deployed description.
    pub description: Option<String>,
    /// What its role may reach.
    pub reads: Vec<Access>,
    /// Its memory in MB (the template's default when `None`).
    pub memory: Option<u32>,
    /// Its timeout in seconds (the template's default when `None`).
    pub timeout: Option<u32>,
    /// Its operations, by id.
    pub operations: Vec<Operation>,
}

/// One HTTP operation of a route function.
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [routes.loans]
/// [routes.loans.operations.memberLoans]
/// method = "get"
/// path = "/members/{memberId}/loans"
/// problems = [401, 404]
/// "#).unwrap();
/// let op = &model.routes()[0].operations[0];
/// assert_eq!(op.method, "GET");
/// assert_eq!(op.path_parameters(), vec!["memberId"]);
/// assert_eq!(op.problems, vec![401, 404]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Operation {
    /// The operation id (the OpenAPI `operationId`, and the name the route's code serves it by).
    pub id: String,
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The path, with `{parameter}` segments (`/members/{memberId}/loans`).
    pub path: String,
    /// One line for the OpenAPI document.
    pub summary: Option<String>,
    /// More, for the OpenAPI document.
    pub description: Option<String>,
    /// The problem documents (statuses, 4xx and 5xx) it answers besides its 200.
    pub problems: Vec<u16>,
    /// Its query parameters and each one's JSON Schema (`{}` for any string), by name.
    pub query: Vec<(String, serde_json::Value)>,
    /// The query parameters it requires.
    pub required_query: Vec<String>,
    /// The JSON Schema of its 200 body (`None`: any JSON object).
    pub response: Option<serde_json::Value>,
}

impl Operation {
    /// The names of the path's `{parameter}` segments, in order.
    pub fn path_parameters(&self) -> Vec<&str> {
        self.path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect()
    }
}

/// The framework's own functions: a route function or a consumer may not take their names.
pub const FRAMEWORK_FUNCTIONS: [&str; 5] = [
    "command-handler",
    "query-handler",
    "data-sync",
    "sql-sync",
    "event-publisher",
];

/// The first path segments the framework's routes use: a service's own route may not start with
/// one of them.
pub const FRAMEWORK_PATH_SEGMENTS: [&str; 6] = [
    "commands",
    "items",
    "query",
    "sequences",
    "master-data",
    "settings",
];

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Builds and checks the declared route functions; each problem is pushed to `errors`.
pub(crate) fn build(
    raw: BTreeMap<String, RawRouteFunction>,
    errors: &mut Vec<ModelError>,
) -> Vec<RouteFunction> {
    let mut err = |place: String, field: String, message: String| {
        errors.push(ModelError {
            place,
            field,
            message,
        })
    };
    let mut functions = Vec::new();
    let mut ids = BTreeSet::new();
    let mut routes: BTreeMap<(String, String), String> = BTreeMap::new();
    for (name, raw) in raw {
        let place = format!("route function `{name}`");
        let valid_name = name.len() <= 40
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.ends_with('-');
        if !valid_name {
            err(
                place.clone(),
                format!("routes.{name}"),
                "a function name is its binary's: lowercase letters, digits and `-`, starting with a letter, at most 40 characters".into(),
            );
        }
        if FRAMEWORK_FUNCTIONS.contains(&name.as_str()) {
            err(
                place.clone(),
                format!("routes.{name}"),
                format!(
                    "`{name}` is one of the framework's functions: name the service's own another way"
                ),
            );
        }
        let mut reads = Vec::new();
        for text in &raw.reads {
            match Access::parse(text) {
                Some(access) if !reads.contains(&access) => reads.push(access),
                Some(_) => {}
                None => err(
                    place.clone(),
                    format!("routes.{name}.reads"),
                    format!(
                        "`{text}` is not something a route reads: use \"data\", \"history\", \"counters\" or \"sql\""
                    ),
                ),
            }
        }
        if let Some(memory) = raw.memory
            && !(128..=10240).contains(&memory)
        {
            err(
                place.clone(),
                format!("routes.{name}.memory"),
                format!("{memory} MB: Lambda takes 128 to 10240"),
            );
        }
        if let Some(timeout) = raw.timeout
            && !(1..=30).contains(&timeout)
        {
            err(
                place.clone(),
                format!("routes.{name}.timeout"),
                format!("{timeout} s: an HTTP API waits at most 30 s for its function, so 1 to 30"),
            );
        }
        if raw.operations.is_empty() {
            err(
                place.clone(),
                format!("routes.{name}.operations"),
                "a route function serves at least one operation: add [routes.NAME.operations.ID] with method and path".into(),
            );
        }
        let mut operations = Vec::new();
        for (id, op) in raw.operations {
            let field = format!("routes.{name}.operations.{id}");
            let valid_id = id.starts_with(|c: char| c.is_ascii_alphabetic())
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid_id {
                err(
                    place.clone(),
                    field.clone(),
                    format!("operation id `{id}`: letters, digits and `_`, starting with a letter"),
                );
            }
            if !ids.insert(id.clone()) {
                err(
                    place.clone(),
                    field.clone(),
                    format!("operation id `{id}` is declared twice"),
                );
            }
            let method = op.method.to_ascii_uppercase();
            if !METHODS.contains(&method.as_str()) {
                err(
                    place.clone(),
                    format!("{field}.method"),
                    format!("`{}`: use GET, POST, PUT, PATCH or DELETE", op.method),
                );
            }
            if let Err(message) = check_path(&op.path) {
                err(place.clone(), format!("{field}.path"), message);
            }
            if let Some(other) = routes.insert((method.clone(), shape(&op.path)), id.clone()) {
                err(
                    place.clone(),
                    format!("{field}.path"),
                    format!("{method} {} is routed twice (also by `{other}`)", op.path),
                );
            }
            for status in &op.problems {
                if !(400..=599).contains(status) {
                    err(
                        place.clone(),
                        format!("{field}.problems"),
                        format!("{status}: a problem document's status is 400 to 599"),
                    );
                }
            }
            for required in &op.required_query {
                if !op.query.contains_key(required) {
                    err(
                        place.clone(),
                        format!("{field}.required_query"),
                        format!("`{required}` is required but not in `query`"),
                    );
                }
            }
            for (param, schema) in &op.query {
                if !schema.is_table() {
                    err(
                        place.clone(),
                        format!("{field}.query.{param}"),
                        "a query parameter's value is its JSON Schema, a table (`{}` for any string)".into(),
                    );
                }
            }
            if let Some(response) = &op.response
                && !response.is_table()
            {
                err(
                    place.clone(),
                    format!("{field}.response"),
                    "the response is the JSON Schema of the 200 body, a table".into(),
                );
            }
            let mut problems = op.problems;
            problems.sort_unstable();
            problems.dedup();
            operations.push(Operation {
                id,
                method,
                path: op.path,
                summary: op.summary,
                description: op.description,
                problems,
                query: op
                    .query
                    .into_iter()
                    .map(|(name, schema)| (name, json(schema)))
                    .collect(),
                required_query: op.required_query,
                response: op.response.map(json),
            });
        }
        functions.push(RouteFunction {
            name,
            description: raw.description,
            reads,
            memory: raw.memory,
            timeout: raw.timeout,
            operations,
        });
    }
    functions
}

/// A TOML value as JSON (a JSON Schema written in TOML).
fn json(value: toml::Value) -> serde_json::Value {
    match value {
        toml::Value::String(s) => serde_json::Value::String(s),
        toml::Value::Integer(i) => serde_json::Value::from(i),
        toml::Value::Float(f) => serde_json::Value::from(f),
        toml::Value::Boolean(b) => serde_json::Value::Bool(b),
        toml::Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        toml::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(json).collect())
        }
        toml::Value::Table(table) => {
            serde_json::Value::Object(table.into_iter().map(|(k, v)| (k, json(v))).collect())
        }
    }
}

/// The path with every parameter's name forgotten: two routes of one shape collide on the gateway.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|s| if s.starts_with('{') { "{}" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

fn check_path(path: &str) -> Result<(), String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("`{path}`: a path starts with `/`"));
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let mut names = BTreeSet::new();
    for segment in &segments {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let valid = name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`{path}`: parameter `{{{name}}}`: letters, digits and `_`, starting with a letter (no greedy `+`)"
                ));
            }
            if !names.insert(name) {
                return Err(format!("`{path}`: parameter `{{{name}}}` twice"));
            }
        } else if segment.is_empty()
            || !segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
        {
            return Err(format!(
                "`{path}`: segment `{segment}`: letters, digits and `-._~`, or a `{{parameter}}`"
            ));
        }
    }
    if let Some(first) = segments.first()
        && FRAMEWORK_PATH_SEGMENTS.contains(first)
    {
        return Err(format!(
            "`{path}`: /{first} is the framework's: a service's own route starts elsewhere"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Model;

    fn errors(text: &str) -> Vec<String> {
        match Model::parse(text) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_model_without_routes_declares_none() {
        assert!(Model::parse("").unwrap().routes().is_empty());
    }

    #[test]
    fn routes_that_cannot_be_served_are_refused_each_with_its_field() {
        let found = errors(
            r#"
[routes.query-handler]
[routes.query-handler.operations.x]
method = "GET"
path = "/reports"

[routes.reports]
reads = ["everything"]
timeout = 60
[routes.reports.operations.a]
method = "FETCH"
path = "/items/{pk}/report"
[routes.reports.operations.b]
method = "GET"
path = "/reports/{a}/{a}"
problems = [200]
[routes.reports.operations.c]
method = "get"
path = "/reports"
[routes.empty]
"#,
        );
        let expected = [
            "framework's functions",
            "`everything` is not something a route reads",
            "60 s",
            "`FETCH`",
            "/items is the framework's",
            "parameter `{a}` twice",
            "200: a problem document's status",
            "GET /reports is routed twice",
            "at least one operation",
        ];
        for text in expected {
            assert!(
                found.iter().any(|e| e.contains(text)),
                "no error says {text:?}: {found:#?}"
            );
        }
        assert_eq!(found.len(), expected.len(), "{found:#?}");
    }
}
