//! Typed keys for the six patterns of the mbc-cqrs-serverless key guide.
//!
//! Each type has a validating constructor `new`, a parser `parse(pk, sk)`
//! that gives the same value back (or says which part is wrong), and
//! `pk()`, `sk()` and `id()` (`pk#sk`, see [`generate_id`]). A value of these
//! types always holds valid parts, so its keys always pass
//! [`validate_partition_key`](crate::validate_partition_key) and
//! [`validate_sort_key`](crate::validate_sort_key).
//!
//! Parsers take base sort keys; remove a version first with
//! [`remove_sort_key_version`](crate::remove_sort_key_version).
//!
//! ```
//! use cqrs_keys::patterns::{MasterKey, MasterKind};
//! let key = MasterKey::parse("MASTER#t1", "SETTING#notification#email_template").unwrap();
//! assert_eq!(key.kind(), MasterKind::Setting);
//! assert_eq!(key.code(), "email_template");
//! ```

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use crate::constants::{KEY_SEPARATOR, TENANT_COMMON};
use crate::error::KeyError;
use crate::helpers::{MASTER_PK_PREFIX, generate_id};
use crate::time_series::{
    parse_time_series_pk, parse_time_series_sk, time_series_pk, time_series_sk, truncate_to_millis,
    year_month,
};
use crate::ulid_gen::new_ulid;
use crate::validate::{check_component, check_pk_len, check_sk_len, join};

/// Partition key prefix of orders and their items (`ORDER#tenant`).
///
/// ```
/// assert_eq!(cqrs_keys::ORDER_PK_PREFIX, "ORDER");
/// ```
pub const ORDER_PK_PREFIX: &str = "ORDER";

/// Sort key prefix of an order (`ORDER#orderId`).
///
/// ```
/// assert_eq!(cqrs_keys::ORDER_SK_PREFIX, "ORDER");
/// ```
pub const ORDER_SK_PREFIX: &str = "ORDER";

/// Sort key prefix of an order item (`ORDER_ITEM#orderId#itemId`).
///
/// ```
/// assert_eq!(cqrs_keys::ORDER_ITEM_SK_PREFIX, "ORDER_ITEM");
/// ```
pub const ORDER_ITEM_SK_PREFIX: &str = "ORDER_ITEM";

/// Partition key prefix of users (`USER#common`).
///
/// ```
/// assert_eq!(cqrs_keys::USER_PK_PREFIX, "USER");
/// ```
pub const USER_PK_PREFIX: &str = "USER";

/// Partition key prefix of user-tenant links (`USER_TENANT#common`).
///
/// ```
/// assert_eq!(cqrs_keys::USER_TENANT_PK_PREFIX, "USER_TENANT");
/// ```
pub const USER_TENANT_PK_PREFIX: &str = "USER_TENANT";

// ---------------------------------------------------------------- helpers

/// Parses `PREFIX#tenant` (exactly two segments) and returns the tenant.
fn parse_tenant_pk<'a>(pk: &'a str, prefix: &str) -> Result<&'a str, KeyError> {
    let Some((found, tenant)) = pk.split_once(KEY_SEPARATOR) else {
        return Err(KeyError::Malformed {
            key: pk.into(),
            expected: format!("{prefix}#tenant"),
        });
    };
    expect_prefix(prefix, found)?;
    check_component(&"tenant", tenant)?;
    Ok(tenant)
}

/// Parses a fixed partition key such as `USER#common`.
fn expect_fixed_pk(pk: &str, prefix: &str) -> Result<(), KeyError> {
    let tenant = parse_tenant_pk(pk, prefix)?;
    if tenant != TENANT_COMMON {
        return Err(KeyError::WrongPrefix {
            expected: join(&[prefix, TENANT_COMMON]),
            found: pk.into(),
        });
    }
    Ok(())
}

fn expect_prefix(expected: &str, found: &str) -> Result<(), KeyError> {
    if expected == found {
        Ok(())
    } else {
        Err(KeyError::WrongPrefix {
            expected: expected.into(),
            found: found.into(),
        })
    }
}

/// Splits a sort key into exactly `N` `#`-separated parts.
fn split_exact<'a, const N: usize>(sk: &'a str, shape: &str) -> Result<[&'a str; N], KeyError> {
    let parts: Vec<&str> = sk.split(KEY_SEPARATOR).collect();
    parts.try_into().map_err(|_| KeyError::Malformed {
        key: sk.into(),
        expected: shape.into(),
    })
}

