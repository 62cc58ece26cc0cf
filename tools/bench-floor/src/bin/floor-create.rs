//! `floor-create`: `POST /commands` (a create) written by hand, the floor of command-handler's
//! create: the least DynamoDB work a safe create can do. The tenant's and `common`'s TTL policy
//! (one `BatchGetItem`, then kept for a minute per container, as command-handler does), then the
//! version row and the item's head (`HEAD#pk@sk`) in one `TransactWriteItems`, each conditional
//! on `attribute_not_exists`: the conditions are the create's whole check, and a failed head
//! condition returns the current head (`ALL_OLD`) for the 409. No read in front of the write.
//! It validates only what it needs to build the item.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use bench_floor::{dynamodb_client, var};
use lambda_http::{Body, Error, Request, RequestExt, Response, service_fn};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Tables {
    command: String,
    data: String,
    idempotency: String,
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_string())
}

fn reply(status: u16, body: Value) -> Result<Response<Body>, Error> {
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))?)
}

/// How long a TTL policy read is used before it is read again.
const TTL_POLICY_FOR: Duration = Duration::from_secs(60);

/// TTL policies read, by tenant and `TTL#<entity>`: when, and their `days`.
type TtlCache = Mutex<HashMap<(String, String), (Instant, Option<i64>)>>;

/// The tenant's TTL policy for `ttl_sk`, else `common`'s: its `days`.
async fn ttl_policy(
    client: &Client,
    tables: &Tables,
    tenant: &str,
    ttl_sk: &str,
) -> Result<Option<i64>, Error> {
    let own = format!("MASTER#{tenant}");
    let keys = KeysAndAttributes::builder()
        .keys(HashMap::from([
            ("pk".into(), s(&own)),
            ("sk".into(), s(ttl_sk)),
        ]))
        .keys(HashMap::from([
            ("pk".into(), s("MASTER#common")),
            ("sk".into(), s(ttl_sk)),
        ]))
        .consistent_read(true)
        .build()?;
    let found = client
        .batch_get_item()
        .request_items(&tables.data, keys)
        .send()
        .await?;
    let items = found
        .responses()
        .and_then(|r| r.get(&tables.data))
        .cloned()
        .unwrap_or_default();
    let days = |pk: &str| {
        items
            .iter()
            .find(|item| item.get("pk") == Some(&s(pk)))
            .and_then(|item| item.get("attributes"))
            .and_then(|a| a.as_m().ok())
            .and_then(|a| a.get("days"))
            .and_then(|d| d.as_n().ok())
            .and_then(|d| d.parse().ok())
    };
    Ok(days(&own).or_else(|| days("MASTER#common")))
}

