//! sql-sync: the data table's stream into the relational read model (PostgreSQL).
//!
//! It has its own event source mapping, on the **data table's** stream (`NEW_AND_OLD_IMAGES`: the
//! newest state of each item, in per-item order), so a slow or failing database never stalls or
//! slows data-sync, whose mapping reads the command table's stream.
//!
//! One batch is one transaction ([`cqrs_sql::write::Writer::write_batch`]): every `INSERT` and
//! `MODIFY` an idempotent, newest-wins upsert of the item's row, every `REMOVE` (the item expired) a
//! delete at that version. The batch goes in a few statements ([`chunks`]): the next chunk's records
//! are converted while PostgreSQL writes the one before.
//!
//! No record can stop a batch, and none is lost:
//!
//! - a U+0000 in a string value, which PostgreSQL cannot store, is written as U+FFFD
//!   ([`cqrs_sql::rows::storable`]);
//! - a record whose key holds U+0000 (never rewritten into another key), a record that is not an
//!   item of the data table, and a row PostgreSQL refuses (a data error: SQLSTATE class 22 or 23,
//!   [`cqrs_sql::write::ErrorClass::Data`]; the chunk is written again row by row under savepoints
//!   to find it) are **parked** in `cqrs_parked` ([`cqrs_sql::schema::PARKED_TABLE`]) with their
//!   reason (PostgreSQL's own message for a refused row), in the batch's transaction, and logged at
//!   error level; the rest of the batch is written. They are never reported to Lambda: retrying
//!   them would fail again, and hold their shard until the record's age limit. An operator reads
//!   the table, fixes the cause, writes the items again (`cqrs rebuild --sql`) and deletes the
//!   parked rows.
//! - When the transaction fails otherwise (the connection closed, the database restarting or
//!   refusing), the batch is written once more at once on a new connection (RDS Proxy closes idle
//!   client connections, and the first batch after that finds its connection closed); if it fails
//!   again, nothing of it was written and it is reported in `batchItemFailures` by its first record,
//!   whose own sequence number it is: Lambda retries it until the record's age limit
//!   (`MaximumRetryAttempts: -1`, `MaximumRecordAgeInSeconds`; every write is idempotent), and then
//!   sends it to the on-failure destination. A connection that does not open within
//!   [`database::CONNECT_TIMEOUT`] fails the same way, well inside the function's timeout.
//!
//! Where it connects, and how (a connection string locally, RDS Proxy with IAM authentication over
//! TLS in AWS), is [`database`]'s. In AWS (the template's `SqlReadModel` aurora or existing) it
//! signs in to the proxy (`SQL_HOST`, the `SqlProxyEndpoint` output) as `SQL_USER`: `cqrs_sync`,
//! Aurora's master user, or `SqlExistingUser`, with an IAM token signed with its role's
//! credentials (`rds-db:connect` on `dbuser:<proxy id>/<user>`), over TLS verified against the
//! Amazon roots; the proxy signs in to the cluster as the same user with an IAM token of its own
//! role (end-to-end IAM authentication: no password, no secret read anywhere). At every cold start,
//! after the migrations, it runs the readers' roles' DDL ([`cqrs_sql::schema::access_ddl`]): the
//! reader role granted to itself, the routes' database user `cqrs_routes` created and allowed to
//! `SET ROLE cqrs_reader` only, and `rds_iam` granted to both where RDS has that role, so that a
//! database migrated by an earlier release gets them too. The service's routes that read sql
//! sign in the same way, as `cqrs_routes` (`cqrs_sql::connect`, `cqrs_sql::read::as_tenant`).
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
use cqrs_sql::write::{BatchOutcome, Change, Entry, ErrorClass, Parked, Writer};
use tokio::sync::Mutex;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::database::Database;

/// What failed: the connection, a batch's transaction, the migrations or the configuration. The
/// text of a database error is PostgreSQL's own ([`cqrs_sql::write::describe`]).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The database could not be reached, or refused the connection.
    #[error("connecting to the database: {}", cqrs_sql::write::describe(.0))]
    Connect(tokio_postgres::Error),
    /// The database did not answer the connection within this time
    /// ([`database::CONNECT_TIMEOUT`]).
    #[error("connecting to the database: no answer within {0:?}")]
    ConnectTimeout(std::time::Duration),
    /// A batch's transaction failed (nothing of it is written): the connection closed under it,
    /// or the database refused it for a reason no row is to blame for (data errors are isolated
    /// and parked instead).
    #[error("writing the batch: {}", cqrs_sql::write::describe(.0))]
    Write(tokio_postgres::Error),
    /// The migrations could not be applied.
    #[error(transparent)]
    Migrate(#[from] cqrs_sql::migrate::MigrateError),
    /// The configuration is missing or wrong.
    #[error("{0}")]
    Config(String),
}

