//! Sequences through the real command handler against DynamoDB Local: 50 concurrent callers get 50
//! distinct numbers without a gap; rotation, format, fiscal year and time zone follow the tenant's
//! master data and settings (with the `common` fallback); a tenant can neither bump nor see
//! another tenant's counter; bad requests and bad formats are refused before a number is drawn; a
//! create can draw a number into an attribute, and a failed create leaves a gap.

mod common;

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{Answer, Caller as _, Req, T1, T2, Who};
use cqrs_caller::CallerMode;
use cqrs_item::Item;
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use futures::future::join_all;
use serde_json::{Value, json};

const CALLERS: usize = 50;

/// The command handler on fresh tables plus a sequences table made from the template.
struct Seq {
    tables: TestTables,
    sequences: String,
    app: cqrs_command_handler::App,
}

impl Seq {
    async fn new() -> Self {
        let tables = cqrs_testkit::fresh_tables().await;
        let sequences = format!("{}-sequences", tables.command.trim_end_matches("-command"));
        let specs = cqrs_testkit::template::workspace_tables().expect("template.yaml parses");
        let spec = cqrs_testkit::template::find(&specs, "SequencesTable")
            .expect("SequencesTable in template.yaml");
        cqrs_testkit::tables::create_table(&tables.client, spec, &sequences)
            .await
            .expect("sequences table");
        let store = Store::new(
            tables.client.clone(),
            Tables::new(
                &tables.command,
                &tables.data,
                &tables.history,
                &tables.idempotency,
            )
            .with_sequences(&sequences),
        );
        let app =
            cqrs_command_handler::App::new(store, CallerMode::Jwt, cqrs_model::Model::example());
        Seq {
            tables,
            sequences,
            app,
        }
    }

    async fn send(&self, request: Req) -> Answer {
        Answer::of(cqrs_command_handler::handle(&self.app, request.request()).await)
    }

    async fn next(&self, who: Who, type_code: &str, body: Value) -> Answer {
        let request = Req::new("POST", &format!("/sequences/{type_code}/next"))
            .header("content-type", "application/json")
            .body(body.to_string().as_bytes())
            .claims_of(who);
        self.send(request).await
    }

    /// A master item as data-sync would have projected it into the data table.
    async fn put_master(&self, tenant: &str, sk: &str, attributes: Value) {
        let mut item = Item::example();
        item.pk = cqrs_keys::master::tenant_master_pk(tenant).expect("a master key");
        item.sk = sk.to_string();
        item.id = cqrs_keys::generate_id(&item.pk, sk);
        item.tenant_code = tenant.to_string();
        item.item_type = "MASTER".into();
        item.attributes = cqrs_item::map_from_json(attributes).expect("attributes");
        self.tables
            .client
            .put_item()
            .table_name(&self.tables.data)
            .set_item(Some(item.to_attributes().expect("item")))
            .send()
            .await
            .expect("put master item");
    }

