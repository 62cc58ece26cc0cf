//! The example service's own route, `GET /orders/summary`, against DynamoDB Local: its
//! declaration in model.toml, its handler by operation id, API Gateway events through
//! `lambda_http`. Each caller gets its own tenant's orders counted by status (soft-deleted ones and
//! order items left out, every page read), a 401 without a caller.

use cqrs_caller::CallerMode;
use cqrs_item::{Item, Value as ItemValue};
use cqrs_store::{Store, Tables};
use cqrs_testkit::http_event::HttpApiRequest;
use serde_json::{Value, json};

fn order(tenant: &str, id: &str, status: &str, total: Option<i64>) -> Item {
    let mut item = Item::example();
    item.pk = format!("ORDER#{tenant}");
    item.sk = format!("ORDER#{id}");
    item.id = cqrs_keys::generate_id(&item.pk, &item.sk);
    item.code = item.sk.clone();
    item.tenant_code = tenant.into();
    item.item_type = "ORDER".into();
    item.attributes.clear();
    item.attributes
        .insert("orderId".into(), ItemValue::from(id));
    item.attributes
        .insert("userId".into(), ItemValue::from("u1"));
    item.attributes
        .insert("status".into(), ItemValue::from(status));
    if let Some(total) = total {
        item.attributes
            .insert("totalCents".into(), ItemValue::from(total));
    }
    item
}

async fn summary(router: &cqrs_routes::axum::Router, tenant: Option<&str>) -> (u64, Value) {
    let request = HttpApiRequest::new("GET", "/orders/summary");
    let request = match tenant {
        Some(tenant) => request.claims("u1", tenant, ""),
        None => request,
    };
    let answer = cqrs_routes::invoke(router, request.event(), "r-1")
        .await
        .unwrap();
    let body = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    (answer["statusCode"].as_u64().unwrap(), body)
}

#[tokio::test]
async fn the_order_summary_counts_the_callers_tenants_orders_by_status() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
    );
    // t1: 1,005 orders (two pages of 1,000), one deleted, one without a total, and an order item
    // in the same partition; t2: one order.
    let mut items = Vec::new();
    for n in 0..1005 {
        let status = if n % 5 == 0 { "PENDING" } else { "PAID" };
        items.push(order("t1", &format!("o{n:04}"), status, Some(100)));
    }
    items.push(order("t1", "x-no-total", "SHIPPED", None));
    let mut deleted = order("t1", "x-deleted", "CANCELLED", Some(5));
    deleted.is_deleted = true;
    items.push(deleted);
    let mut line = order("t1", "o0001", "PAID", Some(7));
    line.sk = "ORDER_ITEM#o0001#001".into();
    line.item_type = "ORDER_ITEM".into();
    items.push(line);
    items.push(order("t2", "o1", "DELIVERED", Some(2500)));
    for chunk in items.chunks(50) {
        let writes = chunk.iter().map(|item| store.put_data_if_newer(item));
        for written in futures::future::join_all(writes).await {
            written.unwrap();
        }
    }

    let router = cqrs_routes::Routes::new(cqrs_example_shop::MODEL, "order-summary")
        .unwrap()
        .on("orderSummary", cqrs_example_shop::order_summary)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .with_store(store)
        .into_router()
        .unwrap();
    let (status, body) = summary(&router, Some("t1")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"orders": 1006,
               "byStatus": {"PENDING": 201, "PAID": 804, "SHIPPED": 1, "DELIVERED": 0, "CANCELLED": 0},
               "totalCents": 100500, "withoutTotal": 1})
    );
    let (status, body) = summary(&router, Some("t2")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["orders"].clone(), body["totalCents"].clone()),
        (json!(1), json!(2500))
    );
    let (_, body) = summary(&router, Some("t3")).await;
    assert_eq!(body["orders"], 0);
    let (status, body) = summary(&router, None).await;
    assert_eq!(
        (status, &body["type"]),
        (401, &json!("urn:cqrs:problem:unauthenticated"))
    );
}
