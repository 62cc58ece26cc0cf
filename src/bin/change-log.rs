//! The example service's `change-log` Lambda function (deployed with `ChangeLog=on`): the
//! framework's consumer of the change feed that writes one change log entry per version of every
//! item into the data table (`CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`, served by `GET /items`).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::change_log::<cqrs_example_shop::Shop>()
}
