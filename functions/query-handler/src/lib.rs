//! The query handler: the read half of the CQRS backend.
//!
//! | route | answer |
//! |-------|--------|
//! | `GET /items/{pk}` | a page of a partition of the data table |
//! | `GET /items/{pk}/{sk}` | the latest state of an item (data table, or the command table with `minVersion`) |
//! | `GET /items/{pk}/{sk}/versions` | a page of the item's history, by version number |
//! | `GET /items/{pk}/{sk}/versions/{v}` | one version from the history table |
//! | `GET /query/{pattern}` | a page of a named access pattern of the entity model ([`pattern`]) |
//!
//! A request goes through these steps, each of which may refuse it before anything is read: the
//! route ([`route`], 404) and the method (405), the caller (JWT claims, or local headers with
//! `CALLER_MODE=local`; 401), the partition key (percent-decoded once, validated with the key
//! crate; 400 naming `pk`), the tenant rules (the caller's tenant and `common`, any tenant for
//! `system_admin`; 403) and, for a `common` partition, who the entity model lets read it
//! ([`App::partition_readers`]: a common entity with `read = "system_admin"`; 403), the sort key and version (400), the query parameters ([`params`], 400),
//! the cursor ([`cursor`], 400). Then the store reads.
//!
//! An item whose `ttl` has passed is gone from every read as soon as it passes, although DynamoDB
//! deletes it only within days ([`cqrs_item::Item::is_expired`], at the time the request is read):
//! the latest state and a version answer 404, listings and patterns leave it out (their pages stay
//! full), and a setting falls back to `common` as when the tenant has none.
//!
//! Answers are JSON: an item as [`cqrs_item::Item`] serialises (camelCase), a listing as
//! `{"items": [...], "cursor": "..." | null}` ([`Listing`]). Every refusal is an RFC 9457 problem
//! document ([`cqrs_problem::ApiError`]).
//!
//! Audit fields ([`AUDIT_FIELDS`]: who wrote an item, from where, with which request id) are shown
//! only to the item's own tenant and to a global `system_admin`; any other reader (another
//! tenant reading a `common` item) gets the item without them, on every route ([`ItemView`]).
//!
//! **The framework's own partitions.** A partition starting with a prefix the framework keeps
//! ([`cqrs_keys::RESERVED_PK_PREFIXES`]: `HEAD`, `HEADS`) is refused on every route, to every
//! caller (403), before anything is read; the change log's (`CQRS_CHANGE_LOG`, when
//! `CHANGE_LOG_TABLE` is the data table) is read like any partition of its tenant, entry by
//! entry: an entry ([`cqrs_store::change_log::is_entry`]) is served only to a caller who may read
//! the item it logs (its `attributes.pk`, by the same tenant and `common` rules, so an entry of a
//! `read = "system_admin"` entity only to a global `system_admin`), and never with a `requestId`
//! (the idempotency key entries of older releases hold). An entry the caller may not see is
//! absent: a 404 alone, left out of a listing, whose page may then hold fewer than `limit`
//! entries (its cursor goes on past them).
//!
//! Single items carry a strong `ETag` holding their version (`"3"`); a matching `If-None-Match`
//! answers `304 Not Modified` with no body. The latest state also says where it came from in the
//! [`READ_SOURCE_HEADER`] header: `data` (the data table) or `command` (the command table, when
//! `minVersion` asked for a version data-sync has not projected yet).
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod access_log;
pub mod cursor;
pub mod params;
pub mod pattern;
pub mod route;
pub mod settings;

use std::sync::{Arc, OnceLock};

use cqrs_caller::{Caller, CallerMode, Readers, request_id, request_path};
use cqrs_item::Item;
use cqrs_keys::{
    CHANGE_LOG_PK_PREFIX, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, generate_id,
    reserved_prefix, tenant_code, validate_partition_key, validate_sort_key,
};
use cqrs_model::{Model, ModelErrors, ReadRule};
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
use serde::{Serialize, Serializer, ser::SerializeMap};

use crate::params::Params;
use crate::route::{Route, decode_segment};

/// The response header naming the table the latest state was read from: `data` or `command`.
///
/// ```
/// assert_eq!(cqrs_query_handler::READ_SOURCE_HEADER, "read-source");
/// ```
pub const READ_SOURCE_HEADER: &str = "read-source";

