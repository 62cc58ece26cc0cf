//! Parked records: stream records data-sync can never project (a malformed image, an item over
//! DynamoDB's limits, a version whose history row holds other content), and records of the data
//! table's stream whose change events the event publisher can never make or publish (reason kind
//! [`EVENT_FEED_KIND`]), kept in the parked table (`PARKED_TABLE`) with their reason until an
//! operator redrives them.
//!
//! Keys come from the key crate ([`cqrs_keys::parked`]): `pk = PARKED#<tenant>`,
//! `sk = <item id>@<sequence number>` (the publisher's records:
//! `<item id>@event-feed@<sequence number>[@<version>]`), so one `Query` lists a tenant's parked
//! records and a `begins_with` narrows them to one item, in stream order
//! ([`Store::list_parked`]). The stream record itself is kept as the JSON Lambda delivered
//! ([`ParkedRecord::record`]), so a redrive can hand it to data-sync again; when that JSON would
//! not fit in an item it is left out and the command row (`itemPk` / `itemSk`) is where the
//! version is read from.
//!
//! [`Store::park`] writes once (`attribute_not_exists`): parking a redelivered record again keeps
//! the first entry and answers [`ParkWrite::AlreadyParked`].

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::{Attributes, MAX_ITEM_BYTES, item_size};
use cqrs_keys::parked::{EVENT_FEED_KIND, parked_event_sk, parked_pk, parked_sk, parked_sk_prefix};
use serde::{Deserialize, Serialize};

use crate::projection::{Retry, is_condition_failure};
use crate::{Store, StoreError, sdk_error};

/// The longest reason kept, in bytes; a longer one is cut at a character boundary.
///
/// ```
/// assert_eq!(cqrs_store::parked::MAX_REASON_BYTES, 4096);
/// ```
pub const MAX_REASON_BYTES: usize = 4096;

/// Room left in a parked item for everything besides the stream record's JSON.
const ENVELOPE_BYTES: usize = 16 * 1024;

/// One stream record data-sync parked, and why.
///
/// ```
/// let parked = cqrs_store::parked::ParkedRecord::example();
/// assert_eq!(parked.pk(), "PARKED#t1");
/// assert_eq!(parked.sk(), "PRODUCT#t1#P001@100");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedRecord {
    /// The tenant of the record's partition key, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The item id (`pk#base`), when the record has keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// The command row's partition key, when the record has keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_pk: Option<String>,
    /// The command row's sort key (`base@version`), when the record has keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_sk: Option<String>,
    /// The version the record carries, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The stream record's sequence number.
    pub sequence_number: String,
    /// The stream record's `eventID`.
    pub event_id: String,
    /// The stream record's `eventName`.
    pub event_name: String,
    /// What kind of permanent failure: `malformed`, `over-limit`, `history-conflict`, ...
    pub reason_kind: String,
    /// Why the record can never be projected, for the operator.
    pub reason: String,
    /// When it was parked (RFC 3339, UTC).
    pub parked_at: String,
    /// The stream record as Lambda delivered it (JSON); `None` when too large to keep here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

impl ParkedRecord {
    /// The partition key: `PARKED#<tenant>` ([`cqrs_keys::parked::parked_pk`]).
    ///
    /// ```
    /// let mut parked = cqrs_store::parked::ParkedRecord::example();
    /// parked.tenant = None;
    /// assert_eq!(parked.pk(), "PARKED#unknown");
    /// ```
    pub fn pk(&self) -> String {
        parked_pk(self.tenant.as_deref())
    }

    /// The sort key: `<item id>@<sequence number>` ([`cqrs_keys::parked::parked_sk`]); for the
    /// event publisher's records (reason kind [`EVENT_FEED_KIND`], a record of another stream
    /// whose sequence numbers may equal those of data-sync's)
    /// `<item id>@event-feed@<sequence number>@<version>`
    /// ([`cqrs_keys::parked::parked_event_sk`]; without `@<version>` when it names none).
    ///
    /// ```
    /// let mut parked = cqrs_store::parked::ParkedRecord::example();
    /// assert_eq!(parked.sk(), "PRODUCT#t1#P001@100");
    /// parked.reason_kind = cqrs_keys::parked::EVENT_FEED_KIND.into();
    /// assert_eq!(parked.sk(), "PRODUCT#t1#P001@event-feed@100@1");
    /// ```
    pub fn sk(&self) -> String {
        if self.reason_kind == EVENT_FEED_KIND {
            parked_event_sk(self.item_id.as_deref(), &self.sequence_number, self.version)
        } else {
            parked_sk(self.item_id.as_deref(), &self.sequence_number)
        }
    }

    /// A parked malformed version 1 of `PRODUCT#t1` / `P001`, for examples and tests.
    ///
    /// ```
    /// assert_eq!(cqrs_store::parked::ParkedRecord::example().reason_kind, "malformed");
    /// ```
    pub fn example() -> Self {
        ParkedRecord {
            tenant: Some("t1".into()),
            item_id: Some("PRODUCT#t1#P001".into()),
            item_pk: Some("PRODUCT#t1".into()),
            item_sk: Some("P001@1".into()),
            version: Some(1),
            sequence_number: "100".into(),
            event_id: "event-1".into(),
            event_name: "INSERT".into(),
            reason_kind: "malformed".into(),
            reason: "NewImage is not an item".into(),
            parked_at: "2026-01-01T00:00:00.000Z".into(),
            record: None,
        }
    }

