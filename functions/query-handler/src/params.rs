//! Query string parameters: each route accepts a fixed set, each at most once; anything else is a
//! 400 that names the parameter (a misspelt `skprefix` would otherwise silently list everything).
//!
//! Values arrive decoded (API Gateway's `rawQueryString`, decoded once by the runtime).
//!
//! ```
//! use cqrs_query_handler::params::Params;
//!
//! let query = lambda_http::aws_lambda_events::query_map::QueryMap::from(
//!     std::collections::HashMap::from([("limit".to_string(), "5".to_string())]),
//! );
//! let params = Params::new(&query, &["limit", "cursor"]).unwrap();
//! assert_eq!(params.limit().unwrap(), 5);
//! assert_eq!(params.get("cursor").unwrap(), None);
//! assert!(Params::new(&query, &["cursor"]).is_err());
//! ```

use cqrs_problem::ApiError;
use cqrs_store::query::Order;
use lambda_http::aws_lambda_events::query_map::QueryMap;

/// Items per page when `limit` is not given.
///
/// ```
/// assert_eq!(cqrs_query_handler::params::DEFAULT_LIMIT, 20);
/// ```
pub const DEFAULT_LIMIT: usize = 20;

/// The largest `limit` accepted.
///
/// ```
/// assert_eq!(cqrs_query_handler::params::MAX_LIMIT, 100);
/// ```
pub const MAX_LIMIT: usize = 100;

/// The longest parameter value accepted (a cursor included), in bytes.
///
/// ```
/// assert_eq!(cqrs_query_handler::params::MAX_VALUE_BYTES, 4096);
/// ```
pub const MAX_VALUE_BYTES: usize = 4096;

/// The query parameters of one request, checked against the names its route accepts.
#[derive(Debug)]
pub struct Params<'a> {
    query: &'a QueryMap,
}

