//! The mbc-cqrs-serverless key helpers (`helpers/key.ts`): ids, tenant code,
//! and the framework's fixed partition and sort keys.
//!
//! Like their TypeScript originals these are plain string functions and do
//! not validate; the entity model (`cqrs-model`) and the validators of this crate do.
//!
//! ```
//! use cqrs_keys::helpers::{generate_id, tenant_code};
//! assert_eq!(generate_id("CAT#mbc", "CAT#001@1"), "CAT#mbc#CAT#001");
//! assert_eq!(tenant_code("CAT#mbc"), Some("mbc"));
//! ```

use crate::constants::{DEFAULT_TENANT_CODE, KEY_SEPARATOR, VER_SEPARATOR};
use crate::version::remove_sort_key_version;

/// Prefix of master-data partition keys (`MASTER#tenant`).
///
/// ```
/// assert_eq!(cqrs_keys::MASTER_PK_PREFIX, "MASTER");
/// ```
pub const MASTER_PK_PREFIX: &str = "MASTER";

/// Prefix of sequence partition keys (`SEQ#tenant`).
///
/// ```
/// assert_eq!(cqrs_keys::SEQ_PK_PREFIX, "SEQ");
/// ```
pub const SEQ_PK_PREFIX: &str = "SEQ";

/// Prefix of table-level TTL setting sort keys (`TTL#table`).
///
/// ```
/// assert_eq!(cqrs_keys::TTL_SK_PREFIX, "TTL");
/// ```
pub const TTL_SK_PREFIX: &str = "TTL";

/// Prefix of an item's head key (`HEAD#pk@sk`): the record of its latest version, kept next to
/// the idempotency records.
///
/// ```
/// assert_eq!(cqrs_keys::HEAD_KEY_PREFIX, "HEAD");
/// ```
pub const HEAD_KEY_PREFIX: &str = "HEAD";

/// The key of an item's head record (its latest version): `HEAD#`, the partition key, `@` and the
/// base sort key (any version removed).
///
/// It names exactly one `(pk, sk)`: a base sort key never holds `@` (the key validators refuse
/// it), so the last `@` of a head key is the one this function put there, whatever the partition
/// key holds. The item id `pk#sk` cannot do that (`("ORDER#t1", "ORDER#o1")` and
/// `("ORDER#t1#ORDER", "o1")` share the id `ORDER#t1#ORDER#o1`), which is why heads are no longer
/// keyed by it (see [`legacy_head_key`]). Keys of the idempotency records are hex digests, so
/// the two never meet. Same length as `HEAD#` + the id, so the limit of
/// [`validate_derived_keys`](crate::validate_derived_keys) holds for it.
///
/// ```
/// use cqrs_keys::head_key;
///
/// assert_eq!(head_key("PRODUCT#t1", "P001@3"), "HEAD#PRODUCT#t1@P001");
/// // Two items with one id, two heads.
/// assert_ne!(head_key("ORDER#t1", "ORDER#o1"), head_key("ORDER#t1#ORDER", "o1"));
/// ```
pub fn head_key(pk: &str, sk: &str) -> String {
    let base = remove_sort_key_version(sk);
    let mut key = String::with_capacity(HEAD_KEY_PREFIX.len() + 2 + pk.len() + base.len());
    key.push_str(HEAD_KEY_PREFIX);
    key.push(KEY_SEPARATOR);
    key.push_str(pk);
    key.push(VER_SEPARATOR);
    key.push_str(base);
    key
}

/// The key heads had before [`head_key`]: `HEAD#` and the item id. Ambiguous (two items can share
/// an id), so it is only read: by the functions while a deployment's heads are not yet complete,
/// and by `cqrs heads seed`, which moves each to [`head_key`] unless its id is shared.
///
/// ```
/// use cqrs_keys::{generate_id, legacy_head_key};
///
/// let id = generate_id("PRODUCT#t1", "P001@3");
/// assert_eq!(legacy_head_key(&id), "HEAD#PRODUCT#t1#P001");
/// ```
pub fn legacy_head_key(id: &str) -> String {
    prefixed(HEAD_KEY_PREFIX, id)
}