fn check_lengths(pk: &str, sk: &str) -> Result<(), KeyError> {
    check_pk_len(pk)?;
    check_sk_len(sk)
}

// ------------------------------------------------------- 1. simple entity

/// Pattern 1, simple entity: `PREFIX#tenant` / `entityId` (usually a ULID).
///
/// ```
/// use cqrs_keys::SimpleEntityKey;
///
/// let key = SimpleEntityKey::new("PRODUCT", "tenant001", "01HX7MBJK3V9WQBZ7XNDK5ZT2M").unwrap();
/// assert_eq!(key.pk(), "PRODUCT#tenant001");
/// assert_eq!(key.sk(), "01HX7MBJK3V9WQBZ7XNDK5ZT2M");
/// assert_eq!(key.id(), "PRODUCT#tenant001#01HX7MBJK3V9WQBZ7XNDK5ZT2M");
/// assert_eq!(SimpleEntityKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimpleEntityKey {
    prefix: String,
    tenant: String,
    entity_id: String,
}

impl SimpleEntityKey {
    /// Validates the parts: each a non-empty component.
    ///
    /// ```
    /// use cqrs_keys::SimpleEntityKey;
    ///
    /// assert!(SimpleEntityKey::new("PRODUCT", "tenant001", "p1").is_ok());
    /// assert!(SimpleEntityKey::new("PRODUCT", "tenant#001", "p1").is_err());
    /// ```
    pub fn new(prefix: &str, tenant: &str, entity_id: &str) -> Result<Self, KeyError> {
        check_component(&"prefix", prefix)?;
        check_component(&"tenant", tenant)?;
        check_component(&"entity id", entity_id)?;
        let key = Self {
            prefix: prefix.into(),
            tenant: tenant.into(),
            entity_id: entity_id.into(),
        };
        check_lengths(&key.pk(), &key.sk())?;
        Ok(key)
    }

    /// A key with a fresh ULID (from [`new_ulid`]) as the
    /// entity id.
    ///
    /// ```
    /// use cqrs_keys::SimpleEntityKey;
    ///
    /// let key = SimpleEntityKey::generate("PRODUCT", "tenant001").unwrap();
    /// assert_eq!(key.entity_id().len(), 26);
    /// ```
    pub fn generate(prefix: &str, tenant: &str) -> Result<Self, KeyError> {
        Self::new(prefix, tenant, &new_ulid())
    }

    /// Reads `PREFIX#tenant` / `entityId` back.
    ///
    /// ```
    /// use cqrs_keys::SimpleEntityKey;
    ///
    /// let key = SimpleEntityKey::parse("PRODUCT#tenant001", "p1").unwrap();
    /// assert_eq!((key.prefix(), key.tenant(), key.entity_id()), ("PRODUCT", "tenant001", "p1"));
    /// assert!(SimpleEntityKey::parse("PRODUCT", "p1").is_err());
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        let Some((prefix, tenant)) = pk.split_once(KEY_SEPARATOR) else {
            return Err(KeyError::Malformed {
                key: pk.into(),
                expected: "PREFIX#tenant".into(),
            });
        };
        Self::new(prefix, tenant, sk)
    }

    /// The partition key prefix, e.g. `PRODUCT`.
    ///
    /// ```
    /// # let key = cqrs_keys::SimpleEntityKey::new("PRODUCT", "t1", "p1").unwrap();
    /// assert_eq!(key.prefix(), "PRODUCT");
    /// ```
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The tenant code.
    ///
    /// ```
    /// # let key = cqrs_keys::SimpleEntityKey::new("PRODUCT", "t1", "p1").unwrap();
    /// assert_eq!(key.tenant(), "t1");
    /// ```
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The entity id (the sort key).
    ///
    /// ```
    /// # let key = cqrs_keys::SimpleEntityKey::new("PRODUCT", "t1", "p1").unwrap();
    /// assert_eq!(key.entity_id(), "p1");
    /// ```
    pub fn entity_id(&self) -> &str {
        &self.entity_id
    }

    /// `PREFIX#tenant`.
    ///
    /// ```
    /// # let key = cqrs_keys::SimpleEntityKey::new("PRODUCT", "t1", "p1").unwrap();
    /// assert_eq!(key.pk(), "PRODUCT#t1");
    /// ```
    pub fn pk(&self) -> String {
        join(&[&self.prefix, &self.tenant])
    }

    /// `entityId`.
    ///
    /// ```
    /// # let key = cqrs_keys::SimpleEntityKey::new("PRODUCT", "t1", "p1").unwrap();
    /// assert_eq!(key.sk(), "p1");
    /// ```
    pub fn sk(&self) -> String {
        self.entity_id.clone()
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # let key = cqrs_keys::SimpleEntityKey::new("PRODUCT", "t1", "p1").unwrap();
    /// assert_eq!(key.id(), "PRODUCT#t1#p1");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }
}

