//! The example service's `query-handler` Lambda function: the framework's query handler serving
//! this service's model (`model.toml`, compiled in; parsed on the first access-pattern request).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    cqrs_query_handler::run(include_str!("../../model.toml")).await
}
