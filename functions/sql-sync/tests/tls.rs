//! sql-sync's TLS against a real PostgreSQL (a throwaway cluster of the test's own, TLS turned on
//! with a certificate authority made for the test by `openssl`): a connection that requires TLS
//! gets it, verified against the roots it is given; the same server is refused when its
//! certificate does not chain to those roots (the Amazon Trust Services roots sql-sync trusts in
//! AWS) or does not name the host connected to; and the default `sslmode=prefer` of a connection
//! string uses TLS when the server offers it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cqrs_local_stack::postgres::Throwaway;
use cqrs_sql_sync::database::{Database, tls};
use tokio_postgres::NoTls;

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (Debian's openssl package) runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A certificate authority, and a server certificate it signed for `localhost` only.
fn certificates(dir: &Path) -> Vec<u8> {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=cqrs test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
    std::fs::read(dir.join("ca.crt")).unwrap()
}

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

    // TLS on, with the test's certificate: the key and certificate go into the data folder, owned
    // by the server's user (as root the server runs as `postgres`).
    let (admin, connection) = tokio_postgres::connect(&instance.url(), NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let data: String = admin
        .query_one("SHOW data_directory", &[])
        .await
        .unwrap()
        .get(0);
    let data = PathBuf::from(data);
    let (uid, gid) = {
        let meta = std::fs::metadata(&data).unwrap();
        (meta.uid(), meta.gid())
    };
    let work = tempdir();
    let ca = certificates(&work);
    for file in ["server.key", "server.crt"] {
        let target = data.join(format!("test-{file}"));
        std::fs::copy(work.join(file), &target).unwrap();
        std::os::unix::fs::chown(&target, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    }
    // One statement at a time: ALTER SYSTEM refuses a transaction block.
    for statement in [
        "ALTER SYSTEM SET ssl_cert_file = 'test-server.crt'",
        "ALTER SYSTEM SET ssl_key_file = 'test-server.key'",
        "ALTER SYSTEM SET ssl = on",
        "SELECT pg_reload_conf()",
    ] {
        admin.batch_execute(statement).await.unwrap();
    }
    let started = Instant::now();
    loop {
        let on: String = admin.query_one("SHOW ssl", &[]).await.unwrap().get(0);
        if on == "on" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the server did not turn TLS on"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

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

/// A fresh folder under the system's temporary folder.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "cqrs-sql-sync-tls-certs-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
