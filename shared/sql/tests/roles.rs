//! The reader role as it is in AWS, where the migrating user is not a superuser: on Aurora the
//! master user has `CREATEROLE` (and owns the database), so the role `cqrs_reader` the migrations
//! create must be usable by that user (`SET LOCAL ROLE` of [`cqrs_sql::read::as_tenant`]) and
//! grantable to a reader's own user, on PostgreSQL 15 (Debian's server) and 17 (the version the
//! template deploys, from npm: [`cqrs_local_stack::postgres_npm`]). Such a user cannot `SET` a role
//! it created without an explicit grant: on 15 it is not a member, on 16+ a member with `ADMIN`
//! only. A database migrated before the grant existed gets it when the grant runs again (as
//! sql-sync's cold start runs it). One throwaway cluster per server version, stopped when the test
//! ends, also when it fails.

mod common;

use common::{MODEL, connected, loan, tenant_rows};
use cqrs_local_stack::{
    postgres::{Install, Throwaway},
    postgres_npm,
};
use cqrs_model::Model;
use cqrs_sql::{
    migrate,
    schema::{Schema, reader_grant_ddl},
    write::apply,
};

/// As Aurora's master user (`CREATEROLE`, owner of the database, not a superuser): the model's
/// migrations, a write, then reads as each tenant, as itself and as a reader's own login user it
/// granted `cqrs_reader`. Returns the server's `server_version_num`.
async fn the_migrating_user_and_a_reader_read_as_a_tenant(pg: &Throwaway) -> i32 {
    let admin = connected(pg, "postgres", "postgres").await;
    for statement in [
        "CREATE ROLE master LOGIN CREATEROLE",
        "CREATE DATABASE app OWNER master",
    ] {
        admin.batch_execute(statement).await.unwrap();
    }
    let version: i32 = admin
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .unwrap()
        .get(0);

    let mut master = connected(pg, "master", "app").await;
    let superuser: bool = master
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!superuser, "the migrating user must not be a superuser");
    let model = Model::parse(MODEL).unwrap();
    let sql = migrate::plan(None, &Schema::of(&model)).unwrap().unwrap();
    let applied = migrate::apply(&mut master, &[(1, "V1__model.sql".into(), sql)])
        .await
        .unwrap();
    assert_eq!(applied, 1);
    apply(
        &mut master,
        &[loan(&model, "t1", "L1"), loan(&model, "t2", "L2")],
    )
    .await
    .unwrap();

    assert_eq!(
        tenant_rows(&mut master, "t1").await,
        Ok(vec!["L1".to_string()]),
        "the migrating user reads as tenant t1 (server_version_num {version})"
    );

    // A reader's own login user, granted the role by the migrating user (who administers it).
    master
        .batch_execute(r#"CREATE ROLE reader LOGIN; GRANT "cqrs_reader" TO reader;"#)
        .await
        .unwrap();
    let mut reader = connected(pg, "reader", "app").await;
    assert_eq!(
        tenant_rows(&mut reader, "t2").await,
        Ok(vec!["L2".to_string()]),
        "a reader's user reads as tenant t2 (server_version_num {version})"
    );

    // A user that may not grant the role (neither its creator nor a superuser): a warning, not an
    // error, so that sql-sync's cold start under such a user goes on.
    master
        .batch_execute("CREATE ROLE other LOGIN")
        .await
        .unwrap();
    let other = connected(pg, "other", "app").await;
    other
        .batch_execute(&reader_grant_ddl())
        .await
        .expect("a user that may not grant the role is warned");
    version
}

/// A database whose first migration predates the grant (the DDL of the release before it): the
/// master cannot read as a tenant until the grant runs again, as sql-sync's cold start runs it;
/// running it twice changes nothing.
async fn a_database_migrated_before_the_grant_gets_it_when_it_runs_again(pg: &Throwaway) {
    let admin = connected(pg, "postgres", "postgres").await;
    admin
        .batch_execute("CREATE DATABASE before OWNER master")
        .await
        .unwrap();
    let mut master = connected(pg, "master", "before").await;
    let model = Model::parse(MODEL).unwrap();
    let sql = migrate::plan(None, &Schema::of(&model)).unwrap().unwrap();
    assert!(sql.contains(&reader_grant_ddl()), "V1 carries the grant");
    let before = sql.replace(&reader_grant_ddl(), "");
    migrate::apply(&mut master, &[(1, "V1__model.sql".into(), before)])
        .await
        .unwrap();
    apply(&mut master, &[loan(&model, "t1", "L1")])
        .await
        .unwrap();
    // Already granted in the other database (roles are the cluster's): revoke it to be as before.
    master
        .batch_execute(r#"REVOKE "cqrs_reader" FROM master"#)
        .await
        .unwrap();
    assert_eq!(
        tenant_rows(&mut master, "t1").await,
        Err("as_tenant: permission denied to set role \"cqrs_reader\"".to_string())
    );
    for _ in 0..2 {
        master.batch_execute(&reader_grant_ddl()).await.unwrap();
    }
    assert_eq!(
        tenant_rows(&mut master, "t1").await,
        Ok(vec!["L1".to_string()])
    );
}

#[tokio::test]
async fn on_postgresql_15_a_createrole_user_migrates_and_reads_as_a_tenant() {
    let pg = Throwaway::start("cqrs-sql-roles-15").expect("a cluster of Debian's server starts");
    let version = the_migrating_user_and_a_reader_read_as_a_tenant(&pg).await;
    a_database_migrated_before_the_grant_gets_it_when_it_runs_again(&pg).await;
    assert!((150000..160000).contains(&version), "{version}");
}

#[tokio::test]
async fn on_postgresql_17_a_createrole_user_migrates_and_reads_as_a_tenant() {
    let local = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.local");
    let install: Install = postgres_npm::ensure(local.as_ref(), postgres_npm::VERSION_17)
        .expect("PostgreSQL 17 installs from npm");
    let pg = Throwaway::start_with("cqrs-sql-roles-17", &install).expect("a 17 cluster starts");
    let version = the_migrating_user_and_a_reader_read_as_a_tenant(&pg).await;
    a_database_migrated_before_the_grant_gets_it_when_it_runs_again(&pg).await;
    assert!((170000..180000).contains(&version), "{version}");
}