/// The key of the record that says whether every item of a deployment has a head
/// ([`head_key`]), kept in the idempotency table beside the heads. `HEADS#` can be neither a head
/// key (`HEAD#...`) nor an idempotency key (a hex digest).
///
/// ```
/// assert_eq!(cqrs_keys::HEADS_STATE_KEY, "HEADS#STATE");
/// assert!(!cqrs_keys::HEADS_STATE_KEY.starts_with("HEAD#"));
/// ```
pub const HEADS_STATE_KEY: &str = "HEADS#STATE";

/// Prefix of a counter's key (`COUNTER#tenant#name`), kept in the idempotency table beside the
/// heads: a counter a command hook keeps in the command's own transaction (a rule across items,
/// such as "at most 3 loans out per member"). Neither a head key (`HEAD#`), the heads record
/// (`HEADS#`) nor an idempotency key (a hex digest) can start so.
///
/// ```
/// assert_eq!(cqrs_keys::COUNTER_KEY_PREFIX, "COUNTER");
/// ```
pub const COUNTER_KEY_PREFIX: &str = "COUNTER";

/// The key of a tenant's counter `name`: `COUNTER#`, the tenant, `#`, the name. The tenant comes
/// first, so that no tenant's counter can be named from another's.
///
/// ```
/// assert_eq!(cqrs_keys::counter_key("t1", "loans#m1"), "COUNTER#t1#loans#m1");
/// assert_ne!(cqrs_keys::counter_key("t1", "a"), cqrs_keys::counter_key("t2", "a"));
/// ```
pub fn counter_key(tenant: &str, name: &str) -> String {
    let mut key = String::with_capacity(COUNTER_KEY_PREFIX.len() + 2 + tenant.len() + name.len());
    key.push_str(COUNTER_KEY_PREFIX);
    key.push(KEY_SEPARATOR);
    key.push_str(tenant);
    key.push(KEY_SEPARATOR);
    key.push_str(name);
    key
}

/// Prefix of a constraint's guard key (`GUARD#scope#entity#constraint#digest`, [`guard_key`]),
/// kept in the idempotency table beside the heads and the counters: the item that holds a unique
/// value, or the members of a bounded group, of a model's declared constraint. Neither a head key
/// (`HEAD#`), the heads record (`HEADS#`), a counter (`COUNTER#`) nor an idempotency key (a hex
/// digest) can start so.
///
/// ```
/// assert_eq!(cqrs_keys::GUARD_KEY_PREFIX, "GUARD");
/// ```
pub const GUARD_KEY_PREFIX: &str = "GUARD";

/// The scope part of a global constraint's guard key: `@`, which no tenant holds (the key
/// validators refuse it in a component).
///
/// ```
/// assert_eq!(cqrs_keys::GUARD_GLOBAL_SCOPE, "@");
/// ```
pub const GUARD_GLOBAL_SCOPE: &str = "@";

/// How many characters of the base64url SHA-256 digest a guard key and a member token keep
/// (132 bits).
pub const DIGEST_CHARS: usize = 22;

/// The first [`DIGEST_CHARS`] characters of the base64url (no padding) SHA-256 of `bytes`.
fn digest22(bytes: &[u8]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(bytes);
    let mut text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash);
    text.truncate(DIGEST_CHARS);
    text
}

/// The key of the guard item of constraint `constraint` of `entity` for `values`:
/// `GUARD#<scope>#<entity>#<constraint>#<digest>`, `scope` the tenant or
/// [`GUARD_GLOBAL_SCOPE`] (`@`) for a global constraint, `digest` the first 22 characters of the
/// base64url SHA-256 of the values as a canonical JSON array of strings. Fixed length whatever
/// the values (no escaping of `#`, no key-length risk); the guard item keeps the values readable.
///
/// ```
/// let key = cqrs_keys::guard_key("t1", "copy", "copy_number", &["978".into(), "2".into()]);
/// assert!(key.starts_with("GUARD#t1#copy#copy_number#"));
/// assert_eq!(key.len(), "GUARD#t1#copy#copy_number#".len() + 22);
/// // The values are a tuple: ["a#b"] and ["a", "b"] are two keys.
/// assert_ne!(
///     cqrs_keys::guard_key("t1", "e", "u", &["a#b".into()]),
///     cqrs_keys::guard_key("t1", "e", "u", &["a".into(), "b".into()])
/// );
/// ```
pub fn guard_key(scope: &str, entity: &str, constraint: &str, values: &[String]) -> String {
    let canonical = serde_json::to_string(values).unwrap_or_default();
    let digest = digest22(canonical.as_bytes());
    let mut key = String::with_capacity(
        GUARD_KEY_PREFIX.len() + 4 + scope.len() + entity.len() + constraint.len() + digest.len(),
    );
    for part in [GUARD_KEY_PREFIX, scope, entity, constraint] {
        key.push_str(part);
        key.push(KEY_SEPARATOR);
    }
    key.push_str(&digest);
    key
}

