//! Stream records as Lambda events: what an event source mapping would hand a function.
//!
//! DynamoDB Streams (`GetRecords`, here read from DynamoDB Local with
//! [`crate::tables::read_stream`]) and Lambda describe the same change in two shapes. This module
//! builds, from the SDK's [`Record`]s, the exact JSON Lambda sends to a function subscribed to the
//! stream:
//!
//! ```json
//! {"Records": [{
//!   "eventID": "…", "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
//!   "awsRegion": "…", "eventSourceARN": "arn:aws:dynamodb:…:table/…/stream/…",
//!   "dynamodb": {"ApproximateCreationDateTime": 1767225600, "Keys": {…}, "NewImage": {…},
//!                "SequenceNumber": "…", "SizeBytes": 123, "StreamViewType": "NEW_IMAGE"}
//! }]}
//! ```
//!
//! and deserialises it into [`aws_lambda_events::event::dynamodb::Event`] (whose types cannot be
//! built field by field). Attribute values are written in DynamoDB's JSON (`{"S": …}`,
//! `{"N": "…"}`, binary as base64, …) without any conversion through Rust numbers or strings, so
//! images round-trip exactly. The record's `eventSourceARN` is not part of a `GetRecords` record;
//! the caller passes the stream's ARN.
//!
//! ```
//! use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, Record, StreamRecord, StreamViewType};
//!
//! let record = Record::builder()
//!     .event_id("e1")
//!     .event_name(OperationType::Insert)
//!     .event_version("1.1")
//!     .event_source("aws:dynamodb")
//!     .aws_region("ddblocal")
//!     .dynamodb(
//!         StreamRecord::builder()
//!             .keys("pk", AttributeValue::S("PRODUCT#t1".into()))
//!             .keys("sk", AttributeValue::S("P001@1".into()))
//!             .new_image("pk", AttributeValue::S("PRODUCT#t1".into()))
//!             .new_image("sk", AttributeValue::S("P001@1".into()))
//!             .new_image("version", AttributeValue::N("1".into()))
//!             .sequence_number("000000000000000000001")
//!             .size_bytes(40)
//!             .stream_view_type(StreamViewType::NewImage)
//!             .build(),
//!     )
//!     .build();
//! let event = cqrs_testkit::stream_event::lambda_event(&[record], "arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/x")
//!     .unwrap();
//! let lambda = &event.records[0];
//! assert_eq!(lambda.event_name, "INSERT");
//! assert_eq!(lambda.change.sequence_number.as_deref(), Some("000000000000000000001"));
//! assert_eq!(
//!     lambda.change.new_image.get("version"),
//!     Some(&serde_dynamo::AttributeValue::N("1".into()))
//! );
//! ```

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record};
use base64::Engine;
use serde_json::{Map, Value, json};

/// Why a stream record could not become a Lambda event record.
#[derive(Debug, thiserror::Error)]
pub enum StreamEventError {
    /// The record lacks a part every Lambda record has.
    #[error("stream record {event_id:?} has no {field}")]
    Missing {
        /// The record's `eventID` (empty when that is what is missing).
        event_id: String,
        /// The missing field.
        field: &'static str,
    },
    /// An attribute value of a type this SDK version does not know.
    #[error("attribute value of an unknown type: {0}")]
    UnknownAttribute(String),
    /// The JSON built does not deserialise as a Lambda event (a bug here, or in the event crate).
    #[error("not a Lambda DynamoDB event: {0}")]
    Event(#[from] serde_json::Error),
}

/// A stream attribute value in DynamoDB's JSON, as Lambda writes it: `{"S": "x"}`,
/// `{"N": "1.5"}` (numbers stay strings), `{"B": "<base64>"}`, `{"M": {…}}`, `{"L": […]}`,
/// `{"SS": […]}`, `{"NS": […]}`, `{"BS": […]}`, `{"BOOL": true}`, `{"NULL": true}`.
///
/// ```
/// use aws_sdk_dynamodbstreams::types::AttributeValue;
/// use aws_smithy_types::Blob;
/// use cqrs_testkit::stream_event::attribute_json;
///
/// assert_eq!(attribute_json(&AttributeValue::N("1.50".into())).unwrap(), serde_json::json!({"N": "1.50"}));
/// assert_eq!(attribute_json(&AttributeValue::B(Blob::new(*b"hi"))).unwrap(), serde_json::json!({"B": "aGk="}));
/// ```
pub fn attribute_json(value: &AttributeValue) -> Result<Value, StreamEventError> {
    let b64 = |bytes: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    Ok(match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B": b64(b.as_ref()) }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(n) => json!({ "NULL": n }),
        AttributeValue::Ss(ss) => json!({ "SS": ss }),
        AttributeValue::Ns(ns) => json!({ "NS": ns }),
        AttributeValue::Bs(bs) => {
            json!({ "BS": bs.iter().map(|b| b64(b.as_ref())).collect::<Vec<_>>() })
        }
        AttributeValue::L(list) => json!({
            "L": list.iter().map(attribute_json).collect::<Result<Vec<_>, _>>()?
        }),
        AttributeValue::M(map) => json!({ "M": image_json(map)? }),
        other => return Err(StreamEventError::UnknownAttribute(format!("{other:?}"))),
    })
}

