//! Creating the template's tables with the SDK, and reading their streams.
//!
//! [`create_table`] turns a [`TableSpec`] into `CreateTable` (same keys,
//! attribute definitions, indexes, stream and on-demand billing) followed by
//! `UpdateTimeToLive`, and waits until the table and its indexes are `ACTIVE`.
//! The functions here work against any DynamoDB endpoint the client points
//! at; the testkit only ever builds clients for DynamoDB Local.

use std::error::Error as StdError;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{BuildError, DisplayErrorContext};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement,
    LocalSecondaryIndex, Projection, StreamSpecification, TableStatus, TimeToLiveSpecification,
};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};

use crate::template::{IndexSpec, KeySpec, TableSpec};

/// How long [`create_table`] waits for `ACTIVE`.
pub const ACTIVE_TIMEOUT: Duration = Duration::from_secs(60);

/// A failed DynamoDB / DynamoDB Streams operation.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The service (or the connection to it) failed.
    #[error("{operation} on {target}: {detail}")]
    Sdk {
        /// API name, e.g. `CreateTable`.
        operation: &'static str,
        /// Table name or stream ARN.
        target: String,
        /// The full error chain, rendered.
        detail: String,
        /// The SDK error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The spec could not be turned into a request.
    #[error("invalid request for {table}: {source}")]
    Build {
        /// Table name.
        table: String,
        /// What the SDK builder rejected.
        #[source]
        source: BuildError,
    },
    /// The table did not become `ACTIVE` in time.
    #[error("table {table} not ACTIVE after {waited:?}")]
    NotActive {
        /// Table name.
        table: String,
        /// How long we waited.
        waited: Duration,
    },
    /// The table has no stream.
    #[error("table {table} has no stream")]
    NoStream {
        /// Table name.
        table: String,
    },
    /// Fewer stream records than expected arrived in time.
    #[error("stream {stream_arn}: {got} record(s) after {waited:?}, wanted at least {wanted}")]
    StreamTimeout {
        /// The stream.
        stream_arn: String,
        /// Records seen.
        got: usize,
        /// Records wanted.
        wanted: usize,
        /// How long we waited.
        waited: Duration,
    },
}

fn sdk_error<E>(operation: &'static str, target: &str, e: E) -> TableError
where
    E: StdError + Send + Sync + 'static,
{
    TableError::Sdk {
        operation,
        target: target.to_owned(),
        detail: DisplayErrorContext(&e).to_string(),
        source: Box::new(e),
    }
}

fn key_schema(keys: &[KeySpec], table: &str) -> Result<Vec<KeySchemaElement>, TableError> {
    keys.iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(&k.name)
                .key_type(k.key_type.clone())
                .build()
                .map_err(|source| TableError::Build {
                    table: table.to_owned(),
                    source,
                })
        })
        .collect()
}

fn projection(ix: &IndexSpec) -> Projection {
    Projection::builder()
        .projection_type(ix.projection_type.clone())
        .set_non_key_attributes(
            (!ix.non_key_attributes.is_empty()).then(|| ix.non_key_attributes.clone()),
        )
        .build()
}

