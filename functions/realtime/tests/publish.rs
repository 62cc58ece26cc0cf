//! The realtime consumer against a stand-in for the AppSync Events HTTP endpoint on 127.0.0.1:
//! what it sends (`POST /event`, the channel, the events, SigV4 headers), and what it makes of
//! the answers (a refused entry, a 5xx, a 400) and of events it must not publish.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cqrs_consumer::ConsumerError;
use cqrs_events::ChangeEvent;
use cqrs_realtime::{Published, Realtime, Skip};
use serde_json::Value;

/// One request the stand-in received.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    raw_body: Vec<u8>,
    body: Value,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP/1.1 server on 127.0.0.1 answering each request with the next queued answer (status,
/// body), by default AppSync's `{"failed":[],"successful":[...]}` for every event sent; one
/// request per connection. Stopped (and its thread joined) when dropped.
struct StandIn {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<VecDeque<(u16, String)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StandIn {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(VecDeque::<(u16, String)>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (received, answers, stop) = (received.clone(), answers.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut stream) = stream else { continue };
                    let Some(request) = read_request(&mut stream) else {
                        continue;
                    };
                    let events = request.body["events"].as_array().map_or(0, Vec::len);
                    received.lock().unwrap().push(request);
                    let (status, body) = answers.lock().unwrap().pop_front().unwrap_or_else(|| {
                        let successful: Vec<Value> = (0..events)
                            .map(|i| serde_json::json!({"identifier": format!("id-{i}"), "index": i}))
                            .collect();
                        (200, serde_json::json!({"failed": [], "successful": successful}).to_string())
                    });
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes());
                }
            })
        };
        StandIn {
            port,
            received,
            answers,
            stop,
            thread: Some(thread),
        }
    }

    fn answer(&self, status: u16, body: &str) {
        self.answers
            .lock()
            .unwrap()
            .push_back((status, body.to_string()));
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    fn realtime(&self) -> Realtime {
        let url = format!("http://127.0.0.1:{}", self.port);
        let vars = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret"),
            ("AWS_SESSION_TOKEN", "session-token"),
            ("REALTIME_API_URL", url.as_str()),
        ];
        Realtime::from_lookup(cqrs_model::EXAMPLE_TOML, |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?.to_string(), start.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Received {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw_body: body,
    })
}

/// The SigV4 signature of `request` as received, computed with the stand-in's copy of the
/// credentials at the request's `x-amz-date`.
fn signature_of(request: &Received, url: &str) -> String {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let date = request.header("x-amz-date").unwrap();
    let time = chrono::NaiveDateTime::parse_from_str(date, "%Y%m%dT%H%M%SZ")
        .unwrap()
        .and_utc();
    let credentials = aws_credential_types::Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI-secret",
        Some("session-token".into()),
        None,
        "test",
    );
    let identity = credentials.into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("eu-west-1")
        .name("appsync")
        .time(std::time::SystemTime::from(time))
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let headers = [
        ("content-type", request.header("content-type").unwrap()),
        ("host", request.header("host").unwrap()),
    ];
    let signable = SignableRequest::new(
        &request.method,
        url,
        headers.into_iter(),
        SignableBody::Bytes(&request.raw_body),
    )
    .unwrap();
    sign(signable, &params).unwrap().signature().to_string()
}

/// A change event of `entity` for `item` (pk, sk, tenant code), with `attributes`.
fn event(entity: &str, pk: &str, sk: &str, tenant: &str, notes: Option<String>) -> ChangeEvent {
    let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    let mut item = cqrs_item::Item::example().into_data_item();
    item.entity = Some(entity.into());
    item.pk = pk.into();
    item.sk = sk.into();
    item.tenant_code = tenant.into();
    if let Some(notes) = notes {
        item.attributes
            .insert("notes".into(), cqrs_item::Value::String(notes));
    }
    feed.version_event(&item, None, chrono::Utc::now()).unwrap()
}

