//! Test harness of the query handler: an [`App`] on fresh DynamoDB Local tables, requests shaped
//! as API Gateway HTTP API (payload 2.0) events, and direct writes into the three tables standing
//! in for the command handler and data-sync.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::OnceLock;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use cqrs_caller::CallerMode;
use cqrs_item::Item;
use cqrs_item::{Number, Value as ItemValue};
use cqrs_model::{ItemView, KeyValue, Model, ValueRef};
use cqrs_query_handler::App;
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use cqrs_testkit::http_event::HttpApiRequest;
use lambda_http::{Body, Request, Response};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

/// A handler on its own tables.
pub struct Harness {
    pub app: App,
    pub tables: TestTables,
}

/// A caller as the JWT authorizer would describe it.
#[derive(Clone, Copy)]
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

/// What a request got.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub response: Response<Body>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap())
    }

    /// The items of a listing.
    pub fn items(&self) -> &Vec<Value> {
        self.body["items"].as_array().expect("a listing")
    }

    /// `sk` of every item of a listing.
    pub fn sks(&self) -> Vec<String> {
        self.items()
            .iter()
            .map(|i| i["sk"].as_str().unwrap().to_string())
            .collect()
    }

    pub fn cursor(&self) -> Option<String> {
        self.body["cursor"].as_str().map(str::to_string)
    }

    /// Asserts a problem document with this status (and field, when given).
    pub fn assert_problem(&self, status: u16, field: Option<&str>) {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{}",
            self.body
        );
        assert_eq!(self.body["status"], status);
        if let Some(field) = field {
            assert_eq!(self.body["field"], field, "{}", self.body);
        }
    }
}

/// Characters kept as they are in a path segment: the unreserved ones.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes one key as a path segment (`#` becomes `%23`).
pub fn enc(key: &str) -> String {
    utf8_percent_encode(key, SEGMENT).to_string()
}

/// Percent-encodes a query value.
pub fn qv(value: &str) -> String {
    enc(value)
}

impl Harness {
    pub async fn new() -> Self {
        let tables = cqrs_testkit::fresh_tables().await;
        Harness {
            app: App::new(store(&tables), CallerMode::Jwt, cqrs_model::EXAMPLE_TOML),
            tables,
        }
    }

    /// A command handler on the same tables.
    pub fn command_app(&self) -> cqrs_command_handler::App {
        cqrs_command_handler::App::new(
            store(&self.tables),
            CallerMode::Jwt,
            cqrs_model::Model::example(),
        )
    }

