//! Sequence counters: mbc-cqrs-serverless' `SEQ#tenant` / `typeCode[#codes]#rotateValue` items in
//! their own table (`SEQUENCES_TABLE`), never in the command table, whose stream would carry a
//! counter row to data-sync as a malformed command.
//!
//! The next number is one `UpdateItem`: `SET seq = if_not_exists(seq, 0) + 1` with
//! `ReturnValues = UPDATED_NEW`. DynamoDB applies updates of one item one after the other, so
//! concurrent callers each get a different number and none is skipped. A counter row has no `ttl`:
//! sequences never expire.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use crate::{Store, StoreError, sdk_error};

/// The counter attribute of a sequence row (mbc's name).
const SEQ: &str = "seq";

/// One draw from a sequence: its key and the attributes mbc writes beside the counter.
///
/// ```
/// let draw = cqrs_store::sequence::SequenceDraw {
///     pk: "SEQ#t1".into(),
///     sk: "invoice#2026".into(),
///     tenant_code: "t1".into(),
///     type_code: "invoice".into(),
///     rotate_by: "yearly".into(),
///     user: "u1".into(),
///     ip: "127.0.0.1".into(),
///     request_id: "r1".into(),
///     now: "2026-11-23T16:00:00.000Z".into(),
/// };
/// assert_eq!(draw.sk, "invoice#2026");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceDraw {
    /// `SEQ#tenant`.
    pub pk: String,
    /// `typeCode[#code1..#code5]#rotateValue` (also written as `code`, as mbc does).
    pub sk: String,
    /// The tenant (`tenantCode`).
    pub tenant_code: String,
    /// The sequence's type code (`type`).
    pub type_code: String,
    /// The rotation (`name`, as mbc writes it): `none`, `yearly`, ...
    pub rotate_by: String,
    /// Who draws (`updatedBy`; `createdBy` on the first draw).
    pub user: String,
    /// From where (`updatedIp`; `createdIp` on the first draw).
    pub ip: String,
    /// The request (`requestId`).
    pub request_id: String,
    /// Now, ISO-8601 (`updatedAt`; `createdAt` on the first draw).
    pub now: String,
}

impl Store {
    fn sequences_table(&self) -> Result<&str, StoreError> {
        self.tables.sequences.as_deref().ok_or_else(|| {
            StoreError::Dynamo("no sequences table: set SEQUENCES_TABLE".to_string())
        })
    }

    /// Draws the next number of a sequence: one atomic `UpdateItem` adding 1 to `seq` (created at
    /// 0 when the row does not exist), answering the new value.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store, draw: &cqrs_store::sequence::SequenceDraw)
    /// # -> Result<(), cqrs_store::StoreError> {
    /// let no = store.next_sequence(draw).await?;
    /// assert!(no >= 1);
    /// # Ok(()) }
    /// ```
    pub async fn next_sequence(&self, draw: &SequenceDraw) -> Result<i64, StoreError> {
        let s = |v: &str| AttributeValue::S(v.to_string());
        let output = self
            .client
            .update_item()
            .table_name(self.sequences_table()?)
            .key("pk", s(&draw.pk))
            .key("sk", s(&draw.sk))
            .update_expression(
                "SET #seq = if_not_exists(#seq, :zero) + :one, #code = :code, #name = :name, \
                 #tenantCode = :tenant, #type = :type, #requestId = :request, \
                 #createdAt = if_not_exists(#createdAt, :now), \
                 #createdBy = if_not_exists(#createdBy, :user), \
                 #createdIp = if_not_exists(#createdIp, :ip), \
                 #updatedAt = :now, #updatedBy = :user, #updatedIp = :ip",
            )
            .expression_attribute_names("#seq", SEQ)
            .expression_attribute_names("#code", "code")
            .expression_attribute_names("#name", "name")
            .expression_attribute_names("#tenantCode", "tenantCode")
            .expression_attribute_names("#type", "type")
            .expression_attribute_names("#requestId", "requestId")
            .expression_attribute_names("#createdAt", "createdAt")
            .expression_attribute_names("#createdBy", "createdBy")
            .expression_attribute_names("#createdIp", "createdIp")
            .expression_attribute_names("#updatedAt", "updatedAt")
            .expression_attribute_names("#updatedBy", "updatedBy")
            .expression_attribute_names("#updatedIp", "updatedIp")
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":code", s(&draw.sk))
            .expression_attribute_values(":name", s(&draw.rotate_by))
            .expression_attribute_values(":tenant", s(&draw.tenant_code))
            .expression_attribute_values(":type", s(&draw.type_code))
            .expression_attribute_values(":request", s(&draw.request_id))
            .expression_attribute_values(":now", s(&draw.now))
            .expression_attribute_values(":user", s(&draw.user))
            .expression_attribute_values(":ip", s(&draw.ip))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|e| sdk_error("UpdateItem (sequence)", e))?;
        match output.attributes.as_ref().and_then(|a| a.get(SEQ)) {
            Some(AttributeValue::N(n)) => n.parse().map_err(|_| {
                StoreError::Dynamo(format!("sequence {} is not an integer: {n}", draw.sk))
            }),
            _ => Err(StoreError::Dynamo(format!(
                "UpdateItem (sequence) answered no {SEQ} for {} / {}",
                draw.pk, draw.sk
            ))),
        }
    }

    /// The last number drawn from a sequence (a strongly consistent read); `None` before the
    /// first draw.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let last = store.current_sequence("SEQ#t1", "invoice#none").await?;
    /// println!("{last:?}");
    /// # Ok(()) }
    /// ```
    pub async fn current_sequence(&self, pk: &str, sk: &str) -> Result<Option<i64>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(self.sequences_table()?)
            .key("pk", AttributeValue::S(pk.to_string()))
            .key("sk", AttributeValue::S(sk.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (sequence)", e))?;
        Ok(output.item.as_ref().and_then(|item| match item.get(SEQ) {
            Some(AttributeValue::N(n)) => n.parse().ok(),
            _ => None,
        }))
    }
}