#[tokio::test]
async fn an_event_is_posted_signed_on_the_tenant_channel_and_the_item_channel() {
    let server = StandIn::start();
    let realtime = server.realtime();
    let event = event("product", "PRODUCT#t1", "P001", "t1", None);

    let published = realtime.publish_event(&event).await.unwrap();

    let token = cqrs_realtime::channel::item_token("PRODUCT#t1", "P001");
    assert_eq!(
        published,
        Published::Channels {
            channels: ["product/t1".into(), format!("product/t1/{token}")],
            reference: false
        }
    );
    let received = server.received();
    assert_eq!(received.len(), 2, "one call per channel: {received:?}");
    for (request, channel) in received
        .iter()
        .zip(["product/t1".to_string(), format!("product/t1/{token}")])
    {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/event")
        );
        assert_eq!(request.body["channel"], channel.as_str());
        let events = request.body["events"].as_array().unwrap();
        assert_eq!(events.len(), 1);
        // Each event is a JSON text (the API's "stringified valid JSON value"): the whole event.
        let sent: Value = serde_json::from_str(events[0].as_str().unwrap()).unwrap();
        assert_eq!(sent["id"], event.id.as_str());
        assert_eq!(sent["type"], "product.created");
        assert_eq!(
            sent["data"]["state"]["createdBy"], "user-1",
            "own tenant: audit kept"
        );
        // Signed: SigV4 for appsync in the region, host and date among the signed headers.
        let auth = request.header("authorization").unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
            "{auth}"
        );
        assert!(auth.contains("/eu-west-1/appsync/aws4_request"), "{auth}");
        let signed = auth
            .split("SignedHeaders=")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap();
        let signed: Vec<&str> = signed.split(';').collect();
        for name in ["host", "x-amz-date", "content-type", "x-amz-security-token"] {
            assert!(signed.contains(&name), "{name} signed: {auth}");
        }
        assert!(auth.contains("Signature="), "{auth}");
        assert!(
            request
                .header("x-amz-date")
                .is_some_and(|d| d.len() == 16 && d.ends_with('Z'))
        );
        assert_eq!(
            request.header("x-amz-security-token"),
            Some("session-token")
        );
        assert_eq!(
            request.header("host"),
            Some(format!("127.0.0.1:{}", server.port).as_str())
        );
        assert_eq!(request.header("content-type"), Some("application/json"));
        // What arrived is what was signed: the signature computed again, as AppSync would, from
        // the received host, content type, date, token and body, is the one sent.
        let url = format!("http://127.0.0.1:{}{}", server.port, request.path);
        assert_eq!(
            signature_of(request, &url),
            auth.rsplit("Signature=").next().unwrap()
        );
    }
    assert_eq!((realtime.published(), realtime.skipped()), (1, 0));
}

#[tokio::test]
async fn a_refused_entry_is_retried_with_its_reason() {
    let server = StandIn::start();
    let realtime = server.realtime();
    server.answer(
        200,
        r#"{"failed":[{"identifier":"a1","index":0,"errorCode":400,"errorMessage":"Channel not allowed"}],"successful":[]}"#,
    );
    let error = realtime
        .publish_event(&event("product", "PRODUCT#t1", "P001", "t1", None))
        .await
        .unwrap_err();
    match &error {
        ConsumerError::Retry(e) => {
            let text = e.to_string();
            assert!(
                text.contains("product/t1") && text.contains("Channel not allowed"),
                "{text}"
            );
            assert!(
                text.contains("refused 1 event(s): index 0 (a1): 400"),
                "{text}"
            );
        }
        other => panic!("expected Retry, got {other:?}"),
    }
    // The item's channel is not tried after the tenant's failed (the retry publishes both).
    assert_eq!(server.received().len(), 1);
    assert_eq!(realtime.published(), 0);
}