/// The inverse of [`guard_key`]'s layout: `(scope, entity, constraint)` of a guard key, `None` for
/// any other key (the digest is not reversible).
///
/// ```
/// let key = cqrs_keys::guard_key("t1", "copy", "number", &["1".into()]);
/// assert_eq!(cqrs_keys::parse_guard_key(&key), Some(("t1", "copy", "number")));
/// assert_eq!(cqrs_keys::parse_guard_key("COUNTER#t1#x"), None);
/// ```
pub fn parse_guard_key(key: &str) -> Option<(&str, &str, &str)> {
    let mut parts = key.split(KEY_SEPARATOR);
    let (prefix, scope, entity, constraint, _digest) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    (prefix == GUARD_KEY_PREFIX && parts.next().is_none()).then_some((scope, entity, constraint))
}

/// Prefix of a consumer's version marker (`CONSUMER#<consumer>#<member token>`,
/// [`consumer_marker_key`]), kept in the idempotency table beside the heads, the counters and the
/// guards: the version of an item a consumer of the change events (`cqrs-consumer`) last applied,
/// its dedup and order guard. Neither a head key (`HEAD#`), the heads record (`HEADS#`), a counter
/// (`COUNTER#`), a guard (`GUARD#`) nor an idempotency key (a hex digest) can start so.
///
/// ```
/// assert_eq!(cqrs_keys::CONSUMER_KEY_PREFIX, "CONSUMER");
/// ```
pub const CONSUMER_KEY_PREFIX: &str = "CONSUMER";

/// The key of consumer `consumer`'s marker of the item `pk` / `base_sk` (any version removed):
/// `CONSUMER#`, the consumer's name, `#`, the item's [`member_token`] (also the item's message
/// group on the consumer's queue). Fixed length after the name, whatever the item's keys.
///
/// ```
/// let key = cqrs_keys::consumer_marker_key("search", "PRODUCT#t1", "P001@3");
/// assert_eq!(key, format!("CONSUMER#search#{}", cqrs_keys::member_token("PRODUCT#t1", "P001")));
/// assert_eq!(key, cqrs_keys::consumer_marker_key("search", "PRODUCT#t1", "P001"));
/// // Two consumers, two markers of one item.
/// assert_ne!(key, cqrs_keys::consumer_marker_key("mailer", "PRODUCT#t1", "P001"));
/// ```
pub fn consumer_marker_key(consumer: &str, pk: &str, base_sk: &str) -> String {
    let mut key = consumer_marker_prefix(consumer);
    key.push_str(&member_token(pk, base_sk));
    key
}

/// What every marker key of consumer `consumer` starts with: `CONSUMER#<consumer>#` (its role's
/// `dynamodb:LeadingKeys` condition is this prefix and `*`).
///
/// ```
/// assert_eq!(cqrs_keys::consumer_marker_prefix("search"), "CONSUMER#search#");
/// let key = cqrs_keys::consumer_marker_key("search", "PRODUCT#t1", "P001");
/// assert!(key.starts_with(&cqrs_keys::consumer_marker_prefix("search")));
/// ```
pub fn consumer_marker_prefix(consumer: &str) -> String {
    let mut key = String::with_capacity(CONSUMER_KEY_PREFIX.len() + 2 + consumer.len() + 22);
    key.push_str(CONSUMER_KEY_PREFIX);
    key.push(KEY_SEPARATOR);
    key.push_str(consumer);
    key.push(KEY_SEPARATOR);
    key
}

