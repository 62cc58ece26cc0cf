//! The routes' database user `cqrs_routes`, as it is in AWS: a login user without a password (it
//! signs in with an IAM token through RDS Proxy), made by the schema's DDL, run by a migrating user
//! that is not a superuser (Aurora's master user: `CREATEROLE`, owner of the database), on
//! PostgreSQL 15 (Debian's server) and 17 (the version the template deploys, from npm:
//! [`cqrs_local_stack::postgres_npm`]). It may `SET ROLE cqrs_reader` ([`cqrs_sql::read::as_tenant`])
//! and do nothing else: it reads a tenant's rows through that role and only that tenant's; without
//! the role it reads no table; it writes nothing; it never reads sql-sync's tables
//! (`cqrs_parked`, `cqrs_schema_history`). The DDL runs again and from several sessions at once
//! without error (sql-sync runs it at every cold start, not under the migration lock), and grants
//! `rds_iam` to both users where that role exists (RDS), nothing where it does not. The tests sign
//! in as `cqrs_routes` through the throwaway cluster's trust authentication (no password is ever
//! set). One throwaway cluster per server version, stopped when the test ends, also when it fails.

mod common;

use std::sync::Arc;

use common::{MODEL, connect, loan, message, tenant_rows};
use cqrs_local_stack::{
    postgres::{Install, Throwaway},
    postgres_npm,
};
use cqrs_model::Model;
use cqrs_sql::{
    migrate,
    schema::{Schema, parked_table_ddl},
    write::apply,
};
use tokio_postgres::Client;

/// The routes' user, spelled out: the test must not take the name from the code it tests.
const ROUTES: &str = "cqrs_routes";

/// What sql-sync runs at every cold start, after the migrations: the roles' DDL.
fn cold_start_ddl() -> String {
    cqrs_sql::schema::access_ddl()
}

/// `statement` run by `client` in a transaction rolled back after it (in the reader role and a
/// tenant when `as_reader`): PostgreSQL's message when it fails.
async fn attempt(client: &mut Client, as_reader: bool, statement: &str) -> Result<(), String> {
    let transaction = if as_reader {
        cqrs_sql::read::as_tenant(client, "t1")
            .await
            .map_err(|e| format!("as_tenant: {}", message(&e)))?
    } else {
        client.transaction().await.map_err(|e| message(&e))?
    };
    let result = transaction
        .batch_execute(statement)
        .await
        .map_err(|e| message(&e));
    let _ = transaction.rollback().await;
    result
}

async fn version(client: &Client) -> i32 {
    client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .unwrap()
        .get(0)
}

/// The direct grants of `role` to `member`: `(admin, inherit, set)` on 16+, `(admin, -, -)` on 15
/// (its rows have no such options: inheritance is the member's `rolinherit` there).
async fn grant_of(admin: &Client, role: &str, member: &str) -> Option<(bool, bool, bool)> {
    let modern = version(admin).await >= 160000;
    let sql = if modern {
        "SELECT m.admin_option, m.inherit_option, m.set_option FROM pg_auth_members m \
         WHERE m.roleid = $1::text::regrole AND m.member = $2::text::regrole"
    } else {
        "SELECT m.admin_option, false, false FROM pg_auth_members m \
         WHERE m.roleid = $1::text::regrole AND m.member = $2::text::regrole"
    };
    admin
        .query_opt(sql, &[&role, &member])
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
}

/// The cluster as Aurora has it: a master user with `CREATEROLE` (not a superuser) owning the
/// database `database`, the model's first migration and sql-sync's table applied by it, two
/// tenants' loans written, and the roles' DDL of sql-sync's cold start run by it. Returns the
/// master's connection.
async fn migrated_by_the_master(pg: &Throwaway, database: &str) -> Client {
    let admin = connect(pg, "postgres", "postgres").await.unwrap();
    for statement in [
        "DO $$ BEGIN CREATE ROLE master LOGIN CREATEROLE; \
         EXCEPTION WHEN duplicate_object THEN NULL; END $$"
            .to_string(),
        format!("CREATE DATABASE {database} OWNER master"),
    ] {
        admin.batch_execute(&statement).await.unwrap();
    }
    let mut master = connect(pg, "master", database).await.unwrap();
    let model = Model::parse(MODEL).unwrap();
    let sql = migrate::plan(None, &Schema::of(&model)).unwrap().unwrap();
    let options = migrate::Options {
        tables: vec![(
            cqrs_sql::schema::PARKED_TABLE.to_string(),
            parked_table_ddl(),
        )],
        ..Default::default()
    };
    migrate::apply_with(&mut master, &[(1, "V1__model.sql".into(), sql)], &options)
        .await
        .unwrap();
    apply(
        &mut master,
        &[loan(&model, "t1", "L1"), loan(&model, "t2", "L2")],
    )
    .await
    .unwrap();
    master
        .batch_execute(&cold_start_ddl())
        .await
        .expect("the roles' DDL runs as the master");
    master
}

