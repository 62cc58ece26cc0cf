//! The example service's own route function, `order-summary` (`[routes.order-summary]` in
//! `model.toml`): `GET /orders/summary` ([`cqrs_example_shop::order_summary`]), served by its
//! operation id.

#[tokio::main]
async fn main() -> Result<(), cqrs_routes::Error> {
    cqrs_routes::Routes::new(cqrs_example_shop::MODEL, "order-summary")?
        .on("orderSummary", cqrs_example_shop::order_summary)?
        .run()
        .await
}
