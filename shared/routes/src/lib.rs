//! A service's own HTTP routes, served by operation id from the model's `[routes.<function>]`
//! declaration: one route function is one Lambda function (the service's binary
//! `src/bin/<function>.rs`), an [axum] router run by `lambda_http`, with the framework's caller,
//! tenant and problem documents.
//!
//! The method and path of each operation are written once, in `model.toml`; the binary names its
//! handlers by operation id:
//!
//! ```no_run
//! use cqrs_routes::{Caller, Json, Problem, Routes, Store};
//!
//! const MODEL: &str = r#"
//! [routes.member-loans]
//! reads = ["data"]
//! [routes.member-loans.operations.memberLoans]
//! method = "GET"
//! path = "/members/{memberId}/loans"
//! "#;
//!
//! async fn member_loans(
//!     caller: Caller,
//!     store: Store,
//!     cqrs_routes::Path(member): cqrs_routes::Path<String>,
//! ) -> Result<Json<serde_json::Value>, Problem> {
//!     let loans = store.counter(&caller.tenant_code, &format!("loans#{member}")).await?;
//!     Ok(Json(serde_json::json!({"memberId": member, "loansOut": loans})))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), cqrs_routes::Error> {
//!     Routes::new(MODEL, "member-loans")?
//!         .on("memberLoans", member_loans)?
//!         .run()
//!         .await
//! }
//! ```
//!
//! What a handler takes (its extractors, run in argument order, each refusing with the framework's
//! problem document):
//! - [`Caller`] (the caller, `CALLER_MODE` from the environment: 401 without one, 403 with a JWT
//!   that names no tenant) or just its [`Tenant`];
//! - [`Path`] (the declared `{param}` segments, percent-decoded exactly once) and [`Query`] (the
//!   query string; a bad value is a 400 naming the parameter);
//! - [`Store`] (the DynamoDB store, when the function `reads` `"data"`, `"history"` or `"counters"`) and
//!   [`Sql`] (one PostgreSQL connection per container, when it `reads` `"sql"`; [`sql`]).
//!
//! It answers `Result<Json<T>, Problem>` (or anything axum turns into a response): a [`Problem`]
//! is made from a [`cqrs_problem::ApiError`] (`?` on an `ApiError` or a
//! `cqrs_store::StoreError`), and becomes the same `application/problem+json` document, with the
//! request id, as the framework's functions answer. A path the function does not serve is a 404
//! problem document, a declared path with another method a 405 (with `Allow`), and axum's own
//! plain-text refusals (a body that is not JSON, ...) become problem documents too.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::handler::Handler;
use axum::routing::MethodFilter;
use cqrs_model::{Access, Model, RouteFunction};

mod extract;
mod problem;
pub mod sql;

pub use axum;
pub use axum::Json;
pub use axum::response::{IntoResponse, Response};
pub use extract::{Caller, Path, Query, Store, Tenant};
pub use problem::Problem;
pub use sql::Sql;
pub use tower;

/// Why a route function cannot start: its model, its declaration against its handlers, or its
/// configuration. `main` returns it, and Lambda reports it as the init error.
///
/// ```
/// let error = cqrs_routes::Routes::new("[entities", "reports").err().unwrap();
/// assert!(error.to_string().starts_with("model.toml"));
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model does not parse or check.
    #[error("model.toml does not check: {0}")]
    Model(String),
    /// The model declares no `[routes.<function>]` of this name.
    #[error(
        "model.toml declares no route function `{function}` (no [routes.{function}]); it declares: {}",
        list(declared)
    )]
    UnknownFunction {
        /// The function asked for.
        function: String,
        /// The route functions the model declares.
        declared: Vec<String>,
    },
    /// A handler for an operation the function does not declare.
    #[error(
        "route function `{function}` declares no operation `{operation}` in model.toml \
         ([routes.{function}.operations.{operation}]); it declares: {}",
        list(declared)
    )]
    UndeclaredOperation {
        /// The route function.
        function: String,
        /// The operation id given to [`Routes::on`].
        operation: String,
        /// The operations it declares.
        declared: Vec<String>,
    },
    /// Two handlers for one operation.
    #[error("route function `{function}`: operation `{operation}` already has a handler")]
    DuplicateHandler {
        /// The route function.
        function: String,
        /// The operation id.
        operation: String,
    },
    /// Declared operations without a handler: the function would answer 404 to routes its
    /// contract promises.
    #[error(
        "route function `{function}`: no handler for the declared operation(s) {}: give each one \
         with .on(\"<operationId>\", handler)",
        list(missing)
    )]
    MissingHandlers {
        /// The route function.
        function: String,
        /// The declared operation ids with no handler.
        missing: Vec<String>,
    },
    /// The environment is missing or wrong (the message names the variable).
    #[error("{0}")]
    Config(String),
    /// The Lambda runtime stopped.
    #[error("the Lambda runtime: {0}")]
    Runtime(String),
}