/// An item's token in a bounded group's member set: the first 22 characters of the base64url
/// SHA-256 of `pk`, a NUL byte and the base sort key (any version removed). One token per item,
/// whatever its version.
///
/// ```
/// let token = cqrs_keys::member_token("LOAN#t1", "L1@3");
/// assert_eq!(token.len(), 22);
/// assert_eq!(token, cqrs_keys::member_token("LOAN#t1", "L1"));
/// assert_ne!(token, cqrs_keys::member_token("LOAN#t1", "L2"));
/// ```
pub fn member_token(pk: &str, base_sk: &str) -> String {
    digest22(&item_bytes(pk, base_sk))
}

/// An item's token in hexadecimal, for places that take neither `_` nor `-` as base64url has them
/// (the realtime API's channel segments): the first 32 hexadecimal digits (128 bits) of the same
/// SHA-256 as [`member_token`]'s (`pk`, a NUL byte, the base sort key). A browser computes it with
/// `crypto.subtle.digest('SHA-256', ...)` on the same UTF-8 bytes.
///
/// ```
/// let token = cqrs_keys::item_hex_token("ORDER#t1", "O1@7");
/// assert_eq!(token.len(), 32);
/// assert!(token.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
/// assert_eq!(token, cqrs_keys::item_hex_token("ORDER#t1", "O1"), "the version is not part of it");
/// assert_ne!(token, cqrs_keys::item_hex_token("ORDER#t1", "O2"));
/// ```
pub fn item_hex_token(pk: &str, base_sk: &str) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(item_bytes(pk, base_sk));
    hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The bytes an item's tokens digest: `pk`, a NUL byte, the sort key without its version.