impl SyncError {
    /// What kind of failure it is: a database error by its SQLSTATE
    /// ([`ErrorClass::of`]); a connection that timed out, or a lock the migrations did not get in
    /// time, is transient; the other migration errors and the configuration need an operator.
    ///
    /// ```
    /// use cqrs_sql::write::ErrorClass;
    /// let error = cqrs_sql_sync::SyncError::ConnectTimeout(cqrs_sql_sync::database::CONNECT_TIMEOUT);
    /// assert_eq!(error.class(), ErrorClass::Transient);
    /// assert_eq!(cqrs_sql_sync::SyncError::Config("x".into()).class(), ErrorClass::Other);
    /// let locked = cqrs_sql::migrate::MigrateError::LockTimeout { doing: "x".into(), detail: "y".into() };
    /// assert_eq!(cqrs_sql_sync::SyncError::Migrate(locked).class(), ErrorClass::Transient);
    /// ```
    pub fn class(&self) -> ErrorClass {
        match self {
            SyncError::Connect(error) | SyncError::Write(error) => ErrorClass::of(error),
            // A lock not granted in time: the next try (the next batch) may get it.
            SyncError::ConnectTimeout(_)
            | SyncError::Migrate(cqrs_sql::migrate::MigrateError::LockTimeout { .. }) => {
                ErrorClass::Transient
            }
            SyncError::Migrate(_) | SyncError::Config(_) => ErrorClass::Other,
        }
    }
}

/// What one record of the data table's stream asks for: `Err` with the reason when it is not an
/// item, or when its key holds U+0000 (sql-sync parks such a record).
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
    let (upsert, item) = item_taking(record)?;
    if let Some(reason) = cqrs_sql::rows::unstorable_key(&item) {
        return Err(reason);
    }
    Ok(if upsert {
        Change::Upsert(rows.row(item))
    } else {
        removal(rows, item)
    })
}

/// The item of `record` (its new image for an `INSERT` or `MODIFY`: `true`, its old image for a
/// `REMOVE`: `false`), taken out of it.
fn item_taking(record: &mut EventRecord) -> Result<(bool, Item), String> {
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
    match event_name {
        "INSERT" | "MODIFY" => {
            drop(std::mem::take(&mut change.old_image));
            Ok((true, image(&mut change.new_image)?))
        }
        "REMOVE" => {
            drop(std::mem::take(&mut change.new_image));
            Ok((false, image(&mut change.old_image)?))
        }
        other => Err(format!("unknown eventName {other:?}")),
    }
}

fn removal(rows: &Rows, item: Item) -> Change {
    Change::Remove {
        table: rows
            .model()
            .entity_of_keys(&item.pk, &item.sk)
            .map(|e| e.name.clone()),
        pk: item.pk,
        sk: item.sk,
        version: item.version,
    }
}