/// `main` returns the error: show the sentence, not the variant.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the extractors of a route function share: the caller mode, the store and the SQL reader
/// (each only when the function's declaration `reads` it). Built once per container by
/// [`Routes::into_router`]; a handler reaches it through [`Caller`], [`Store`] and [`Sql`] (or
/// `axum::extract::State<RouteState>` in an extractor of its own).
///
/// ```
/// let state = cqrs_routes::RouteState::new("reports", cqrs_caller::CallerMode::Local);
/// assert!(state.store().is_none() && state.sql().is_none());
/// assert_eq!(state.function(), "reports");
/// ```
#[derive(Clone)]
pub struct RouteState {
    inner: Arc<Shared>,
}

struct Shared {
    function: String,
    mode: cqrs_caller::CallerMode,
    store: Option<cqrs_store::Store>,
    sql: Option<sql::Reader>,
}

impl RouteState {
    /// A state with neither store nor SQL reader (add them with [`RouteState::with_store`] and
    /// [`RouteState::with_sql`]).
    ///
    /// ```
    /// let state = cqrs_routes::RouteState::new("reports", cqrs_caller::CallerMode::Jwt);
    /// assert_eq!(state.caller_mode(), cqrs_caller::CallerMode::Jwt);
    /// ```
    pub fn new(function: impl Into<String>, mode: cqrs_caller::CallerMode) -> Self {
        RouteState {
            inner: Arc::new(Shared {
                function: function.into(),
                mode,
                store: None,
                sql: None,
            }),
        }
    }

    fn edit(self, change: impl FnOnce(&mut Shared)) -> Self {
        let mut shared = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Shared {
            function: shared.function.clone(),
            mode: shared.mode,
            store: shared.store.clone(),
            sql: shared.sql.clone(),
        });
        change(&mut shared);
        RouteState {
            inner: Arc::new(shared),
        }
    }

    /// The same state with this store.
    ///
    /// ```no_run
    /// # fn example(store: cqrs_store::Store) {
    /// let state = cqrs_routes::RouteState::new("loans", cqrs_caller::CallerMode::Jwt).with_store(store);
    /// assert!(state.store().is_some());
    /// # }
    /// ```
    pub fn with_store(self, store: cqrs_store::Store) -> Self {
        self.edit(|s| s.store = Some(store))
    }

    /// The same state with this SQL reader.
    ///
    /// ```
    /// let state = cqrs_routes::RouteState::new("reports", cqrs_caller::CallerMode::Jwt)
    ///     .with_sql(cqrs_routes::sql::Reader::not_deployed());
    /// assert!(state.sql().is_some());
    /// ```
    pub fn with_sql(self, reader: sql::Reader) -> Self {
        self.edit(|s| s.sql = Some(reader))
    }

    /// The route function's name.
    ///
    /// ```
    /// assert_eq!(cqrs_routes::RouteState::new("r", cqrs_caller::CallerMode::Jwt).function(), "r");
    /// ```
    pub fn function(&self) -> &str {
        &self.inner.function
    }

    /// Where callers are read from.
    ///
    /// ```
    /// let state = cqrs_routes::RouteState::new("r", cqrs_caller::CallerMode::Local);
    /// assert_eq!(state.caller_mode(), cqrs_caller::CallerMode::Local);
    /// ```
    pub fn caller_mode(&self) -> cqrs_caller::CallerMode {
        self.inner.mode
    }

    /// The store, when the function has one.
    ///
    /// ```
    /// assert!(cqrs_routes::RouteState::new("r", cqrs_caller::CallerMode::Jwt).store().is_none());
    /// ```
    pub fn store(&self) -> Option<&cqrs_store::Store> {
        self.inner.store.as_ref()
    }

    /// The SQL reader, when the function has one.
    ///
    /// ```
    /// assert!(cqrs_routes::RouteState::new("r", cqrs_caller::CallerMode::Jwt).sql().is_none());
    /// ```
    pub fn sql(&self) -> Option<&sql::Reader> {
        self.inner.sql.as_ref()
    }
}

