//! The example service's `data-sync` Lambda function: the framework's projection of the command
//! table's stream into the data and history tables, with the framework's own sync targets only
//! (this service registers none of its own: a service adds them in the closure).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_data_sync::run(|_store, sync| sync).await
}