/// What sql-sync does with `record`: write its change, or park it (a key holding U+0000, a
/// record that is not an item), taking its image.
fn entry(rows: &Rows, record: &mut EventRecord) -> Entry {
    let sequence_number = record.change.sequence_number.clone().unwrap_or_default();
    let parked = |record: &EventRecord, item: Option<&Item>, reason: String| {
        let key = |name: &str| match record.change.keys.get(name) {
            Some(serde_dynamo::AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        };
        Parked {
            sequence_number: sequence_number.clone(),
            pk: item.map(|i| i.pk.clone()).or_else(|| key("pk")),
            sk: item.map(|i| i.sk.clone()).or_else(|| key("sk")),
            version: item.map(|i| i.version),
            event_name: record.event_name.clone(),
            reason,
            // The item when it converted; otherwise what is left of the record (its keys: the
            // item is read again from the data table by them).
            record: match item {
                Some(item) => serde_json::to_string(item).unwrap_or_default(),
                None => serde_json::json!({
                    "eventName": record.event_name,
                    "sequenceNumber": record.change.sequence_number,
                    "keys": record.change.keys,
                })
                .to_string(),
            },
        }
    };
    let entry = match item_taking(record) {
        Err(reason) => Entry::Park(parked(record, None, reason)),
        Ok((upsert, item)) => match cqrs_sql::rows::unstorable_key(&item) {
            Some(reason) => Entry::Park(parked(record, Some(&item), reason)),
            None if upsert => Entry::Write(sequence_number.clone(), Change::Upsert(rows.row(item))),
            None => Entry::Write(sequence_number.clone(), removal(rows, item)),
        },
    };
    drop(std::mem::take(&mut record.change.keys));
    entry
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

    /// Applies the service's migrations that are not applied yet, and makes sql-sync's own table
    /// ([`cqrs_sql::schema::PARKED_TABLE`]) when it is missing, with
    /// [`cqrs_sql::migrate::apply_with`]; returns how many migrations were applied. Every cold
    /// start calls it, and many at once after a deploy are safe:
    ///
    /// - with nothing to do (the common case) it only reads the history, and takes no lock;
    /// - otherwise one start at a time applies them, under the session advisory lock
    ///   [`cqrs_sql::migrate::MIGRATION_LOCK`], waited for at most
    ///   [`cqrs_sql::migrate::LOCK_WAIT`]; the others find them applied;
    /// - a migration's statement that waits longer than [`cqrs_sql::migrate::LOCK_TIMEOUT`] for a
    ///   table (an `ALTER TABLE` behind a long report query) fails instead of holding every writer
    ///   behind it: nothing is applied, the error is
    ///   [`cqrs_sql::migrate::MigrateError::LockTimeout`] (SQLSTATE 55P03), and [`run`] tries
    ///   again at the next batch (the batch is reported meanwhile: Lambda retries it, nothing is
    ///   lost);
    /// - migrations the database has and this release does not know (a rollback: a newer release
    ///   applied them) stop nothing: they are logged at warn level. A migration edited after it
    ///   was applied is still refused.
    ///
    /// ```no_run
    /// # async fn example(sync: cqrs_sql_sync::SqlSync) {
    /// let applied = sync.migrate(&[(1, "V1__model.sql", "CREATE TABLE t (x int);")]).await.unwrap();
    /// # }
    /// ```
    pub async fn migrate(&self, migrations: &[(u32, &str, &str)]) -> Result<usize, SyncError> {
        let mut slot = self.writer.lock().await;
        if slot.as_ref().is_none_or(Writer::is_closed) {
            *slot = Some(self.connect().await?);
        }
        let client = slot.as_mut().expect("connected").client();
        let owned: Vec<(u32, String, String)> = migrations
            .iter()
            .map(|(v, name, sql)| (*v, name.to_string(), sql.to_string()))
            .collect();
        let options = cqrs_sql::migrate::Options {
            // sql-sync's own table, whatever the service's migrations hold (a stack deployed
            // before it existed gets it at its next cold start), under the same lock.
            tables: vec![(
                cqrs_sql::schema::PARKED_TABLE.to_string(),
                cqrs_sql::schema::parked_table_ddl(),
            )],
            ..Default::default()
        };
        let mut result = cqrs_sql::migrate::apply_with(client, &owned, &options).await;
        if result.is_ok() {
            // The readers' roles (the reader role's grant to this user, the routes' user
            // cqrs_routes, rds_iam where it exists), for a database whose first migration
            // predates them (cqrs_sql::schema::access_ddl): catalog reads where they are there.
            if let Err(e) = client.batch_execute(&cqrs_sql::schema::access_ddl()).await {
                result = Err(cqrs_sql::migrate::MigrateError::Apply(format!(
                    "the readers' roles (cqrs_sql::schema::access_ddl): {}",
                    cqrs_sql::write::describe(&e)
                )));
            }
        }
        if result.is_err() && slot.as_ref().is_some_and(Writer::is_closed) {
            *slot = None;
        }
        let report = result?;
        if !report.unknown.is_empty() {
            tracing::warn!(
                unknown = ?report.unknown,
                "the database has migrations this release does not know (a newer release applied \
                 them: a rollback): sql-sync runs on, writing the columns it knows"
            );
        }
        Ok(report.applied.len())
    }

    /// One batch, in one transaction: every record written or parked (see the crate's
    /// documentation); when the transaction fails, written once more at once on a new
    /// connection; when that fails too, reported by its first record (nothing of it was written).
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
            let (first, most) = chunks(records);
            let mut entries = event
                .records
                .iter_mut()
                .map(|record| entry(&self.rows, record));
            let mut spent = Vec::with_capacity(records);
            let mut result = self.write(&mut entries, &mut spent, first, most).await;
            if let Err(error @ SyncError::Write(_)) = &result
                && error.class() != ErrorClass::Data
            {
                // The connection closed under the batch (RDS Proxy's idle close, a restart, a
                // failover), or the database refused it for now: once more, on a new connection,
                // before Lambda spends a retry on it.
                tracing::warn!(
                    %error,
                    class = ?error.class(),
                    records,
                    "the batch was not written: writing it once more on a new connection"
                );
                let mut again = std::mem::take(&mut spent).into_iter().chain(&mut entries);
                result = self.write(&mut again, &mut spent, first, most).await;
            }
            result
        };
        let mut response = DynamoDbEventResponse::default();
        match result {
            Ok(BatchOutcome { written, parked }) => {
                for record in &parked {
                    tracing::error!(
                        sequence_number = record.sequence_number,
                        event_name = record.event_name,
                        pk = ?record.pk,
                        sk = ?record.sk,
                        version = record.version,
                        reason = record.reason,
                        "a record of the data table's stream could not be written: parked in {}",
                        cqrs_sql::schema::PARKED_TABLE
                    );
                }
                tracing::info!(
                    records,
                    rows = written.rows,
                    deleted = written.deleted,
                    stale = written.stale,
                    parked = parked.len(),
                    "batch written"
                );
            }
            Err(error) => {
                tracing::error!(
                    %error,
                    class = ?error.class(),
                    records,
                    "the batch was not written; Lambda retries it from its first record"
                );
                if let Some(record) = event.records.first() {
                    let mut failure = DynamoDbBatchItemFailure::default();
                    failure.item_identifier = record.change.sequence_number.clone();
                    response.batch_item_failures.push(failure);
                }
            }
        }
        response
    }

    /// Writes what `entries` yields in one transaction ([`Writer::write_batch`]), opening the
    /// connection when there is none; it is dropped after a failure (a fresh one next time).
    async fn write(
        &self,
        entries: &mut dyn Iterator<Item = Entry>,
        spent: &mut Vec<Entry>,
        first: usize,
        most: usize,
    ) -> Result<BatchOutcome, SyncError> {
        let mut slot = self.writer.lock().await;
        if slot.as_ref().is_none_or(Writer::is_closed) {
            *slot = Some(self.connect().await?);
        }
        let writer = slot.as_mut().expect("connected");
        let result = writer.write_batch(entries, spent, first, most).await;
        if result.is_err() {
            *slot = None;
        }
        result.map_err(SyncError::Write)
    }
}