impl<'a> Params<'a> {
    /// Checks that every parameter of `query` is one of `allowed`, given once, not empty and not
    /// over [`MAX_VALUE_BYTES`].
    ///
    /// ```
    /// # use cqrs_query_handler::params::Params;
    /// # use lambda_http::aws_lambda_events::query_map::QueryMap;
    /// let twice = QueryMap::from(std::collections::HashMap::from([(
    ///     "limit".to_string(),
    ///     vec!["1".to_string(), "2".to_string()],
    /// )]));
    /// assert_eq!(Params::new(&twice, &["limit"]).unwrap_err().status(), 400);
    /// ```
    pub fn new(query: &'a QueryMap, allowed: &[&str]) -> Result<Self, ApiError> {
        let mut names: Vec<&str> = query.iter().map(|(name, _)| name).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            if !allowed.contains(&name) {
                let expected = if allowed.is_empty() {
                    "this route takes no query parameters".to_string()
                } else {
                    format!("this route takes {}", allowed.join(", "))
                };
                return Err(ApiError::bad_field(
                    name,
                    format!("unknown query parameter: {expected}"),
                ));
            }
            let values = query.all(name).unwrap_or_default();
            if values.len() > 1 {
                return Err(ApiError::bad_field(name, "is given more than once"));
            }
            if values.iter().any(|v| v.is_empty()) {
                return Err(ApiError::bad_field(name, "must not be empty"));
            }
            if values.iter().any(|v| v.len() > MAX_VALUE_BYTES) {
                return Err(ApiError::bad_field(
                    name,
                    format!("is longer than {MAX_VALUE_BYTES} bytes"),
                ));
            }
            if values.iter().any(|v| v.chars().any(char::is_control)) {
                return Err(ApiError::bad_field(name, "contains a control character"));
            }
        }
        Ok(Params { query })
    }

    /// The value of `name`, if given.
    ///
    /// ```
    /// # use cqrs_query_handler::params::Params;
    /// # let query = lambda_http::aws_lambda_events::query_map::QueryMap::default();
    /// assert_eq!(Params::new(&query, &["x"]).unwrap().get("x").unwrap(), None);
    /// ```
    pub fn get(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        Ok(self.query.first(name))
    }

    /// `limit`: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent; anything else is a 400.
    ///
    /// ```
    /// # use cqrs_query_handler::params::Params;
    /// # use lambda_http::aws_lambda_events::query_map::QueryMap;
    /// let q = |v: &str| QueryMap::from(std::collections::HashMap::from([("limit".to_string(), v.to_string())]));
    /// for bad in ["0", "101", "-1", "ten", "1.5"] {
    ///     assert_eq!(Params::new(&q(bad), &["limit"]).unwrap().limit().unwrap_err().status(), 400);
    /// }
    /// assert_eq!(Params::new(&q("100"), &["limit"]).unwrap().limit().unwrap(), 100);
    /// ```
    pub fn limit(&self) -> Result<usize, ApiError> {
        let Some(value) = self.get("limit")? else {
            return Ok(DEFAULT_LIMIT);
        };
        let bad =
            || ApiError::bad_field("limit", format!("must be an integer from 1 to {MAX_LIMIT}"));
        if !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        match value.parse::<usize>() {
            Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
            _ => Err(bad()),
        }
    }

    /// `order`: `asc` or `desc`, `default` when absent.
    ///
    /// ```
    /// # use cqrs_query_handler::params::Params;
    /// # use cqrs_store::query::Order;
    /// # let query = lambda_http::aws_lambda_events::query_map::QueryMap::default();
    /// let params = Params::new(&query, &["order"]).unwrap();
    /// assert_eq!(params.order(Order::Descending).unwrap(), Order::Descending);
    /// ```
    pub fn order(&self, default: Order) -> Result<Order, ApiError> {
        match self.get("order")? {
            None => Ok(default),
            Some("asc") => Ok(Order::Ascending),
            Some("desc") => Ok(Order::Descending),
            Some(_) => Err(ApiError::bad_field("order", "must be asc or desc")),
        }
    }

    /// A boolean flag: `true` or `false`, `false` when absent.
    ///
    /// ```
    /// # use cqrs_query_handler::params::Params;
    /// # let query = lambda_http::aws_lambda_events::query_map::QueryMap::default();
    /// assert!(!Params::new(&query, &[]).unwrap().flag("includeDeleted").unwrap());
    /// ```
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.get(name)? {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => Err(ApiError::bad_field(name, "must be true or false")),
        }
    }

    /// A positive version number (`1`, `2`, ...), if given.
    ///
    /// ```
    /// # use cqrs_query_handler::params::Params;
    /// # use lambda_http::aws_lambda_events::query_map::QueryMap;
    /// let q = QueryMap::from(std::collections::HashMap::from([("minVersion".to_string(), "0".to_string())]));
    /// let params = Params::new(&q, &["minVersion"]).unwrap();
    /// assert_eq!(params.version("minVersion").unwrap_err().status(), 400);
    /// ```
    pub fn version(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)?
            .map(|value| parse_version(name, value))
            .transpose()
    }
}

/// Parses a version: ASCII digits only, at least 1, within `i64`; anything else is a 400 naming
/// `field`.
///
/// ```
/// use cqrs_query_handler::params::parse_version;
/// assert_eq!(parse_version("version", "12").unwrap(), 12);
/// for bad in ["0", "-1", "+1", "1e3", "", "x", "99999999999999999999"] {
///     assert_eq!(parse_version("version", bad).unwrap_err().status(), 400, "{bad}");
/// }
/// ```
pub fn parse_version(field: &str, value: &str) -> Result<i64, ApiError> {
    let bad = || ApiError::bad_field(field, "must be a positive integer (1, 2, ...)");
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match value.parse::<i64>() {
        Ok(version) if version >= 1 => Ok(version),
        _ => Err(bad()),
    }
}