#[tokio::test]
async fn an_answer_that_does_not_account_for_the_event_is_retried() {
    let server = StandIn::start();
    let realtime = server.realtime();
    server.answer(200, r#"{"failed":[],"successful":[]}"#);
    let error = realtime
        .publish_event(&event("product", "PRODUCT#t1", "P001", "t1", None))
        .await
        .unwrap_err();
    assert!(matches!(error, ConsumerError::Retry(_)), "{error:?}");
}

#[tokio::test]
async fn a_server_error_is_retried_and_a_bad_request_is_poison() {
    let server = StandIn::start();
    let realtime = server.realtime();
    let event = event("product", "PRODUCT#t1", "P001", "t1", None);
    server.answer(503, r#"{"message":"slow down"}"#);
    let error = realtime.publish_event(&event).await.unwrap_err();
    assert!(matches!(error, ConsumerError::Retry(_)), "{error:?}");
    assert!(error.to_string().contains("503"), "{error}");
    server.answer(400, r#"{"message":"bad channel"}"#);
    let error = realtime.publish_event(&event).await.unwrap_err();
    assert!(matches!(error, ConsumerError::Poison { .. }), "{error:?}");
    assert!(error.to_string().contains("bad channel"), "{error}");
}

#[tokio::test]
async fn a_closed_port_is_retried() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let credentials =
        aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
    let publisher = cqrs_realtime::publish::Publisher::new(
        &format!("http://127.0.0.1:{port}"),
        "eu-west-1",
        credentials,
        cqrs_store::client::TlsRoots::Amazon,
    )
    .unwrap();
    let realtime = Realtime::new(cqrs_model::Model::example(), publisher);
    let error = realtime
        .publish_event(&event("product", "PRODUCT#t1", "P001", "t1", None))
        .await
        .unwrap_err();
    assert!(matches!(error, ConsumerError::Retry(_)), "{error:?}");
}

#[tokio::test]
async fn a_tenant_outside_the_channel_alphabet_is_skipped_logged_and_counted() {
    let server = StandIn::start();
    let realtime = server.realtime();
    for tenant in ["t_1", "-t1", "t.1"] {
        let pk = format!("PRODUCT#{tenant}");
        let published = realtime
            .publish_event(&event("product", &pk, "P001", tenant, None))
            .await
            .unwrap();
        assert_eq!(published, Published::Skipped(Skip::Tenant(tenant.into())));
    }
    assert!(server.received().is_empty(), "nothing sent");
    assert_eq!((realtime.published(), realtime.skipped()), (0, 3));
}

#[tokio::test]
async fn an_event_over_240_kb_is_sent_as_a_reference() {
    let server = StandIn::start();
    let realtime = server.realtime();
    let event = event(
        "product",
        "PRODUCT#t1",
        "P001",
        "t1",
        Some("x".repeat(300_000)),
    );
    let published = realtime.publish_event(&event).await.unwrap();
    assert!(
        matches!(
            published,
            Published::Channels {
                reference: true,
                ..
            }
        ),
        "{published:?}"
    );
    for request in server.received() {
        let text = request.body["events"][0].as_str().unwrap().to_string();
        assert!(text.len() < 10_000, "{} bytes", text.len());
        let sent: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(sent["stateref"], "history");
        assert!(sent["data"].get("state").is_none());
        assert_eq!(sent["id"], event.id.as_str());
    }
}

#[tokio::test]
async fn a_common_item_goes_to_the_common_channel_without_its_audit_attributes() {
    let server = StandIn::start();
    let realtime = server.realtime();
    let event = event("master_data", "MASTER#common", "CAT#001", "common", None);
    let published = realtime.publish_event(&event).await.unwrap();
    let Published::Channels { channels, .. } = published else {
        panic!("{published:?}")
    };
    assert_eq!(channels[0], "master-data/common");
    for request in server.received() {
        let sent: Value =
            serde_json::from_str(request.body["events"][0].as_str().unwrap()).unwrap();
        for name in cqrs_realtime::payload::AUDIT_FIELDS {
            assert!(sent["data"]["state"].get(name).is_none(), "{name}: {sent}");
        }
        assert_eq!(
            sent["data"]["state"]["code"],
            event.data.state.as_ref().unwrap().code.as_str()
        );
    }
}