/// What the handler needs for every request: the store, where callers come from, and the entity
/// model whose access patterns `/query/{pattern}` serves.
///
/// The model is parsed and checked on its first use, not at start: only `/query/{pattern}` and
/// reads of `common` partitions (whose readers the model declares) need it, so a container that
/// serves reads of its callers' own tenants never pays for it (about 1 ms of a cold start at the
/// release profile's `opt-level = "z"`, measured by `make bench`); the first pattern request of a
/// container pays it instead, once, and logs `entity model loaded` with `load_micros`. The model
/// is compiled in, and command-handler checks the same text at start, so a model that does not
/// check never gets this far in a deployment: should it, pattern requests and reads of `common`
/// answer 500 and log the problems (who may read `common` is unknown then), while reads of a
/// caller's own tenant go on.
#[derive(Debug, Clone)]
pub struct App {
    /// The DynamoDB store.
    pub store: Store,
    /// Claims, or local headers.
    pub caller_mode: CallerMode,
    source: &'static str,
    model: Arc<OnceLock<Result<Model, ModelErrors>>>,
}

impl App {
    /// The handler's state serving the service's model (the text of its `model.toml`, compiled
    /// into its binary); the first [`App::model`] parses and checks it.
    ///
    /// ```
    /// # async fn demo(store: cqrs_store::Store) {
    /// let app = cqrs_query_handler::App::new(store, cqrs_caller::CallerMode::Jwt, cqrs_model::EXAMPLE_TOML);
    /// assert!(!app.model_is_loaded());
    /// # }
    /// ```
    pub fn new(store: Store, caller_mode: CallerMode, model: &'static str) -> Self {
        App {
            store,
            caller_mode,
            source: model,
            model: Arc::new(OnceLock::new()),
        }
    }

    /// The handler's state serving `model`, already parsed (tests, tools): already loaded, never
    /// checked again.
    ///
    /// ```
    /// # async fn demo(store: cqrs_store::Store) {
    /// let app = cqrs_query_handler::App::with_model(store, cqrs_caller::CallerMode::Jwt, cqrs_model::Model::example());
    /// assert!(app.model_is_loaded());
    /// # }
    /// ```
    pub fn with_model(store: Store, caller_mode: CallerMode, model: Model) -> Self {
        App {
            store,
            caller_mode,
            source: "",
            model: Arc::new(OnceLock::from(Ok(model))),
        }
    }

    /// Whether [`App::model`] has loaded the model yet (the first pattern request does).
    pub fn model_is_loaded(&self) -> bool {
        self.model.get().is_some()
    }

    /// The service's entity model, parsed and checked the first time it is asked for (and timed
    /// and logged then); every later call returns the same model.
    ///
    /// # Errors
    ///
    /// When the service's model does not check: each problem names the entity and field.
    pub fn model(&self) -> Result<&Model, &ModelErrors> {
        self.model
            .get_or_init(|| {
                let started = std::time::Instant::now();
                let model = Model::parse(self.source);
                let load_micros = started.elapsed().as_micros();
                match &model {
                    Ok(model) => tracing::info!(
                        revision = model.revision(),
                        patterns = model.patterns().len(),
                        load_micros,
                        "entity model loaded"
                    ),
                    Err(errors) => tracing::error!(%errors, "the entity model does not check"),
                }
                model
            })
            .as_ref()
    }

    /// Who may read the `common` partition `pk` through the generic routes: the narrowest read
    /// rule of the model's entities that `pk` could hold ([`Model::partition_read_rule`]), every
    /// caller when it could hold none with a rule. Loads the model.
    ///
    /// # Errors
    ///
    /// A 500 when the service's model does not check (nobody knows who may read then).
    pub fn partition_readers(&self, pk: &str) -> Result<Readers, ApiError> {
        Ok(readers(self.checked_model()?.partition_read_rule(pk)))
    }

    /// [`App::model`], its failure as a 500.
    fn checked_model(&self) -> Result<&Model, ApiError> {
        self.model().map_err(|errors| {
            ApiError::Internal(format!("the entity model does not check: {errors}"))
        })
    }
}

/// The caller crate's name for a read rule of the model.
fn readers(rule: ReadRule) -> Readers {
    match rule {
        ReadRule::Everyone => Readers::Everyone,
        ReadRule::SystemAdmin => Readers::SystemAdmin,
    }
}

