//! Routes: which of the four reads a request path names, with its keys decoded.
//!
//! The path is taken as the client sent it (API Gateway's `rawPath`, percent-encoded), split on
//! `/`, and each segment is percent-decoded exactly once. So `PRODUCT%23t1` is `PRODUCT#t1`,
//! `%2F` inside a segment is a `/` of the key (not a separator), and `%2523` is the literal text
//! `%23`, never a second `#`. Path parameters as API Gateway or a local router hand them over
//! (sometimes decoded, sometimes not) are never used, so AWS and local runs agree.
//!
//! | path | route |
//! |------|-------|
//! | `/items/{pk}` | [`Route::Partition`] |
//! | `/items/{pk}/{sk}` | [`Route::Item`] |
//! | `/items/{pk}/{sk}/versions` | [`Route::Versions`] |
//! | `/items/{pk}/{sk}/versions/{v}` | [`Route::Version`] |
//! | `/query/{pattern}` | [`Route::Pattern`] |
//!
//! ```
//! use cqrs_query_handler::route::{Route, parse_path};
//!
//! let route = parse_path("/items/ORDER%23t1/ORDER_ITEM%23o1%23001/versions", None).unwrap();
//! assert_eq!(route, Route::Versions { pk: "ORDER%23t1", sk: "ORDER_ITEM%23o1%23001" });
//! assert_eq!(route.pk(), Some("ORDER%23t1"));
//! ```

use std::borrow::Cow;

use cqrs_problem::ApiError;

/// The read a path names, with its segments still percent-encoded; decode them with
/// [`decode_segment`].
///
/// ```
/// use cqrs_query_handler::route::{Route, parse_path};
/// assert_eq!(parse_path("/items/P%23t1", None).unwrap(), Route::Partition { pk: "P%23t1" });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /items/{pk}`: a page of a partition.
    Partition {
        /// Partition key segment.
        pk: &'a str,
    },
    /// `GET /items/{pk}/{sk}`: the latest state of an item.
    Item {
        /// Partition key segment.
        pk: &'a str,
        /// Sort key segment.
        sk: &'a str,
    },
    /// `GET /items/{pk}/{sk}/versions`: a page of an item's history.
    Versions {
        /// Partition key segment.
        pk: &'a str,
        /// Sort key segment.
        sk: &'a str,
    },
    /// `GET /query/{pattern}`: a page of a named access pattern of the entity model.
    Pattern {
        /// The pattern name segment.
        name: &'a str,
    },
    /// `GET /items/{pk}/{sk}/versions/{v}`: one version of an item.
    Version {
        /// Partition key segment.
        pk: &'a str,
        /// Sort key segment.
        sk: &'a str,
        /// Version segment (`{v}`).
        version: &'a str,
    },
}

impl<'a> Route<'a> {
    /// The partition key segment, still encoded (`None` for a pattern).
    ///
    /// ```
    /// let route = cqrs_query_handler::route::parse_path("/items/a%23b/c", None).unwrap();
    /// assert_eq!(route.pk(), Some("a%23b"));
    /// ```
    pub fn pk(&self) -> Option<&'a str> {
        match *self {
            Route::Partition { pk }
            | Route::Item { pk, .. }
            | Route::Versions { pk, .. }
            | Route::Version { pk, .. } => Some(pk),
            Route::Pattern { .. } => None,
        }
    }
}

/// Parses a raw (percent-encoded) request path into a [`Route`]; any other path is a 404. A
/// leading segment equal to the API Gateway `stage` (other than `$default`) is skipped, and so is
/// a trailing `/`.
///
/// ```
/// use cqrs_query_handler::route::{Route, parse_path};
///
/// assert_eq!(
///     parse_path("/prod/items/P%23t1/a/versions/3", Some("prod")).unwrap(),
///     Route::Version { pk: "P%23t1", sk: "a", version: "3" }
/// );
/// assert_eq!(parse_path("/items/P%23t1/a/", None).unwrap(), Route::Item { pk: "P%23t1", sk: "a" });
/// assert_eq!(parse_path("/items", None).unwrap_err().status(), 404);
/// assert_eq!(parse_path("/items/P%23t1/a/history", None).unwrap_err().status(), 404);
/// assert_eq!(parse_path("/query/orders_of_user", None).unwrap(), Route::Pattern { name: "orders_of_user" });
/// assert_eq!(parse_path("/query/a/b", None).unwrap_err().status(), 404);
/// ```
pub fn parse_path<'a>(path: &'a str, stage: Option<&str>) -> Result<Route<'a>, ApiError> {
    let not_found = || {
        ApiError::NotFound(format!(
            "no route {path}: use /items/{{pk}}, /items/{{pk}}/{{sk}}, \
             /items/{{pk}}/{{sk}}/versions, /items/{{pk}}/{{sk}}/versions/{{v}} or /query/{{pattern}}"
        ))
    };
    let mut trimmed = path.strip_suffix('/').unwrap_or(path);
    if let Some(stage) = stage.filter(|s| !s.is_empty() && *s != "$default")
        && let Some(rest) = trimmed
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(stage))
        && (rest.starts_with("/items") || rest.starts_with("/query"))
    {
        trimmed = rest;
    }
    if let Some(name) = trimmed.strip_prefix("/query/") {
        return match name {
            "" => Err(not_found()),
            name if name.contains('/') => Err(not_found()),
            name => Ok(Route::Pattern { name }),
        };
    }
    let Some(rest) = trimmed.strip_prefix("/items/") else {
        return Err(not_found());
    };
    let segments: Vec<&str> = rest.split('/').collect();
    match segments.as_slice() {
        [pk] => Ok(Route::Partition { pk }),
        [pk, sk] => Ok(Route::Item { pk, sk }),
        [pk, sk, "versions"] => Ok(Route::Versions { pk, sk }),
        [pk, sk, "versions", version] => Ok(Route::Version { pk, sk, version }),
        _ => Err(not_found()),
    }
}

