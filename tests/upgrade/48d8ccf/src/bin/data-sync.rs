//! The `data-sync` Lambda function: projects the command table's stream into the data and history
//! tables. This service's own sync targets (a search index, a SQL read model) are added in the
//! closure: `sync.with_target(MyTarget { .. })`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_data_sync::run(|_store, sync| sync).await
}
