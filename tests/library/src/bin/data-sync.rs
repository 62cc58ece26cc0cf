//! The library's `data-sync` Lambda function: the framework's projection, with the library's own sync
//! target ([`library::LoanFeed`]) registered here (sync targets are deprecated: a consumer runs one
//! with a queue of its own; the library keeps its target to prove that a service's target still
//! runs).

#[allow(deprecated)]
fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::data_sync_with::<library::Library>(|sync| {
        sync.with_target(library::LoanFeed::printing())
    })
}
