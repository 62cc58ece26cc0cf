//! The command handler: `POST /commands` and `PATCH /commands`.
//!
//! A request goes through these steps, each of which may refuse it before anything is written:
//! route and method, the caller (JWT claims, or local headers with `CALLER_MODE=local`), the body
//! ([`input`], after a size check: over [`MAX_BODY_BYTES`] is a 413 before parsing), the derived
//! key limits, the tenant rules, the entity's write roles ([`roles`], before any read), the TTL rules
//! of constrained entities ([`ttl_policy`]), the idempotency key; then [`publish`] writes one new
//! version (with the guards of the model's declared [`constraints`]), the
//! item's head record and the idempotency record in one conditional transaction. The answer is
//! `202` with `id, pk, sk, version` of the stored command, or an RFC 9457 problem document.
//!
//! Version rules, read from the item's head record (so a version whose row expired is never
//! written again): `0` creates (409 if the item exists); `N` writes `N+1` (404 if version `N` does
//! not exist, 409 if `N+1` already does); `-1` writes after the latest, re-reading and retrying up
//! to [`publish::LATEST_RETRIES`] times when it loses a race or meets a transaction conflict.
//!
//! `Idempotency-Key`: the first request with a key stores, in the same transaction as the version,
//! what it wrote and a digest of the request. A retry with the same key and the same request answers
//! that first result (`Idempotent-Replayed: true`); the same key with another request is a 422.
//! Keys are scoped to the caller (tenant and user) and kept for 24 hours.
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod constraints;
pub mod copy;
pub mod entity;
pub mod fingerprint;
pub mod heads;
pub mod hooks;
pub mod input;
pub mod publish;
pub mod roles;
pub mod sequence;
pub mod ttl_policy;

