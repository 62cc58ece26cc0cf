//! Harness of the reliability suite: both HTTP functions on fresh DynamoDB Local tables, requests
//! shaped as API Gateway HTTP API (payload 2.0) events with or without JWT claims, a seedable PRNG,
//! and whole-table snapshots to prove that nothing was written.

#![allow(dead_code)]

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_caller::CallerMode;
use cqrs_item::Item;
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use lambda_http::{Body, Response};
use serde_json::Value;

/// A store on `tables`.
pub fn store(tables: &TestTables) -> Store {
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

/// Both HTTP functions on one set of fresh tables, in one caller mode.
pub struct Stack {
    pub tables: TestTables,
    pub command: cqrs_command_handler::App,
    pub query: cqrs_query_handler::App,
    pub mode: CallerMode,
}

impl Stack {
    pub async fn new(mode: CallerMode) -> Self {
        let tables = cqrs_testkit::fresh_tables().await;
        Self::on(tables, mode)
    }

    /// The functions on existing tables.
    pub fn on(tables: TestTables, mode: CallerMode) -> Self {
        Stack {
            command: cqrs_command_handler::App::new(
                store(&tables),
                mode,
                cqrs_model::Model::example(),
            ),
            query: cqrs_query_handler::App::new(store(&tables), mode, cqrs_model::EXAMPLE_TOML),
            tables,
            mode,
        }
    }

    /// Sends `request` to the function that serves its path (`/commands` or anything else).
    pub async fn send(&self, request: Req) -> Answer {
        // The command handler's routes, as template.yaml routes them.
        let to_commands = ["/commands", "/sequences/", "/master-data/"]
            .iter()
            .any(|prefix| request.path.starts_with(prefix));
        let event = request.request();
        let response = if to_commands {
            cqrs_command_handler::handle(&self.command, event).await
        } else {
            cqrs_query_handler::handle(&self.query, event).await
        };
        Answer::of(response)
    }

    /// A snapshot of all four tables.
    pub async fn snapshot(&self) -> Snapshot {
        snapshot(&self.tables).await
    }
}

/// Who a request claims to come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Who {
    pub user: &'static str,
    pub tenant: &'static str,
    pub roles: &'static str,
}

pub const T1: Who = Who {
    user: "u1",
    tenant: "t1",
    roles: "admin",
};
pub const T2: Who = Who {
    user: "u2",
    tenant: "t2",
    roles: "admin",
};
pub const ROOT: Who = Who {
    user: "root",
    tenant: "t1",
    roles: "system_admin",
};

/// One HTTP request, as API Gateway would hand it to a function (the testkit's builder).
pub use cqrs_testkit::http_event::HttpApiRequest as Req;

/// The callers of the suite on a request.
pub trait Caller: Sized {
    /// JWT claims of `who`.
    fn claims_of(self, who: Who) -> Self;
    /// The local caller headers of `who`.
    fn local(self, who: Who) -> Self;
    /// `who` as the caller mode expects it: claims, or local headers.
    fn from(self, mode: CallerMode, who: Who) -> Self {
        match mode {
            CallerMode::Jwt => self.claims_of(who),
            CallerMode::Local => self.local(who),
        }
    }
}

impl Caller for Req {
    fn claims_of(self, who: Who) -> Self {
        self.claims(who.user, who.tenant, who.roles)
    }

    fn local(self, who: Who) -> Self {
        self.header("x-tenant-code", who.tenant)
            .header("x-user-id", who.user)
            .header("x-roles", who.roles)
    }
}

/// `GET target`, no caller.
pub fn get(target: &str) -> Req {
    Req::new("GET", target)
}

/// What a function answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub text: String,
    pub body: Value,
}