/// The `{category}` and `{code}` segments (still encoded) of `GET /settings/{category}/{code}`
/// (the answer of [`crate::settings`]); `None` for any other path. A leading `stage` segment
/// and a trailing `/` are skipped as in [`parse_path`].
///
/// ```
/// use cqrs_query_handler::route::setting_path;
///
/// assert_eq!(setting_path("/settings/ui/theme", None), Some(("ui", "theme")));
/// assert_eq!(setting_path("/prod/settings/ui/theme/", Some("prod")), Some(("ui", "theme")));
/// assert_eq!(setting_path("/settings/ui", None), None);
/// assert_eq!(setting_path("/items/ui/theme", None), None);
/// ```
pub fn setting_path<'a>(path: &'a str, stage: Option<&str>) -> Option<(&'a str, &'a str)> {
    let mut trimmed = path.strip_suffix('/').unwrap_or(path);
    if let Some(stage) = stage.filter(|s| !s.is_empty() && *s != "$default")
        && let Some(rest) = trimmed
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(stage))
        && rest.starts_with("/settings/")
    {
        trimmed = rest;
    }
    let (category, code) = trimmed.strip_prefix("/settings/")?.split_once('/')?;
    (!category.is_empty() && !code.is_empty() && !code.contains('/')).then_some((category, code))
}

/// Percent-decodes one path segment, once; a segment that is not UTF-8 once decoded is a 400
/// naming `field`.
///
/// ```
/// use cqrs_query_handler::route::decode_segment;
///
/// assert_eq!(decode_segment("pk", "PRODUCT%23t1").unwrap(), "PRODUCT#t1");
/// assert_eq!(decode_segment("sk", "a%2523b").unwrap(), "a%23b");
/// assert_eq!(decode_segment("sk", "a+b").unwrap(), "a+b");
/// assert_eq!(decode_segment("sk", "%FF").unwrap_err().status(), 400);
/// ```
pub fn decode_segment<'a>(field: &str, segment: &'a str) -> Result<Cow<'a, str>, ApiError> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| ApiError::bad_field(field, "is not UTF-8 once percent-decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_shapes_route() {
        for path in [
            "/",
            "/item/P%23t1",
            "/items/",
            "/itemsX/P%23t1",
            "/items/P%23t1/a/b",
            "/items/P%23t1/a/versions/1/x",
            "/commands",
        ] {
            assert_eq!(parse_path(path, None).unwrap_err().status(), 404, "{path}");
        }
    }

    #[test]
    fn encoded_slashes_stay_inside_their_segment() {
        let route = parse_path("/items/P%23t1/a%2Fb/versions", None).unwrap();
        assert_eq!(
            route,
            Route::Versions {
                pk: "P%23t1",
                sk: "a%2Fb"
            }
        );
        assert_eq!(decode_segment("sk", "a%2Fb").unwrap(), "a/b");
    }

    #[test]
    fn an_item_named_versions_is_an_item() {
        assert_eq!(
            parse_path("/items/P%23t1/versions", None).unwrap(),
            Route::Item {
                pk: "P%23t1",
                sk: "versions"
            }
        );
    }

    #[test]
    fn the_stage_is_skipped_only_when_it_is_the_first_segment() {
        assert_eq!(
            parse_path("/dev/items/P%23t1", Some("dev")).unwrap(),
            Route::Partition { pk: "P%23t1" }
        );
        assert!(parse_path("/dev/items/P%23t1", Some("$default")).is_err());
        assert!(parse_path("/devx/items/P%23t1", Some("dev")).is_err());
    }
}