/// The body of a listing: one page of items and the cursor of the next page (`null` on the last
/// page).
///
/// ```
/// let listing = cqrs_query_handler::Listing { items: vec![], cursor: None };
/// assert_eq!(serde_json::to_string(&listing).unwrap(), r#"{"items":[],"cursor":null}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listing {
    /// The items of the page, in the listing's order, as the caller may see them.
    pub items: Vec<ItemView>,
    /// Pass as `cursor` to get the next page; `null` when no item follows.
    pub cursor: Option<String>,
}

/// The attributes that say who wrote an item, from where and with which request (the request id
/// holds the writer's Idempotency-Key): shown only to the item's own tenant and a global
/// `system_admin`.
///
/// ```
/// assert!(cqrs_query_handler::AUDIT_FIELDS.contains(&"createdIp"));
/// ```
pub const AUDIT_FIELDS: [&str; 5] = [
    "createdBy",
    "createdIp",
    "updatedBy",
    "updatedIp",
    "requestId",
];

/// An item as one caller may see it: whole for the item's own tenant and a global `system_admin`,
/// without the [`AUDIT_FIELDS`] for anyone else. A change log entry
/// ([`cqrs_store::change_log::is_entry`]) never shows a `requestId`, neither its own nor the one
/// older releases copied into its attributes (an idempotency key).
///
/// ```
/// use cqrs_caller::Caller;
/// use cqrs_query_handler::ItemView;
///
/// let mut item = cqrs_item::Item::example();
/// item.pk = "MASTER#common".into();
/// item.tenant_code = "common".into();
/// let reader = Caller::new("u2", "t2", vec![]);
/// let json = serde_json::to_value(ItemView::for_caller(item.clone(), &reader)).unwrap();
/// assert!(json.get("createdBy").is_none() && json.get("requestId").is_none());
/// assert_eq!(json["pk"], "MASTER#common");
///
/// let admin = Caller::new("root", "t1", vec!["system_admin".into()]);
/// let json = serde_json::to_value(ItemView::for_caller(item, &admin)).unwrap();
/// assert_eq!(json["createdBy"], "user-1");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ItemView {
    /// The item.
    pub item: Item,
    /// Whether the audit fields are shown.
    pub audit: bool,
}

impl ItemView {
    /// `item` as `caller` may see it: the audit fields only when the item belongs to the caller's
    /// tenant (its `tenantCode` and the tenant of its `pk` both) or the caller is a global
    /// `system_admin`.
    ///
    /// ```
    /// let item = cqrs_item::Item::example(); // PRODUCT#t1
    /// let own = cqrs_caller::Caller::new("u", "t1", vec![]);
    /// assert!(cqrs_query_handler::ItemView::for_caller(item, &own).audit);
    /// ```
    pub fn for_caller(mut item: Item, caller: &Caller) -> Self {
        if cqrs_store::change_log::is_entry(&item) {
            cqrs_store::change_log::strip_request_id(&mut item);
        }
        let owner = tenant_code(&item.pk).filter(|t| *t == item.tenant_code);
        let audit = caller.is_system_admin() || owner.is_some_and(|t| caller.sees_audit_of(t));
        ItemView { item, audit }
    }
}

impl Serialize for ItemView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entry = cqrs_store::change_log::is_entry(&self.item);
        if self.audit && !entry {
            return self.item.serialize(serializer);
        }
        // The item's own JSON, member by member, each value kept as its exact text (numbers
        // included), without the audit members (and an entry without its `requestId`).
        use serde::ser::Error;
        let text = serde_json::to_string(&self.item).map_err(S::Error::custom)?;
        let members: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
            serde_json::from_str(&text).map_err(S::Error::custom)?;
        let mut map = serializer.serialize_map(None)?;
        for (name, value) in &members {
            let hidden = if self.audit {
                name == "requestId"
            } else {
                AUDIT_FIELDS.contains(&name.as_str())
            };
            if !hidden {
                map.serialize_entry(name, value)?;
            }
        }
        map.end()
    }
}

/// Where the latest state of an item was read from.
///
/// ```
/// assert_eq!(cqrs_query_handler::ReadSource::Command.as_str(), "command");
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
    /// assert_eq!(cqrs_query_handler::ReadSource::Data.as_str(), "data");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ReadSource::Data => "data",
            ReadSource::Command => "command",
        }
    }
}

