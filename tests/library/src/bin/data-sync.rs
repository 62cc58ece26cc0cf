//! The library's `data-sync` Lambda function: the framework's projection, with the library's own sync
//! target ([`library::LoanFeed`]) registered here.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_data_sync::run(|_store, sync| sync.with_target(library::LoanFeed::printing())).await
}
