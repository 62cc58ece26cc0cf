//! The `change-log` Lambda function (deployed with `ChangeLog=on`): a consumer of the change feed
//! that writes one entry per version of every item into the data table, per tenant and month
//! (`CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`), so that what changed in a tenant in a month, in order,
//! is one `GET /items` of that partition. Nothing of the service's goes here.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::change_log::<library::Library>()
}
