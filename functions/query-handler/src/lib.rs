//! The query handler: the read half of the CQRS backend.
//!
//! | route | answer |
//! |-------|--------|
//! | `GET /items/{pk}` | a page of a partition of the data table |
//! | `GET /items/{pk}/{sk}` | the latest state of an item (data table, or the command table with `minVersion`) |
//! | `GET /items/{pk}/{sk}/versions` | a page of the item's history, by version number |
//! | `GET /items/{pk}/{sk}/versions/{v}` | one version from the history table |
//!
//! A request goes through these steps, each of which may refuse it before anything is read: the
//! route ([`route`], 404) and the method (405), the caller (JWT claims, or local headers with
//! `CALLER_MODE=local`; 401), the partition key (percent-decoded once, validated with the key
//! crate; 400 naming `pk`), the tenant rules (the caller's tenant and `common`, any tenant for
//! `system_admin`; 403), the sort key and version (400), the query parameters ([`params`], 400),
//! the cursor ([`cursor`], 400). Then the store reads.
//!
//! Answers are JSON: an item as [`cqrs_item::Item`] serialises (camelCase), a listing as
//! `{"items": [...], "cursor": "..." | null}` ([`Listing`]). Every refusal is an RFC 9457 problem
//! document ([`cqrs_problem::ApiError`]).
//!
//! Single items carry a strong `ETag` holding their version (`"3"`); a matching `If-None-Match`
//! answers `304 Not Modified` with no body. The latest state also says where it came from in the
//! [`READ_SOURCE_HEADER`] header: `data` (the data table) or `command` (the command table, when
//! `minVersion` asked for a version data-sync has not projected yet).
#![forbid(unsafe_code)]

pub mod cursor;
pub mod params;
pub mod route;

use cqrs_caller::{Caller, CallerMode, request_id, request_path};
use cqrs_item::Item;
use cqrs_keys::{validate_partition_key, validate_sort_key};
use cqrs_problem::ApiError;
use cqrs_store::{
    Store, StoreError,
    query::{Order, PartitionQuery, SortKeyRange, VersionQuery},
};
use lambda_http::{
    Body, Request, RequestExt, Response,
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    request::RequestContext,
};
use serde::Serialize;

use crate::params::Params;
use crate::route::{Route, decode_segment};

/// The response header naming the table the latest state was read from: `data` or `command`.
///
/// ```
/// assert_eq!(query_handler::READ_SOURCE_HEADER, "read-source");
/// ```
pub const READ_SOURCE_HEADER: &str = "read-source";

/// What the handler needs for every request: the store and where callers come from.
#[derive(Debug, Clone)]
pub struct App {
    /// The DynamoDB store.
    pub store: Store,
    /// Claims, or local headers.
    pub caller_mode: CallerMode,
}

/// The body of a listing: one page of items and the cursor of the next page (`null` on the last
/// page).
///
/// ```
/// let listing = query_handler::Listing { items: vec![], cursor: None };
/// assert_eq!(serde_json::to_string(&listing).unwrap(), r#"{"items":[],"cursor":null}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listing {
    /// The items of the page, in the listing's order.
    pub items: Vec<Item>,
    /// Pass as `cursor` to get the next page; `null` when no item follows.
    pub cursor: Option<String>,
}

/// Where the latest state of an item was read from.
///
/// ```
/// assert_eq!(query_handler::ReadSource::Command.as_str(), "command");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSource {
    /// The data table (data-sync's projection).
    Data,
    /// The command table (a version data-sync has not projected yet).
    Command,
}

impl ReadSource {
    /// The value of the [`READ_SOURCE_HEADER`] header.
    ///
    /// ```
    /// assert_eq!(query_handler::ReadSource::Data.as_str(), "data");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ReadSource::Data => "data",
            ReadSource::Command => "command",
        }
    }
}

/// Answers one HTTP request. Never fails: every refusal is a problem document.
#[tracing::instrument(skip_all, fields(method = %request.method(), path = %request_path(&request)))]
pub async fn handle(app: &App, request: Request) -> Response<Body> {
    let request_id = request_id(&request);
    match answer(app, &request).await {
        Ok(response) => response,
        Err(error) => {
            match &error {
                ApiError::Internal(detail) => {
                    tracing::error!(%request_id, %detail, "query failed")
                }
                other => {
                    tracing::info!(%request_id, status = other.status(), %other, "query refused")
                }
            }
            let allow = matches!(error, ApiError::MethodNotAllowed(_));
            let mut response = error.into_response(&request_id);
            if allow {
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET"));
            }
            response
        }
    }
}

