//! sql-sync's TLS against a real PostgreSQL (a throwaway cluster of the test's own, TLS turned on
//! with a certificate authority made for the test by `openssl`): a connection that requires TLS
//! gets it, verified against the roots it is given; the same server is refused when its
//! certificate does not chain to those roots (the Amazon Trust Services roots sql-sync trusts in
//! AWS) or does not name the host connected to; and the default `sslmode=prefer` of a connection
//! string uses TLS when the server offers it.

use cqrs_local_stack::postgres::Throwaway;
use cqrs_sql_sync::database::{Database, tls};

/// Whether the connection `client` is on is encrypted, as the server sees it.
async fn encrypted(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_connection_gets_verified_tls_and_refuses_a_certificate_it_cannot_verify() {
    let pg = Throwaway::start("cqrs-sql-sync-tls").unwrap();
    let instance = pg.instance();
    let port = instance.port;

    // TLS on, with a certificate authority made for the test (the cluster takes unencrypted
    // connections too: `prefer` must choose TLS by itself).
    let certificates = pg.enable_tls("").await.unwrap();
    let ca = std::fs::read(certificates.join("ca.crt")).unwrap();

    let ours = tls(&ca).unwrap();
    let url = |host: &str, mode: &str| {
        Database::Url(format!(
            "postgres://postgres@{host}:{port}/postgres?sslmode={mode}&hostaddr=127.0.0.1"
        ))
    };

    // Required, and verified against the test's authority: encrypted.
    let client = url("localhost", "require").connect(&ours).await.unwrap();
    assert!(
        encrypted(&client).await,
        "sslmode=require connected in the clear"
    );

    // The default of a connection string (prefer) takes TLS when the server offers it.
    let client = url("localhost", "prefer").connect(&ours).await.unwrap();
    assert!(encrypted(&client).await, "sslmode=prefer did not use TLS");

    // A certificate that does not chain to the roots: refused (in AWS, sql-sync trusts Amazon
    // Trust Services alone).
    let amazon = tls(cqrs_store::client::AMAZON_ROOTS).unwrap();
    let refused = url("localhost", "require").connect(&amazon).await;
    let Err(error) = refused else {
        panic!("a certificate of an unknown issuer was accepted");
    };
    assert!(
        format!("{error:?}").contains("UnknownIssuer"),
        "refused for another reason: {error:?}"
    );

    // A certificate for another name: refused (it names localhost, the connection 127.0.0.1).
    let refused = url("127.0.0.1", "require").connect(&ours).await;
    let Err(error) = refused else {
        panic!("a certificate for another host was accepted");
    };
    assert!(
        format!("{error:?}").contains("NotValidForName"),
        "refused for another reason: {error:?}"
    );
}