/// Runs the query handler as a Lambda function serving the service's model (the text of its
/// `model.toml`): builds the DynamoDB client and the configuration once per cold start (each phase
/// timed and logged once, see [`cqrs_store::client::InitClock`]), the model on the first pattern
/// request ([`App::model`]), then answers every request with [`handle`]. A service's
/// `query-handler` binary is this call and nothing else:
///
/// ```no_run
/// // The service's src/bin/query-handler.rs, where MODEL is `include_str!("../../model.toml")`.
/// # const MODEL: &str = cqrs_model::EXAMPLE_TOML;
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_http::Error> {
///     cqrs_query_handler::run(MODEL).await
/// }
/// ```
///
/// Configuration: `COMMAND_TABLE`, `DATA_TABLE`, `HISTORY_TABLE`, `IDEMPOTENCY_TABLE`,
/// `CALLER_MODE`, the access log's variables ([`access_log::init_from_env`]) and the client's
/// ([`cqrs_store::client`]).
///
/// # Errors
///
/// A missing or malformed variable: the function fails its cold start and says why.
pub async fn run(model: &'static str) -> Result<(), lambda_http::Error> {
    use cqrs_store::Tables;
    use cqrs_store::client::{InitClock, client_from_env};

    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    let tables = Tables::from_env()?;
    let caller_mode = CallerMode::from_env()?;
    access_log::init_from_env()?;
    init.lap("config");
    let client = client_from_env(&mut init)?;
    let app = App::new(Store::new(client, tables), caller_mode, model);
    init.log();
    let app = &app;
    lambda_http::run(lambda_http::service_fn(
        move |request: Request| async move {
            Ok::<_, lambda_http::Error>(handle(app, request).await)
        },
    ))
    .await
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
    if let Some((category, code)) = route::setting_path(&path, stage.as_deref()) {
        return settings::get_setting(app, request, category, code).await;
    }
    let route = route::parse_path(&path, stage.as_deref())?;
    if request.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} {path}: items are read with GET (write with POST or PATCH /commands)",
            request.method()
        )));
    }
    let caller = Caller::from_request(request, app.caller_mode)?;
    let query = request.query_string_parameters();
    let now = now_epoch_seconds();
    let Some(pk) = route.pk() else {
        let Route::Pattern { name } = route else {
            return Err(ApiError::Internal("a route without a partition".into()));
        };
        let name = decode_segment("pattern", name)?;
        return list_pattern(
            Reader {
                app,
                caller: &caller,
                now,
            },
            &name,
            &query,
        )
        .await;
    };
    // The partition first, and the tenant rules before anything else of the request is looked at:
    // another tenant, or a `common` partition the model keeps for a global system_admin (the model
    // is loaded for `common` partitions only, never for the caller's own tenant).
    let pk = decode_segment("pk", pk)?;
    validate_partition_key(&stored_key(&pk)).map_err(|e| ApiError::bad_field("pk", e))?;
    if let Some(prefix) = reserved_prefix(&pk)
        && prefix != CHANGE_LOG_PK_PREFIX
    {
        return Err(ApiError::Forbidden(format!(
            "partitions starting with {prefix} hold the framework's own records: no route reads them"
        )));
    }
    caller.authorize_read_with(&pk, || app.partition_readers(&pk))?;
    let headers = request.headers();
    let reader = Reader {
        app,
        caller: &caller,
        now,
    };
    match route {
        Route::Partition { .. } => list_partition(reader, &pk, &query).await,
        Route::Item { sk, .. } => {
            let sk = sort_key(&pk, sk)?;
            get_item(reader, &pk, &sk, &query, headers).await
        }
        Route::Versions { sk, .. } => {
            let sk = sort_key(&pk, sk)?;
            list_versions(reader, &pk, &sk, &query).await
        }
        Route::Version { sk, version, .. } => {
            let sk = sort_key(&pk, sk)?;
            let version = params::parse_version("v", &decode_segment("v", version)?)?;
            Params::new(&query, &[])?;
            get_version(reader, &pk, &sk, version, headers).await
        }
        Route::Pattern { .. } => Err(ApiError::Internal("a pattern with a partition".into())),
    }
}

/// The store and the caller of one request, and when it reads.
#[derive(Clone, Copy)]
struct Reader<'a> {
    app: &'a App,
    caller: &'a Caller,
    /// Now, epoch seconds: items expired at this time are absent.
    now: i64,
}