use cqrs_caller::{Caller, CallerMode, request_id, request_path, source_ip};
use cqrs_problem::ApiError;
use cqrs_store::{IdempotencyRecord, Store};
use lambda_http::{
    Body, Request, Response,
    http::{HeaderValue, Method, StatusCode, header},
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::input::parse_command;
use crate::publish::{Audit, Mode, Published, publish_command};

/// How long an idempotency key is remembered.
pub const IDEMPOTENCY_TTL_SECONDS: i64 = 24 * 60 * 60;

/// The largest request body accepted, in bytes; a larger one is a 413 before it is parsed.
///
/// The largest command is an item at DynamoDB's limit ([`cqrs_item::MAX_ITEM_BYTES`], 400 KB as
/// stored) plus its envelope: JSON spends more bytes than DynamoDB on the same data (quotes,
/// punctuation, escapes such as `\u0001` for one stored byte, spelt-out numbers), so the body may be
/// up to 2.5 times the stored item: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The longest `Idempotency-Key` accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// What the handler needs for every request: the store, where callers come from, and the entity
/// model.
#[derive(Debug, Clone)]
pub struct App {
    /// The DynamoDB store.
    pub store: Store,
    /// Claims, or local headers.
    pub caller_mode: CallerMode,
    /// The service's entity model (its `model.toml`, compiled into its binary).
    pub model: std::sync::Arc<cqrs_model::Model>,
    /// TTL policies read by this warm container ([`ttl_policy`]).
    pub ttl_policies: std::sync::Arc<ttl_policy::PolicyCache>,
    /// The deployment's heads state as this warm container last read it ([`heads`]).
    pub heads: std::sync::Arc<heads::HeadsCache>,
    /// The service's command hooks, by entity ([`hooks`]).
    pub hooks: hooks::Hooks,
}

impl App {
    /// The handler on `store`, with callers from `caller_mode`, serving the service's `model`.
    ///
    /// ```
    /// # async fn demo(store: cqrs_store::Store) {
    /// let model = cqrs_model::Model::example();
    /// let app = cqrs_command_handler::App::new(store, cqrs_caller::CallerMode::Jwt, model);
    /// assert!(app.model.entity("order").is_some());
    /// # }
    /// ```
    pub fn new(store: Store, caller_mode: CallerMode, model: cqrs_model::Model) -> Self {
        App {
            store,
            caller_mode,
            model: std::sync::Arc::new(model),
            ttl_policies: Default::default(),
            heads: Default::default(),
            hooks: hooks::Hooks::new(),
        }
    }

    /// What a command of `entity` obeys: the model's entity and the service's hook on it.
    pub fn rules<'a>(&'a self, entity: Option<entity::ModelEntity<'a>>) -> publish::Rules<'a> {
        publish::Rules {
            entity,
            hook: entity.and_then(|e| self.hooks.get(&e.entity.name)),
            model: Some(&self.model),
        }
    }

    /// The same handler with the service's command `hooks`.
    ///
    /// # Errors
    ///
    /// A hook registered for an entity the model does not have, or two hooks on one entity
    /// ([`hooks::Hooks::check`]): a cold start fails naming the entity.
    ///
    /// ```
    /// # async fn demo(store: cqrs_store::Store) {
    /// let app = cqrs_command_handler::App::new(store, cqrs_caller::CallerMode::Jwt, cqrs_model::Model::example())
    ///     .with_hooks(cqrs_command_handler::hooks::Hooks::new())
    ///     .unwrap();
    /// assert!(app.hooks.is_empty());
    /// # }
    /// ```
    pub fn with_hooks(mut self, hooks: hooks::Hooks) -> Result<Self, String> {
        hooks.check(&self.model)?;
        self.hooks = hooks;
        Ok(self)
    }
}

/// Runs the command handler as a Lambda function serving the service's model (the text of its
/// `model.toml`): builds the DynamoDB client, the configuration and the model once per cold start
/// (each phase timed and logged once, see [`cqrs_store::client::InitClock`]), then answers every
/// request with [`handle`]. A service's `command-handler` binary is this call and nothing else:
///
/// ```no_run
/// // The service's src/bin/command-handler.rs, where MODEL is `include_str!("../../model.toml")`.
/// # const MODEL: &str = cqrs_model::EXAMPLE_TOML;
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_http::Error> {
///     cqrs_command_handler::run(MODEL).await
/// }
/// ```
///
/// Configuration: `COMMAND_TABLE`, `DATA_TABLE`, `HISTORY_TABLE`, `IDEMPOTENCY_TABLE`,
/// `SEQUENCES_TABLE`, `CALLER_MODE`, and the client's variables ([`cqrs_store::client`]).
///
/// # Errors
///
/// A missing or malformed variable, or a model that does not check (each problem names the entity
/// and the field): the function fails its cold start and says why.
pub async fn run(model: &str) -> Result<(), lambda_http::Error> {
    run_with_hooks(model, hooks::Hooks::new()).await
}

/// [`run`] with the service's command hooks ([`hooks`]): its `command-handler` binary when it has
/// rules of its own.
///
/// ```no_run
/// // The service's src/bin/command-handler.rs, where MODEL is `include_str!("../../model.toml")`.
/// # const MODEL: &str = cqrs_model::EXAMPLE_TOML;
/// # struct OrderRules;
/// # impl cqrs_command_handler::hooks::CommandHook for OrderRules {
/// #     fn before_write<'a>(&'a self, _: &'a mut cqrs_command_handler::hooks::HookCommand<'_>) -> cqrs_command_handler::hooks::HookFuture<'a> { Box::pin(async { Ok(()) }) }
/// # }
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_http::Error> {
///     let hooks = cqrs_command_handler::hooks::Hooks::new().on("order", OrderRules);
///     cqrs_command_handler::run_with_hooks(MODEL, hooks).await
/// }
/// ```
///
/// # Errors
///
/// As [`run`], and a hook registered for an entity the model does not have or two hooks on one
/// entity ([`hooks::Hooks::check`]).
pub async fn run_with_hooks(model: &str, hooks: hooks::Hooks) -> Result<(), lambda_http::Error> {
    use cqrs_store::Tables;
    use cqrs_store::client::{InitClock, client_from_env};

    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    let tables = Tables::from_env()?;
    if tables.sequences.is_none() {
        return Err(cqrs_store::ConfigError::MissingVariable("SEQUENCES_TABLE").into());
    }
    let caller_mode = CallerMode::from_env()?;
    init.lap("config");
    let client = client_from_env(&mut init)?;
    let model = cqrs_model::Model::parse(model)?;
    init.lap("model");
    tracing::info!(
        entities = model.entities().len(),
        revision = model.revision(),
        "entity model loaded"
    );
    let app = App::new(Store::new(client, tables), caller_mode, model).with_hooks(hooks)?;
    init.log();
    let app = &app;
    lambda_http::run(lambda_http::service_fn(
        move |request: Request| async move {
            Ok::<_, lambda_http::Error>(handle(app, request).await)
        },
    ))
    .await
}

/// The body of a `202`: the stored command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// `pk#sk` without version.
    pub id: String,
    /// Partition key.
    pub pk: String,
    /// Sort key with version.
    pub sk: String,
    /// The version written.
    pub version: i64,
}

/// Answers one HTTP request. Never fails: every refusal is a problem document.
#[tracing::instrument(skip_all, fields(method = %request.method(), path = %request_path(&request)))]
pub async fn handle(app: &App, request: Request) -> Response<Body> {
    let request_id = request_id(&request);
    // On the heap: the command's state machine is large, and a caller that holds several (a
    // test, a router) would carry each on its stack.
    match Box::pin(handle_command(app, &request, &request_id)).await {
        Ok(response) => response,
        Err(error) => {
            match &error {
                ApiError::Internal(detail) => {
                    tracing::error!(%request_id, %detail, "command failed")
                }
                other => {
                    tracing::info!(%request_id, status = other.status(), %other, "command refused")
                }
            }
            let allow = matches!(error, ApiError::MethodNotAllowed(_));
            let mut response = error.into_response(&request_id);
            if allow {
                let methods = if request_path(&request).starts_with("/commands") {
                    "POST, PATCH"
                } else {
                    "POST"
                };
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(methods));
            }
            response
        }
    }
}

async fn handle_command(
    app: &App,
    request: &Request,
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let path = request_path(request);
    if let Some(rest) = path.trim_end_matches('/').strip_prefix("/sequences/") {
        return sequence_next(app, request, rest, request_id).await;
    }
    if path.trim_end_matches('/') == "/master-data/copy" {
        return master_data_copy(app, request, request_id).await;
    }
    if path.trim_end_matches('/') != "/commands" {
        return Err(ApiError::NotFound(format!(
            "no route {path}: use /commands, /sequences/{{typeCode}}/next or /master-data/copy"
        )));
    }
    let mode = match *request.method() {
        Method::POST => Mode::Replace,
        Method::PATCH => Mode::Merge,
        ref other => {
            return Err(ApiError::MethodNotAllowed(format!(
                "{other} /commands: use POST or PATCH"
            )));
        }
    };
    let caller = Caller::from_request(request, app.caller_mode)?;
    let body = json_body(request)?;
    let mut input = parse_command(body, mode == Mode::Merge)?;
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let entity = entity::resolve(&app.model, &mut input, &caller, mode, &now)?;
    // Keys derived from pk and sk (the item id, the head key) must fit DynamoDB's key limit too,
    // or the version could be written but never projected nor versioned.
    cqrs_keys::validate_derived_keys(&input.pk, &input.sk)
        .map_err(|e| ApiError::bad_field("sk", e))?;
    // The framework's own key spaces (the change log's) are written by the framework only.
    if let Some(prefix) = cqrs_keys::reserved_prefix(&input.pk) {
        return Err(ApiError::bad_field(
            "pk",
            format!("partitions starting with {prefix} are reserved for the framework"),
        ));
    }
    caller.authorize_write(&input.pk)?;
    // Who may write the entity, from the request alone: before any read.
    roles::check_request(entity, &caller, &input)?;
    // A TTL removal frees no guard: a constrained entity's versions do not expire.
    ttl_policy::refuse_own_ttl(entity, &input)?;
    ttl_policy::refuse_policy_write(&app.model, &input)?;
    let idempotency_key = idempotency_key(request)?;
    // The TTL policy and the heads state, both cached per container: on a warm container neither
    // reads; a cold one reads both in one BatchGetItem.
    let heads = heads::prepare(app, &mut input, entity).await?;
    ttl_policy::refuse_policy_found(entity, &input)?;
    let audit = Audit {
        ip: source_ip(request),
        request_id: idempotency_key.unwrap_or(request_id).to_string(),
        now,
        caller,
    };
    let Some(key) = idempotency_key else {
        draw_into(app, &mut input, &audit).await?;
        return match publish_command(
            &app.store,
            &input,
            mode,
            &audit,
            app.rules(entity),
            None,
            heads,
        )
        .await?
        {
            Published::Stored(item) => Ok(stored(request_id, &item)),
            Published::Replay(_) | Published::KeyTaken => Err(ApiError::Internal(
                "an idempotency key was taken without one being used".into(),
            )),
        };
    };
    let record = IdempotencyRecord {
        key: scoped_key(&audit.caller, key),
        fingerprint: fingerprint::of(request.method(), body),
        item_pk: String::new(),
        item_sk: String::new(),
        item_id: String::new(),
        version: 0,
        ttl: chrono::Utc::now().timestamp() + IDEMPOTENCY_TTL_SECONDS,
    };
    // The record is written in the command's transaction, whose failed condition returns an
    // earlier request's record: no read in front. Except for a command that draws a sequence
    // number: the draw comes before the transaction, and a retry must never draw a second one.
    if input.sequence.is_some()
        && let Some(first) = app.store.get_idempotency(&record.key).await?
    {
        return replay(&first, request.method(), body);
    }
    draw_into(app, &mut input, &audit).await?;
    let published = publish_command(
        &app.store,
        &input,
        mode,
        &audit,
        app.rules(entity),
        Some(&record),
        heads,
    )
    .await;
    match published {
        Ok(Published::Stored(item)) => Ok(stored(request_id, &item)),
        Ok(Published::Replay(first)) => replay(&first, request.method(), body),
        // A concurrent request with the same key won: answer as a retry of it.
        Ok(Published::KeyTaken) => match app.store.get_idempotency(&record.key).await? {
            Some(first) => replay(&first, request.method(), body),
            None => Err(ApiError::Unavailable(
                "a concurrent request with this Idempotency-Key did not leave its record; retry"
                    .into(),
            )),
        },
        // Refused before the transaction's idempotency condition could answer (the version
        // rules, a command hook's refusal, the checks of the new version, a guard that cannot
        // hold): a retry of a request that was written may be refused so now (its version
        // exists, the hook's state moved on), and its record says it was written. Any 4xx is
        // answered from the record when there is one. The read is on these refusal paths only.
        Err(refusal) if (400..500).contains(&refusal.status()) => {
            match app.store.get_idempotency(&record.key).await? {
                Some(first) => replay(&first, request.method(), body),
                None => Err(refusal),
            }
        }
        Err(other) => Err(other),
    }
}

/// Draws the number a create asks for (`sequence`) into its attribute and `seq`, in the tenant
/// of its `pk`. Runs after every check that can refuse the command without a write, so only a
/// failing write (a lost race, a refusal of the model) leaves a gap.
async fn draw_into(
    app: &App,
    input: &mut input::CommandInput,
    audit: &Audit,
) -> Result<(), ApiError> {
    let Some(wanted) = input.sequence.take() else {
        return Ok(());
    };
    let tenant = cqrs_keys::tenant_code(&input.pk)
        .ok_or_else(|| ApiError::bad_field("pk", "names no tenant"))?
        .to_string();
    let drawn = sequence::draw(
        &sequence::DrawContext {
            store: &app.store,
            caller: &audit.caller,
            ip: &audit.ip,
            request_id: &audit.request_id,
        },
        &sequence::DrawRequest {
            tenant: &tenant,
            type_code: &wanted.type_code,
            rotate_by: wanted.rotate_by,
            params: &wanted.params,
            date: None,
            prefix: wanted.prefix.as_deref(),
            postfix: wanted.postfix.as_deref(),
        },
    )
    .await
    .map_err(|e| match e {
        ApiError::BadRequest {
            field: Some(field),
            detail,
        } => ApiError::BadRequest {
            field: Some(format!("sequence.{field}")),
            detail,
        },
        other => other,
    })?;
    let mut attributes = input.attributes.value().unwrap_or_default();
    attributes.insert(
        wanted.attribute,
        cqrs_item::Value::String(drawn.formatted_no),
    );
    input.attributes = input::Patch::Value(attributes);
    input.seq = Some(drawn.no);
    Ok(())
}

/// `POST /sequences/{typeCode}/next`: draws the next number of the caller's tenant's sequence
/// ([`sequence::draw`]) and answers it with `200`.
async fn sequence_next(
    app: &App,
    request: &Request,
    rest: &str,
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let Some((segment, "next")) = rest.split_once('/') else {
        return Err(ApiError::NotFound(format!(
            "no route /sequences/{rest}: use POST /sequences/{{typeCode}}/next"
        )));
    };
    if segment.contains('/') {
        return Err(ApiError::NotFound(format!(
            "no route /sequences/{rest}: use POST /sequences/{{typeCode}}/next"
        )));
    }
    if *request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} /sequences/{{typeCode}}/next: use POST",
            request.method()
        )));
    }
    let type_code = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| ApiError::bad_field("typeCode", "is not UTF-8 once percent-decoded"))?;
    let caller = Caller::from_request(request, app.caller_mode)?;
    let body = optional_json_body(request)?;
    let next: sequence::NextRequest = match body {
        None => sequence::NextRequest::default(),
        Some(text) => parse_strict(text)?,
    };
    let tenant = next
        .tenant_code
        .clone()
        .unwrap_or_else(|| caller.tenant_code.clone());
    let ip = source_ip(request);
    let drawn = sequence::draw(
        &sequence::DrawContext {
            store: &app.store,
            caller: &caller,
            ip: &ip,
            request_id,
        },
        &sequence::DrawRequest {
            tenant: &tenant,
            type_code: &type_code,
            rotate_by: next.rotate_by,
            params: &next.params,
            date: next.date.as_deref(),
            prefix: next.prefix.as_deref(),
            postfix: next.postfix.as_deref(),
        },
    )
    .await?;
    tracing::info!(%request_id, id = %drawn.id, no = drawn.no, "sequence drawn");
    Ok(json_response(StatusCode::OK, &drawn))
}

