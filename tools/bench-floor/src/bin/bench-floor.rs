//! `bench-floor`: the echo line of the cold-path benchmark (`scripts/bench.sh`, see BENCHMARKS.md).
//!
//! A minimal `lambda_runtime` function that answers every event with the event itself: no logging
//! set-up, no configuration, no AWS SDK client, no DynamoDB call. It shows the runtime loop alone;
//! the per-path floors (`floor-create`, `floor-get`, `floor-batch`) are the reference for our
//! functions, since they make the same DynamoDB calls.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(event.payload)
    }))
    .await
}
