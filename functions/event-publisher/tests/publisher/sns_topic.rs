//! [`SnsTopic`] against a canned SNS endpoint on 127.0.0.1 (the SDK's own client, the query
//! protocol's XML answers as SNS documents them): what a `PublishBatch` request carries, a
//! per-entry `Failed` inside an HTTP 200 (its code, message and sender fault), and a call
//! refused as a whole.

use std::sync::{Arc, Mutex};

use cqrs_event_publisher::{Attributes, Entry, Publish, SnsTopic};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `status` + `body` to every request on a free port of 127.0.0.1; answers the port and
/// the request bodies received. The server task ends with the test's runtime.
async fn canned(status: &'static str, body: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                // Headers, then Content-Length bytes of body.
                let (head_end, length) = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..at]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (at + 4, length);
                    }
                };
                while buffer.len() < head_end + length {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buffer[head_end..]).into_owned());
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, requests)
}

fn topic(port: u16) -> SnsTopic {
    let env = cqrs_store::client::ClientEnv::from_lookup(|name| match name {
        "AWS_REGION" => Some("eu-west-1".into()),
        "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => Some("test".into()),
        _ => None,
    })
    .unwrap();
    let http = cqrs_store::client::http_client(env.tls_roots).unwrap();
    let endpoint = cqrs_store::client::service_endpoint("SNS", |name| {
        (name == "AWS_ENDPOINT_URL_SNS").then(|| format!("http://127.0.0.1:{port}"))
    });
    SnsTopic::new(
        SnsTopic::client(&env, http, endpoint),
        "arn:aws:sns:eu-west-1:000000000000:shop-events.fifo",
    )
}

fn entry(group: &str, id: &str) -> Entry {
    Entry {
        group_id: group.into(),
        dedup_id: id.into(),
        body: format!(r#"{{"id":"{id}"}}"#),
        attributes: Attributes {
            event_type: "product.updated".into(),
            tenant: "t1".into(),
            entity: "product".into(),
        },
        reference: false,
    }
}

const PARTLY_FAILED: &str = r#"<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">
  <PublishBatchResult>
    <Successful>
      <member><Id>0</Id><MessageId>m-0</MessageId><SequenceNumber>10000000000000000001</SequenceNumber></member>
    </Successful>
    <Failed>
      <member><Id>1</Id><Code>InternalError</Code><Message>try again</Message><SenderFault>false</SenderFault></member>
    </Failed>
  </PublishBatchResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
</PublishBatchResponse>"#;

const FAULTS: &str = r#"<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">
  <PublishBatchResult>
    <Successful/>
    <Failed>
      <member><Id>0</Id><Code>ParameterValueInvalid</Code><Message>Invalid parameter: Message</Message><SenderFault>true</SenderFault></member>
      <member><Id>1</Id><Code>Throttled</Code><Message>Rate exceeded</Message><SenderFault>true</SenderFault></member>
      <member><Id>2</Id><Code>InternalError</Code><Message>try again</Message><SenderFault>false</SenderFault></member>
    </Failed>
  </PublishBatchResult>
  <ResponseMetadata><RequestId>r-3</RequestId></ResponseMetadata>
</PublishBatchResponse>"#;

const DENIED: &str = r#"<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">
  <Error><Type>Sender</Type><Code>AuthorizationError</Code><Message>not allowed to publish</Message></Error>
  <RequestId>r-2</RequestId>
</ErrorResponse>"#;

#[tokio::test]
async fn an_http_200_with_a_failed_entry_answers_that_entry_failed() {
    let (port, requests) = canned("200 OK", PARTLY_FAILED).await;
    let topic = topic(port);
    // A third entry SNS says nothing about is a failure too, never a silent success.
    let entries = [
        entry("g-a", "id-a"),
        entry("g-b", "id-b"),
        entry("g-c", "id-c"),
    ];
    let results = topic.publish_batch(&entries).await.unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    let failed = results[1].as_ref().unwrap_err();
    assert_eq!(failed.code, "InternalError");
    assert!(failed.message.contains("try again"), "{failed}");
    assert_eq!(results[2].as_ref().unwrap_err().code, "NoResult");

    // The request: the topic, each entry's group, dedup id, body and three String attributes.
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let form: Vec<(String, String)> = url_decode(&requests[0]);
    let get = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{name} missing in {form:?}"))
    };
    assert_eq!(get("Action"), "PublishBatch");
    assert_eq!(
        get("TopicArn"),
        "arn:aws:sns:eu-west-1:000000000000:shop-events.fifo"
    );
    assert_eq!(
        get("PublishBatchRequestEntries.member.2.MessageGroupId"),
        "g-b"
    );
    assert_eq!(
        get("PublishBatchRequestEntries.member.2.MessageDeduplicationId"),
        "id-b"
    );
    assert_eq!(
        get("PublishBatchRequestEntries.member.2.Message"),
        r#"{"id":"id-b"}"#
    );
    assert_eq!(get("PublishBatchRequestEntries.member.2.Id"), "1");
    let attributes: Vec<(&str, &str)> = form
        .iter()
        .filter(|(k, _)| k.starts_with("PublishBatchRequestEntries.member.1.MessageAttributes."))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for (name, value) in [
        ("type", "product.updated"),
        ("tenant", "t1"),
        ("entity", "product"),
    ] {
        let entry = attributes
            .iter()
            .find(|(k, v)| k.ends_with(".Name") && *v == name)
            .unwrap_or_else(|| panic!("attribute {name} in {attributes:?}"))
            .0
            .trim_end_matches(".Name")
            .to_string();
        let field = |f: &str| {
            attributes
                .iter()
                .find(|(k, _)| *k == format!("{entry}.Value.{f}"))
                .map(|(_, v)| *v)
        };
        assert_eq!(field("DataType"), Some("String"), "{name}");
        assert_eq!(field("StringValue"), Some(value), "{name}");
    }
}