/// `POST /master-data/copy`: one page of copying `common`'s master data to a tenant
/// ([`copy::copy_master_data`]), answered with `200` and its report.
async fn master_data_copy(
    app: &App,
    request: &Request,
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    if *request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} /master-data/copy: use POST",
            request.method()
        )));
    }
    let caller = Caller::from_request(request, app.caller_mode)?;
    let body: copy::CopyRequest = match optional_json_body(request)? {
        None => copy::CopyRequest::default(),
        Some(text) => parse_strict(text)?,
    };
    let audit = Audit {
        ip: source_ip(request),
        request_id: request_id.to_string(),
        now: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        caller: caller.clone(),
    };
    let report = copy::copy_master_data(app, &caller, body, &audit).await?;
    tracing::info!(
        %request_id,
        tenant = %report.tenant_code,
        created = report.created.len(),
        updated = report.updated.len(),
        unchanged = report.unchanged,
        kept = report.kept.len(),
        "master data copied"
    );
    Ok(json_response(StatusCode::OK, &report))
}

/// Parses a JSON body into `T`, refusing unknown members; an error names the member's path.
fn parse_strict<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." || inner.is_syntax() || inner.is_eof() {
            ApiError::bad_request(format!("the body is not valid: {inner}"))
        } else {
            ApiError::bad_field(path, inner)
        }
    })
}

