//! sql-sync: the data table's stream into the relational read model (PostgreSQL).
//!
//! It has its own event source mapping, on the **data table's** stream (`NEW_AND_OLD_IMAGES`: the
//! newest state of each item, in per-item order), so a slow or failing database never stalls or
//! slows data-sync, whose mapping reads the command table's stream.
//!
//! One batch is one transaction ([`cqrs_sql::write::Writer::apply_pipelined`]): every `INSERT` and
//! `MODIFY` an idempotent, newest-wins upsert of the item's row, every `REMOVE` (the item expired) a
//! delete at that version. The batch goes in a few statements ([`chunks`]): the next chunk's records
//! are converted while PostgreSQL writes the one before. When the transaction fails (the database
//! is down, restarting, refusing), the whole batch is reported in `batchItemFailures` from its
//! first record, and Lambda retries it, bisects it, and after its retries sends it to the
//! on-failure destination; the connection is opened again on the next invocation. A record that is not an item of the data table (an image that does not
//! convert) is reported from its position, after the records before it were written: retried, then
//! isolated by bisection and sent to the on-failure destination with nothing after it lost.
//!
//! Where it connects, and how (a connection string locally, RDS Proxy with IAM authentication over
//! TLS in AWS), is [`database`]'s.
//!
//! ```ignore
//! // A service's src/bin/sql-sync.rs (its model and migrations are files of the service):
//! #[tokio::main]
//! async fn main() -> Result<(), lambda_runtime::Error> {
//!     const MIGRATIONS: &[(u32, &str, &str)] =
//!         &[(1, "V1__model.sql", include_str!("../../migrations/V1__model.sql"))];
//!     cqrs_sql_sync::run(include_str!("../../model.toml"), MIGRATIONS).await
//! }
//! ```
#![forbid(unsafe_code)]

pub mod database;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use cqrs_item::Item;
use cqrs_model::Model;
use cqrs_sql::rows::Rows;
use cqrs_sql::write::{Change, Writer, Written};
use tokio::sync::Mutex;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::database::Database;