/// A route function being assembled: its declaration (from the model), a handler per declared
/// operation, and what its handlers share.
///
/// ```
/// use cqrs_routes::{Json, Problem, Routes};
///
/// const MODEL: &str = r#"
/// [routes.hello]
/// [routes.hello.operations.sayHello]
/// method = "GET"
/// path = "/hello/{name}"
/// "#;
///
/// async fn say_hello(
///     cqrs_routes::Path(name): cqrs_routes::Path<String>,
/// ) -> Result<Json<String>, Problem> {
///     Ok(Json(format!("hello, {name}")))
/// }
///
/// let routes = Routes::new(MODEL, "hello").unwrap().on("sayHello", say_hello).unwrap();
/// assert_eq!(routes.function().operations[0].path, "/hello/{name}");
/// let router = routes
///     .caller_mode(cqrs_caller::CallerMode::Local)
///     .into_router()
///     .unwrap();
/// # drop(router);
/// ```
pub struct Routes {
    function: RouteFunction,
    router: axum::Router<RouteState>,
    served: BTreeSet<String>,
    mode: Option<cqrs_caller::CallerMode>,
    store: Option<cqrs_store::Store>,
    sql: Option<sql::Reader>,
}

impl Routes {
    /// The route function `function` of the model `model_toml` (`[routes.<function>]`); an error
    /// when the model does not check or declares no such function (naming the ones it declares).
    ///
    /// ```
    /// let model = "[routes.a]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// assert!(cqrs_routes::Routes::new(model, "a").is_ok());
    /// let error = cqrs_routes::Routes::new(model, "b").err().unwrap().to_string();
    /// assert!(error.contains("no route function `b`") && error.contains("`a`"), "{error}");
    /// ```
    pub fn new(model_toml: &str, function: &str) -> Result<Routes, Error> {
        let model = Model::parse(model_toml).map_err(|e| Error::Model(e.to_string()))?;
        let declared = model
            .route(function)
            .cloned()
            .ok_or_else(|| Error::UnknownFunction {
                function: function.to_string(),
                declared: model.routes().iter().map(|r| r.name.clone()).collect(),
            })?;
        Ok(Routes {
            function: declared,
            router: axum::Router::new(),
            served: BTreeSet::new(),
            mode: None,
            store: None,
            sql: None,
        })
    }

    /// The declaration served.
    ///
    /// ```
    /// let model = "[routes.a]\nreads = [\"sql\"]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// let routes = cqrs_routes::Routes::new(model, "a").unwrap();
    /// assert_eq!(routes.function().reads, vec![cqrs_model::Access::Sql]);
    /// ```
    pub fn function(&self) -> &RouteFunction {
        &self.function
    }

