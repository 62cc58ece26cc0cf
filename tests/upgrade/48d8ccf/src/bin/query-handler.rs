//! The `query-handler` Lambda function: the framework's query handler serving this service's model
//! (items, history, and the model's access patterns).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    cqrs_query_handler::run(tasks::MODEL).await
}
