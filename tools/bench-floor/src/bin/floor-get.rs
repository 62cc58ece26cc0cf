//! `floor-get`: `GET /items/{pk}/{sk}` written by hand, the floor of query-handler's cold path.
//! It makes the DynamoDB call query-handler makes for an item that exists: one `GetItem` of the
//! data table. It checks that the caller's tenant owns the partition and answers the item as
//! JSON with its version as the entity tag.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use bench_floor::{dynamodb_client, var};
use lambda_http::{Body, Error, Request, RequestExt, Response, service_fn};
use serde_json::{Value, json};

fn reply(status: u16, body: Value) -> Result<Response<Body>, Error> {
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))?)
}

async fn get(client: &Client, data_table: &str, request: Request) -> Result<Response<Body>, Error> {
    let lambda_http::request::RequestContext::ApiGatewayV2(context) = request.request_context()
    else {
        return reply(400, json!({"title": "not an HTTP API request"}));
    };
    let tenant = context
        .authorizer
        .as_ref()
        .and_then(|a| a.jwt.as_ref())
        .and_then(|jwt| jwt.claims.get("custom:tenant").cloned());
    let params = request.path_parameters();
    let (Some(pk), Some(sk), Some(tenant)) = (params.first("pk"), params.first("sk"), tenant)
    else {
        return reply(400, json!({"title": "no pk, sk or tenant"}));
    };
    if pk.split_once('#').map(|(_, t)| t) != Some(tenant.as_str()) {
        return reply(403, json!({"title": "not your tenant"}));
    }
    let output = client
        .get_item()
        .table_name(data_table)
        .key("pk", AttributeValue::S(pk.to_string()))
        .key("sk", AttributeValue::S(sk.to_string()))
        .consistent_read(false)
        .send()
        .await?;
    let Some(item) = output.item else {
        return reply(404, json!({"title": "no such item"}));
    };
    let version = match item.get("version") {
        Some(AttributeValue::N(n)) => n.clone(),
        _ => "0".to_string(),
    };
    let body: Value = serde_dynamo::from_item(item)?;
    Ok(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("etag", format!("\"{version}\""))
        .body(Body::from(body.to_string()))?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let data_table = var("DATA_TABLE")?;
    let client = dynamodb_client()?;
    let (client, data_table) = (&client, data_table.as_str());
    lambda_http::run(service_fn(move |request: Request| async move {
        get(client, data_table, request).await
    }))
    .await
}