/// What `cqrs_routes` may and may not do in a database the master migrated.
async fn the_routes_user_reads_a_tenant_through_the_reader_role_and_nothing_else(
    pg: &Throwaway,
    database: &str,
) {
    let admin = connect(pg, "postgres", "postgres").await.unwrap();
    let server = version(&admin).await;
    let mut routes = connect(pg, ROUTES, database)
        .await
        .unwrap_or_else(|e| panic!("{ROUTES} signs in (server_version_num {server}): {e}"));
    let superuser: bool = admin
        .query_one(
            "SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls FROM pg_roles \
             WHERE rolname = $1",
            &[&ROUTES],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!superuser, "{ROUTES} has no attribute but LOGIN");

    // Through the reader role: one tenant's rows, and only that tenant's.
    assert_eq!(
        tenant_rows(&mut routes, "t1").await,
        Ok(vec!["L1".to_string()]),
        "{ROUTES} reads as tenant t1 (server_version_num {server})"
    );
    assert_eq!(
        tenant_rows(&mut routes, "t2").await,
        Ok(vec!["L2".to_string()])
    );
    assert_eq!(tenant_rows(&mut routes, "t3").await, Ok(vec![]));

    // Without the role: no table at all, even with a tenant set.
    let denied = "permission denied for table";
    for (as_reader, statement) in [
        (false, r#"SELECT * FROM "loan""#),
        (
            false,
            r#"SELECT set_config('cqrs.tenant', 't1', true); SELECT * FROM "loan""#,
        ),
        (false, r#"SELECT * FROM "cqrs_items""#),
        (false, r#"SELECT * FROM "cqrs_removed""#),
        (false, r#"SELECT * FROM "cqrs_parked""#),
        (false, r#"SELECT * FROM "cqrs_schema_history""#),
        (true, r#"SELECT * FROM "cqrs_parked""#),
        (true, r#"SELECT * FROM "cqrs_schema_history""#),
        (true, r#"SELECT * FROM "cqrs_removed""#),
        // No write, with or without the role.
        (
            false,
            r#"INSERT INTO "loan" ("pk", "sk", "id", "tenant_code", "item_type", "version", "loanId") VALUES ('LOAN#t1', 'L9', 'x', 't1', 'LOAN', 1, 'L9')"#,
        ),
        (
            true,
            r#"INSERT INTO "loan" ("pk", "sk", "id", "tenant_code", "item_type", "version", "loanId") VALUES ('LOAN#t1', 'L9', 'x', 't1', 'LOAN', 1, 'L9')"#,
        ),
        (true, r#"UPDATE "loan" SET "version" = 2"#),
        (true, r#"DELETE FROM "loan""#),
        (false, r#"DELETE FROM "loan""#),
        (true, r#"DELETE FROM "cqrs_parked""#),
    ] {
        let result = attempt(&mut routes, as_reader, statement).await;
        assert!(
            result.as_ref().is_err_and(|e| e.contains(denied)),
            "{ROUTES} (reader role: {as_reader}) {statement}: expected {denied:?}, got {result:?} \
             (server_version_num {server})"
        );
    }
    // Nothing new in the schema, no other role.
    for (as_reader, statement, expected) in [
        (
            false,
            "CREATE TABLE mine (a int)",
            "permission denied for schema public",
        ),
        (
            true,
            "CREATE TABLE mine (a int)",
            "permission denied for schema public",
        ),
        (
            false,
            "SET ROLE master",
            "permission denied to set role \"master\"",
        ),
        (
            true,
            "SET ROLE master",
            "permission denied to set role \"master\"",
        ),
        (
            false,
            "CREATE ROLE other",
            "permission denied to create role",
        ),
    ] {
        let result = attempt(&mut routes, as_reader, statement).await;
        assert!(
            result.as_ref().is_err_and(|e| e.contains(expected)),
            "{ROUTES} (reader role: {as_reader}) {statement}: expected {expected:?}, got {result:?} \
             (server_version_num {server})"
        );
    }

    // The grant itself: SET only (16+), or a membership whose privileges it does not inherit (15).
    let grant = grant_of(&admin, "cqrs_reader", ROUTES).await;
    if server >= 160000 {
        assert_eq!(
            grant,
            Some((false, false, true)),
            "cqrs_reader to {ROUTES}: (admin, inherit, set)"
        );
    } else {
        assert!(grant.is_some(), "{ROUTES} is a member of cqrs_reader");
        let inherits: bool = admin
            .query_one(
                "SELECT rolinherit FROM pg_roles WHERE rolname = $1",
                &[&ROUTES],
            )
            .await
            .unwrap()
            .get(0);
        assert!(!inherits, "{ROUTES} is NOINHERIT on 15");
    }
}

/// Without a role `rds_iam` (not RDS): nothing granted, no error. With one (made by a superuser, as
/// RDS makes it; the master administers it through `rds_superuser`, as on RDS): both users get it,
/// directly, once, however often the DDL runs.
async fn rds_iam_is_granted_where_it_exists(pg: &Throwaway, master: &Client) {
    let admin = connect(pg, "postgres", "postgres").await.unwrap();
    let exists: bool = admin
        .query_one(
            "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!exists, "no rds_iam yet");
    master.batch_execute(&cold_start_ddl()).await.unwrap();

    admin
        .batch_execute(
            "CREATE ROLE rds_iam NOLOGIN; CREATE ROLE rds_superuser NOLOGIN; \
             GRANT rds_iam TO rds_superuser WITH ADMIN OPTION; GRANT rds_superuser TO master;",
        )
        .await
        .unwrap();
    for _ in 0..2 {
        master
            .batch_execute(&cold_start_ddl())
            .await
            .expect("the DDL runs again, rds_iam there");
    }
    for member in [ROUTES, "master"] {
        assert!(
            grant_of(&admin, "rds_iam", member).await.is_some(),
            "rds_iam is granted to {member} directly"
        );
    }
    let rows: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_auth_members WHERE roleid = 'rds_iam'::regrole",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 3, "rds_superuser, {ROUTES} and master, once each");

    // A user that may neither create roles nor grant rds_iam runs it (a service whose sql-sync
    // user lacks CREATEROLE): warnings, not an error, and nothing granted to it.
    master
        .batch_execute("CREATE ROLE other LOGIN")
        .await
        .unwrap();
    let database: String = master
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap()
        .get(0);
    let other = connect(pg, "other", &database).await.unwrap();
    other
        .batch_execute(&cold_start_ddl())
        .await
        .expect("a user that may not grant is warned, not failed");
    assert_eq!(grant_of(&admin, "rds_iam", "other").await, None);
}

/// The user gone (a database migrated before it existed): sessions of the master running the
/// roles' DDL at once (several sql-sync cold starts after a deploy) all succeed, and the user is
/// back, granted the reader role.
async fn the_ddl_runs_from_several_sessions_at_once(pg: &Throwaway, database: &str) {
    let admin = connect(pg, "postgres", "postgres").await.unwrap();
    for round in 0..6 {
        admin
            .batch_execute(&format!("DROP ROLE IF EXISTS {ROUTES}"))
            .await
            .unwrap();
        let mut sessions = Vec::new();
        for _ in 0..4 {
            sessions.push(connect(pg, "master", database).await.unwrap());
        }
        let barrier = Arc::new(tokio::sync::Barrier::new(sessions.len()));
        let runs: Vec<_> = sessions
            .into_iter()
            .map(|session| {
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    session
                        .batch_execute(&cold_start_ddl())
                        .await
                        .map_err(|e| message(&e))
                })
            })
            .collect();
        for run in runs {
            let result = run.await.unwrap();
            assert!(result.is_ok(), "round {round}: {result:?}");
        }
        assert!(
            grant_of(&admin, "cqrs_reader", ROUTES).await.is_some(),
            "round {round}: {ROUTES} is back, granted cqrs_reader"
        );
    }
}

async fn the_whole_story(pg: &Throwaway) -> i32 {
    let master = migrated_by_the_master(pg, "app").await;
    let superuser: bool = master
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!superuser, "the migrating user must not be a superuser");
    the_routes_user_reads_a_tenant_through_the_reader_role_and_nothing_else(pg, "app").await;
    rds_iam_is_granted_where_it_exists(pg, &master).await;
    the_ddl_runs_from_several_sessions_at_once(pg, "app").await;
    // After all that, still the same rights.
    the_routes_user_reads_a_tenant_through_the_reader_role_and_nothing_else(pg, "app").await;
    version(&master).await
}

#[tokio::test]
async fn on_postgresql_15_the_routes_user_reads_as_a_tenant_and_nothing_else() {
    let pg = Throwaway::start("cqrs-sql-routes-15").expect("a cluster of Debian's server starts");
    let version = the_whole_story(&pg).await;
    assert!((150000..160000).contains(&version), "{version}");
}

#[tokio::test]
async fn on_postgresql_17_the_routes_user_reads_as_a_tenant_and_nothing_else() {
    let local = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.local");
    let install: Install = postgres_npm::ensure(local.as_ref(), postgres_npm::VERSION_17)
        .expect("PostgreSQL 17 installs from npm");
    let pg = Throwaway::start_with("cqrs-sql-routes-17", &install).expect("a 17 cluster starts");
    let version = the_whole_story(&pg).await;
    assert!((170000..180000).contains(&version), "{version}");
}