async fn create(
    client: &Client,
    tables: &Tables,
    ttl_cache: &TtlCache,
    request: Request,
) -> Result<Response<Body>, Error> {
    let context = request.request_context();
    let lambda_http::request::RequestContext::ApiGatewayV2(context) = context else {
        return reply(400, json!({"title": "not an HTTP API request"}));
    };
    let claims = context
        .authorizer
        .as_ref()
        .and_then(|a| a.jwt.as_ref())
        .map(|jwt| jwt.claims.clone())
        .unwrap_or_default();
    let (Some(tenant), Some(user)) = (claims.get("custom:tenant"), claims.get("sub")) else {
        return reply(401, json!({"title": "no caller"}));
    };
    let ip = context.http.source_ip.clone().unwrap_or_default();
    let body: Value = match request.body() {
        Body::Text(text) => serde_json::from_str(text)?,
        Body::Binary(bytes) => serde_json::from_slice(bytes)?,
        _ => return reply(400, json!({"title": "no body"})),
    };
    let field = |name: &str| body.get(name).and_then(Value::as_str).unwrap_or_default();
    let (pk, sk, code, name) = (field("pk"), field("sk"), field("code"), field("name"));
    let Some((entity_type, pk_tenant)) = pk.split_once('#') else {
        return reply(400, json!({"title": "bad pk"}));
    };
    if pk_tenant != tenant || sk.is_empty() || sk.contains('@') {
        return reply(400, json!({"title": "bad pk or sk"}));
    }
    let id = format!("{pk}#{sk}");
    let head_key = format!("HEAD#{pk}@{sk}");
    let ttl_sk = format!("TTL#{}", entity_type.to_ascii_lowercase());

    // The TTL policy of the tenant, else of `common`: read once per minute and container, as
    // command-handler does.
    let cache_key = (tenant.to_string(), ttl_sk.clone());
    let ttl_days = match ttl_cache
        .lock()
        .ok()
        .and_then(|c| c.get(&cache_key).copied())
    {
        Some((read, days)) if read.elapsed() < TTL_POLICY_FOR => days,
        _ => {
            let days = ttl_policy(client, tables, tenant, &ttl_sk).await?;
            if let Ok(mut cache) = ttl_cache.lock() {
                cache.insert(cache_key, (Instant::now(), days));
            }
            days
        }
    };

    let now = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let attributes = body.get("attributes").cloned().unwrap_or(json!({}));
    let mut row = HashMap::from([
        ("pk".to_string(), s(pk)),
        ("sk".to_string(), s(&format!("{sk}@1"))),
        ("id".to_string(), s(&id)),
        ("code".to_string(), s(code)),
        ("name".to_string(), s(name)),
        ("type".to_string(), s(entity_type)),
        ("entity".to_string(), s(&entity_type.to_ascii_lowercase())),
        ("tenantCode".to_string(), s(tenant)),
        ("version".to_string(), AttributeValue::N("1".into())),
        ("isDeleted".to_string(), AttributeValue::Bool(false)),
        (
            "attributes".to_string(),
            serde_dynamo::to_attribute_value(attributes)?,
        ),
        ("createdAt".to_string(), s(&now)),
        ("updatedAt".to_string(), s(&now)),
        ("createdBy".to_string(), s(user)),
        ("updatedBy".to_string(), s(user)),
        ("createdIp".to_string(), s(&ip)),
        ("updatedIp".to_string(), s(&ip)),
        (
            "requestId".to_string(),
            s(&context.request_id.clone().unwrap_or_default()),
        ),
        ("source".to_string(), s("POST /commands")),
    ]);
    if let Some(days) = ttl_days {
        let expires = chrono::Utc::now().timestamp() + days * 86_400;
        row.insert("ttl".to_string(), AttributeValue::N(expires.to_string()));
    }
    let put_row = Put::builder()
        .table_name(&tables.command)
        .set_item(Some(row))
        .condition_expression("attribute_not_exists(pk)")
        .build()?;
    let put_head = Put::builder()
        .table_name(&tables.idempotency)
        .item("pk", s(&head_key))
        .item("latest", AttributeValue::N("1".into()))
        .condition_expression("attribute_not_exists(pk)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()?;
    let written = client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put_row).build())
        .transact_items(TransactWriteItem::builder().put(put_head).build())
        .send()
        .await;
    if let Err(error) = written {
        let current = error
            .as_service_error()
            .and_then(|e| match e {
                TransactWriteItemsError::TransactionCanceledException(cancelled) => Some(cancelled),
                _ => None,
            })
            .and_then(|cancelled| cancelled.cancellation_reasons().get(1))
            .and_then(|reason| reason.item())
            .and_then(|head| head.get("latest"))
            .and_then(|latest| latest.as_n().ok())
            .and_then(|n| n.parse::<i64>().ok());
        return reply(
            409,
            json!({"title": "already exists", "currentVersion": current}),
        );
    }
    reply(
        202,
        json!({"id": id, "pk": pk, "sk": format!("{sk}@1"), "version": 1}),
    )
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let tables = Tables {
        command: var("COMMAND_TABLE")?,
        data: var("DATA_TABLE")?,
        idempotency: var("IDEMPOTENCY_TABLE")?,
    };
    let client = dynamodb_client()?;
    let ttl_cache = TtlCache::default();
    let (client, tables, ttl_cache) = (&client, &tables, &ttl_cache);
    lambda_http::run(service_fn(move |request: Request| async move {
        create(client, tables, ttl_cache, request).await
    }))
    .await
}