    /// The counter of `pk` / `sk`, read straight from the table.
    async fn counter(&self, pk: &str, sk: &str) -> Option<i64> {
        let item = self
            .tables
            .client
            .get_item()
            .table_name(&self.sequences)
            .key("pk", AttributeValue::S(pk.into()))
            .key("sk", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("get counter")
            .item?;
        assert!(!item.contains_key("ttl"), "a sequence row never expires");
        match item.get("seq") {
            Some(AttributeValue::N(n)) => n.parse().ok(),
            other => panic!("seq is {other:?}"),
        }
    }
}

#[tokio::test]
async fn fifty_concurrent_callers_get_fifty_distinct_numbers_without_a_gap() {
    let seq = Seq::new().await;
    let answers = join_all((0..CALLERS).map(|_| seq.next(T1, "invoice", json!({})))).await;
    let mut numbers = Vec::new();
    for answer in &answers {
        assert_eq!(answer.status, 200, "{}", answer.text);
        numbers.push(answer.body["no"].as_i64().expect("no"));
        assert_eq!(answer.body["sk"], "invoice#none");
        assert_eq!(answer.body["formattedNo"], answer.body["no"].to_string());
    }
    let distinct: BTreeSet<i64> = numbers.iter().copied().collect();
    let expected: BTreeSet<i64> = (1..=CALLERS as i64).collect();
    let gaps = expected.difference(&distinct).count();
    assert_eq!(distinct, expected, "every number once, none skipped");
    assert_eq!(
        seq.counter("SEQ#t1", "invoice#none").await,
        Some(CALLERS as i64)
    );
    println!(
        "sequences: {CALLERS} concurrent callers, {} distinct numbers, {gaps} gaps, {} repeats",
        distinct.len(),
        numbers.len() - distinct.len()
    );
}

#[tokio::test]
async fn rotation_format_fiscal_year_and_time_zone_follow_master_data_and_settings() {
    let seq = Seq::new().await;
    seq.put_master(
        "t1",
        "MASTER_DATA#invoice",
        json!({"format": "INV-%%fiscal_year%%-%%code1%%-%%month#:0>2%%-%%no#:0>6%%", "startMonth": 10}),
    )
    .await;
    seq.put_master(
        "t1",
        "SETTING#sequence#timeZone",
        json!({"value": "+09:00"}),
    )
    .await;
    let draw = |date: &str| json!({"rotateBy": "fiscal_yearly", "params": {"code1": "A"}, "date": date, "prefix": "<", "postfix": ">"});
    // 2026-09-30T20:00Z is October 1st in Tokyo: the fiscal year that starts in October 2026.
    let a = seq.next(T1, "invoice", draw("2026-09-30T20:00:00Z")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.body["sk"], "invoice#A#2026");
    assert_eq!(a.body["fiscalYear"], 74);
    assert_eq!(a.body["formattedNo"], "<INV-74-A-10-000001>");
    assert_eq!(a.body["issuedAt"], "2026-10-01T05:00:00.000+09:00");
    assert_eq!(a.body["formatSource"], "tenant");
    assert_eq!(a.body["timeZone"], "+09:00");
    // Ten hours earlier it is still September 30th in Tokyo: the previous fiscal year, its own
    // counter.
    let b = seq.next(T1, "invoice", draw("2026-09-30T10:00:00Z")).await;
    assert_eq!(b.body["sk"], "invoice#A#2025", "{}", b.text);
    assert_eq!(b.body["formattedNo"], "<INV-73-A-09-000001>");
    let c = seq.next(T1, "invoice", draw("2027-09-30")).await;
    assert_eq!(c.body["sk"], "invoice#A#2026", "{}", c.text);
    assert_eq!(c.body["no"], 2);
    // The other rotations.
    for (rotate, date, sk) in [
        ("none", "2026-01-02", "invoice#none"),
        ("yearly", "2026-01-02", "invoice#2026"),
        ("monthly", "2026-01-02", "invoice#202601"),
        ("daily", "2026-01-02", "invoice#20260102"),
    ] {
        let body = json!({"rotateBy": rotate, "date": date});
        // The tenant's format needs code1: without it the draw is refused, nothing drawn.
        let refused = seq.next(T1, "invoice", body.clone()).await;
        assert_eq!(refused.status, 400, "{}", refused.text);
        assert_eq!(seq.counter("SEQ#t1", sk).await, None);
        let answer = seq.next(T1, "plain", body).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(
            answer.body["sk"],
            format!("plain#{}", sk.trim_start_matches("invoice#"))
        );
        assert_eq!(answer.body["no"], 1);
        assert_eq!(answer.body["formatSource"], "default");
    }
    // The common tenant's format applies to a tenant without its own.
    seq.put_master(
        "common",
        "MASTER_DATA#order",
        json!({"format": "ORD%%no#:0>4%%"}),
    )
    .await;
    let t2 = seq.next(T2, "order", json!({})).await;
    assert_eq!(t2.status, 200, "{}", t2.text);
    assert_eq!(t2.body["formattedNo"], "ORD0001");
    assert_eq!(t2.body["formatSource"], "common");
    assert_eq!(t2.body["timeZone"], "UTC");
    println!(
        "sequences: 4 rotations and fiscal years by startMonth in +09:00, formats from tenant, common and default"
    );
}

#[tokio::test]
async fn a_tenant_cannot_bump_another_tenants_sequence_and_bad_input_draws_nothing() {
    let seq = Seq::new().await;
    assert_eq!(seq.next(T1, "invoice", json!({})).await.status, 200);
    let mut refused = 0;
    // Another tenant's sequence, asked for by name.
    let attack = seq.next(T2, "invoice", json!({"tenantCode": "t1"})).await;
    assert_eq!(attack.status, 403, "{}", attack.text);
    refused += 1;
    // A tenant code that would add a key segment.
    let attack = seq
        .next(T2, "invoice", json!({"tenantCode": "t2#t1"}))
        .await;
    assert_eq!(attack.status, 400, "{}", attack.text);
    refused += 1;
    // A type code that would reach into another key.
    let attack = seq.next(T2, "invoice%23none", json!({})).await;
    assert_eq!(attack.status, 400, "{}", attack.text);
    refused += 1;
    assert_eq!(seq.counter("SEQ#t1", "invoice#none").await, Some(1));
    // t2's own sequence of the same name is its own counter.
    let own = seq.next(T2, "invoice", json!({})).await;
    assert_eq!((own.status, own.body["no"].as_i64()), (200, Some(1)));
    assert_eq!(own.body["pk"], "SEQ#t2");

    // Bad input: a 400 naming the field, nothing drawn.
    seq.put_master("t1", "MASTER_DATA#broken", json!({"format": "%%colour%%"}))
        .await;
    for (type_code, body, field) in [
        ("invoice", json!({"extra": 1}), "extra"),
        ("invoice", json!({"rotateBy": "weekly"}), "rotateBy"),
        ("invoice", json!({"params": {"code2": "b"}}), "params.code2"),
        ("invoice", json!({"date": "31/12/2026"}), "date"),
        ("broken", json!({}), "format"),
    ] {
        let answer = seq.next(T1, type_code, body.clone()).await;
        assert!(answer.problem_fault().is_none(), "{body}: {}", answer.text);
        assert_eq!(answer.status, 400, "{body}: {}", answer.text);
        assert_eq!(answer.body["field"], field, "{body}: {}", answer.text);
        refused += 1;
    }
    assert_eq!(seq.counter("SEQ#t1", "invoice#none").await, Some(1));
    assert_eq!(seq.counter("SEQ#t1", "broken#none").await, None);
    // No caller at all.
    let anonymous = seq.send(Req::new("POST", "/sequences/invoice/next")).await;
    assert_eq!(anonymous.status, 401);
    refused += 1;
    println!("sequences: {refused} cross-tenant and bad draws refused, 0 numbers drawn by them");
}

#[tokio::test]
async fn a_create_draws_a_number_into_an_attribute_and_a_failed_create_leaves_a_gap() {
    let seq = Seq::new().await;
    seq.put_master(
        "t1",
        "MASTER_DATA#invoice",
        json!({"format": "INV-%%no#:0>5%%"}),
    )
    .await;
    let create = |sk: &str| {
        Req::command(
            "POST",
            &json!({"pk": "INVOICE#t1", "sk": sk, "version": 0, "attributes": {"amount": 10},
                    "sequence": {"attribute": "invoiceNo", "typeCode": "invoice"}})
            .to_string(),
        )
        .claims_of(T1)
    };
    let first = seq.send(create("I1")).await;
    assert_eq!(first.status, 202, "{}", first.text);
    let store = common::store(&seq.tables);
    let row = store
        .get_command("INVOICE#t1", "I1", 1)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(row.attributes["invoiceNo"], "INV-00001");
    assert_eq!(row.seq, Some(1));
    // The same create again fails (the item exists): its number is drawn and lost.
    let again = seq.send(create("I1")).await;
    assert_eq!(again.status, 409, "{}", again.text);
    let second = seq.send(create("I2")).await;
    assert_eq!(second.status, 202, "{}", second.text);
    let row = store
        .get_command("INVOICE#t1", "I2", 1)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        row.attributes["invoiceNo"], "INV-00003",
        "number 2 went to the failed create"
    );
    // Only a create draws; the attribute is not given by the client.
    let patch = Req::command(
        "PATCH",
        &json!({"pk": "INVOICE#t1", "sk": "I2", "version": 1,
                "sequence": {"attribute": "invoiceNo", "typeCode": "invoice"}})
        .to_string(),
    )
    .claims_of(T1);
    let refused = seq.send(patch).await;
    assert_eq!(
        (refused.status, refused.body["field"].as_str()),
        (400, Some("sequence"))
    );
    assert_eq!(seq.counter("SEQ#t1", "invoice#none").await, Some(3));
    println!("sequences: 2 creates numbered INV-00001 and INV-00003, 1 failed create left 1 gap");
}

/// A retried create with the same `Idempotency-Key` answers the first result and never draws a
/// second number: the record is read before the draw (the transaction's failed condition, which
/// answers every other retry, comes after it).
#[tokio::test]
async fn a_retried_create_with_the_same_idempotency_key_draws_no_second_number() {
    let seq = Seq::new().await;
    let create = || {
        Req::command(
            "POST",
            &json!({"pk": "INVOICE#t1", "sk": "R1", "version": 0, "attributes": {"amount": 10},
                    "sequence": {"attribute": "invoiceNo", "typeCode": "invoice"}})
            .to_string(),
        )
        .header("idempotency-key", "invoice-r1")
        .claims_of(T1)
    };
    let first = seq.send(create()).await;
    assert_eq!(first.status, 202, "{}", first.text);
    for _ in 0..3 {
        let retry = seq.send(create()).await;
        assert_eq!(retry.status, 202, "{}", retry.text);
        assert_eq!(retry.body, first.body, "the first result");
    }
    assert_eq!(
        seq.counter("SEQ#t1", "invoice#none").await,
        Some(1),
        "one number drawn for four requests"
    );
    println!("sequences: a create retried 3 times with its Idempotency-Key drew 1 number");
}
