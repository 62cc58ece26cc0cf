//! Per-test tables: a fresh, uniquely named copy of the template's tables.
//!
//! Every call to [`fresh_tables`] creates the command, data, history, idempotency and parked
//! tables under a new prefix (`t-<ulid>`), so tests running in parallel
//! against the same DynamoDB Local never share a table. Tables are not
//! deleted: the DynamoDB Local process is thrown away after the test run.

use std::time::Duration;

use aws_sdk_dynamodbstreams::types::Record;

use crate::tables::{self, TableError};
use crate::template::{
    self, COMMAND_TABLE, DATA_TABLE, HISTORY_TABLE, IDEMPOTENCY_TABLE, TableSpec, TemplateError,
};

/// Why [`create_tables`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateTablesError {
    /// `template.yaml` could not be read or parsed.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A table the fixtures need is not in `template.yaml`.
    #[error("{0} missing from {path}", path = template::service_template().display())]
    Missing(&'static str),
    /// DynamoDB refused to create a table.
    #[error(transparent)]
    Table(#[from] TableError),
}

/// The template's logical id of data-sync's parked-records table.
///
/// ```
/// assert_eq!(cqrs_testkit::fixtures::PARKED_TABLE, "ParkedTable");
/// ```
pub const PARKED_TABLE: &str = "ParkedTable";

/// The tables of one test (command, data, history, idempotency, parked), and a client for them.
#[derive(Debug, Clone)]
pub struct TestTables {
    /// DynamoDB client for DynamoDB Local.
    pub client: aws_sdk_dynamodb::Client,
    /// Name of this test's command table (stream: `NEW_IMAGE`).
    pub command: String,
    /// Name of this test's data table.
    pub data: String,
    /// Name of this test's history table (GSI `id-version-index`).
    pub history: String,
    /// Name of this test's idempotency table.
    pub idempotency: String,
    /// Name of this test's parked-records table (data-sync's records that can never be projected).
    pub parked: String,
}

impl TestTables {
    /// The command table's latest stream ARN.
    ///
    /// # Panics
    ///
    /// If DynamoDB Local cannot describe the table or it has no stream.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let tables = cqrs_testkit::fresh_tables().await;
    /// let arn = tables.command_stream_arn().await;
    /// assert!(arn.contains(&tables.command));
    /// # }
    /// ```
    pub async fn command_stream_arn(&self) -> String {
        match tables::latest_stream_arn(&self.client, &self.command).await {
            Ok(arn) => arn,
            Err(e) => panic!("command table stream ARN: {e}"),
        }
    }

    /// Waits (up to 10 s) until the command table's stream holds at least
    /// `min` records and returns them all, oldest first per shard.
    ///
    /// # Panics
    ///
    /// On an SDK error or when fewer than `min` records arrive in time.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let tables = cqrs_testkit::fresh_tables().await;
    /// // ... put one item into tables.command ...
    /// let records = tables.command_stream_records(1).await;
    /// assert_eq!(records[0].event_name().map(|e| e.as_str()), Some("INSERT"));
    /// # }
    /// ```
    pub async fn command_stream_records(&self, min: usize) -> Vec<Record> {
        let arn = self.command_stream_arn().await;
        let streams = crate::streams_client().await;
        match tables::wait_for_stream_records(&streams, &arn, min, Duration::from_secs(10)).await {
            Ok(records) => records,
            Err(e) => panic!("command table stream: {e}"),
        }
    }

    /// The data table's stream ARN (`NEW_AND_OLD_IMAGES`: what sql-sync reads).
    ///
    /// # Panics
    ///
    /// When the table has no stream or the SDK call fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let tables = cqrs_testkit::fresh_tables().await;
    /// assert!(tables.data_stream_arn().await.contains(&tables.data));
    /// # }
    /// ```
    pub async fn data_stream_arn(&self) -> String {
        match tables::latest_stream_arn(&self.client, &self.data).await {
            Ok(arn) => arn,
            Err(e) => panic!("data table stream ARN: {e}"),
        }
    }

    /// Waits (up to 10 s) until the data table's stream holds at least `min` records and returns
    /// them all, oldest first per shard.
    ///
    /// # Panics
    ///
    /// On an SDK error or when fewer than `min` records arrive in time.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let tables = cqrs_testkit::fresh_tables().await;
    /// // ... data-sync projects one item ...
    /// let records = tables.data_stream_records(1).await;
    /// # let _ = records;
    /// # }
    /// ```
    pub async fn data_stream_records(&self, min: usize) -> Vec<Record> {
        let arn = self.data_stream_arn().await;
        let streams = crate::streams_client().await;
        match tables::wait_for_stream_records(&streams, &arn, min, Duration::from_secs(10)).await {
            Ok(records) => records,
            Err(e) => panic!("data table stream: {e}"),
        }
    }
}

/// A fresh prefix for table names: `t-<ulid>` (unique per call).
///
/// # Examples
///
/// ```
/// let a = cqrs_testkit::fixtures::unique_prefix();
/// let b = cqrs_testkit::fixtures::unique_prefix();
/// assert!(a.starts_with("t-"));
/// assert_ne!(a, b);
/// ```
pub fn unique_prefix() -> String {
    format!("t-{}", ulid::Ulid::new().to_string().to_lowercase())
}

/// Creates the workspace template's tables under `prefix` (names as the
/// template's `TableName: !Sub '${Prefix}-…'` would give with
/// `Prefix = prefix`) and returns them.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = cqrs_testkit::client().await;
/// let tables = cqrs_testkit::fixtures::create_tables(client, "dev").await?;
/// assert_eq!(tables.command, "dev-command");
/// # Ok(()) }
/// ```
pub async fn create_tables(
    client: aws_sdk_dynamodb::Client,
    prefix: &str,
) -> Result<TestTables, CreateTablesError> {
    let specs = template::workspace_tables()?;
    let spec = |id: &'static str| -> Result<(TableSpec, String), CreateTablesError> {
        let spec = template::find(&specs, id).ok_or(CreateTablesError::Missing(id))?;
        let name = spec
            .table_name(&[("Prefix", prefix)])
            .unwrap_or_else(|| format!("{prefix}-{id}"));
        Ok((spec.clone(), name))
    };
    let (command_spec, command) = spec(COMMAND_TABLE)?;
    let (data_spec, data) = spec(DATA_TABLE)?;
    let (history_spec, history) = spec(HISTORY_TABLE)?;
    let (idempotency_spec, idempotency) = spec(IDEMPOTENCY_TABLE)?;
    let (parked_spec, parked) = spec(PARKED_TABLE)?;
    tokio::try_join!(
        tables::create_table(&client, &command_spec, &command),
        tables::create_table(&client, &data_spec, &data),
        tables::create_table(&client, &history_spec, &history),
        tables::create_table(&client, &idempotency_spec, &idempotency),
        tables::create_table(&client, &parked_spec, &parked),
    )?;
    Ok(TestTables {
        client,
        command,
        data,
        history,
        idempotency,
        parked,
    })
}

/// Creates the template's command, data, history, idempotency and parked tables in DynamoDB Local
/// under a unique prefix ([`unique_prefix`]) and returns their names with a
/// client.
///
/// # Panics
///
/// When `AWS_ENDPOINT_URL_DYNAMODB` is unset (run the tests through
/// `make test`), the template cannot be read, or table creation fails.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() {
/// let tables = cqrs_testkit::fresh_tables().await;
/// tables
///     .client
///     .put_item()
///     .table_name(&tables.data)
///     .item("pk", aws_sdk_dynamodb::types::AttributeValue::S("tenant#1".into()))
///     .item("sk", aws_sdk_dynamodb::types::AttributeValue::S("item#1".into()))
///     .send()
///     .await
///     .unwrap();
/// # }
/// ```
pub async fn fresh_tables() -> TestTables {
    let client = crate::client().await;
    let prefix = unique_prefix();
    match create_tables(client, &prefix).await {
        Ok(tables) => tables,
        Err(e) => panic!("creating test tables {prefix}-*: {e}"),
    }
}
