//! The SQL reader of a route function against a throwaway PostgreSQL cluster (Debian's server,
//! stopped when the test ends, also when it fails): a handler reads, as a login user granted only
//! the reader role, as the caller's tenant and sees that tenant's rows only; the container's one connection is opened on the first request, kept,
//! and opened again after it broke; a database that cannot be reached is a 503 problem document.

use cqrs_caller::CallerMode;
use cqrs_item::{Item, Value as ItemValue};
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_routes::sql::{Reader, Sql, failed};
use cqrs_routes::{Json, Problem, Routes, Tenant};
use cqrs_sql::connect::Database;
use cqrs_sql::schema::Schema;
use cqrs_sql::write::{Change, apply};
use cqrs_testkit::http_event::HttpApiRequest;
use serde_json::{Value, json};

const MODEL: &str = r#"
[entities.task]
pk = "TASK#{tenant}"
sk = "{taskId}"
id = "taskId"
attributes.taskId = { type = "string", max = 26 }
attributes.title = { type = "string", required = true, max = 200 }

[routes.task-titles]
reads = ["sql"]
[routes.task-titles.operations.taskTitles]
method = "GET"
path = "/tasks/titles"
problems = [401, 503]
"#;

async fn task_titles(Tenant(tenant): Tenant, mut sql: Sql) -> Result<Json<Value>, Problem> {
    let session = sql.as_tenant(&tenant).await?;
    // No tenant filter in the query: row-level security is the filter.
    let rows = session
        .query(r#"SELECT "title" FROM "task" ORDER BY "title""#, &[])
        .await
        .map_err(failed)?;
    session.commit().await.map_err(failed)?;
    let titles: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    Ok(Json(json!({"tenant": tenant, "titles": titles})))
}

fn task(model: &Model, tenant: &str, id: &str, title: &str) -> Change {
    let mut item = Item::example();
    item.pk = format!("TASK#{tenant}");
    item.sk = id.into();
    item.id = cqrs_keys::generate_id(&item.pk, id);
    item.tenant_code = tenant.into();
    item.item_type = "TASK".into();
    item.version = 1;
    item.attributes.clear();
    item.attributes.insert("taskId".into(), ItemValue::from(id));
    item.attributes
        .insert("title".into(), ItemValue::from(title));
    Change::Upsert(cqrs_sql::rows::row(model, &Schema::of(model), &item))
}

fn router(reader: Reader) -> cqrs_routes::axum::Router {
    Routes::new(MODEL, "task-titles")
        .unwrap()
        .on("taskTitles", task_titles)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .with_sql(reader)
        .into_router()
        .unwrap()
}

async fn titles(router: &cqrs_routes::axum::Router, tenant: &str) -> (u64, Value) {
    let request = HttpApiRequest::new("GET", "/tasks/titles").claims("u1", tenant, "");
    let answer = cqrs_routes::invoke(router, request.event(), "r-1")
        .await
        .unwrap();
    let body = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    (answer["statusCode"].as_u64().unwrap(), body)
}

#[tokio::test]
async fn a_route_reads_its_callers_tenants_rows_on_one_connection_opened_again_after_it_broke() {
    let pg = Throwaway::start("cqrs-routes-sql").expect("a throwaway cluster starts");
    let (mut admin, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let model = Model::parse(MODEL).unwrap();
    let ddl = cqrs_sql::migrate::plan(None, &Schema::of(&model))
        .unwrap()
        .unwrap();
    cqrs_sql::migrate::apply(&mut admin, &[(1, "V1__model.sql".into(), ddl)])
        .await
        .unwrap();
    apply(
        &mut admin,
        &[
            task(&model, "t1", "a", "charlie"),
            task(&model, "t1", "b", "alpha"),
            task(&model, "t2", "c", "delta"),
        ],
    )
    .await
    .unwrap();

    // The route reads as a login user of its own that may only take the reader role, as
    // `cqrs_routes` does in AWS: not a superuser, not the migrating user.
    admin
        .batch_execute(r#"CREATE ROLE route_reader LOGIN; GRANT "cqrs_reader" TO route_reader;"#)
        .await
        .unwrap();
    let url = pg
        .url()
        .replacen("postgres://postgres@", "postgres://route_reader@", 1);
    let reader = Reader::new(Database::Url(url)).unwrap();
    let router = router(reader.clone());
    assert_eq!(reader.connections(), 0, "nothing opened before a request");

    let (status, body) = titles(&router, "t1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"tenant": "t1", "titles": ["alpha", "charlie"]})
    );
    let (status, body) = titles(&router, "t2").await;
    assert_eq!(
        (status, body),
        (200, json!({"tenant": "t2", "titles": ["delta"]}))
    );
    let (_, body) = titles(&router, "t3").await;
    assert_eq!(body["titles"], json!([]));
    assert_eq!(reader.connections(), 1, "one connection for every request");

    // The server ends the connection (a failover, an idle timeout): the next request opens another.
    admin
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE pid <> pg_backend_pid() AND datname = current_database()",
        )
        .await
        .unwrap();
    let mut answered = None;
    for _ in 0..5 {
        // A request that finds the connection broken before the client noticed (its connection
        // task has not yet seen the server's goodbye: on this test's one-thread runtime, until
        // the test yields) is a 503; the first after the client noticed reads again.
        let (status, body) = titles(&router, "t1").await;
        if status == 200 {
            answered = Some(body);
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["status"], 503);
        tokio::task::yield_now().await;
    }
    assert_eq!(
        answered,
        Some(json!({"tenant": "t1", "titles": ["alpha", "charlie"]}))
    );
    assert_eq!(reader.connections(), 2, "opened again once");

    // A database that cannot be reached: a 503 problem document, and nothing kept.
    let port = pg.instance().port;
    drop(admin);
    drop(pg);
    let gone = Reader::new(Database::Url(format!(
        "postgres://postgres@127.0.0.1:{port}/postgres"
    )))
    .unwrap();
    let (status, body) = titles(&self::router(gone.clone()), "t1").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["type"], "urn:cqrs:problem:store-unavailable", "{body}");
    assert_eq!(gone.connections(), 0);
}

/// Before sql-sync's first batch, the database holds neither the read model's tables nor its
/// reader role (`cqrs make dev-up`, then the report asked at once): the route is unavailable for a
/// moment (503, try again), not broken (500).
#[tokio::test]
async fn a_database_sql_sync_has_not_migrated_yet_is_a_503_not_a_500() {
    let pg = Throwaway::start("cqrs-routes-unmigrated").expect("a throwaway cluster starts");
    let reader = Reader::new(Database::Url(pg.url())).unwrap();
    let (status, body) = titles(&router(reader), "t1").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["type"], "urn:cqrs:problem:store-unavailable", "{body}");
}