async fn answer(app: &App, request: &Request) -> Result<Response<Body>, ApiError> {
    let path = request_path(request);
    let stage = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context.stage.clone(),
        _ => None,
    };
    let route = route::parse_path(&path, stage.as_deref())?;
    if request.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} {path}: items are read with GET (write with POST or PATCH /commands)",
            request.method()
        )));
    }
    let caller = Caller::from_request(request, app.caller_mode)?;
    // The partition first, and the tenant rules before anything else of the request is looked at.
    let pk = decode_segment("pk", route.pk())?;
    validate_partition_key(&pk).map_err(|e| ApiError::bad_field("pk", e))?;
    caller.authorize_read(&pk)?;
    let query = request.query_string_parameters();
    let headers = request.headers();
    match route {
        Route::Partition { .. } => list_partition(app, &pk, &query).await,
        Route::Item { sk, .. } => {
            let sk = sort_key(sk)?;
            get_item(app, &pk, &sk, &query, headers).await
        }
        Route::Versions { sk, .. } => {
            let sk = sort_key(sk)?;
            list_versions(app, &pk, &sk, &query).await
        }
        Route::Version { sk, version, .. } => {
            let sk = sort_key(sk)?;
            let version = params::parse_version("v", &decode_segment("v", version)?)?;
            Params::new(&query, &[])?;
            get_version(app, &pk, &sk, version, headers).await
        }
    }
}

fn sort_key(segment: &str) -> Result<String, ApiError> {
    let sk = decode_segment("sk", segment)?;
    validate_sort_key(&sk).map_err(|e| ApiError::bad_field("sk", e))?;
    Ok(sk.into_owned())
}

/// Maps a store failure: throttling is a 503 (retry later), anything else a 500.
fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::Throttled(detail) => ApiError::Unavailable(detail),
        other => ApiError::Internal(other.to_string()),
    }
}

/// `GET /items/{pk}/{sk}`: the data table's item, or with `minVersion` the newest command version
/// when the data table is behind.
async fn get_item(
    app: &App,
    pk: &str,
    sk: &str,
    query: &lambda_http::aws_lambda_events::query_map::QueryMap,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let params = Params::new(query, &["includeDeleted", "minVersion"])?;
    let include_deleted = params.flag("includeDeleted")?;
    let min_version = params.version("minVersion")?;
    let data = app.store.get_data_item(pk, sk).await.map_err(store_error)?;
    let (item, source) = match (data, min_version) {
        (Some(item), None) => (item, ReadSource::Data),
        (Some(item), Some(min)) if item.version >= min => (item, ReadSource::Data),
        (None, None) => {
            return Err(ApiError::NotFound(format!("no item {pk} / {sk}")));
        }
        (data, Some(min)) => {
            // The data table is behind (or has not seen the item yet): read the command table.
            let newest = app
                .store
                .latest_command_version(pk, sk)
                .await
                .map_err(store_error)?;
            let command = match newest {
                Some(newest) if newest >= min => app
                    .store
                    .get_command(pk, sk, newest)
                    .await
                    .map_err(store_error)?,
                _ => None,
            };
            match command {
                Some(item) => (item.into_data_item(), ReadSource::Command),
                None => {
                    let newest = newest
                        .max(data.map(|d| d.version))
                        .map_or("no version".to_string(), |v| format!("version {v}"));
                    return Err(ApiError::NotFound(format!(
                        "version {min} of {pk} / {sk} does not exist (newest: {newest})"
                    )));
                }
            }
        }
    };
    if item.is_deleted && !include_deleted {
        return Err(ApiError::NotFound(format!(
            "{pk} / {sk} is deleted (version {}); add includeDeleted=true to read it",
            item.version
        )));
    }
    let mut response = single(&item, headers);
    response.headers_mut().insert(
        READ_SOURCE_HEADER,
        HeaderValue::from_static(source.as_str()),
    );
    Ok(response)
}

/// `GET /items/{pk}/{sk}/versions/{v}`: one version from the history table.
async fn get_version(
    app: &App,
    pk: &str,
    sk: &str,
    version: i64,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    match app
        .store
        .get_history_version(pk, sk, version)
        .await
        .map_err(store_error)?
    {
        Some(item) => Ok(single(&item, headers)),
        None => Err(ApiError::NotFound(format!(
            "no version {version} of {pk} / {sk} in the history"
        ))),
    }
}

