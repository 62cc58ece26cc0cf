//! The example service's consumer of the change events, `order-audit` (`[consumers.order-audit]`
//! in `model.toml`: the `order` entity's events only). The framework runs it from its own FIFO
//! queue: each version of an order once, in version order per order; an error retries the event
//! and then parks it in its dead-letter queue with its reason. This one logs a line per event.

use cqrs_dynamo::consumer::{ConsumerError, Delivered, from_fn};

fn main() -> Result<(), cqrs_dynamo::Error> {
    let consumer = from_fn("order-audit", |delivered: Delivered| async move {
        let event = &delivered.event;
        cqrs_dynamo::tracing::info!(
            event_type = %event.event_type,
            subject = %event.subject,
            version = event.itemversion,
            tenant = %event.tenant,
            "order-audit"
        );
        Ok::<(), ConsumerError>(())
    });
    cqrs_dynamo::run::consumer::<cqrs_example_shop::Shop>(consumer)
}
