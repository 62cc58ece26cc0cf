//! The example service's `change-log` Lambda function (deployed with `ChangeLog=on`): the
//! framework's consumer of the change feed that writes one change log entry per version of every
//! item into the data table (`CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`, served by `GET /items`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_consumer::change_log::run(cqrs_example_shop::MODEL).await
}