// ------------------------------------------------------------ 2. hierarchy

/// Pattern 2, hierarchy (parent): `ORDER#tenant` / `ORDER#orderId`.
///
/// ```
/// use cqrs_keys::OrderKey;
///
/// let key = OrderKey::new("tenant001", "01HX7MBJK3V9WQBZ7XNDK5ZT2M").unwrap();
/// assert_eq!(key.pk(), "ORDER#tenant001");
/// assert_eq!(key.sk(), "ORDER#01HX7MBJK3V9WQBZ7XNDK5ZT2M");
/// assert_eq!(OrderKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderKey {
    tenant: String,
    order_id: String,
}

impl OrderKey {
    /// Validates the parts: each a non-empty component.
    ///
    /// ```
    /// use cqrs_keys::OrderKey;
    ///
    /// assert!(OrderKey::new("tenant001", "o1").is_ok());
    /// assert!(OrderKey::new("tenant001", "").is_err());
    /// ```
    pub fn new(tenant: &str, order_id: &str) -> Result<Self, KeyError> {
        check_component(&"tenant", tenant)?;
        check_component(&"order id", order_id)?;
        let key = Self {
            tenant: tenant.into(),
            order_id: order_id.into(),
        };
        check_lengths(&key.pk(), &key.sk())?;
        Ok(key)
    }

    /// Reads `ORDER#tenant` / `ORDER#orderId` back.
    ///
    /// ```
    /// use cqrs_keys::{KeyError, OrderKey};
    ///
    /// assert_eq!(OrderKey::parse("ORDER#t1", "ORDER#o1").unwrap().order_id(), "o1");
    /// assert_eq!(
    ///     OrderKey::parse("ORDER#t1", "ORDER_ITEM#o1"),
    ///     Err(KeyError::WrongPrefix { expected: "ORDER".into(), found: "ORDER_ITEM".into() })
    /// );
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        let tenant = parse_tenant_pk(pk, ORDER_PK_PREFIX)?;
        let [prefix, order_id] = split_exact(sk, "ORDER#orderId")?;
        expect_prefix(ORDER_SK_PREFIX, prefix)?;
        Self::new(tenant, order_id)
    }

    /// The tenant code.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.tenant(), "t1");
    /// ```
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The order id.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.order_id(), "o1");
    /// ```
    pub fn order_id(&self) -> &str {
        &self.order_id
    }

    /// `ORDER#tenant`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.pk(), "ORDER#t1");
    /// ```
    pub fn pk(&self) -> String {
        join(&[ORDER_PK_PREFIX, &self.tenant])
    }

    /// `ORDER#orderId`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.sk(), "ORDER#o1");
    /// ```
    pub fn sk(&self) -> String {
        join(&[ORDER_SK_PREFIX, &self.order_id])
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.id(), "ORDER#t1#ORDER#o1");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }

    /// The key of one of this order's items.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.item("001").unwrap().sk(), "ORDER_ITEM#o1#001");
    /// ```
    pub fn item(&self, item_id: &str) -> Result<OrderItemKey, KeyError> {
        OrderItemKey::new(&self.tenant, &self.order_id, item_id)
    }

    /// The sort key prefix of all this order's items, `ORDER_ITEM#orderId#`,
    /// for a `begins_with` query. The trailing `#` keeps order `o1` from
    /// matching the items of order `o10`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderKey::new("t1", "o1").unwrap();
    /// assert_eq!(key.items_sk_prefix(), "ORDER_ITEM#o1#");
    /// ```
    pub fn items_sk_prefix(&self) -> String {
        let mut prefix = join(&[ORDER_ITEM_SK_PREFIX, &self.order_id]);
        prefix.push(KEY_SEPARATOR);
        prefix
    }
}

/// Pattern 2, hierarchy (child): `ORDER#tenant` / `ORDER_ITEM#orderId#itemId`,
/// in the same partition as its [`OrderKey`].
///
/// ```
/// use cqrs_keys::OrderItemKey;
///
/// let key = OrderItemKey::new("tenant001", "01HX7MBJK3V9WQBZ7XNDK5ZT2M", "001").unwrap();
/// assert_eq!(key.pk(), "ORDER#tenant001");
/// assert_eq!(key.sk(), "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001");
/// assert_eq!(OrderItemKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderItemKey {
    tenant: String,
    order_id: String,
    item_id: String,
}