    /// Serves the declared operation `operation_id` with `handler`, at its declared method and
    /// path. An operation the function does not declare, or one given twice, is an error.
    ///
    /// ```
    /// let model = "[routes.a]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// async fn x() -> &'static str { "x" }
    /// let error = cqrs_routes::Routes::new(model, "a").unwrap().on("y", x).err().unwrap();
    /// assert!(error.to_string().contains("declares no operation `y`"), "{error}");
    /// ```
    pub fn on<H, T>(mut self, operation_id: &str, handler: H) -> Result<Routes, Error>
    where
        H: Handler<T, RouteState>,
        T: 'static,
    {
        let Some(operation) = self
            .function
            .operations
            .iter()
            .find(|o| o.id == operation_id)
        else {
            return Err(Error::UndeclaredOperation {
                function: self.function.name.clone(),
                operation: operation_id.to_string(),
                declared: self
                    .function
                    .operations
                    .iter()
                    .map(|o| o.id.clone())
                    .collect(),
            });
        };
        if !self.served.insert(operation.id.clone()) {
            return Err(Error::DuplicateHandler {
                function: self.function.name.clone(),
                operation: operation.id.clone(),
            });
        }
        let filter = method_filter(&operation.method)?;
        // The model's `{param}` segments are axum 0.8's own syntax.
        self.router = self
            .router
            .route(&operation.path, axum::routing::on(filter, handler));
        Ok(self)
    }

    /// Reads callers this way rather than from `CALLER_MODE` (tests).
    ///
    /// ```
    /// let model = "[routes.a]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// let routes = cqrs_routes::Routes::new(model, "a").unwrap();
    /// let _ = routes.caller_mode(cqrs_caller::CallerMode::Local);
    /// ```
    pub fn caller_mode(mut self, mode: cqrs_caller::CallerMode) -> Routes {
        self.mode = Some(mode);
        self
    }

    /// Uses this store rather than one built from the environment (tests).
    ///
    /// ```no_run
    /// # fn example(store: cqrs_store::Store) {
    /// let model = "[routes.a]\nreads = [\"data\"]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// let routes = cqrs_routes::Routes::new(model, "a").unwrap();
    /// let _ = routes.with_store(store);
    /// # }
    /// ```
    pub fn with_store(mut self, store: cqrs_store::Store) -> Routes {
        self.store = Some(store);
        self
    }

    /// Uses this SQL reader rather than one configured from the environment (tests).
    ///
    /// ```
    /// let model = "[routes.a]\nreads = [\"sql\"]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// let routes = cqrs_routes::Routes::new(model, "a").unwrap();
    /// let _ = routes.with_sql(cqrs_routes::sql::Reader::not_deployed());
    /// ```
    pub fn with_sql(mut self, reader: sql::Reader) -> Routes {
        self.sql = Some(reader);
        self
    }

    /// The router `lambda_http` runs: every declared operation must have its handler (else an
    /// error naming the missing ones); what the declaration `reads` is built once, from the
    /// environment unless given ([`Routes::with_store`], [`Routes::with_sql`]): the store
    /// (`cqrs_store::client::client_from_env`, `Tables::from_env`) for `"data"`, `"history"` or `"counters"`,
    /// the SQL reader ([`sql::Reader::from_env`]) for `"sql"`; nothing it does not read.
    ///
    /// ```
    /// let model = "[routes.a]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
    /// let error = cqrs_routes::Routes::new(model, "a").unwrap().into_router().err().unwrap();
    /// assert!(error.to_string().contains("no handler for the declared operation(s) `x`"), "{error}");
    /// ```
    pub fn into_router(self) -> Result<axum::Router, Error> {
        let missing: Vec<String> = self
            .function
            .operations
            .iter()
            .filter(|o| !self.served.contains(&o.id))
            .map(|o| o.id.clone())
            .collect();
        if !missing.is_empty() {
            return Err(Error::MissingHandlers {
                function: self.function.name.clone(),
                missing,
            });
        }
        let mode = match self.mode {
            Some(mode) => mode,
            None => cqrs_caller::CallerMode::from_env().map_err(Error::Config)?,
        };
        let reads = |access: Access| self.function.reads.contains(&access);
        let store = match self.store {
            Some(store) => Some(store),
            None if reads(Access::Data) || reads(Access::History) || reads(Access::Counters) => {
                Some(store_from_env()?)
            }
            None => None,
        };
        let sql = match self.sql {
            Some(reader) => Some(reader),
            None if reads(Access::Sql) => Some(sql::Reader::from_env()?),
            None => None,
        };
        let state = RouteState {
            inner: Arc::new(Shared {
                function: self.function.name.clone(),
                mode,
                store,
                sql,
            }),
        };
        let served = Arc::new(problem::Served::of(&self.function));
        let (not_found, not_allowed) = (served.clone(), served);
        Ok(self
            .router
            .fallback(move |method, uri| problem::not_found(not_found.clone(), method, uri))
            .method_not_allowed_fallback(move |method, uri| {
                problem::not_allowed(not_allowed.clone(), method, uri)
            })
            .layer(axum::middleware::from_fn(problem::documents))
            .with_state(state))
    }

