//! The example service's own route function, `order-summary` (`[routes.order-summary]` in
//! `model.toml`): `GET /orders/summary` ([`cqrs_example_shop::order_summary`]), served by its
//! operation id.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::routes::<cqrs_example_shop::Shop>("order-summary", |routes| {
        routes.on("orderSummary", cqrs_example_shop::order_summary)
    })
}