impl OrderItemKey {
    /// Validates the parts: each a non-empty component.
    ///
    /// ```
    /// use cqrs_keys::OrderItemKey;
    ///
    /// assert!(OrderItemKey::new("t1", "o1", "001").is_ok());
    /// assert!(OrderItemKey::new("t1", "o1", "0@1").is_err());
    /// ```
    pub fn new(tenant: &str, order_id: &str, item_id: &str) -> Result<Self, KeyError> {
        check_component(&"tenant", tenant)?;
        check_component(&"order id", order_id)?;
        check_component(&"item id", item_id)?;
        let key = Self {
            tenant: tenant.into(),
            order_id: order_id.into(),
            item_id: item_id.into(),
        };
        check_lengths(&key.pk(), &key.sk())?;
        Ok(key)
    }

    /// Reads `ORDER#tenant` / `ORDER_ITEM#orderId#itemId` back.
    ///
    /// ```
    /// use cqrs_keys::OrderItemKey;
    ///
    /// let key = OrderItemKey::parse("ORDER#t1", "ORDER_ITEM#o1#001").unwrap();
    /// assert_eq!((key.order_id(), key.item_id()), ("o1", "001"));
    /// assert!(OrderItemKey::parse("ORDER#t1", "ORDER_ITEM#o1").is_err());
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        let tenant = parse_tenant_pk(pk, ORDER_PK_PREFIX)?;
        let [prefix, order_id, item_id] = split_exact(sk, "ORDER_ITEM#orderId#itemId")?;
        expect_prefix(ORDER_ITEM_SK_PREFIX, prefix)?;
        Self::new(tenant, order_id, item_id)
    }

    /// The tenant code.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.tenant(), "t1");
    /// ```
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The parent order's id.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.order_id(), "o1");
    /// ```
    pub fn order_id(&self) -> &str {
        &self.order_id
    }

    /// The item id.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.item_id(), "001");
    /// ```
    pub fn item_id(&self) -> &str {
        &self.item_id
    }

    /// The parent order's key.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.order().sk(), "ORDER#o1");
    /// ```
    pub fn order(&self) -> OrderKey {
        OrderKey {
            tenant: self.tenant.clone(),
            order_id: self.order_id.clone(),
        }
    }

    /// `ORDER#tenant`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.pk(), "ORDER#t1");
    /// ```
    pub fn pk(&self) -> String {
        join(&[ORDER_PK_PREFIX, &self.tenant])
    }

    /// `ORDER_ITEM#orderId#itemId`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.sk(), "ORDER_ITEM#o1#001");
    /// ```
    pub fn sk(&self) -> String {
        join(&[ORDER_ITEM_SK_PREFIX, &self.order_id, &self.item_id])
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # let key = cqrs_keys::OrderItemKey::new("t1", "o1", "001").unwrap();
    /// assert_eq!(key.id(), "ORDER#t1#ORDER_ITEM#o1#001");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }
}

// ----------------------------------------------- 3. user with auth provider

/// The authentication providers of the user pattern.
///
/// ```
/// use cqrs_keys::AuthProvider;
///
/// assert_eq!(AuthProvider::Sso.as_str(), "sso");
/// assert_eq!("oauth".parse::<AuthProvider>().unwrap(), AuthProvider::Oauth);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthProvider {
    /// Local password authentication: `local`.
    Local,
    /// Single sign-on: `sso`.
    Sso,
    /// OAuth: `oauth`.
    Oauth,
    /// Temporary session: `temp`.
    Temp,
    /// User profile data: `profile`.
    Profile,
}

impl AuthProvider {
    /// Every provider, in declaration order.
    ///
    /// ```
    /// assert_eq!(cqrs_keys::AuthProvider::ALL.len(), 5);
    /// ```
    pub const ALL: [AuthProvider; 5] = [
        AuthProvider::Local,
        AuthProvider::Sso,
        AuthProvider::Oauth,
        AuthProvider::Temp,
        AuthProvider::Profile,
    ];

    /// The sort key prefix of this provider.
    ///
    /// ```
    /// assert_eq!(cqrs_keys::AuthProvider::Local.as_str(), "local");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            AuthProvider::Local => "local",
            AuthProvider::Sso => "sso",
            AuthProvider::Oauth => "oauth",
            AuthProvider::Temp => "temp",
            AuthProvider::Profile => "profile",
        }
    }
}