/// An attribute map (`Keys`, `NewImage`, `OldImage`) in DynamoDB's JSON.
///
/// ```
/// use std::collections::HashMap;
/// use aws_sdk_dynamodbstreams::types::AttributeValue;
///
/// let keys = HashMap::from([("pk".to_string(), AttributeValue::S("P#t1".into()))]);
/// let json = cqrs_testkit::stream_event::image_json(&keys).unwrap();
/// assert_eq!(serde_json::Value::Object(json), serde_json::json!({"pk": {"S": "P#t1"}}));
/// ```
pub fn image_json(
    image: &HashMap<String, AttributeValue>,
) -> Result<Map<String, Value>, StreamEventError> {
    image
        .iter()
        .map(|(name, value)| Ok((name.clone(), attribute_json(value)?)))
        .collect()
}

/// One stream record as the JSON of a Lambda event record (see the [module docs](self)).
/// `event_source_arn` is the stream's ARN.
///
/// Missing `eventID`, `eventName` or `dynamodb` is an error; `eventVersion` defaults to `"1.1"`,
/// `eventSource` to `"aws:dynamodb"`; `userIdentity` appears when the record has one (TTL
/// deletions).
///
/// ```
/// use aws_sdk_dynamodbstreams::types::{OperationType, Record, StreamRecord};
///
/// let record = Record::builder()
///     .event_id("e1")
///     .event_name(OperationType::Remove)
///     .dynamodb(StreamRecord::builder().sequence_number("7").size_bytes(1).build())
///     .build();
/// let json = cqrs_testkit::stream_event::record_json(&record, "arn:x").unwrap();
/// assert_eq!(json["eventName"], "REMOVE");
/// assert_eq!(json["eventSourceARN"], "arn:x");
/// assert_eq!(json["dynamodb"]["SequenceNumber"], "7");
/// ```
pub fn record_json(record: &Record, event_source_arn: &str) -> Result<Value, StreamEventError> {
    let event_id = record.event_id().unwrap_or_default().to_string();
    let missing = |field| StreamEventError::Missing {
        event_id: event_id.clone(),
        field,
    };
    let change = record.dynamodb().ok_or_else(|| missing("dynamodb"))?;
    let event_name = record.event_name().ok_or_else(|| missing("eventName"))?;
    if event_id.is_empty() {
        return Err(missing("eventID"));
    }

    let mut dynamodb = Map::new();
    if let Some(time) = change.approximate_creation_date_time() {
        // Lambda writes whole epoch seconds; keep any fraction the stream gives.
        let seconds = time.as_secs_f64();
        let value = if seconds.fract() == 0.0 {
            json!(seconds as i64)
        } else {
            json!(seconds)
        };
        dynamodb.insert("ApproximateCreationDateTime".into(), value);
    }
    for (name, image) in [
        ("Keys", change.keys()),
        ("NewImage", change.new_image()),
        ("OldImage", change.old_image()),
    ] {
        if let Some(image) = image {
            dynamodb.insert(name.into(), Value::Object(image_json(image)?));
        }
    }
    if let Some(sequence_number) = change.sequence_number() {
        dynamodb.insert("SequenceNumber".into(), json!(sequence_number));
    }
    dynamodb.insert("SizeBytes".into(), json!(change.size_bytes().unwrap_or(0)));
    if let Some(view) = change.stream_view_type() {
        dynamodb.insert("StreamViewType".into(), json!(view.as_str()));
    }

    let mut json = json!({
        "eventID": event_id,
        "eventName": event_name.as_str(),
        "eventVersion": record.event_version().unwrap_or("1.1"),
        "eventSource": record.event_source().unwrap_or("aws:dynamodb"),
        "awsRegion": record.aws_region().unwrap_or_default(),
        "dynamodb": dynamodb,
        "eventSourceARN": event_source_arn,
    });
    if let Some(identity) = record.user_identity() {
        json["userIdentity"] = json!({
            "type": identity.r#type().unwrap_or_default(),
            "principalId": identity.principal_id().unwrap_or_default(),
        });
    }
    Ok(json)
}

/// The JSON document Lambda would send for `records` (`{"Records": […]}`), e.g. to save as a
/// sample event for `cargo lambda invoke --data-file`.
///
/// ```
/// let json = cqrs_testkit::stream_event::lambda_event_json(&[], "arn:x").unwrap();
/// assert_eq!(json, serde_json::json!({"Records": []}));
/// ```
pub fn lambda_event_json(
    records: &[Record],
    event_source_arn: &str,
) -> Result<Value, StreamEventError> {
    let records = records
        .iter()
        .map(|record| record_json(record, event_source_arn))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({ "Records": records }))
}