/// `GET /items/{pk}`: a page of the partition.
async fn list_partition(
    app: &App,
    pk: &str,
    query: &lambda_http::aws_lambda_events::query_map::QueryMap,
) -> Result<Response<Body>, ApiError> {
    let params = Params::new(
        query,
        &[
            "skPrefix",
            "skFrom",
            "skTo",
            "order",
            "limit",
            "cursor",
            "includeDeleted",
        ],
    )?;
    let prefix = params.get("skPrefix")?;
    let from = params.get("skFrom")?;
    let to = params.get("skTo")?;
    let range = match (prefix, from, to) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(ApiError::bad_field(
                "skPrefix",
                "cannot be combined with skFrom or skTo",
            ));
        }
        (Some(prefix), None, None) => SortKeyRange::Prefix(prefix.into()),
        (None, Some(from), Some(to)) => {
            let range = SortKeyRange::Between(from.into(), to.into());
            if range.is_empty() {
                return Err(ApiError::bad_field(
                    "skFrom",
                    "must not sort after skTo (the range is inclusive)",
                ));
            }
            range
        }
        (None, Some(from), None) => SortKeyRange::From(from.into()),
        (None, None, Some(to)) => SortKeyRange::To(to.into()),
        (None, None, None) => SortKeyRange::All,
    };
    let mut store_query = PartitionQuery::new(pk)
        .range(range)
        .order(params.order(Order::Ascending)?)
        .limit(params.limit()?)
        .include_deleted(params.flag("includeDeleted")?);
    if let Some(text) = params.get("cursor")? {
        store_query.start = Some(cursor::decode_partition(text, &store_query)?);
    }
    let page = app
        .store
        .query_partition(&store_query)
        .await
        .map_err(store_error)?;
    let cursor = page
        .next
        .map(|key| cursor::encode_partition(&store_query, &key));
    Ok(json(
        StatusCode::OK,
        &Listing {
            items: page.items,
            cursor,
        },
    ))
}

/// `GET /items/{pk}/{sk}/versions`: a page of the item's history.
async fn list_versions(
    app: &App,
    pk: &str,
    sk: &str,
    query: &lambda_http::aws_lambda_events::query_map::QueryMap,
) -> Result<Response<Body>, ApiError> {
    let params = Params::new(query, &["order", "limit", "cursor"])?;
    let mut store_query = VersionQuery::new(pk, sk);
    store_query.order = params.order(Order::Descending)?;
    store_query.limit = params.limit()?;
    if let Some(text) = params.get("cursor")? {
        store_query.start = Some(cursor::decode_versions(text, &store_query)?);
    }
    let page = app
        .store
        .query_versions(&store_query)
        .await
        .map_err(store_error)?;
    if page.items.is_empty() && store_query.start.is_none() {
        return Err(ApiError::NotFound(format!(
            "no versions of {pk} / {sk} in the history"
        )));
    }
    let cursor = page
        .next
        .map(|key| cursor::encode_versions(&store_query, &key));
    Ok(json(
        StatusCode::OK,
        &Listing {
            items: page.items,
            cursor,
        },
    ))
}

/// The strong entity tag of an item: its version, quoted.
///
/// ```
/// assert_eq!(query_handler::etag(7), "\"7\"");
/// ```
pub fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

/// Whether an `If-None-Match` header (all its values) matches the entity tag `etag`: `*`, or the
/// same opaque tag, weak or strong (RFC 9110 weak comparison).
///
/// ```
/// use lambda_http::http::{HeaderMap, HeaderValue};
/// use query_handler::none_match;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("if-none-match", HeaderValue::from_static(r#"W/"2", "3""#));
/// assert!(none_match(&headers, "\"3\""));
/// assert!(none_match(&headers, "\"2\""));
/// assert!(!none_match(&headers, "\"4\""));
/// assert!(!none_match(&HeaderMap::new(), "\"4\""));
/// ```
pub fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

/// One item with its `ETag`, or `304` when `If-None-Match` names it.
fn single(item: &Item, headers: &HeaderMap) -> Response<Body> {
    let tag = etag(item.version);
    let mut response = if none_match(headers, &tag) {
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        json(StatusCode::OK, item)
    };
    if let Ok(value) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

fn json(status: StatusCode, body: &impl Serialize) -> Response<Body> {
    match serde_json::to_string(body) {
        Ok(text) => {
            let mut response = Response::new(Body::Text(text));
            *response.status_mut() = status;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => ApiError::Internal(format!("serialising the answer: {e}")).into_response(""),
    }
}