impl fmt::Display for AuthProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AuthProvider {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| KeyError::WrongPrefix {
                expected: "local|sso|oauth|temp|profile".into(),
                found: s.into(),
            })
    }
}

/// Pattern 3, user with auth provider: `USER#common` / `provider#userId`.
///
/// ```
/// use cqrs_keys::{AuthProvider, UserAuthKey};
///
/// let key = UserAuthKey::new(AuthProvider::Sso, "abc123def456").unwrap();
/// assert_eq!(key.pk(), "USER#common");
/// assert_eq!(key.sk(), "sso#abc123def456");
/// assert_eq!(UserAuthKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserAuthKey {
    provider: AuthProvider,
    user_id: String,
}

impl UserAuthKey {
    /// Validates the user id: a non-empty component.
    ///
    /// ```
    /// use cqrs_keys::{AuthProvider, UserAuthKey};
    ///
    /// assert!(UserAuthKey::new(AuthProvider::Local, "user123").is_ok());
    /// assert!(UserAuthKey::new(AuthProvider::Local, "").is_err());
    /// ```
    pub fn new(provider: AuthProvider, user_id: &str) -> Result<Self, KeyError> {
        check_component(&"user id", user_id)?;
        let key = Self {
            provider,
            user_id: user_id.into(),
        };
        check_lengths(&key.pk(), &key.sk())?;
        Ok(key)
    }

    /// Reads `USER#common` / `provider#userId` back.
    ///
    /// ```
    /// use cqrs_keys::{AuthProvider, UserAuthKey};
    ///
    /// let key = UserAuthKey::parse("USER#common", "oauth#google789").unwrap();
    /// assert_eq!((key.provider(), key.user_id()), (AuthProvider::Oauth, "google789"));
    /// assert!(UserAuthKey::parse("USER#tenant001", "oauth#google789").is_err());
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        expect_fixed_pk(pk, USER_PK_PREFIX)?;
        let [provider, user_id] = split_exact(sk, "provider#userId")?;
        Self::new(provider.parse()?, user_id)
    }

    /// The provider.
    ///
    /// ```
    /// # use cqrs_keys::{AuthProvider, UserAuthKey};
    /// # let key = UserAuthKey::new(AuthProvider::Temp, "s1").unwrap();
    /// assert_eq!(key.provider(), AuthProvider::Temp);
    /// ```
    pub fn provider(&self) -> AuthProvider {
        self.provider
    }

    /// The user id.
    ///
    /// ```
    /// # use cqrs_keys::{AuthProvider, UserAuthKey};
    /// # let key = UserAuthKey::new(AuthProvider::Temp, "s1").unwrap();
    /// assert_eq!(key.user_id(), "s1");
    /// ```
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// `USER#common`.
    ///
    /// ```
    /// # use cqrs_keys::{AuthProvider, UserAuthKey};
    /// # let key = UserAuthKey::new(AuthProvider::Temp, "s1").unwrap();
    /// assert_eq!(key.pk(), "USER#common");
    /// ```
    pub fn pk(&self) -> String {
        join(&[USER_PK_PREFIX, TENANT_COMMON])
    }

    /// `provider#userId`.
    ///
    /// ```
    /// # use cqrs_keys::{AuthProvider, UserAuthKey};
    /// # let key = UserAuthKey::new(AuthProvider::Temp, "s1").unwrap();
    /// assert_eq!(key.sk(), "temp#s1");
    /// ```
    pub fn sk(&self) -> String {
        join(&[self.provider.as_str(), &self.user_id])
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # use cqrs_keys::{AuthProvider, UserAuthKey};
    /// # let key = UserAuthKey::new(AuthProvider::Temp, "s1").unwrap();
    /// assert_eq!(key.id(), "USER#common#temp#s1");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }
}

// ------------------------------------------------------ 4. user-tenant link

/// Pattern 4, user-tenant link: `USER_TENANT#common` / `tenantCode#userId`.
///
/// ```
/// use cqrs_keys::UserTenantKey;
///
/// let key = UserTenantKey::new("tenant001", "user123").unwrap();
/// assert_eq!(key.pk(), "USER_TENANT#common");
/// assert_eq!(key.sk(), "tenant001#user123");
/// assert_eq!(UserTenantKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserTenantKey {
    tenant_code: String,
    user_id: String,
}