    pub async fn send(&self, request: Request) -> Answer {
        let response = cqrs_query_handler::handle(&self.app, request).await;
        let status = response.status().as_u16();
        let body = match response.body() {
            Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::String(text.clone())),
            Body::Empty => Value::Null,
            other => panic!("unexpected body {other:?}"),
        };
        Answer {
            status,
            body,
            response,
        }
    }

    /// `GET target` (a raw path with an optional raw query string) from `caller`.
    pub async fn get(&self, caller: &As, target: &str) -> Answer {
        self.send(event("GET", caller, target, &[])).await
    }

    /// `GET target` with extra headers.
    pub async fn get_with(&self, caller: &As, target: &str, headers: &[(&str, &str)]) -> Answer {
        self.send(event("GET", caller, target, headers)).await
    }

    /// Follows the cursors of a listing from `target` (which has a query string) to its end; every
    /// page is checked for its status and, except the last, for being full (`limit` items).
    pub async fn all_pages(&self, caller: &As, target: &str, limit: usize) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let url = match &cursor {
                None => target.to_string(),
                Some(c) => format!("{target}&cursor={c}"),
            };
            let answer = self.get(caller, &url).await;
            assert_eq!(answer.status, 200, "{url}: {}", answer.body);
            let sks = answer.sks();
            assert!(sks.len() <= limit, "{url}: page over the limit");
            cursor = answer.cursor();
            pages.push(sks);
            match &cursor {
                Some(_) => assert_eq!(
                    pages.last().unwrap().len(),
                    limit,
                    "{url}: a page before the last is full"
                ),
                None => break,
            }
            assert!(pages.len() < 10_000, "the cursors never end");
        }
        pages
    }

    async fn put(&self, table: &str, item: &Item) {
        self.tables
            .client
            .put_item()
            .table_name(table)
            .set_item(Some(item.to_attributes().unwrap()))
            .send()
            .await
            .unwrap();
    }

    /// Writes a command-table item (version `sk@v`) as the command handler would.
    pub async fn put_command(&self, item: &Item) {
        self.put(&self.tables.command, item).await;
    }

    /// Writes a command item into the history table, as data-sync would.
    pub async fn put_history(&self, item: &Item) {
        self.put(&self.tables.history, item).await;
    }

    /// Writes the data-table form of a command item, as data-sync would.
    pub async fn put_data(&self, item: &Item) {
        self.put(&self.tables.data, &item.clone().into_data_item())
            .await;
    }

    /// Writes versions `1..=versions` of `pk` / `sk` into the command and history tables and the
    /// last into the data table; the last is soft-deleted when `deleted`. Returns the last.
    pub async fn seed(&self, pk: &str, sk: &str, versions: i64, deleted: bool) -> Item {
        let mut last = None;
        for v in 1..=versions {
            let item = version_item(pk, sk, v, deleted && v == versions);
            self.put_command(&item).await;
            self.put_history(&item).await;
            last = Some(item);
        }
        let last = last.expect("at least one version");
        self.put_data(&last).await;
        last
    }

    /// Writes version 1 of `pk` / `sk` into the data table only.
    pub async fn seed_data(&self, pk: &str, sk: &str, deleted: bool) {
        self.put_data(&version_item(pk, sk, 1, deleted)).await;
    }

    /// Sends a command through the real command handler (JWT caller `caller`).
    pub async fn command(&self, method: &str, caller: &As, body: Value) -> (u16, Value) {
        let request = command_event(method, caller, &body.to_string());
        let response = cqrs_command_handler::handle(&self.command_app(), request).await;
        let status = response.status().as_u16();
        let body = match response.body() {
            Body::Text(text) => serde_json::from_str(text).unwrap(),
            _ => Value::Null,
        };
        (status, body)
    }

    /// Writes data-table items as data-sync projects them, 25 per call.
    pub async fn put_all(&self, items: &[Item]) {
        put_all_items(self, items).await;
    }

    /// How many items the data table holds.
    pub async fn data_count(&self) -> usize {
        let output = self
            .tables
            .client
            .scan()
            .table_name(&self.tables.data)
            .send()
            .await
            .unwrap();
        output.items().len()
    }

    /// Reads the data table's item directly.
    pub async fn raw_data(&self, pk: &str, sk: &str) -> Option<Item> {
        self.tables
            .client
            .get_item()
            .table_name(&self.tables.data)
            .key("pk", AttributeValue::S(pk.into()))
            .key("sk", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .map(|a| Item::from_attributes(a).unwrap())
    }
}

fn store(tables: &TestTables) -> Store {
    Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
    )
}

/// Version `version` of `pk` / base `sk` in the command table's shape.
pub fn version_item(pk: &str, sk: &str, version: i64, deleted: bool) -> Item {
    let mut item = Item::example();
    let prefix = pk.split('#').next().unwrap();
    item.pk = pk.to_string();
    item.sk = cqrs_keys::add_sort_key_version(sk, version);
    item.id = cqrs_keys::generate_id(pk, sk);
    item.version = version;
    item.tenant_code = cqrs_keys::tenant_code(pk).unwrap().to_string();
    item.item_type = prefix.to_string();
    item.is_deleted = deleted;
    item.code = sk.to_string();
    item.name = format!("{sk} v{version}");
    item.attributes = cqrs_item::map_from_json(json!({"v": version, "sk": sk})).unwrap();
    item
}

