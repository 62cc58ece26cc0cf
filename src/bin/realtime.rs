//! The example service's `realtime` Lambda function (deployed with `RealtimeEvents=on`): a
//! consumer of the change feed that publishes every change event to the realtime API (AppSync
//! Events), on its entity's namespace, for the browsers subscribed to its tenant or item.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_realtime::run(cqrs_example_shop::MODEL).await
}
