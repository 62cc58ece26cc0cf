//! The `task-audit` Lambda function: the service's consumer of its own change events, declared in
//! `model.toml` (`[consumers.task-audit]`: the `task` entity's events only). This is the place a
//! team reacts to a change (mail someone, update a search index, call another service): the
//! framework runs it from its own FIFO queue and hands it each version of each task once, in
//! version order per task. Return `Ok` when the event is handled; `ConsumerError::retry(..)` to
//! have it again later (after its `max_receive` attempts it is parked in the dead-letter queue with
//! its reason, and `cqrs redrive` feeds it back); `ConsumerError::poison(..)` to park it now.
//! A slow or failing consumer delays neither another consumer nor the service's writes.

use cqrs_dynamo::consumer::{ConsumerError, Delivered, from_fn};

fn main() -> Result<(), cqrs_dynamo::Error> {
    let consumer = from_fn("task-audit", |delivered: Delivered| async move {
        // The event (CloudEvents 1.0): its type (task.created, task.updated, task.deleted), the
        // item (subject), its version and tenant; `delivered.item` is the task at that version.
        let event = &delivered.event;
        cqrs_dynamo::tracing::info!(
            event_type = %event.event_type,
            subject = %event.subject,
            version = event.itemversion,
            tenant = %event.tenant,
            "task-audit"
        );
        Ok::<(), ConsumerError>(())
    });
    cqrs_dynamo::run::consumer::<{{crate}}::{{service}}>(consumer)
}