/// The Lambda event for `records`, in order, as a function subscribed to the stream with ARN
/// `event_source_arn` receives it (see the [module docs](self) for an example).
///
/// # Errors
///
/// When a record misses a part every Lambda record has ([`StreamEventError::Missing`]) or holds an
/// attribute type this SDK does not know.
pub fn lambda_event(records: &[Record], event_source_arn: &str) -> Result<Event, StreamEventError> {
    Ok(serde_json::from_value(lambda_event_json(
        records,
        event_source_arn,
    )?)?)
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodbstreams::types::{Identity, OperationType, StreamRecord, StreamViewType};
    use aws_smithy_types::{Blob, DateTime};

    use super::*;

    fn every_type() -> HashMap<String, AttributeValue> {
        let mut nested = HashMap::new();
        nested.insert(
            "deep".to_string(),
            AttributeValue::L(vec![AttributeValue::N("-0.5".into())]),
        );
        HashMap::from([
            ("s".to_string(), AttributeValue::S("x".into())),
            (
                "n".to_string(),
                AttributeValue::N("12345678901234567890.123".into()),
            ),
            (
                "b".to_string(),
                AttributeValue::B(Blob::new(vec![0u8, 255, 7])),
            ),
            ("bool".to_string(), AttributeValue::Bool(false)),
            ("null".to_string(), AttributeValue::Null(true)),
            (
                "ss".to_string(),
                AttributeValue::Ss(vec!["a".into(), "b".into()]),
            ),
            (
                "ns".to_string(),
                AttributeValue::Ns(vec!["1".into(), "2.5".into()]),
            ),
            ("bs".to_string(), AttributeValue::Bs(vec![Blob::new(*b"z")])),
            ("m".to_string(), AttributeValue::M(nested)),
        ])
    }

    fn record() -> Record {
        let mut change = StreamRecord::builder()
            .approximate_creation_date_time(DateTime::from_secs(1_767_225_600))
            .sequence_number("4200000000000000000001")
            .size_bytes(99)
            .stream_view_type(StreamViewType::NewImage)
            .keys("pk", AttributeValue::S("P#t1".into()));
        for (name, value) in every_type() {
            change = change.new_image(name, value);
        }
        Record::builder()
            .event_id("id-1")
            .event_name(OperationType::Insert)
            .aws_region("ddblocal")
            .dynamodb(change.build())
            .user_identity(
                Identity::builder()
                    .r#type("Service")
                    .principal_id("dynamodb.amazonaws.com")
                    .build(),
            )
            .build()
    }

    #[test]
    fn images_round_trip_exactly_through_the_lambda_event() {
        let event = lambda_event(&[record()], "arn:s").unwrap();
        let lambda = &event.records[0];
        let image: HashMap<String, serde_dynamo::AttributeValue> =
            lambda.change.new_image.clone().into();
        // Compare with the same image written through serde_dynamo's own JSON form.
        let expected: HashMap<String, serde_dynamo::AttributeValue> =
            serde_json::from_value(Value::Object(image_json(&every_type()).unwrap())).unwrap();
        assert_eq!(image, expected);
        assert_eq!(
            image["n"],
            serde_dynamo::AttributeValue::N("12345678901234567890.123".into())
        );
        assert_eq!(image["b"], serde_dynamo::AttributeValue::B(vec![0, 255, 7]));
        // And back to JSON: the very same document.
        let again = serde_json::to_value(&event).unwrap();
        assert_eq!(
            again["Records"][0]["dynamodb"]["NewImage"],
            Value::Object(image_json(&every_type()).unwrap())
        );
    }

    #[test]
    fn every_lambda_field_is_there() {
        let json = record_json(&record(), "arn:s").unwrap();
        assert_eq!(json["eventVersion"], "1.1");
        assert_eq!(json["eventSource"], "aws:dynamodb");
        assert_eq!(json["awsRegion"], "ddblocal");
        assert_eq!(json["eventSourceARN"], "arn:s");
        assert_eq!(json["userIdentity"]["type"], "Service");
        assert_eq!(
            json["dynamodb"]["ApproximateCreationDateTime"],
            1_767_225_600
        );
        assert_eq!(json["dynamodb"]["StreamViewType"], "NEW_IMAGE");
        assert_eq!(json["dynamodb"]["SizeBytes"], 99);
        let event = lambda_event(&[record()], "arn:s").unwrap();
        let identity = event.records[0].user_identity.as_ref().unwrap();
        assert_eq!(identity.principal_id, "dynamodb.amazonaws.com");
        assert_eq!(
            event.records[0]
                .change
                .approximate_creation_date_time
                .timestamp(),
            1_767_225_600
        );
    }

    #[test]
    fn a_record_without_its_change_is_refused() {
        let record = Record::builder()
            .event_id("e")
            .event_name(OperationType::Insert)
            .build();
        let err = lambda_event(&[record], "arn").unwrap_err();
        assert!(err.to_string().contains("dynamodb"), "{err}");
    }
}