impl UserTenantKey {
    /// Validates the parts: each a non-empty component.
    ///
    /// ```
    /// use cqrs_keys::UserTenantKey;
    ///
    /// assert!(UserTenantKey::new("tenant001", "user123").is_ok());
    /// assert!(UserTenantKey::new("", "user123").is_err());
    /// ```
    pub fn new(tenant_code: &str, user_id: &str) -> Result<Self, KeyError> {
        check_component(&"tenant code", tenant_code)?;
        check_component(&"user id", user_id)?;
        let key = Self {
            tenant_code: tenant_code.into(),
            user_id: user_id.into(),
        };
        check_lengths(&key.pk(), &key.sk())?;
        Ok(key)
    }

    /// Reads `USER_TENANT#common` / `tenantCode#userId` back.
    ///
    /// ```
    /// use cqrs_keys::UserTenantKey;
    ///
    /// let key = UserTenantKey::parse("USER_TENANT#common", "tenant002#user123").unwrap();
    /// assert_eq!((key.tenant_code(), key.user_id()), ("tenant002", "user123"));
    /// assert!(UserTenantKey::parse("USER#common", "tenant002#user123").is_err());
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        expect_fixed_pk(pk, USER_TENANT_PK_PREFIX)?;
        let [tenant_code, user_id] = split_exact(sk, "tenantCode#userId")?;
        Self::new(tenant_code, user_id)
    }

    /// The linked tenant's code.
    ///
    /// ```
    /// # let key = cqrs_keys::UserTenantKey::new("t1", "u1").unwrap();
    /// assert_eq!(key.tenant_code(), "t1");
    /// ```
    pub fn tenant_code(&self) -> &str {
        &self.tenant_code
    }

    /// The user id.
    ///
    /// ```
    /// # let key = cqrs_keys::UserTenantKey::new("t1", "u1").unwrap();
    /// assert_eq!(key.user_id(), "u1");
    /// ```
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// `USER_TENANT#common`.
    ///
    /// ```
    /// # let key = cqrs_keys::UserTenantKey::new("t1", "u1").unwrap();
    /// assert_eq!(key.pk(), "USER_TENANT#common");
    /// ```
    pub fn pk(&self) -> String {
        join(&[USER_TENANT_PK_PREFIX, TENANT_COMMON])
    }

    /// `tenantCode#userId`.
    ///
    /// ```
    /// # let key = cqrs_keys::UserTenantKey::new("t1", "u1").unwrap();
    /// assert_eq!(key.sk(), "t1#u1");
    /// ```
    pub fn sk(&self) -> String {
        join(&[&self.tenant_code, &self.user_id])
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # let key = cqrs_keys::UserTenantKey::new("t1", "u1").unwrap();
    /// assert_eq!(key.id(), "USER_TENANT#common#t1#u1");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }
}

// ------------------------------------------------------------ 5. master data

/// The kinds of master data: the first component of a master sort key.
///
/// ```
/// use cqrs_keys::MasterKind;
///
/// assert_eq!(MasterKind::Setting.as_str(), "SETTING");
/// assert_eq!("COPY".parse::<MasterKind>().unwrap(), MasterKind::Copy);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MasterKind {
    /// Settings: `SETTING`.
    Setting,
    /// Data: `DATA`.
    Data,
    /// Copies (backups): `COPY`.
    Copy,
}

impl MasterKind {
    /// Every kind, in declaration order.
    ///
    /// ```
    /// assert_eq!(cqrs_keys::MasterKind::ALL.len(), 3);
    /// ```
    pub const ALL: [MasterKind; 3] = [MasterKind::Setting, MasterKind::Data, MasterKind::Copy];

    /// The sort key prefix of this kind.
    ///
    /// ```
    /// assert_eq!(cqrs_keys::MasterKind::Data.as_str(), "DATA");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            MasterKind::Setting => "SETTING",
            MasterKind::Data => "DATA",
            MasterKind::Copy => "COPY",
        }
    }
}

impl fmt::Display for MasterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MasterKind {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| KeyError::WrongPrefix {
                expected: "SETTING|DATA|COPY".into(),
                found: s.into(),
            })
    }
}

/// Pattern 5, master data: `MASTER#tenant` / `KIND#category#code`.
///
/// ```
/// use cqrs_keys::{MasterKey, MasterKind};
///
/// let key = MasterKey::new("tenant001", MasterKind::Data, "product_category", "electronics").unwrap();
/// assert_eq!(key.pk(), "MASTER#tenant001");
/// assert_eq!(key.sk(), "DATA#product_category#electronics");
/// assert_eq!(MasterKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MasterKey {
    tenant: String,
    kind: MasterKind,
    category: String,
    code: String,
}