impl Answer {
    pub fn of(response: Response<Body>) -> Self {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let text = match response.body() {
            Body::Text(text) => text.clone(),
            Body::Binary(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Body::Empty => String::new(),
            _ => String::new(),
        };
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer {
            status,
            content_type,
            text,
            body,
        }
    }

    /// Why this answer is not a valid RFC 9457 problem document with a 4xx status, if it is not.
    pub fn problem_fault(&self) -> Option<String> {
        if !(400..500).contains(&self.status) {
            return Some(format!("status {} is not a 4xx", self.status));
        }
        if self.content_type.as_deref() != Some("application/problem+json") {
            return Some(format!("content-type {:?}", self.content_type));
        }
        let b = &self.body;
        let ok = b["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("urn:cqrs:problem:"))
            && b["title"].as_str().is_some_and(|t| !t.is_empty())
            && b["status"].as_u64() == Some(u64::from(self.status))
            && b["detail"].as_str().is_some_and(|d| !d.is_empty());
        (!ok).then(|| format!("not a problem document: {}", self.text))
    }
}

/// Every item of the four tables, rendered canonically (sorted attributes, sorted items).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub tables: BTreeMap<&'static str, Vec<String>>,
}

impl Snapshot {
    pub fn items(&self) -> usize {
        self.tables.values().map(Vec::len).sum()
    }
}

/// Every raw item of `table`.
pub async fn scan_raw(
    tables: &TestTables,
    table: &str,
) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    let mut items = Vec::new();
    let mut pages = tables
        .client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        items.extend(page.expect("scan").items().iter().cloned());
    }
    items
}

/// Every item of `table` in the item shape, by `pk`, `sk`.
pub async fn scan_items(tables: &TestTables, table: &str) -> Vec<Item> {
    let mut items: Vec<Item> = scan_raw(tables, table)
        .await
        .into_iter()
        .map(|a| Item::from_attributes(a).expect("an item"))
        .collect();
    items.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
    items
}

pub async fn snapshot(tables: &TestTables) -> Snapshot {
    let mut out = BTreeMap::new();
    for (name, table) in [
        ("command", &tables.command),
        ("data", &tables.data),
        ("history", &tables.history),
        ("idempotency", &tables.idempotency),
    ] {
        let mut rendered: Vec<String> = scan_raw(tables, table)
            .await
            .into_iter()
            .map(|item| render(&AttributeValue::M(item)))
            .collect();
        rendered.sort();
        out.insert(name, rendered);
    }
    Snapshot { tables: out }
}

/// An attribute value as text with every map's keys in order (the SDK's maps are hash maps, whose
/// order differs between two reads of the same item).
fn render(value: &AttributeValue) -> String {
    match value {
        AttributeValue::M(map) => {
            let sorted: BTreeMap<&String, String> =
                map.iter().map(|(k, v)| (k, render(v))).collect();
            format!("M({sorted:?})")
        }
        AttributeValue::L(list) => {
            format!("L({:?})", list.iter().map(render).collect::<Vec<_>>())
        }
        other => format!("{other:?}"),
    }
}

/// splitmix64: a small, seedable PRNG (enough to shuffle and to choose faults reproducibly).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The splitmix64 finaliser: a good 64-bit hash of a 64-bit value.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of a seeded test: `RELIABILITY_SEED` when set (to replay a failure), else `default`.
pub fn seed(default: u64) -> u64 {
    match std::env::var("RELIABILITY_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("RELIABILITY_SEED={text:?} is not a u64")),
        Err(_) => default,
    }
}

/// Version `version` of item `pk` / `base`, as the command handler would write it.
pub fn command_item(pk: &str, base: &str, version: i64) -> Item {
    let mut item = Item::example();
    item.pk = pk.into();
    item.sk = cqrs_keys::add_sort_key_version(base, version);
    item.id = cqrs_keys::generate_id(pk, base);
    item.code = base.into();
    item.name = format!("{base} v{version}");
    item.version = version;
    item.tenant_code = cqrs_keys::tenant_code(pk).unwrap_or("t1").to_string();
    item.item_type = pk.split('#').next().unwrap_or_default().into();
    item.attributes.insert("v".into(), version.into());
    item
}