    /// Serves the function under `lambda_http` (logging as the framework's functions do) until
    /// the runtime stops; errors before serving as [`Routes::into_router`] does.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), cqrs_routes::Error> {
    /// # async fn report() -> &'static str { "" }
    /// # const MODEL: &str = "";
    /// cqrs_routes::Routes::new(MODEL, "task-report")?
    ///     .on("taskReport", report)?
    ///     .run()
    ///     .await
    /// # }
    /// ```
    pub async fn run(self) -> Result<(), Error> {
        cqrs_store::logging::init();
        let router = self.into_router()?;
        lambda_http::run(router)
            .await
            .map_err(|e| Error::Runtime(e.to_string()))
    }
}

/// One invocation of `router` as Lambda makes it under `lambda_http::run`: `event` (an API
/// Gateway HTTP API payload 2.0 event, as `cqrs_testkit::http_event::HttpApiRequest::event`
/// writes it) with the invocation's `request_id`, through `lambda_http`'s own adapter; the answer
/// is the response Lambda hands back to API Gateway (`statusCode`, `headers`, `body`,
/// `isBase64Encoded`). For a service's tests of its own routes, without a running stack.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let model = "[routes.a]\n[routes.a.operations.x]\nmethod = \"GET\"\npath = \"/a\"\n";
/// async fn x() -> cqrs_routes::Json<u32> { cqrs_routes::Json(7) }
/// let router = cqrs_routes::Routes::new(model, "a").unwrap().on("x", x).unwrap()
///     .caller_mode(cqrs_caller::CallerMode::Jwt).into_router().unwrap();
/// let event = serde_json::json!({
///     "version": "2.0", "rawPath": "/a", "rawQueryString": "", "headers": {},
///     "requestContext": {"http": {"method": "GET", "path": "/a"}, "stage": "$default"},
///     "isBase64Encoded": false,
/// });
/// let answer = cqrs_routes::invoke(&router, event, "r-1").await.unwrap();
/// assert_eq!((answer["statusCode"].as_u64(), answer["body"].as_str()), (Some(200), Some("7")));
/// # }
/// ```
pub async fn invoke(
    router: &axum::Router,
    event: serde_json::Value,
    request_id: &str,
) -> Result<serde_json::Value, String> {
    use tower::ServiceExt;
    let request: lambda_http::request::LambdaRequest =
        serde_json::from_value(event).map_err(|e| format!("not an HTTP API event: {e}"))?;
    let mut context = lambda_http::Context::default();
    context.request_id = request_id.to_string();
    let adapter = lambda_http::Adapter::from(router.clone());
    let response = adapter
        .oneshot(lambda_http::LambdaEvent::new(request, context))
        .await
        .map_err(|e| format!("{e:?}"))?;
    serde_json::to_value(&response).map_err(|e| e.to_string())
}

fn method_filter(method: &str) -> Result<MethodFilter, Error> {
    Ok(match method {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        other => {
            return Err(Error::Model(format!(
                "method {other:?} is not one a route serves"
            )));
        }
    })
}

fn store_from_env() -> Result<cqrs_store::Store, Error> {
    let mut init = cqrs_store::client::InitClock::start();
    let client =
        cqrs_store::client::client_from_env(&mut init).map_err(|e| Error::Config(e.to_string()))?;
    let tables = cqrs_store::Tables::from_env().map_err(|e| Error::Config(e.to_string()))?;
    Ok(cqrs_store::Store::new(client, tables))
}