impl MasterKey {
    /// Validates the parts: each a non-empty component. (Use
    /// [`DEFAULT_TENANT_CODE`](crate::DEFAULT_TENANT_CODE) for single-tenant
    /// mode; unlike [`master_pk`](crate::master_pk) the tenant is required.)
    ///
    /// ```
    /// use cqrs_keys::{MasterKey, MasterKind};
    ///
    /// assert!(MasterKey::new("tenant001", MasterKind::Setting, "notification", "email_template").is_ok());
    /// assert!(MasterKey::new("tenant001", MasterKind::Setting, "", "x").is_err());
    /// ```
    pub fn new(
        tenant: &str,
        kind: MasterKind,
        category: &str,
        code: &str,
    ) -> Result<Self, KeyError> {
        check_component(&"tenant", tenant)?;
        check_component(&"category", category)?;
        check_component(&"code", code)?;
        let key = Self {
            tenant: tenant.into(),
            kind,
            category: category.into(),
            code: code.into(),
        };
        check_lengths(&key.pk(), &key.sk())?;
        Ok(key)
    }

    /// Reads `MASTER#tenant` / `KIND#category#code` back.
    ///
    /// ```
    /// use cqrs_keys::{MasterKey, MasterKind};
    ///
    /// let key = MasterKey::parse("MASTER#tenant001", "COPY#backup#2024-01-01").unwrap();
    /// assert_eq!((key.kind(), key.category(), key.code()), (MasterKind::Copy, "backup", "2024-01-01"));
    /// assert!(MasterKey::parse("MASTER#tenant001", "OTHER#backup#2024-01-01").is_err());
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        let tenant = parse_tenant_pk(pk, MASTER_PK_PREFIX)?;
        let [kind, category, code] = split_exact(sk, "KIND#category#code")?;
        Self::new(tenant, kind.parse()?, category, code)
    }

    /// The tenant code.
    ///
    /// ```
    /// # let key = cqrs_keys::MasterKey::new("t1", cqrs_keys::MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.tenant(), "t1");
    /// ```
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The kind.
    ///
    /// ```
    /// # use cqrs_keys::{MasterKey, MasterKind};
    /// # let key = MasterKey::new("t1", MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.kind(), MasterKind::Data);
    /// ```
    pub fn kind(&self) -> MasterKind {
        self.kind
    }

    /// The category.
    ///
    /// ```
    /// # let key = cqrs_keys::MasterKey::new("t1", cqrs_keys::MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.category(), "c");
    /// ```
    pub fn category(&self) -> &str {
        &self.category
    }

    /// The code.
    ///
    /// ```
    /// # let key = cqrs_keys::MasterKey::new("t1", cqrs_keys::MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.code(), "x");
    /// ```
    pub fn code(&self) -> &str {
        &self.code
    }

    /// `MASTER#tenant`.
    ///
    /// ```
    /// # let key = cqrs_keys::MasterKey::new("t1", cqrs_keys::MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.pk(), "MASTER#t1");
    /// ```
    pub fn pk(&self) -> String {
        join(&[MASTER_PK_PREFIX, &self.tenant])
    }

    /// `KIND#category#code`.
    ///
    /// ```
    /// # let key = cqrs_keys::MasterKey::new("t1", cqrs_keys::MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.sk(), "DATA#c#x");
    /// ```
    pub fn sk(&self) -> String {
        join(&[self.kind.as_str(), &self.category, &self.code])
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # let key = cqrs_keys::MasterKey::new("t1", cqrs_keys::MasterKind::Data, "c", "x").unwrap();
    /// assert_eq!(key.id(), "MASTER#t1#DATA#c#x");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }
}

// ------------------------------------------------------------ 6. time series

/// Pattern 6, time series: `LOG#tenant#YYYY-MM` / `timestamp#eventId`.
///
/// The timestamp is kept to whole milliseconds (what the key stores), so
/// `parse` gives back exactly the value `new` made.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::TimeSeriesKey;
///
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// let key = TimeSeriesKey::new("tenant001", &ts, "evt001").unwrap();
/// assert_eq!(key.pk(), "LOG#tenant001#2024-01");
/// assert_eq!(key.sk(), "2024-01-15T10:30:00.000Z#evt001");
/// assert_eq!(TimeSeriesKey::parse(&key.pk(), &key.sk()).unwrap(), key);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimeSeriesKey {
    tenant: String,
    timestamp: DateTime<Utc>,
    event_id: String,
}

