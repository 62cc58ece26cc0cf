//! The library's own route, `GET /members/{memberId}/loans` ([`library::member_loans`]): a Lambda
//! function of the service's own, on the framework's store, caller and problem documents.

use lambda_http::{Error, Request, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    cqrs_store::logging::init();
    let mode = cqrs_caller::CallerMode::from_env()?;
    let mut init = cqrs_store::client::InitClock::start();
    let client = cqrs_store::client::client_from_env(&mut init)?;
    let store = cqrs_store::Store::new(client, cqrs_store::Tables::from_env()?);
    let store = &store;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Error>(library::member_loans(store, mode, request).await)
    }))
    .await
}