impl Reader<'_> {
    /// `item` as the caller may see it, or `None` when the caller may not see it at all: a row of
    /// the framework's own partitions, or a change log entry of an item the caller may not read
    /// (see the [crate docs](crate)).
    ///
    /// # Errors
    ///
    /// A 500 when the model does not check (who may read a logged `common` item is unknown then).
    fn visible(&self, item: Item) -> Result<Option<ItemView>, ApiError> {
        if let Some(prefix) = reserved_prefix(&item.pk)
            && prefix != CHANGE_LOG_PK_PREFIX
        {
            return Ok(None);
        }
        if cqrs_store::change_log::is_entry(&item) && !self.reads_logged_item(&item)? {
            return Ok(None);
        }
        Ok(Some(ItemView::for_caller(item, self.caller)))
    }

    /// Whether the caller may read the item the change log entry `entry` logs (its
    /// `attributes.pk`), by the rules of a read of that partition; an entry naming no partition
    /// is a global `system_admin`'s alone.
    fn reads_logged_item(&self, entry: &Item) -> Result<bool, ApiError> {
        let Some(logged) = entry.attributes.get("pk").and_then(|pk| pk.as_str()) else {
            return Ok(self.caller.is_system_admin());
        };
        match self
            .caller
            .authorize_read_with(logged, || self.app.partition_readers(logged))
        {
            Ok(()) => Ok(true),
            Err(ApiError::Forbidden(_)) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// The items of a page the caller may see, in order ([`Reader::visible`]).
    fn visible_all(&self, items: Vec<Item>) -> Result<Vec<ItemView>, ApiError> {
        let mut views = Vec::with_capacity(items.len());
        for item in items {
            views.extend(self.visible(item)?);
        }
        Ok(views)
    }

    /// The item unless it has expired ([`Item::is_expired`]).
    fn live(&self, item: Option<Item>) -> Option<Item> {
        item.filter(|item| !item.is_expired(self.now))
    }
}

/// Now, in epoch seconds: the time a request's reads are made at.
pub(crate) fn now_epoch_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A key of the path as the key crate checks it for a read: U+10FFFF, refused in new keys (it ends
/// every range read of a prefix), may be in keys stored before that rule, and those items stay
/// readable. It is checked as U+10FFFE, a character of the same length that every rule allows, so
/// every other rule (separators, control characters, lengths) still holds.
fn stored_key(key: &str) -> std::borrow::Cow<'_, str> {
    if key.contains('\u{10FFFF}') {
        std::borrow::Cow::Owned(key.replace('\u{10FFFF}', "\u{10FFFE}"))
    } else {
        std::borrow::Cow::Borrowed(key)
    }
}

/// The sort key of the path: decoded once and valid, and with `pk` an item id (`pk#sk`, the
/// history index's partition key) that DynamoDB can hold; no item can have a longer one.
fn sort_key(pk: &str, segment: &str) -> Result<String, ApiError> {
    let sk = decode_segment("sk", segment)?;
    validate_sort_key(&stored_key(&sk)).map_err(|e| ApiError::bad_field("sk", e))?;
    let id_bytes = generate_id(pk, &sk).len();
    if id_bytes > MAX_PARTITION_KEY_BYTES {
        return Err(ApiError::bad_field(
            "sk",
            format!(
                "makes the item id (pk#sk) {id_bytes} bytes long, over the {MAX_PARTITION_KEY_BYTES} bytes of a DynamoDB key: no item has it"
            ),
        ));
    }
    Ok(sk.into_owned())
}

/// A sort key filter of a partition listing (`skPrefix`, `skFrom`, `skTo`): at most
/// [`MAX_SORT_KEY_BYTES`], the longest sort key DynamoDB holds (and compares with).
fn sort_key_filter<'a>(params: &Params<'a>, name: &str) -> Result<Option<&'a str>, ApiError> {
    let value = params.get(name)?;
    if let Some(value) = value
        && value.len() > MAX_SORT_KEY_BYTES
    {
        return Err(ApiError::bad_field(
            name,
            format!(
                "is {} bytes long, over the {MAX_SORT_KEY_BYTES} bytes of a DynamoDB sort key",
                value.len()
            ),
        ));
    }
    Ok(value)
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
    reader: Reader<'_>,
    pk: &str,
    sk: &str,
    query: &lambda_http::aws_lambda_events::query_map::QueryMap,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let app = reader.app;
    let params = Params::new(query, &["includeDeleted", "minVersion"])?;
    let include_deleted = params.flag("includeDeleted")?;
    let min_version = params.version("minVersion")?;
    let data = app.store.get_data_item(pk, sk).await.map_err(store_error)?;
    access_log::record("data", None, pk, "get", usize::from(data.is_some()));
    // An expired item is absent, whether DynamoDB has deleted it yet or not.
    let data = reader.live(data);
    let (item, source) = match (data, min_version) {
        (Some(item), None) => (item, ReadSource::Data),
        (Some(item), Some(min)) if item.version >= min => (item, ReadSource::Data),
        (None, None) => {
            return Err(ApiError::NotFound(format!("no item {pk} / {sk}")));
        }
        (data, Some(min)) => {
            // The data table is behind (or has not seen the item yet): the item's head record
            // names its newest version in one read; an item without a head (written before heads
            // existed, or by mbc-cqrs-serverless) is looked up in the command table's rows.
            let newest = match app.store.get_head(pk, sk).await.map_err(store_error)? {
                Some(newest) => Some(newest),
                None => app
                    .store
                    .latest_command_version(pk, sk)
                    .await
                    .map_err(store_error)?,
            };
            let command = match newest {
                Some(newest) if newest >= min => reader.live(
                    app.store
                        .get_command(pk, sk, newest)
                        .await
                        .map_err(store_error)?,
                ),
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
    // An item the caller may not see is absent, before anything else is said of it.
    let Some(view) = reader.visible(item)? else {
        return Err(ApiError::NotFound(format!("no item {pk} / {sk}")));
    };
    if view.item.is_deleted && !include_deleted {
        return Err(ApiError::NotFound(format!(
            "{pk} / {sk} is deleted (version {}); add includeDeleted=true to read it",
            view.item.version
        )));
    }
    let mut response = single(view, headers);
    response.headers_mut().insert(
        READ_SOURCE_HEADER,
        HeaderValue::from_static(source.as_str()),
    );
    Ok(response)
}

/// `GET /items/{pk}/{sk}/versions/{v}`: one version from the history table.
async fn get_version(
    reader: Reader<'_>,
    pk: &str,
    sk: &str,
    version: i64,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let found = reader
        .app
        .store
        .get_history_version(pk, sk, version)
        .await
        .map_err(store_error)?;
    access_log::record("history", None, pk, "get", usize::from(found.is_some()));
    match reader
        .live(found)
        .map(|item| reader.visible(item))
        .transpose()?
        .flatten()
    {
        Some(view) => Ok(single(view, headers)),
        None => Err(ApiError::NotFound(format!(
            "no version {version} of {pk} / {sk} in the history"
        ))),
    }
}

/// `GET /items/{pk}`: a page of the partition.
async fn list_partition(
    reader: Reader<'_>,
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
    let prefix = sort_key_filter(&params, "skPrefix")?;
    let from = sort_key_filter(&params, "skFrom")?;
    let to = sort_key_filter(&params, "skTo")?;
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
        .include_deleted(params.flag("includeDeleted")?)
        .live_at(reader.now);
    if let Some(text) = params.get("cursor")? {
        store_query.start = Some(cursor::decode_partition(text, &store_query)?);
    }
    let page = reader
        .app
        .store
        .query_partition(&store_query)
        .await
        .map_err(store_error)?;
    access_log::record("data", None, pk, "query", page.items.len());
    let cursor = page
        .next
        .map(|key| cursor::encode_partition(&store_query, &key));
    Ok(json(
        StatusCode::OK,
        &Listing {
            items: reader.visible_all(page.items)?,
            cursor,
        },
    ))
}

/// `GET /items/{pk}/{sk}/versions`: a page of the item's history.
async fn list_versions(
    reader: Reader<'_>,
    pk: &str,
    sk: &str,
    query: &lambda_http::aws_lambda_events::query_map::QueryMap,
) -> Result<Response<Body>, ApiError> {
    let params = Params::new(query, &["order", "limit", "cursor"])?;
    let mut store_query = VersionQuery::new(pk, sk);
    store_query.order = params.order(Order::Descending)?;
    store_query.limit = params.limit()?;
    store_query.live_at = Some(reader.now);
    if let Some(text) = params.get("cursor")? {
        store_query.start = Some(cursor::decode_versions(text, &store_query)?);
    }
    let page = reader
        .app
        .store
        .query_versions(&store_query)
        .await
        .map_err(store_error)?;
    access_log::record(
        "history",
        Some("id-version-index"),
        &generate_id(pk, sk),
        "query",
        page.items.len(),
    );
    // The versions of one item are all visible or all not: none the caller may see is none.
    let items = reader.visible_all(page.items)?;
    if items.is_empty() && store_query.start.is_none() {
        return Err(ApiError::NotFound(format!(
            "no versions of {pk} / {sk} in the history"
        )));
    }
    let cursor = page
        .next
        .map(|key| cursor::encode_versions(&store_query, &key));
    Ok(json(StatusCode::OK, &Listing { items, cursor }))
}

/// The parameters of `/query/{pattern}` besides the pattern's own.
const PATTERN_PAGING: [&str; 4] = ["order", "limit", "cursor", "includeDeleted"];

/// `GET /query/{pattern}`: a page of a named access pattern.
async fn list_pattern(
    reader: Reader<'_>,
    name: &str,
    query: &lambda_http::aws_lambda_events::query_map::QueryMap,
) -> Result<Response<Body>, ApiError> {
    let model = reader.app.checked_model()?;
    let Some(pattern) = model.pattern(name) else {
        let known: Vec<&str> = model.patterns().iter().map(|p| p.name.as_str()).collect();
        return Err(ApiError::bad_field(
            "pattern",
            format!(
                "there is no access pattern {name:?}; the model has {}",
                known.join(", ")
            ),
        ));
    };
    // Who may read the pattern's entities (a common entity may be kept for a global system_admin),
    // before its parameters and cursor are looked at.
    reader.caller.authorize_common_read(
        &format!("access pattern {name:?}"),
        readers(model.pattern_read_rule(pattern)),
    )?;
    let mut allowed: Vec<&str> = PATTERN_PAGING.to_vec();
    allowed.extend(pattern.params.iter().map(String::as_str));
    if pattern.sort.contains(&cqrs_model::SortCondition::Range) {
        allowed.extend(cqrs_model::RANGE_PARAMS);
    }
    let params = Params::new(query, &allowed)?;
    let given: Vec<(&str, &str)> = query
        .iter()
        .filter(|(name, _)| !PATTERN_PAGING.contains(name))
        .collect();
    let plan = model
        .query(name, &reader.caller.tenant_code, &given)
        .map_err(|e| ApiError::bad_field(&e.param, e.message))?;
    let order = params.order(Order::Ascending)?;
    let cursor = match params.get("cursor")? {
        Some(text) => Some(cursor::decode_pattern(text, &plan, order)?),
        None => None,
    };
    let page = pattern::read_page(
        &reader.app.store,
        model,
        &plan,
        pattern::PageRequest {
            order,
            limit: params.limit()?,
            include_deleted: params.flag("includeDeleted")?,
            live_at: Some(reader.now),
            cursor,
        },
    )
    .await
    .map_err(store_error)?;
    // One access-log line per partition the page read (each shard of a fan-out is a partition).
    for (partition, entries) in plan.partitions.iter().zip(&page.shard_entries) {
        if *entries > 0 {
            let key: Vec<&str> = partition.iter().map(cqrs_model::KeyValue::as_str).collect();
            access_log::record(
                "data",
                plan.index.map(|i| i.name.as_str()),
                &key.join("#"),
                "query",
                *entries,
            );
        }
    }
    tracing::debug!(
        pattern = name,
        queries = page.stats.queries,
        entries = page.stats.entries,
        reread = page.stats.reread,
        stale = page.stats.stale,
        items = page.items.len(),
        "pattern page"
    );
    let cursor = page
        .cursor
        .map(|c| cursor::encode_pattern(&plan, order, &c));
    Ok(json(
        StatusCode::OK,
        &Listing {
            items: reader.visible_all(page.items)?,
            cursor,
        },
    ))
}

/// The strong entity tag of an item: its version, quoted.
///
/// ```
/// assert_eq!(cqrs_query_handler::etag(7), "\"7\"");
/// ```
pub fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

/// Whether an `If-None-Match` header (all its values) matches the entity tag `etag`: `*`, or the
/// same opaque tag, weak or strong (RFC 9110 weak comparison).
///
/// ```
/// use lambda_http::http::{HeaderMap, HeaderValue};
/// use cqrs_query_handler::none_match;
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
fn single(view: ItemView, headers: &HeaderMap) -> Response<Body> {
    let tag = etag(view.item.version);
    let mut response = if none_match(headers, &tag) {
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        json(StatusCode::OK, &view)
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
