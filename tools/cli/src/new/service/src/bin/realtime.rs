//! The `realtime` Lambda function (deployed with `RealtimeEvents=on`): a consumer of the change
//! feed that publishes every change event to the realtime API (AppSync Events), on its entity's
//! namespace, where browsers subscribed to their tenant or to an item receive it. Nothing of the
//! service's goes here: who may subscribe is the model's read rules.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::realtime::<{{crate}}::{{service}}>()
}
