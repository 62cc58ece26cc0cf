//! Work-arounds for where DynamoDB Local's answers differ from DynamoDB's, applied only to the
//! clients this crate builds for DynamoDB Local.
//!
//! DynamoDB Local's stream writes an empty map attribute (`"attributes": {}` in an item) as `{}`
//! instead of `{"M": {}}`. The SDK cannot read a value without a type, so `GetRecords` fails for
//! the whole page ("Union did not contain a valid variant") and the stream cannot be read past
//! that record. [`EmptyMapFix`] rewrites such values in `GetRecords` answers before the SDK reads
//! them, so the records come out as DynamoDB would send them.

use std::pin::Pin;
use std::task::{Context, Poll};

use aws_sdk_dynamodbstreams::config::{
    ConfigBag, Intercept, RuntimeComponents,
    interceptors::BeforeDeserializationInterceptorContextMut,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use http_body::{Body, Frame};
use serde_json::Value;

/// Rewrites untyped empty attribute values (`{}`) in stream answers as empty maps (`{"M": {}}`).
#[derive(Debug, Default, Clone, Copy)]
pub struct EmptyMapFix;

impl Intercept for EmptyMapFix {
    fn name(&self) -> &'static str {
        "DynamoDbLocalEmptyMapFix"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = std::mem::replace(context.response_mut().body_mut(), SdkBody::taken());
        *context.response_mut().body_mut() = SdkBody::from_body_1_x(Rewritten {
            inner: Box::pin(body),
            buffer: Vec::new(),
            done: false,
        });
        Ok(())
    }
}

/// The answer body, read whole, then handed on once with the values repaired.
struct Rewritten {
    inner: Pin<Box<SdkBody>>,
    buffer: Vec<u8>,
    done: bool,
}

impl Body for Rewritten {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match self.inner.as_mut().poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => {
                    self.done = true;
                    let repaired = repair_stream_answer(&self.buffer);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(repaired)))));
                }
            }
        }
    }
}

/// Repairs a `GetRecords` answer: every untyped `{}` attribute value in a record's `Keys`,
/// `NewImage` or `OldImage` (at any depth of maps and lists) becomes `{"M": {}}`. Anything that
/// is not such an answer is returned unchanged.
///
/// ```
/// let broken = br#"{"Records":[{"dynamodb":{"NewImage":{"attributes":{},"l":{"L":[{}]}}}}]}"#;
/// let fixed: serde_json::Value =
///     serde_json::from_slice(&cqrs_testkit::local_quirks::repair_stream_answer(broken)).unwrap();
/// assert_eq!(fixed["Records"][0]["dynamodb"]["NewImage"]["attributes"], serde_json::json!({"M": {}}));
/// assert_eq!(fixed["Records"][0]["dynamodb"]["NewImage"]["l"]["L"][0], serde_json::json!({"M": {}}));
/// assert_eq!(cqrs_testkit::local_quirks::repair_stream_answer(b"not json"), b"not json");
/// ```
pub fn repair_stream_answer(body: &[u8]) -> Vec<u8> {
    let Ok(mut answer) = serde_json::from_slice::<Value>(body) else {
        return body.to_vec();
    };
    let Some(records) = answer.get_mut("Records").and_then(Value::as_array_mut) else {
        return body.to_vec();
    };
    let mut repaired = false;
    for record in records {
        let Some(change) = record.get_mut("dynamodb") else {
            continue;
        };
        for image in ["Keys", "NewImage", "OldImage"] {
            if let Some(Value::Object(attributes)) = change.get_mut(image) {
                for value in attributes.values_mut() {
                    repaired |= repair_value(value);
                }
            }
        }
    }
    if repaired {
        serde_json::to_vec(&answer).unwrap_or_else(|_| body.to_vec())
    } else {
        body.to_vec()
    }
}

fn repair_value(value: &mut Value) -> bool {
    let Value::Object(typed) = value else {
        return false;
    };
    if typed.is_empty() {
        typed.insert("M".into(), Value::Object(Default::default()));
        return true;
    }
    let mut repaired = false;
    if let Some(Value::Object(map)) = typed.get_mut("M") {
        for inner in map.values_mut() {
            repaired |= repair_value(inner);
        }
    }
    if let Some(Value::Array(list)) = typed.get_mut("L") {
        for inner in list {
            repaired |= repair_value(inner);
        }
    }
    repaired
}