/// A JSON answer with `status`.
fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response<Body> {
    let json = serde_json::to_string(body).unwrap_or_default();
    let mut response = Response::new(Body::Text(json));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The body as JSON text, or `None` when there is none (no bytes: a request whose members are all
/// optional). Anything else must be JSON: whitespace alone is not a body of nothing but a body
/// that is not JSON (a 400), as it is for `/commands`.
fn optional_json_body(request: &Request) -> Result<Option<&str>, ApiError> {
    let empty = match request.body() {
        Body::Text(text) => text.is_empty(),
        Body::Binary(bytes) => bytes.is_empty(),
        _ => true,
    };
    if empty {
        return Ok(None);
    }
    json_body(request).map(Some)
}

fn stored(request_id: &str, item: &cqrs_item::Item) -> Response<Body> {
    tracing::info!(%request_id, id = %item.id, version = item.version, "command stored");
    accepted(&Accepted::from(item), false)
}

/// The answer to a retry: the first request's result, when the retry is the same request.
fn replay(
    first: &IdempotencyRecord,
    method: &Method,
    body: &str,
) -> Result<Response<Body>, ApiError> {
    if !fingerprint::matches(&first.fingerprint, method, body) {
        return Err(ApiError::IdempotencyKeyReused(
            "this Idempotency-Key was already used with a different request".into(),
        ));
    }
    Ok(accepted(
        &Accepted {
            id: first.item_id.clone(),
            pk: first.item_pk.clone(),
            sk: first.item_sk.clone(),
            version: first.version,
        },
        true,
    ))
}

impl From<&cqrs_item::Item> for Accepted {
    fn from(item: &cqrs_item::Item) -> Self {
        Accepted {
            id: item.id.clone(),
            pk: item.pk.clone(),
            sk: item.sk.clone(),
            version: item.version,
        }
    }
}

fn accepted(body: &Accepted, replayed: bool) -> Response<Body> {
    let json = serde_json::to_string(body).unwrap_or_default();
    let mut response = Response::new(Body::Text(json));
    *response.status_mut() = StatusCode::ACCEPTED;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if replayed {
        headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// The body as JSON text: at most [`MAX_BODY_BYTES`], present, UTF-8, and JSON if a content type
/// is given.
fn json_body(request: &Request) -> Result<&str, ApiError> {
    let size = match request.body() {
        Body::Text(text) => text.len(),
        Body::Binary(bytes) => bytes.len(),
        _ => 0,
    };
    if size > MAX_BODY_BYTES {
        return Err(ApiError::BodyTooLarge(format!(
            "the body is {size} bytes, over the {MAX_BODY_BYTES} bytes of the largest command \
             (an item of {} bytes, DynamoDB's limit, written as JSON)",
            cqrs_item::MAX_ITEM_BYTES
        )));
    }
    if let Some(content_type) = request.headers().get(header::CONTENT_TYPE) {
        let content_type = content_type
            .to_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(ApiError::UnsupportedMediaType(format!(
                "content-type {essence:?}: send application/json"
            )));
        }
    }
    let text = match request.body() {
        Body::Text(text) => text.as_str(),
        Body::Binary(bytes) => std::str::from_utf8(bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid UTF-8: {e}")))?,
        _ => "",
    };
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "the body is empty: send a JSON command",
        ));
    }
    Ok(text)
}

fn idempotency_key(request: &Request) -> Result<Option<&str>, ApiError> {
    let Some(value) = request.headers().get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .map_err(|_| ApiError::bad_field("Idempotency-Key", "must be visible ASCII"))?
        .trim();
    // RFC draft: the key is a string, often wrapped in quotes.
    let key = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(key);
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN {
        return Err(ApiError::bad_field(
            "Idempotency-Key",
            format!("must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"),
        ));
    }
    Ok(Some(key))
}

/// The idempotency table's key: a digest of the caller and the client's key, so keys of different
/// callers never meet and no separator in a key can make two scopes collide.
fn scoped_key(caller: &Caller, key: &str) -> String {
    let mut digest = Sha256::new();
    for part in [caller.tenant_code.as_str(), caller.user_id.as_str(), key] {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    hex(&digest.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_keys_separate_callers() {
        let t1 = Caller::new("u", "t1", vec![]);
        let t2 = Caller::new("u", "t2", vec![]);
        assert_ne!(scoped_key(&t1, "k"), scoped_key(&t2, "k"));
        assert_eq!(scoped_key(&t1, "k"), scoped_key(&t1, "k"));
        // No ambiguity from where one part ends.
        let a = Caller::new("ab", "t", vec![]);
        let b = Caller::new("a", "t", vec![]);
        assert_ne!(scoped_key(&a, "c"), scoped_key(&b, "bc"));
    }
}
