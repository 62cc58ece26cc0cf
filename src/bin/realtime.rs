//! The example service's `realtime` Lambda function (deployed with `RealtimeEvents=on`): a
//! consumer of the change feed that publishes every change event to the realtime API (AppSync
//! Events), on its entity's namespace, for the browsers subscribed to its tenant or item.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::realtime::<cqrs_example_shop::Shop>()
}
