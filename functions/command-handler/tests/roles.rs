//! Who may write an entity (`roles = { create, update, delete }` in `model.toml`): checked from
//! the request right after the tenant check, before any DynamoDB call (counted through the
//! recording client, [`cqrs_testkit::round_trips::CallLog`]); the one case the request cannot
//! show (`version: -1` creating or updating, a restore without `isDeleted`) once the base is known,
//! before the write. A global `system_admin` always may; an entity without `roles` is today's rule.

mod common;

use std::sync::Arc;

use common::{As, Harness, SYSTEM_ADMIN};
use cqrs_model::Model;
use cqrs_testkit::round_trips::CallLog;
use serde_json::{Value, json};

const MODEL: &str = r#"
[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.shelf = { type = "string", max = 20 }
roles = { create = ["librarian"], update = ["librarian", "clerk"], delete = ["manager"] }

[entities.note]
pk = "NOTE#{tenant}"
sk = "{noteId}"
attributes.noteId = { type = "string", required = true, max = 40 }
"#;

const READER: As = As {
    user: "r",
    tenant: "t1",
    roles: "reader",
};
const CLERK: As = As {
    user: "c",
    tenant: "t1",
    roles: "clerk",
};
const LIBRARIAN: As = As {
    user: "l",
    tenant: "t1",
    roles: "librarian",
};
const MANAGER: As = As {
    user: "m",
    tenant: "t1",
    roles: "manager",
};

async fn library(log: &CallLog) -> Harness {
    let mut h = Harness::counted(log).await;
    h.app.model = Arc::new(Model::parse(MODEL).expect("the test model parses"));
    h
}

fn copy(id: &str, version: i64, deleted: Option<bool>) -> Value {
    let mut body = json!({"entity": "copy", "version": version,
        "attributes": {"copyId": id, "shelf": "A1"}});
    if let Some(deleted) = deleted {
        body["isDeleted"] = json!(deleted);
    }
    body
}

/// Sends `body` as `caller`; answers the status, the answer and the DynamoDB calls it made.
async fn send(h: &Harness, log: &CallLog, caller: &As, body: Value) -> (u16, Value, usize) {
    log.clear();
    let (status, answer) = h.post(caller, body).await;
    let calls = log.calls().len();
    log.clear();
    (status, answer, calls)
}

fn forbidden(answer: &Value, words: &str) {
    assert_eq!(answer["type"], "urn:cqrs:problem:forbidden", "{answer}");
    let detail = answer["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(words), "{detail:?} should say {words:?}");
}

#[tokio::test]
async fn a_forbidden_write_is_refused_before_any_dynamodb_call() {
    let log = CallLog::default();
    let h = library(&log).await;
    // A cold container: the first command would read the heads state; the 403 reads nothing.
    let (status, answer, calls) = send(&h, &log, &READER, copy("c1", 0, None)).await;
    assert_eq!((status, calls), (403, 0), "{answer}");
    forbidden(
        &answer,
        "creating a copy takes the role librarian: the caller holds reader",
    );
    for (body, words) in [
        (
            copy("c1", 1, None),
            "updating a copy takes the role librarian or clerk",
        ),
        (
            copy("c1", 1, Some(true)),
            "deleting or restoring a copy takes the role manager",
        ),
        (copy("c1", 1, Some(false)), "deleting or restoring a copy"),
        // `version: -1` creates or updates: a caller who may do neither is refused at once.
        (copy("c1", -1, None), "updating a copy"),
    ] {
        let (status, answer, calls) = send(&h, &log, &READER, body.clone()).await;
        assert_eq!((status, calls), (403, 0), "{body}: {answer}");
        forbidden(&answer, words);
    }
    let (status, _, calls) = send(&h, &log, &LIBRARIAN, copy("c1", 1, Some(true))).await;
    assert_eq!((status, calls), (403, 0));
    assert_eq!(h.command_count().await, 0, "nothing written");
    // An entity without roles: every caller of the tenant, as before.
    let note = json!({"entity": "note", "version": 0, "attributes": {"noteId": "n1"}});
    assert_eq!(send(&h, &log, &READER, note).await.0, 202);
}

#[tokio::test]
async fn each_operation_takes_its_roles() {
    let log = CallLog::default();
    let h = library(&log).await;
    assert_eq!(send(&h, &log, &CLERK, copy("c1", 0, None)).await.0, 403);
    assert_eq!(send(&h, &log, &LIBRARIAN, copy("c1", 0, None)).await.0, 202);
    assert_eq!(send(&h, &log, &CLERK, copy("c1", 1, None)).await.0, 202);
    assert_eq!(send(&h, &log, &LIBRARIAN, copy("c1", 2, None)).await.0, 202);
    assert_eq!(
        send(&h, &log, &CLERK, copy("c1", 3, Some(true))).await.0,
        403
    );
    assert_eq!(
        send(&h, &log, &MANAGER, copy("c1", 3, Some(true))).await.0,
        202
    );
    // A restore without `isDeleted` (a POST on the deleted version): known once the base is
    // read, refused before the write.
    let (status, answer, _) = send(&h, &log, &LIBRARIAN, copy("c1", 4, None)).await;
    assert_eq!(status, 403, "{answer}");
    forbidden(
        &answer,
        "deleting or restoring a copy takes the role manager",
    );
    assert_eq!(
        send(&h, &log, &MANAGER, copy("c1", 4, Some(false))).await.0,
        202
    );
    assert_eq!(h.versions("COPY#t1", "c1").await.len(), 5);

    // `version: -1`: a clerk may update, not create; told once the head is read.
    assert_eq!(send(&h, &log, &CLERK, copy("c1", -1, None)).await.0, 202);
    let (status, answer, _) = send(&h, &log, &CLERK, copy("c2", -1, None)).await;
    assert_eq!(status, 403, "{answer}");
    forbidden(&answer, "creating a copy takes the role librarian");
    assert!(h.versions("COPY#t1", "c2").await.is_empty());

    // A global system_admin always may.
    assert_eq!(
        send(&h, &log, &SYSTEM_ADMIN, copy("c3", 0, None)).await.0,
        202
    );
    assert_eq!(
        send(&h, &log, &SYSTEM_ADMIN, copy("c3", 1, Some(true)))
            .await
            .0,
        202
    );
    // A create that says it is live is a create.
    assert_eq!(
        send(&h, &log, &LIBRARIAN, copy("c5", 0, Some(false)))
            .await
            .0,
        202
    );
    // A role limited to another tenant does not count.
    let elsewhere = As {
        user: "x",
        tenant: "t1",
        roles: r#"[{"tenant":"t2","role":"librarian"}]"#,
    };
    assert_eq!(send(&h, &log, &elsewhere, copy("c4", 0, None)).await.0, 403);
}