/// Creates `spec` as a table called `name`, waits until it (and its indexes)
/// are `ACTIVE`, then enables TTL when the spec has a TTL attribute.
///
/// Billing is on demand; point-in-time recovery and SSE are not requested
/// (DynamoDB Local has neither).
///
/// # Examples
///
/// ```no_run
/// use cqrs_testkit::template::{find, workspace_tables, DATA_TABLE};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let specs = workspace_tables()?;
/// let client = cqrs_testkit::client().await;
/// let data = find(&specs, DATA_TABLE).expect("DataTable in template.yaml");
/// let name = data.table_name(&[("Prefix", "dev")]).unwrap();
/// cqrs_testkit::tables::create_table(&client, data, &name).await?;
/// # Ok(()) }
/// ```
pub async fn create_table(client: &Client, spec: &TableSpec, name: &str) -> Result<(), TableError> {
    let build = |source| TableError::Build {
        table: name.to_owned(),
        source,
    };
    let attributes = spec
        .attributes
        .iter()
        .map(|a| {
            AttributeDefinition::builder()
                .attribute_name(&a.name)
                .attribute_type(a.attribute_type.clone())
                .build()
                .map_err(build)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let gsis = spec
        .global_secondary_indexes
        .iter()
        .map(|ix| {
            GlobalSecondaryIndex::builder()
                .index_name(&ix.name)
                .set_key_schema(Some(key_schema(&ix.key_schema, name)?))
                .projection(projection(ix))
                .build()
                .map_err(build)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let lsis = spec
        .local_secondary_indexes
        .iter()
        .map(|ix| {
            LocalSecondaryIndex::builder()
                .index_name(&ix.name)
                .set_key_schema(Some(key_schema(&ix.key_schema, name)?))
                .projection(projection(ix))
                .build()
                .map_err(build)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stream = spec
        .stream_view_type
        .as_ref()
        .map(|view| {
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view.clone())
                .build()
                .map_err(build)
        })
        .transpose()?;

    client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(attributes))
        .set_key_schema(Some(key_schema(&spec.key_schema, name)?))
        .set_global_secondary_indexes((!gsis.is_empty()).then_some(gsis))
        .set_local_secondary_indexes((!lsis.is_empty()).then_some(lsis))
        .set_stream_specification(stream)
        .send()
        .await
        .map_err(|e| sdk_error("CreateTable", name, e))?;

    wait_active(client, name, ACTIVE_TIMEOUT).await?;

    if let Some(attribute) = &spec.ttl_attribute {
        let ttl = TimeToLiveSpecification::builder()
            .attribute_name(attribute)
            .enabled(true)
            .build()
            .map_err(build)?;
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(ttl)
            .send()
            .await
            .map_err(|e| sdk_error("UpdateTimeToLive", name, e))?;
    }
    Ok(())
}

/// Polls `DescribeTable` until the table and all its global secondary
/// indexes are `ACTIVE`, for at most `timeout`.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: &aws_sdk_dynamodb::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// cqrs_testkit::tables::wait_active(client, "dev-data", Duration::from_secs(10)).await?;
/// # Ok(()) }
/// ```
pub async fn wait_active(client: &Client, name: &str, timeout: Duration) -> Result<(), TableError> {
    let start = Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        let out = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(|e| sdk_error("DescribeTable", name, e))?;
        if let Some(table) = out.table() {
            let indexes_active = table
                .global_secondary_indexes()
                .iter()
                .all(|ix| ix.index_status() == Some(&IndexStatus::Active));
            if table.table_status() == Some(&TableStatus::Active) && indexes_active {
                return Ok(());
            }
        }
        if start.elapsed() >= timeout {
            return Err(TableError::NotActive {
                table: name.to_owned(),
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}

/// The `LatestStreamArn` of a table.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: &aws_sdk_dynamodb::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let arn = cqrs_testkit::tables::latest_stream_arn(client, "dev-command").await?;
/// assert!(arn.contains(":table/dev-command/stream/"));
/// # Ok(()) }
/// ```
pub async fn latest_stream_arn(client: &Client, name: &str) -> Result<String, TableError> {
    let out = client
        .describe_table()
        .table_name(name)
        .send()
        .await
        .map_err(|e| sdk_error("DescribeTable", name, e))?;
    out.table()
        .and_then(|t| t.latest_stream_arn())
        .map(str::to_owned)
        .ok_or_else(|| TableError::NoStream {
            table: name.to_owned(),
        })
}

/// Every record currently in the stream, all shards read from
/// `TRIM_HORIZON`, in shard order then sequence order.
///
/// Each call starts over from the beginning of the stream, so a test can
/// poll it until the records it expects are there (see
/// [`wait_for_stream_records`]).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(arn: &str) -> Result<(), Box<dyn std::error::Error>> {
/// let streams = cqrs_testkit::streams_client().await;
/// for record in cqrs_testkit::tables::read_stream(&streams, arn).await? {
///     println!("{:?}", record.event_name());
/// }
/// # Ok(()) }
/// ```
pub async fn read_stream(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
) -> Result<Vec<Record>, TableError> {
    let mut shard_ids = Vec::new();
    let mut start_after: Option<String> = None;
    loop {
        let out = streams
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(start_after.take())
            .send()
            .await
            .map_err(|e| sdk_error("DescribeStream", stream_arn, e))?;
        let Some(description) = out.stream_description() else {
            break;
        };
        shard_ids.extend(
            description
                .shards()
                .iter()
                .filter_map(|s| s.shard_id().map(str::to_owned)),
        );
        match description.last_evaluated_shard_id() {
            Some(last) => start_after = Some(last.to_owned()),
            None => break,
        }
    }

    let mut records = Vec::new();
    for shard_id in shard_ids {
        let mut iterator = streams
            .get_shard_iterator()
            .stream_arn(stream_arn)
            .shard_id(&shard_id)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .map_err(|e| sdk_error("GetShardIterator", stream_arn, e))?
            .shard_iterator()
            .map(str::to_owned);
        // An open shard always hands back a next iterator; stop at the first
        // empty page (everything written so far has been read).
        while let Some(it) = iterator {
            let out = streams
                .get_records()
                .shard_iterator(it)
                .send()
                .await
                .map_err(|e| sdk_error("GetRecords", stream_arn, e))?;
            if out.records().is_empty() {
                break;
            }
            records.extend_from_slice(out.records());
            iterator = out.next_shard_iterator().map(str::to_owned);
        }
    }
    Ok(records)
}

/// Polls [`read_stream`] until it returns at least `min` records, for at most
/// `timeout`.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(arn: &str) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// let streams = cqrs_testkit::streams_client().await;
/// let records =
///     cqrs_testkit::tables::wait_for_stream_records(&streams, arn, 1, Duration::from_secs(10))
///         .await?;
/// assert!(!records.is_empty());
/// # Ok(()) }
/// ```
pub async fn wait_for_stream_records(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
    min: usize,
    timeout: Duration,
) -> Result<Vec<Record>, TableError> {
    let start = Instant::now();
    loop {
        let records = read_stream(streams, stream_arn).await?;
        if records.len() >= min {
            return Ok(records);
        }
        if start.elapsed() >= timeout {
            return Err(TableError::StreamTimeout {
                stream_arn: stream_arn.to_owned(),
                got: records.len(),
                wanted: min,
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