/// How many records of a batch of `records` one statement writes: `(first, most)` for
/// [`Writer::write_batch`]. The first chunk is small ([`MIN_CHUNK`]), so that PostgreSQL starts
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
    // At cold start; when that fails (another start holds the migration lock too long, a
    // migration waited too long for a table, the database is away), before each batch until it
    // succeeds, the batch being reported meanwhile (Lambda retries it; nothing is lost).
    let migrated = std::sync::atomic::AtomicBool::new(false);
    let migrate = || async {
        match sync.migrate(migrations).await {
            Ok(applied) => {
                tracing::info!(applied, "migrations");
                migrated.store(true, std::sync::atomic::Ordering::Relaxed);
                true
            }
            Err(error) => {
                tracing::error!(
                    %error,
                    class = ?error.class(),
                    "the migrations were not applied: every batch is reported (Lambda retries \
                     it) until they are"
                );
                false
            }
        }
    };
    migrate().await;
    let (sync, migrated, migrate) = (&sync, &migrated, &migrate);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        if !migrated.load(std::sync::atomic::Ordering::Relaxed) && !migrate().await {
            return Ok::<_, lambda_runtime::Error>(retry_all(&event.payload));
        }
        Ok::<_, lambda_runtime::Error>(sync.handle(event.payload).await)
    }))
    .await
}

/// The answer that has Lambda retry the whole of `event`: its first record reported.
///
/// ```
/// let mut event = aws_lambda_events::event::dynamodb::Event::default();
/// event.records.push(Default::default());
/// event.records[0].change.sequence_number = Some("42".into());
/// let response = cqrs_sql_sync::retry_all(&event);
/// assert_eq!(response.batch_item_failures[0].item_identifier.as_deref(), Some("42"));
/// ```
pub fn retry_all(event: &Event) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    if let Some(record) = event.records.first() {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = record.change.sequence_number.clone();
        response.batch_item_failures.push(failure);
    }
    response
}