    /// The item `PutItem` takes: the keys and the fields; the reason cut to [`MAX_REASON_BYTES`]
    /// and the record left out when the item would not fit in DynamoDB's item size limit.
    fn to_attributes(&self) -> Result<Attributes, StoreError> {
        let mut record = self.clone();
        record.reason = cut(&record.reason, MAX_REASON_BYTES);
        if record
            .record
            .as_ref()
            .is_some_and(|r| r.len() > MAX_ITEM_BYTES - ENVELOPE_BYTES)
        {
            record.record = None;
        }
        let mut attributes: Attributes = serde_dynamo::to_item(&record)
            .map_err(|e| StoreError::Conversion(cqrs_item::ConversionError::from(e)))?;
        attributes.insert("pk".into(), AttributeValue::S(self.pk()));
        attributes.insert("sk".into(), AttributeValue::S(self.sk()));
        if item_size(&attributes) > MAX_ITEM_BYTES {
            attributes.remove("record");
        }
        Ok(attributes)
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default().to_string()
}

/// What [`Store::park`] did.
///
/// ```
/// use cqrs_store::parked::ParkWrite;
/// assert_ne!(ParkWrite::Parked, ParkWrite::AlreadyParked);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkWrite {
    /// The record is now in the parked table.
    Parked,
    /// The record was parked before (a redelivery); the first entry stays.
    AlreadyParked,
}

impl Store {
    /// The parked-records table, or an error (reported, so the record is retried, never dropped)
    /// when this store was built without one.
    fn parked_table(&self) -> Result<&str, StoreError> {
        self.tables.parked.as_deref().ok_or_else(|| {
            StoreError::Dynamo("no parked-records table configured (PARKED_TABLE)".into())
        })
    }

    /// Parks `record` in the parked table, once. Retries transient failures
    /// ([`Retry::default`]); what still fails is returned, and the caller must not acknowledge
    /// the record.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// use cqrs_store::parked::{ParkWrite, ParkedRecord};
    /// let parked = ParkedRecord::example();
    /// assert_eq!(store.park(&parked).await?, ParkWrite::Parked);
    /// assert_eq!(store.park(&parked).await?, ParkWrite::AlreadyParked);
    /// # Ok(()) }
    /// ```
    pub async fn park(&self, record: &ParkedRecord) -> Result<ParkWrite, StoreError> {
        let table = self.parked_table()?;
        let attributes = record.to_attributes()?;
        Retry::default()
            .run(|| async {
                let result = self
                    .client
                    .put_item()
                    .table_name(table)
                    .set_item(Some(attributes.clone()))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", "pk")
                    .send()
                    .await;
                match result {
                    Ok(_) => Ok(ParkWrite::Parked),
                    Err(e) if is_condition_failure(&e) => Ok(ParkWrite::AlreadyParked),
                    Err(e) => Err(sdk_error("PutItem (parked)", e)),
                }
            })
            .await
    }

    /// The parked records of `tenant` (`None`: records that named no tenant), of one item when
    /// `item_id` is given, in key order (per item, stream order). Strongly consistent.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// for parked in store.list_parked(Some("t1"), Some("PRODUCT#t1#P001")).await? {
    ///     println!("{} {}: {}", parked.sequence_number, parked.reason_kind, parked.reason);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_parked(
        &self,
        tenant: Option<&str>,
        item_id: Option<&str>,
    ) -> Result<Vec<ParkedRecord>, StoreError> {
        let table = self.parked_table()?;
        let mut builder = self
            .client
            .query()
            .table_name(table)
            .consistent_read(true)
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", AttributeValue::S(parked_pk(tenant)));
        builder = match item_id {
            None => builder.key_condition_expression("#pk = :pk"),
            Some(id) => builder
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(
                    ":prefix",
                    AttributeValue::S(parked_sk_prefix(Some(id))),
                ),
        };
        let mut pages = builder.into_paginator().send();
        let mut records = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Query (parked)", e))?;
            for item in page.items() {
                let record: ParkedRecord = serde_dynamo::from_item(item.clone())
                    .map_err(|e| StoreError::Conversion(cqrs_item::ConversionError::from(e)))?;
                records.push(record);
            }
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_record_is_left_out_and_the_reason_cut() {
        let mut parked = ParkedRecord::example();
        parked.record = Some("x".repeat(MAX_ITEM_BYTES));
        parked.reason = "é".repeat(MAX_REASON_BYTES);
        let attributes = parked.to_attributes().unwrap();
        assert!(!attributes.contains_key("record"));
        assert!(item_size(&attributes) < MAX_ITEM_BYTES);
        match attributes.get("reason") {
            Some(AttributeValue::S(reason)) => assert!(reason.len() <= MAX_REASON_BYTES),
            other => panic!("{other:?}"),
        }
        parked.record = Some("{}".into());
        assert!(parked.to_attributes().unwrap().contains_key("record"));
    }

    #[test]
    fn the_stored_form_reads_back() {
        let mut parked = ParkedRecord::example();
        parked.record = Some("{\"eventID\":\"1\"}".into());
        let back: ParkedRecord = serde_dynamo::from_item(parked.to_attributes().unwrap()).unwrap();
        assert_eq!(back, parked);
    }
}
