//! Test harness of the command handler: an [`App`] on fresh DynamoDB Local tables, requests shaped
//! as API Gateway HTTP API (payload 2.0) events, and direct reads of the command table.

#![allow(dead_code)]

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_caller::CallerMode;
use cqrs_command_handler::App;
use cqrs_item::Item;
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use cqrs_testkit::http_event::HttpApiRequest;
use lambda_http::{Body, Request, Response};
use serde_json::{Value, json};

/// A handler on its own tables.
pub struct Harness {
    pub app: App,
    pub tables: TestTables,
}

/// A caller as the JWT authorizer would describe it.
#[derive(Clone)]
pub struct As {
    pub user: &'static str,
    pub tenant: &'static str,
    pub roles: &'static str,
}

pub const USER_T1: As = As {
    user: "u1",
    tenant: "t1",
    roles: "admin",
};
pub const USER_T2: As = As {
    user: "u2",
    tenant: "t2",
    roles: "admin",
};
pub const SYSTEM_ADMIN: As = As {
    user: "root",
    tenant: "t1",
    roles: "system_admin",
};

impl Harness {
    pub async fn new() -> Self {
        Self::with_mode(CallerMode::Jwt).await
    }

    pub async fn with_mode(caller_mode: CallerMode) -> Self {
        Self::build(caller_mode, None).await
    }

    /// A handler whose every DynamoDB call goes into `log`.
    pub async fn counted(log: &cqrs_testkit::round_trips::CallLog) -> Self {
        Self::build(CallerMode::Jwt, Some(log)).await
    }

    async fn build(
        caller_mode: CallerMode,
        log: Option<&cqrs_testkit::round_trips::CallLog>,
    ) -> Self {
        let tables = cqrs_testkit::fresh_tables().await;
        let sequences = format!("{}-sequences", tables.command.trim_end_matches("-command"));
        let specs = cqrs_testkit::template::workspace_tables().expect("template.yaml parses");
        let spec = cqrs_testkit::template::find(&specs, "SequencesTable")
            .expect("SequencesTable in template.yaml");
        cqrs_testkit::tables::create_table(&tables.client, spec, &sequences)
            .await
            .expect("sequences table");
        let client = match log {
            Some(log) => log.client(&tables.client),
            None => tables.client.clone(),
        };
        let store = Store::new(
            client,
            Tables::new(
                &tables.command,
                &tables.data,
                &tables.history,
                &tables.idempotency,
            )
            .with_sequences(sequences),
        );
        Harness {
            app: App::new(store, caller_mode, cqrs_model::Model::example()),
            tables,
        }
    }

    pub async fn send(&self, request: Request) -> (u16, Value, Response<Body>) {
        let response = cqrs_command_handler::handle(&self.app, request).await;
        let status = response.status().as_u16();
        let body = match response.body() {
            Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::String(text.clone())),
            Body::Empty => Value::Null,
            other => panic!("unexpected body {other:?}"),
        };
        (status, body, response)
    }

    pub async fn post(&self, caller: &As, body: Value) -> (u16, Value) {
        let (status, body, _) = self
            .send(event("POST", caller, &body.to_string(), &[]))
            .await;
        (status, body)
    }

    pub async fn patch(&self, caller: &As, body: Value) -> (u16, Value) {
        let (status, body, _) = self
            .send(event("PATCH", caller, &body.to_string(), &[]))
            .await;
        (status, body)
    }

    /// Every stored version of `pk` / base `sk`, by version.
    pub async fn versions(&self, pk: &str, sk: &str) -> Vec<Item> {
        let output = self
            .tables
            .client
            .query()
            .table_name(&self.tables.command)
            .key_condition_expression("pk = :pk AND begins_with(sk, :sk)")
            .expression_attribute_values(":pk", AttributeValue::S(pk.into()))
            .expression_attribute_values(":sk", AttributeValue::S(format!("{sk}@")))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        let mut items: Vec<Item> = output
            .items()
            .iter()
            .map(|a| Item::from_attributes(a.clone()).unwrap())
            .collect();
        items.sort_by_key(|i| i.version);
        items
    }

    /// How many items the command table holds in all.
    pub async fn command_count(&self) -> usize {
        let output = self
            .tables
            .client
            .scan()
            .table_name(&self.tables.command)
            .send()
            .await
            .unwrap();
        output.items().len()
    }
}

/// An API Gateway HTTP API (payload 2.0) event for `method /commands` from `caller`.
pub fn event(method: &str, caller: &As, body: &str, headers: &[(&str, &str)]) -> Request {
    let mut request =
        HttpApiRequest::command(method, body).claims(caller.user, caller.tenant, caller.roles);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.request()
}

pub fn command(pk: &str, sk: &str, version: i64) -> Value {
    json!({"pk": pk, "sk": sk, "version": version, "name": "n", "attributes": {"a": 1}})
}