impl TimeSeriesKey {
    /// Validates the parts: tenant and event id non-empty components, the
    /// timestamp's year within 0000 to 9999. Drops sub-millisecond precision.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use cqrs_keys::TimeSeriesKey;
    ///
    /// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 31, 0).unwrap();
    /// assert!(TimeSeriesKey::new("tenant001", &ts, "evt002").is_ok());
    /// assert!(TimeSeriesKey::new("tenant001", &ts, "evt#002").is_err());
    /// ```
    pub fn new(tenant: &str, timestamp: &DateTime<Utc>, event_id: &str) -> Result<Self, KeyError> {
        let pk = time_series_pk(tenant, timestamp)?;
        let sk = time_series_sk(timestamp, event_id)?;
        check_lengths(&pk, &sk)?;
        Ok(Self {
            tenant: tenant.into(),
            timestamp: truncate_to_millis(timestamp),
            event_id: event_id.into(),
        })
    }

    /// Reads `LOG#tenant#YYYY-MM` / `timestamp#eventId` back; the month of
    /// the partition key must be the month of the timestamp.
    ///
    /// ```
    /// use cqrs_keys::TimeSeriesKey;
    ///
    /// let key = TimeSeriesKey::parse("LOG#tenant001#2024-01", "2024-01-15T10:31:00.000Z#evt002").unwrap();
    /// assert_eq!(key.event_id(), "evt002");
    /// assert!(TimeSeriesKey::parse("LOG#tenant001#2024-02", "2024-01-15T10:31:00.000Z#evt002").is_err());
    /// ```
    pub fn parse(pk: &str, sk: &str) -> Result<Self, KeyError> {
        let (tenant, ym) = parse_time_series_pk(pk)?;
        let (timestamp, event_id) = parse_time_series_sk(sk)?;
        let expected = year_month(&timestamp)?;
        if ym != expected {
            return Err(KeyError::Malformed {
                key: pk.into(),
                expected: format!("the month {expected} of the sort key's timestamp"),
            });
        }
        Self::new(tenant, &timestamp, event_id)
    }

    /// The tenant code.
    ///
    /// ```
    /// # let key = cqrs_keys::TimeSeriesKey::parse("LOG#t1#2024-01", "2024-01-15T10:31:00.000Z#e1").unwrap();
    /// assert_eq!(key.tenant(), "t1");
    /// ```
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The timestamp, to whole milliseconds.
    ///
    /// ```
    /// # let key = cqrs_keys::TimeSeriesKey::parse("LOG#t1#2024-01", "2024-01-15T10:31:00.000Z#e1").unwrap();
    /// assert_eq!(key.timestamp().timestamp(), 1_705_314_660);
    /// ```
    pub fn timestamp(&self) -> DateTime<Utc> {
        self.timestamp
    }

    /// The event id.
    ///
    /// ```
    /// # let key = cqrs_keys::TimeSeriesKey::parse("LOG#t1#2024-01", "2024-01-15T10:31:00.000Z#e1").unwrap();
    /// assert_eq!(key.event_id(), "e1");
    /// ```
    pub fn event_id(&self) -> &str {
        &self.event_id
    }

    /// `LOG#tenant#YYYY-MM`.
    ///
    /// ```
    /// # let key = cqrs_keys::TimeSeriesKey::parse("LOG#t1#2024-01", "2024-01-15T10:31:00.000Z#e1").unwrap();
    /// assert_eq!(key.pk(), "LOG#t1#2024-01");
    /// ```
    pub fn pk(&self) -> String {
        // `new` checked that the parts and the year are valid.
        time_series_pk(&self.tenant, &self.timestamp).unwrap_or_default()
    }

    /// `timestamp#eventId`.
    ///
    /// ```
    /// # let key = cqrs_keys::TimeSeriesKey::parse("LOG#t1#2024-01", "2024-01-15T10:31:00.000Z#e1").unwrap();
    /// assert_eq!(key.sk(), "2024-01-15T10:31:00.000Z#e1");
    /// ```
    pub fn sk(&self) -> String {
        time_series_sk(&self.timestamp, &self.event_id).unwrap_or_default()
    }

    /// `pk#sk`.
    ///
    /// ```
    /// # let key = cqrs_keys::TimeSeriesKey::parse("LOG#t1#2024-01", "2024-01-15T10:31:00.000Z#e1").unwrap();
    /// assert_eq!(key.id(), "LOG#t1#2024-01#2024-01-15T10:31:00.000Z#e1");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk(), &self.sk())
    }
}