/// Why sql-sync could not start.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The database could not be reached.
    #[error("connecting to the database: {0}")]
    Connect(#[from] tokio_postgres::Error),
    /// The migrations could not be applied.
    #[error(transparent)]
    Migrate(#[from] cqrs_sql::migrate::MigrateError),
    /// The configuration is missing or wrong.
    #[error("{0}")]
    Config(String),
}

/// What one record of the data table's stream asks for.
///
/// ```
/// let record = aws_lambda_events::event::dynamodb::EventRecord::default();
/// let rows = cqrs_sql::rows::Rows::new(cqrs_model::Model::example());
/// assert!(cqrs_sql_sync::change(&rows, &record).is_err(), "no eventName");
/// ```
pub fn change(rows: &Rows, record: &EventRecord) -> Result<Change, String> {
    change_taking(rows, &mut record.clone())
}

/// [`change`], taking the image it reads out of `record` instead of copying it (a batch's records
/// are not needed whole once converted).
fn change_taking(rows: &Rows, record: &mut EventRecord) -> Result<Change, String> {
    let event_name = record.event_name.as_str();
    let image = |image: &mut serde_dynamo::Item| -> Result<Item, String> {
        if image.is_empty() {
            return Err(format!(
                "{event_name} without its image (the stream view type must be NEW_AND_OLD_IMAGES)"
            ));
        }
        Item::from_image(std::mem::take(image))
            .map_err(|e| format!("the image is not an item: {e}"))
    };
    // What is not read is freed now too (while PostgreSQL writes the chunk before), not with the
    // whole event after the commit.
    let change = &mut record.change;
    drop(std::mem::take(&mut change.keys));
    match event_name {
        "INSERT" | "MODIFY" => {
            drop(std::mem::take(&mut change.old_image));
            let item = image(&mut change.new_image)?;
            Ok(Change::Upsert(rows.row(item)))
        }
        "REMOVE" => {
            drop(std::mem::take(&mut change.new_image));
            let item = image(&mut change.old_image)?;
            Ok(Change::Remove {
                table: rows
                    .model()
                    .entity_of_keys(&item.pk, &item.sk)
                    .map(|e| e.name.clone()),
                pk: item.pk,
                sk: item.sk,
                version: item.version,
            })
        }
        other => Err(format!("unknown eventName {other:?}")),
    }
}

/// The function: the model, its schema, where its database is, and one connection, opened when
/// first needed and again after a failure.
pub struct SqlSync {
    rows: Rows,
    database: Database,
    tls: MakeRustlsConnect,
    writer: Mutex<Option<Writer>>,
}

impl SqlSync {
    /// sql-sync for `model`, writing to the database at `url`
    /// (`postgres://user:password@host:port/database`).
    ///
    /// ```
    /// let sync = cqrs_sql_sync::SqlSync::new(cqrs_model::Model::example(), "postgres://127.0.0.1/x");
    /// # let _ = sync;
    /// ```
    pub fn new(model: Model, url: &str) -> Self {
        Self::connecting(model, Database::Url(url.to_string()))
    }

    /// sql-sync for `model`, writing to `database` (see [`database`]); TLS trusts the Amazon
    /// Trust Services roots ([`cqrs_store::client::AMAZON_ROOTS`]).
    ///
    /// ```
    /// use cqrs_sql_sync::{SqlSync, database::{Database, Iam}};
    /// let proxy = Iam {
    ///     host: "shop.proxy-abc123.eu-west-1.rds.amazonaws.com".into(),
    ///     port: 5432,
    ///     database: "cqrs".into(),
    ///     user: "cqrs_sync".into(),
    ///     region: "eu-west-1".into(),
    /// };
    /// let sync = SqlSync::connecting(cqrs_model::Model::example(), Database::Iam(proxy));
    /// # let _ = sync;
    /// ```
    pub fn connecting(model: Model, database: Database) -> Self {
        SqlSync {
            rows: Rows::new(model),
            database,
            // The compiled-in roots always parse (database::tls's doctest holds it).
            tls: database::tls(cqrs_store::client::AMAZON_ROOTS)
                .expect("the Amazon Trust Services roots are valid certificates"),
            writer: Mutex::new(None),
        }
    }

    async fn connect(&self) -> Result<Writer, SyncError> {
        Ok(Writer::new(self.database.connect(&self.tls).await?))
    }

    /// Applies the service's migrations that are not applied yet (see
    /// [`cqrs_sql::migrate::apply`]); returns how many.
    ///
    /// ```no_run
    /// # async fn example(sync: cqrs_sql_sync::SqlSync) {
    /// let applied = sync.migrate(&[(1, "V1__model.sql", "CREATE TABLE t (x int);")]).await.unwrap();
    /// # }
    /// ```
    pub async fn migrate(&self, migrations: &[(u32, &str, &str)]) -> Result<usize, SyncError> {
        let mut slot = self.writer.lock().await;
        if slot.is_none() {
            *slot = Some(self.connect().await?);
        }
        let client = slot.as_mut().expect("connected").client();
        let owned: Vec<(u32, String, String)> = migrations
            .iter()
            .map(|(v, name, sql)| (*v, name.to_string(), sql.to_string()))
            .collect();
        Ok(cqrs_sql::migrate::apply(client, &owned).await?)
    }

    /// One batch: written in one transaction; what could not be written reported from its first
    /// record.
    ///
    /// ```no_run
    /// # async fn example(sync: cqrs_sql_sync::SqlSync, event: aws_lambda_events::event::dynamodb::Event) {
    /// let response = sync.handle(event).await;
    /// assert!(response.batch_item_failures.is_empty());
    /// # }
    /// ```
    pub async fn handle(&self, mut event: Event) -> DynamoDbEventResponse {
        let records = event.records.len();
        let result = {
            let changes = event
                .records
                .iter_mut()
                .enumerate()
                .map(|(at, record)| change_taking(&self.rows, record).map_err(|e| (at, e)));
            let (first, most) = chunks(records);
            self.write(changes, first, most).await
        };
        let mut failed_at = None;
        match result {
            Ok((written, stopped)) => {
                tracing::info!(
                    records,
                    rows = written.rows,
                    deleted = written.deleted,
                    stale = written.stale,
                    "batch written"
                );
                if let Some((at, reason)) = stopped {
                    tracing::error!(
                        sequence_number = event.records[at].change.sequence_number.as_deref(),
                        reason,
                        "a record of the data table's stream is not an item: reported, not written"
                    );
                    failed_at = Some(at);
                }
            }
            Err(error) => {
                tracing::error!(%error, records, "the batch was not written; it is retried");
                failed_at = Some(0);
            }
        }
        let mut response = DynamoDbEventResponse::default();
        if let Some(at) = failed_at
            && let Some(record) = event.records.get(at)
        {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = record.change.sequence_number.clone();
            response.batch_item_failures.push(failure);
        }
        response
    }

    /// Writes what `changes` yields in one transaction, converting the next chunk of records while
    /// PostgreSQL writes the one before ([`Writer::apply_pipelined`]); the connection is opened
    /// again after a failure.
    async fn write<E>(
        &self,
        changes: impl Iterator<Item = Result<Change, E>>,
        first: usize,
        most: usize,
    ) -> Result<(Written, Option<E>), SyncError> {
        let mut slot = self.writer.lock().await;
        if slot.as_ref().is_none_or(Writer::is_closed) {
            *slot = Some(self.connect().await?);
        }
        let writer = slot.as_mut().expect("connected");
        let result = writer.apply_pipelined(changes, first, most).await;
        if result.is_err() {
            // A fresh connection next time: this one may be broken.
            *slot = None;
        }
        Ok(result?)
    }
}

/// How many records of a batch of `records` one statement writes: `(first, most)` for
/// [`Writer::apply_pipelined`]. The first chunk is small ([`MIN_CHUNK`]), so that PostgreSQL starts
/// early; the next ones double, up to a quarter of the batch ([`PIPELINE_DEPTH`]), so that
/// converting one chunk overlaps PostgreSQL writing the one before, and never fewer than
/// [`MIN_CHUNK`] (a statement's own cost, spread over too few rows, would cost more than the
/// overlap saves). Chosen by measurement (`make bench`, BENCHMARKS.md section 3b).
///
/// ```
/// assert_eq!(cqrs_sql_sync::chunks(1_000), (50, 250));
/// assert_eq!(cqrs_sql_sync::chunks(100), (50, 50));
/// assert_eq!(cqrs_sql_sync::chunks(10), (10, 10));
/// ```
pub fn chunks(records: usize) -> (usize, usize) {
    let records = records.max(1);
    let most = records.div_ceil(PIPELINE_DEPTH).max(MIN_CHUNK).min(records);
    (MIN_CHUNK.min(records), most)
}

/// Into how many chunks, at least, [`chunks`] cuts a large batch.
pub const PIPELINE_DEPTH: usize = 4;

/// The fewest records [`chunks`] puts in a statement (and the first chunk's size).
pub const MIN_CHUNK: usize = 50;

/// The function's `main`: the model's text, the service's migrations (applied at cold start), the
/// database its environment names ([`Database::from_env`]: `SQL_URL` locally, an RDS Proxy with
/// IAM authentication over TLS in AWS).
pub async fn run(
    model_text: &str,
    migrations: &[(u32, &str, &str)],
) -> Result<(), lambda_runtime::Error> {
    use lambda_runtime::{LambdaEvent, service_fn};
    cqrs_store::logging::init();
    let model = Model::parse(model_text)?;
    let database = Database::from_env(|name| std::env::var(name).ok())?;
    match &database {
        Database::Url(_) => tracing::info!("database: SQL_URL"),
        Database::Iam(iam) => {
            tracing::info!(host = %iam.host, port = iam.port, database = %iam.database, user = %iam.user, "database: IAM authentication over TLS")
        }
    }
    let sync = SqlSync::connecting(model, database);
    let applied = sync.migrate(migrations).await?;
    tracing::info!(applied, "migrations");
    let sync = &sync;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<_, lambda_runtime::Error>(sync.handle(event.payload).await)
    }))
    .await
}
