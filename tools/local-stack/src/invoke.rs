//! Invoking a function through cargo-lambda's local Invoke endpoint
//! (`POST /2015-03-31/functions/<name>/invocations` on the `cargo lambda watch` port), the same
//! API Lambda's own event source mapping uses.

use aws_sdk_dynamodbstreams::types::Record;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use serde_json::Value;

use crate::mapper::{Invoke, InvokeError};

/// Invokes one function over HTTP on the local invoke endpoint.
#[derive(Debug, Clone)]
pub struct HttpInvoker {
    client: Client<HttpConnector, Full<Bytes>>,
    url: String,
    event_source_arn: String,
}

impl HttpInvoker {
    /// An invoker of `function` at `base` (e.g. `http://127.0.0.1:9000`), sending records of the
    /// stream `event_source_arn`.
    pub fn new(base: &str, function: &str, event_source_arn: &str) -> Self {
        HttpInvoker {
            client: Client::builder(TokioExecutor::new()).build_http(),
            url: format!(
                "{}/2015-03-31/functions/{function}/invocations",
                base.trim_end_matches('/')
            ),
            event_source_arn: event_source_arn.to_string(),
        }
    }
}

impl HttpInvoker {
    /// Invokes the function with `event`; answers its answer's text, or why the invocation failed
    /// (an error status, `X-Amz-Function-Error`).
    async fn invoke_event(&self, event: &Value) -> Result<String, InvokeError> {
        let request = hyper::Request::post(&self.url)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(event.to_string())))
            .map_err(|e| InvokeError(format!("building the request: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| InvokeError(format!("invoking {}: {e}", self.url)))?;
        let status = response.status();
        let function_error = response.headers().contains_key("x-amz-function-error");
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| InvokeError(format!("reading the answer: {e}")))?
            .to_bytes();
        let text = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() || function_error {
            return Err(InvokeError(format!("function failed ({status}): {text}")));
        }
        Ok(text)
    }
}

impl Invoke for HttpInvoker {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        let event = cqrs_testkit::stream_event::lambda_event_json(records, &self.event_source_arn)
            .map_err(|e| InvokeError(format!("building the event: {e}")))?;
        batch_item_failures(&self.invoke_event(&event).await?)
    }
}

/// A consumer's SQS event, through the same endpoint (the `event_source_arn` the invoker was made
/// with is not used: the event names its queue).
impl crate::sqs_mapper::InvokeSqs for HttpInvoker {
    async fn invoke_sqs(&self, event: &Value) -> Result<Vec<String>, InvokeError> {
        batch_item_failures(&self.invoke_event(event).await?)
    }
}

/// The identifiers (sequence numbers of a stream's records, `messageId`s of a queue's messages) of
/// a `{"batchItemFailures": [{"itemIdentifier": ...}]}` answer. An answer
/// that is not of that shape is a failed invocation (as in AWS, which then retries the batch).
pub fn batch_item_failures(answer: &str) -> Result<Vec<String>, InvokeError> {
    let value: Value = serde_json::from_str(answer)
        .map_err(|e| InvokeError(format!("the answer is not JSON ({e}): {answer}")))?;
    if value.get("errorType").is_some() || value.get("errorMessage").is_some() {
        return Err(InvokeError(format!("function error: {answer}")));
    }
    let failures = match value.get("batchItemFailures") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(failures)) => failures,
        Some(_) => {
            return Err(InvokeError(format!(
                "batchItemFailures is not a list: {answer}"
            )));
        }
    };
    failures
        .iter()
        .map(|failure| {
            failure
                .get("itemIdentifier")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_string)
                .ok_or_else(|| InvokeError(format!("a failure without itemIdentifier: {answer}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_like_lambda_reads_them() {
        assert_eq!(
            batch_item_failures(r#"{"batchItemFailures":[]}"#).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(batch_item_failures("{}").unwrap(), Vec::<String>::new());
        assert_eq!(
            batch_item_failures(
                r#"{"batchItemFailures":[{"itemIdentifier":"42"},{"itemIdentifier":"7"}]}"#
            )
            .unwrap(),
            ["42", "7"]
        );
        assert!(batch_item_failures(r#"{"batchItemFailures":[{"itemIdentifier":""}]}"#).is_err());
        assert!(batch_item_failures(r#"{"errorType":"Panic","errorMessage":"boom"}"#).is_err());
        assert!(batch_item_failures("not json").is_err());
    }
}