/// An API Gateway HTTP API (payload 2.0) event for `method target` from `caller`, where `target`
/// is a raw (percent-encoded) path with an optional raw query string.
pub fn event(method: &str, caller: &As, target: &str, headers: &[(&str, &str)]) -> Request {
    let mut request = HttpApiRequest::new(method, target)
        .claims(caller.user, caller.tenant, caller.roles)
        .header("accept", "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.request()
}

/// A `method /commands` event for the command handler.
pub fn command_event(method: &str, caller: &As, body: &str) -> Request {
    HttpApiRequest::command(method, body)
        .claims(caller.user, caller.tenant, caller.roles)
        .request()
}

/// The `pk` and `sk` of an item of the example model's `entity` (model.toml), built by the model as
/// the command handler builds them: `model_keys("order", "t1", &[("orderId", "o1")])`.
pub fn model_keys(entity: &str, tenant: &str, attrs: &[(&str, &str)]) -> (String, String) {
    use cqrs_model::{ItemView, Model, ValueRef};
    static MODEL: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    let model = MODEL.get_or_init(Model::example);
    let attrs: Vec<(&str, ValueRef<'_>)> =
        attrs.iter().map(|(n, v)| (*n, ValueRef::Str(v))).collect();
    let view = ItemView {
        tenant,
        created_at: "2024-01-15T10:30:00.000Z",
        attributes: &attrs,
    };
    model
        .entity(entity)
        .unwrap_or_else(|| panic!("no entity {entity} in model.toml"))
        .primary_key(&view)
        .unwrap_or_else(|e| panic!("keys of {entity}: {e}"))
}

pub fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(Model::example)
}

/// The data-table item of `entity` with `attrs`, as data-sync projects version `version` of it.
pub fn entity_item(
    entity: &str,
    tenant: &str,
    attrs: Value,
    created_at: &str,
    version: i64,
) -> Item {
    let e = model().entity(entity).unwrap();
    let map = attrs.as_object().unwrap();
    let texts: Vec<(String, String, bool)> = map
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => (k.clone(), s.clone(), false),
            Value::Number(n) => (k.clone(), n.to_string(), true),
            other => (k.clone(), other.to_string(), false),
        })
        .collect();
    let refs: Vec<(&str, ValueRef<'_>)> = texts
        .iter()
        .map(|(k, v, number)| {
            (
                k.as_str(),
                if *number {
                    ValueRef::Num(v)
                } else {
                    ValueRef::Str(v)
                },
            )
        })
        .collect();
    let keys = e
        .derive(&ItemView {
            tenant,
            created_at,
            attributes: &refs,
        })
        .unwrap_or_else(|err| panic!("{entity}: {err}"));
    let mut item = version_item(&keys.pk, &keys.sk, version, false);
    item.tenant_code = tenant.to_string();
    item.item_type = e.item_type.clone();
    item.created_at = created_at.to_string();
    item.attributes = cqrs_item::map_from_json(attrs).unwrap();
    item.entity = Some(entity.to_string());
    item.model_revision = Some(model().revision().to_string());
    item.index_keys = keys
        .index
        .into_iter()
        .map(|(name, value)| match value {
            KeyValue::S(s) => (name, ItemValue::String(s)),
            KeyValue::N(n) => (name, ItemValue::Number(Number::parse(&n).unwrap())),
        })
        .collect();
    item.into_data_item()
}

/// Writes data-table items as data-sync projects them, 25 per call.
async fn put_all_items(h: &Harness, items: &[Item]) {
    for chunk in items.chunks(25) {
        let requests = chunk
            .iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item.to_attributes().unwrap()))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        let mut pending = Some(HashMap::from([(h.tables.data.clone(), requests)]));
        while let Some(items) = pending.take() {
            let out = h
                .tables
                .client
                .batch_write_item()
                .set_request_items(Some(items))
                .send()
                .await
                .unwrap();
            pending = out.unprocessed_items.filter(|u| !u.is_empty());
        }
    }
}