#[tokio::test]
async fn a_failed_entrys_code_message_and_sender_fault_are_read() {
    let (port, _) = canned("200 OK", FAULTS).await;
    let entries = [
        entry("g-a", "id-a"),
        entry("g-b", "id-b"),
        entry("g-c", "id-c"),
    ];
    let results = topic(port).publish_batch(&entries).await.unwrap();
    let read: Vec<(&str, &str, bool)> = results
        .iter()
        .map(|r| {
            let e = r.as_ref().unwrap_err();
            (e.code.as_str(), e.message.as_str(), e.sender_fault)
        })
        .collect();
    assert_eq!(
        read,
        [
            ("ParameterValueInvalid", "Invalid parameter: Message", true),
            ("Throttled", "Rate exceeded", true),
            ("InternalError", "try again", false),
        ]
    );
    // Only the invalid entry is one no retry can publish (the publisher parks it).
    let permanent: Vec<bool> = results
        .iter()
        .map(|r| r.as_ref().unwrap_err().permanent())
        .collect();
    assert_eq!(permanent, [true, false, false]);
}

#[tokio::test]
async fn a_call_refused_as_a_whole_is_an_error_of_the_call() {
    let (port, _) = canned("403 Forbidden", DENIED).await;
    let error = topic(port)
        .publish_batch(&[entry("g-a", "id-a")])
        .await
        .unwrap_err();
    assert_eq!(error.code, "AuthorizationError");
    assert!(error.message.contains("not allowed to publish"), "{error}");
}

/// `application/x-www-form-urlencoded` pairs, decoded.
fn url_decode(body: &str) -> Vec<(String, String)> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        while at < bytes.len() {
            match bytes[at] {
                b'+' => out.push(b' '),
                b'%' if at + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    at += 2;
                }
                b => out.push(b),
            }
            at += 1;
        }
        String::from_utf8(out).unwrap()
    }
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}
