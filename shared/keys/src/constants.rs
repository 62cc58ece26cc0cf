//! Framework constants and DynamoDB key limits.
//!
//! The first six values are those of mbc-cqrs-serverless
//! (`@mbc-cqrs-serverless/core`, `constants/key.ts` and `constants/index.ts`),
//! so that items written by this crate and by the TypeScript framework share
//! one layout. The limits are DynamoDB's own.
//!
//! ```
//! use cqrs_keys::constants::{KEY_SEPARATOR, VER_SEPARATOR};
//! assert_eq!(format!("PRODUCT{KEY_SEPARATOR}t1"), "PRODUCT#t1");
//! assert_eq!(format!("p1{VER_SEPARATOR}2"), "p1@2");
//! ```

/// Separates the components of a key: `PREFIX#TENANT`, `TYPE#category#code`,
/// and the partition key from the sort key in an id (`pk#sk`).
///
/// ```
/// assert_eq!(cqrs_keys::KEY_SEPARATOR, '#');
/// ```
pub const KEY_SEPARATOR: char = '#';

/// Separates a sort key from its version number in the command and history
/// tables: `sk@3`.
///
/// ```
/// assert_eq!(cqrs_keys::VER_SEPARATOR, '@');
/// ```
pub const VER_SEPARATOR: char = '@';

/// Version of an entity's first command.
///
/// ```
/// assert_eq!(cqrs_keys::VERSION_FIRST, 0);
/// ```
pub const VERSION_FIRST: i64 = 0;

/// "The latest version": what [`sort_key_version`](crate::sort_key_version)
/// returns for a sort key without a version suffix.
///
/// ```
/// assert_eq!(cqrs_keys::VERSION_LATEST, -1);
/// ```
pub const VERSION_LATEST: i64 = -1;

/// Tenant code of data shared by all tenants (`USER#common`).
///
/// ```
/// assert_eq!(cqrs_keys::TENANT_COMMON, "common");
/// ```
pub const TENANT_COMMON: &str = "common";

/// Tenant code used in single-tenant mode and by [`master_pk`](crate::master_pk)
/// and [`seq_pk`](crate::seq_pk) when no tenant is given.
///
/// ```
/// assert_eq!(cqrs_keys::DEFAULT_TENANT_CODE, "single");
/// ```
pub const DEFAULT_TENANT_CODE: &str = "single";

/// Largest partition key DynamoDB accepts, in UTF-8 bytes.
///
/// ```
/// assert_eq!(cqrs_keys::MAX_PARTITION_KEY_BYTES, 2048);
/// ```
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;

/// Largest sort key DynamoDB accepts, in UTF-8 bytes.
///
/// ```
/// assert_eq!(cqrs_keys::MAX_SORT_KEY_BYTES, 1024);
/// ```
pub const MAX_SORT_KEY_BYTES: usize = 1024;

/// Longest version suffix [`add_sort_key_version`](crate::add_sort_key_version)
/// can append: `@` and the 20 characters of `i64::MIN`.
///
/// ```
/// use cqrs_keys::MAX_VERSION_SUFFIX_BYTES;
/// assert_eq!(MAX_VERSION_SUFFIX_BYTES, format!("@{}", i64::MIN).len());
/// ```
pub const MAX_VERSION_SUFFIX_BYTES: usize = 21;

/// Largest *base* sort key (one without a version) this crate accepts, in
/// UTF-8 bytes: [`MAX_SORT_KEY_BYTES`] minus room for the `@version` suffix
/// the command table appends, so that every versioned sort key also fits.
///
/// ```
/// use cqrs_keys::{MAX_BASE_SORT_KEY_BYTES, MAX_SORT_KEY_BYTES, MAX_VERSION_SUFFIX_BYTES};
/// assert_eq!(MAX_BASE_SORT_KEY_BYTES, MAX_SORT_KEY_BYTES - MAX_VERSION_SUFFIX_BYTES);
/// ```
pub const MAX_BASE_SORT_KEY_BYTES: usize = MAX_SORT_KEY_BYTES - MAX_VERSION_SUFFIX_BYTES;
