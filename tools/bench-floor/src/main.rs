//! `bench-floor`: the floor of the cold-path benchmark (`scripts/bench.sh`, see BENCHMARKS.md).
//!
//! A minimal `lambda_runtime` function that answers every event with the event itself: no logging
//! set-up, no configuration, no AWS SDK client. It is built with the same release profile as the
//! project's three functions, so the difference between their cold path and this one is what their
//! own set-up costs (the SDK client above all) over the runtime loop alone.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(event.payload)
    }))
    .await
}
