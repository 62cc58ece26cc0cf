//! The `task-report` Lambda function: `GET /tasks/report`, the service's own route that reads the
//! relational read model (PostgreSQL at `SQL_URL`) as the caller's tenant ([`tasks::task_report`]).

use lambda_http::{Error, Request, service_fn};
use tokio::sync::Mutex;

#[tokio::main]
async fn main() -> Result<(), Error> {
    cqrs_store::logging::init();
    let mode = cqrs_caller::CallerMode::from_env()?;
    let url = std::env::var("SQL_URL").map_err(|_| "SQL_URL: the relational read model")?;
    // One connection per container, opened again after it broke.
    let client: Mutex<Option<tokio_postgres::Client>> = Mutex::new(None);
    let (client, url) = (&client, url.as_str());
    lambda_http::run(service_fn(move |request: Request| async move {
        let mut slot = client.lock().await;
        if slot.as_ref().is_none_or(tokio_postgres::Client::is_closed) {
            *slot = match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
                Ok((fresh, connection)) => {
                    tokio::spawn(connection);
                    Some(fresh)
                }
                Err(error) => {
                    tracing::error!(%error, "the relational read model is unreachable");
                    None
                }
            };
        }
        Ok::<_, Error>(tasks::task_report(slot.as_mut(), mode, request).await)
    }))
    .await
}