fn item_bytes(pk: &str, sk: &str) -> Vec<u8> {
    let base = remove_sort_key_version(sk);
    let mut bytes = Vec::with_capacity(pk.len() + 1 + base.len());
    bytes.extend_from_slice(pk.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(base.as_bytes());
    bytes
}

/// The item id: `pk#sk` with any version removed from `sk`.
///
/// ```
/// use cqrs_keys::generate_id;
///
/// assert_eq!(
///     generate_id("PRODUCT#tenant001", "01HX7MBJK3V9WQBZ7XNDK5ZT2M"),
///     "PRODUCT#tenant001#01HX7MBJK3V9WQBZ7XNDK5ZT2M"
/// );
/// assert_eq!(generate_id("TENANT#mbc", "CAT#001@3"), "TENANT#mbc#CAT#001");
/// ```
pub fn generate_id(pk: &str, sk: &str) -> String {
    let base = remove_sort_key_version(sk);
    let mut id = String::with_capacity(pk.len() + 1 + base.len());
    id.push_str(pk);
    id.push(KEY_SEPARATOR);
    id.push_str(base);
    id
}

/// The tenant code of a partition key: the segment after the prefix.
///
/// `None` when the key has no `#` or the segment is empty.
///
/// Deliberate difference from mbc's `getTenantCode`, which returns the text
/// after the *last* `#`: for `LOG#t1#2024-01` that is `2024-01`, not the
/// tenant, so this function takes the second segment. The two agree on every
/// two-segment key. mbc also returns `""` for `PRODUCT#`; this returns `None`.
///
/// ```
/// use cqrs_keys::tenant_code;
///
/// assert_eq!(tenant_code("PRODUCT#tenant001"), Some("tenant001"));
/// assert_eq!(tenant_code("LOG#t1#2024-01"), Some("t1"));
/// assert_eq!(tenant_code("PRODUCT"), None);
/// ```
pub fn tenant_code(pk: &str) -> Option<&str> {
    let (_, rest) = pk.split_once(KEY_SEPARATOR)?;
    let tenant = rest.split(KEY_SEPARATOR).next().unwrap_or(rest);
    (!tenant.is_empty()).then_some(tenant)
}

/// Master-data partition key `MASTER#tenant`; [`DEFAULT_TENANT_CODE`] for
/// `None` or an empty tenant (as mbc's `masterPk`, which uses `||`).
///
/// Does not validate the tenant (the entity model's `MASTER#{tenant}` templates do).
///
/// ```
/// use cqrs_keys::master_pk;
///
/// assert_eq!(master_pk(Some("tenant001")), "MASTER#tenant001");
/// assert_eq!(master_pk(None), "MASTER#single");
/// ```
pub fn master_pk(tenant: Option<&str>) -> String {
    prefixed(MASTER_PK_PREFIX, tenant_or_default(tenant))
}

/// Sequence partition key `SEQ#tenant`; [`DEFAULT_TENANT_CODE`] for `None` or
/// an empty tenant. Does not validate.
///
/// ```
/// use cqrs_keys::seq_pk;
///
/// assert_eq!(seq_pk(Some("tenant001")), "SEQ#tenant001");
/// assert_eq!(seq_pk(None), "SEQ#single");
/// ```
pub fn seq_pk(tenant: Option<&str>) -> String {
    prefixed(SEQ_PK_PREFIX, tenant_or_default(tenant))
}

/// Sort key of a table's TTL setting: `TTL#table`. Does not validate.
///
/// ```
/// use cqrs_keys::ttl_sk;
///
/// assert_eq!(ttl_sk("product"), "TTL#product");
/// ```
pub fn ttl_sk(table: &str) -> String {
    prefixed(TTL_SK_PREFIX, table)
}

/// Whether `pk` and `sk` are those of a TTL policy (`MASTER#<tenant>` / `TTL#<table>`): only the
/// first segment of each counts, so a key template (`MASTER#{tenant}`, `TTL#{entity}`) answers
/// as the keys it makes.
///
/// ```
/// assert!(cqrs_keys::is_ttl_policy_key("MASTER#t1", "TTL#order"));
/// assert!(cqrs_keys::is_ttl_policy_key("MASTER#{tenant}", "TTL#{entity}"));
/// assert!(!cqrs_keys::is_ttl_policy_key("MASTER#t1", "DATA#unit#kg"));
/// ```
pub fn is_ttl_policy_key(pk: &str, sk: &str) -> bool {
    let first = |key: &str| key.split(KEY_SEPARATOR).next() == Some(MASTER_PK_PREFIX);
    let ttl = |key: &str| key.split(KEY_SEPARATOR).next() == Some(TTL_SK_PREFIX);
    first(pk) && ttl(sk)
}

/// Inverse of [`generate_id`] when the partition key is known: the base sort
/// key, or `None` when `id` does not start with `pk#` (mbc's
/// `sortKeyBaseFromId`).
///
/// ```
/// use cqrs_keys::sort_key_base_from_id;
///
/// assert_eq!(sort_key_base_from_id("SEQ#tenant-x", "SEQ#tenant-x#FOO#BAR#baz"), Some("FOO#BAR#baz"));
/// assert_eq!(sort_key_base_from_id("SEQ#other", "SEQ#tenant-x#FOO"), None);
/// ```
pub fn sort_key_base_from_id<'a>(pk: &str, id: &'a str) -> Option<&'a str> {
    id.strip_prefix(pk)?.strip_prefix(KEY_SEPARATOR)
}

/// Splits an id whose partition key has exactly two segments
/// (`PREFIX#TENANT`) into that key and the base sort key, which keeps any
/// further `#` (mbc's `parsePkSkFromId`).
///
/// `None` when the id has fewer than three segments. Unlike mbc, also `None`
/// when the prefix, tenant or sort key is empty.
///
/// ```
/// use cqrs_keys::split_id;
///
/// assert_eq!(
///     split_id("USER_TENANT#tenant-A#USER_TENANT#item-1"),
///     Some(("USER_TENANT#tenant-A", "USER_TENANT#item-1"))
/// );
/// assert_eq!(split_id("A#B"), None);
/// ```
pub fn split_id(id: &str) -> Option<(&str, &str)> {
    let first = id.find(KEY_SEPARATOR)?;
    let second = first + 1 + id[first + 1..].find(KEY_SEPARATOR)?;
    let (pk, sk) = (&id[..second], &id[second + 1..]);
    if first == 0 || second == first + 1 || sk.is_empty() {
        return None;
    }
    Some((pk, sk))
}

fn tenant_or_default(tenant: Option<&str>) -> &str {
    match tenant {
        Some(t) if !t.is_empty() => t,
        _ => DEFAULT_TENANT_CODE,
    }
}

fn prefixed(prefix: &str, rest: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 1 + rest.len());
    out.push_str(prefix);
    out.push(KEY_SEPARATOR);
    out.push_str(rest);
    out
}
