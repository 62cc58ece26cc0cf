//! # cqrs-dynamo
//!
//! A multi-tenant CQRS framework for DynamoDB on AWS Lambda. A service is one crate that depends on
//! this one: it declares its entities, keys, indexes, access patterns, routes and consumers in
//! `model.toml`, tells the framework what is its own through one trait, [`Service`], and has one
//! binary per Lambda function, each a single call of [`run`]:
//!
//! ```no_run
//! // src/lib.rs
//! use cqrs_dynamo::hooks::{HookCommand, Hooks};
//! use cqrs_dynamo::ApiError;
//!
//! pub struct Tasks;
//!
//! impl cqrs_dynamo::Service for Tasks {
//!     const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; // include_str!("../model.toml")
//!     fn hooks() -> Hooks {
//!         Hooks::new().on_fn("product", |command: &mut HookCommand<'_>| {
//!             if command.stored().is_some_and(|p| p.is_deleted) {
//!                 return Err(ApiError::refused(422, "urn:shop:deleted", "Deleted", "a deleted product stays deleted"));
//!             }
//!             Ok(())
//!         })
//!     }
//! }
//!
//! // src/bin/command-handler.rs
//! fn main() -> Result<(), cqrs_dynamo::Error> {
//!     cqrs_dynamo::run::command_handler::<Tasks>()
//! }
//! ```
//!
//! Every function's binary has that shape: `cqrs_dynamo::run::<function>::<Service>(…)`, with
//! the service's own code as the argument where the function runs some (a consumer, the handlers
//! of a route function). The framework owns the boot: the Tokio runtime, logging, configuration
//! from the environment the template sets, the AWS clients, and Lambda's runtime loop.
//!
//! The features name the functions (all on by default): `command-handler`, `query-handler`,
//! `data-sync`, `sql-sync`, `routes`, `events` (the change feed, consumers and the change log) and
//! `realtime`. The crates a service's code uses are re-exported, with the versions the framework is
//! built with: [`lambda_http`], [`lambda_runtime`], [`tokio`], [`tracing`]. One more feature is for
//! a service's tests, as a dev-dependency: `testkit` (module `testkit`: the checks of its model and
//! what is generated from it, DynamoDB Local's tables, a client of its running stack).
#![forbid(unsafe_code)]

pub use lambda_http;
pub use lambda_runtime;
pub use tokio;
pub use tracing;

pub use cqrs_problem::ApiError;

/// What a function's `main` returns: an error that stops its cold start, with its reason (a
/// missing variable, a model that does not check, …), as Lambda's runtime reports it.
///
/// ```
/// let error: cqrs_dynamo::Error = "environment variable DATA_TABLE is missing or empty".into();
/// assert!(error.to_string().contains("DATA_TABLE"));
/// ```
pub type Error = lambda_runtime::Error;

/// A migration of the relational read model: its version, its file name and its SQL
/// (`migrations/V<version>__<name>.sql`, which `cqrs model sql` writes from the model).
///
/// ```
/// const MIGRATIONS: &[cqrs_dynamo::Migration] = &[(1, "V1__model.sql", "CREATE TABLE t (id text)")];
/// assert_eq!(MIGRATIONS[0].0, 1);
/// ```
pub type Migration = (u32, &'static str, &'static str);

/// What a service tells the framework about itself (Loco's `Hooks`, axum's state: one place): its
/// model, its relational read model's migrations and its rules in code. Every item but
/// [`Service::MODEL`] has a default.
///
/// ```
/// struct Shop;
/// impl cqrs_dynamo::Service for Shop {
///     const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML;
/// }
/// assert!(cqrs_dynamo::model::Model::parse(<Shop as cqrs_dynamo::Service>::MODEL).is_ok());
/// assert!(<Shop as cqrs_dynamo::Service>::MIGRATIONS.is_empty());
/// ```
pub trait Service: 'static {
    /// The service's `model.toml`, compiled in: `include_str!("../model.toml")`.
    const MODEL: &'static str;

    /// The relational read model's migrations, in version order: sql-sync applies those not yet
    /// applied at its cold start. None by default.
    const MIGRATIONS: &'static [Migration] = &[];

    /// The service's rules in code, per entity, run by the command handler before each write
    /// ([`hooks`]). None by default: the rules declared in `model.toml` still apply.
    #[cfg(feature = "command-handler")]
    fn hooks() -> hooks::Hooks {
        hooks::Hooks::new()
    }
}

/// The entity model: `model.toml` parsed and checked.
pub mod model {
    pub use cqrs_model::{EXAMPLE_TOML, Model};
}

/// Items as the tables hold them, and an entity's typed form (`src/model.rs`, which
/// `cqrs model rust --crate cqrs_dynamo::item` writes: its types come from this module).
pub mod item {
    pub use cqrs_item::{Item, Map, Number, TypedEntity, Value};
}

/// The service's rules in code: a hook per entity, run before a command's write.
#[cfg(feature = "command-handler")]
pub mod hooks {
    pub use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks, limit_key};
}

/// A service's own sync targets in data-sync (deprecated: a failing target holds back its whole
/// stream shard; a consumer, `[consumers.<name>]` in `model.toml`, runs the same target with
/// `consumer::FromSyncTarget`, with a queue of its own). For a service that has targets and
/// runs them with [`run::data_sync_with`] until it moves them.
#[cfg(feature = "data-sync")]
pub mod data_sync {
    pub use cqrs_data_sync::{Change, DataSync, SyncTarget, TargetError};
    pub use cqrs_store::projection::DataWrite;
}

/// The service's own HTTP routes (`model.toml`'s `[routes.<function>]`): axum handlers with the
/// framework's extractors.
#[cfg(feature = "routes")]
pub mod routes {
    pub use cqrs_routes::sql::{Sql, failed};
    pub use cqrs_routes::{
        Caller, Error, IntoResponse, Json, Path, Problem, Query, Response, Routes, Store, Tenant,
    };
}

/// The service's consumers of the change events (`model.toml`'s `[consumers.<name>]`).
#[cfg(feature = "events")]
pub mod consumer {
    pub use cqrs_consumer::{Consumer, ConsumerError, Delivered, FromSyncTarget, from_fn};
}

/// The functions' `main`s: each builds the Tokio runtime (multi-threaded, as `#[tokio::main]`)
/// and runs its function until Lambda stops it. A service's `src/bin/<function>.rs` is one call.
pub mod run {
    use super::{Error, Service};

    /// Runs `function` to its end on a new multi-threaded Tokio runtime.
    fn block_on<F>(function: F) -> Result<(), Error>
    where
        F: std::future::Future<Output = Result<(), Error>>,
    {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(function)
    }

    /// The command handler (`src/bin/command-handler.rs`): `POST`/`PATCH /commands` and the
    /// framework's write routes, with the model's rules and [`Service::hooks`].
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::command_handler::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_command_handler::run_with_hooks`).
    #[cfg(feature = "command-handler")]
    pub fn command_handler<S: Service>() -> Result<(), Error> {
        block_on(cqrs_command_handler::run_with_hooks(S::MODEL, S::hooks()))
    }

    /// The query handler (`src/bin/query-handler.rs`): items, history and the access patterns.
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::query_handler::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_query_handler::run`).
    #[cfg(feature = "query-handler")]
    pub fn query_handler<S: Service>() -> Result<(), Error> {
        block_on(cqrs_query_handler::run(S::MODEL))
    }

    /// data-sync (`src/bin/data-sync.rs`): the command table's stream projected into the data and
    /// history tables.
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::data_sync::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_data_sync::run`).
    #[cfg(feature = "data-sync")]
    pub fn data_sync<S: Service>() -> Result<(), Error> {
        block_on(cqrs_data_sync::run(|_store, sync| sync))
    }

    /// data-sync with the service's own sync targets ([`crate::data_sync`]), added by `targets`
    /// (deprecated, as targets are: a consumer runs one with its own queue).
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// use cqrs_dynamo::data_sync::{Change, SyncTarget, TargetError};
    ///
    /// struct Printed;
    ///
    /// impl SyncTarget for Printed {
    ///     fn name(&self) -> &str {
    ///         "printed"
    ///     }
    ///     fn apply<'a>(
    ///         &'a self,
    ///         change: &'a Change,
    ///     ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), TargetError>> + Send + 'a>> {
    ///         Box::pin(async move {
    ///             println!("{} {}", change.item.pk, change.item.sk);
    ///             Ok(())
    ///         })
    ///     }
    /// }
    ///
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     #[allow(deprecated)] // sync targets: a consumer runs one with its own queue
    ///     cqrs_dynamo::run::data_sync_with::<Tasks>(|sync| sync.with_target(Printed))
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_data_sync::run`).
    #[cfg(feature = "data-sync")]
    pub fn data_sync_with<S: Service>(
        targets: impl FnOnce(cqrs_data_sync::DataSync) -> cqrs_data_sync::DataSync,
    ) -> Result<(), Error> {
        block_on(cqrs_data_sync::run(|_store, sync| targets(sync)))
    }

    /// sql-sync (`src/bin/sql-sync.rs`): the data table's stream into PostgreSQL, after
    /// [`Service::MIGRATIONS`].
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::sql_sync::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_sql_sync::run`).
    #[cfg(feature = "sql-sync")]
    pub fn sql_sync<S: Service>() -> Result<(), Error> {
        block_on(cqrs_sql_sync::run(S::MODEL, S::MIGRATIONS))
    }

    /// event-publisher (`src/bin/event-publisher.rs`): the change feed, the data table's stream
    /// into the events topic.
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::event_publisher::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_event_publisher::run`).
    #[cfg(feature = "events")]
    pub fn event_publisher<S: Service>() -> Result<(), Error> {
        block_on(cqrs_event_publisher::run(S::MODEL))
    }

    /// A consumer of the change events (`src/bin/<name>.rs`, `[consumers.<name>]` in
    /// `model.toml`), run from its queue: each version once, in order per item.
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = "[consumers.task-audit]\n"; }
    /// use cqrs_dynamo::consumer::{ConsumerError, Delivered, from_fn};
    ///
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::consumer::<Tasks>(from_fn("task-audit", |delivered: Delivered| async move {
    ///         cqrs_dynamo::tracing::info!(subject = %delivered.event.subject, "task-audit");
    ///         Ok::<(), ConsumerError>(())
    ///     }))
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_consumer::run`: among others a consumer whose name
    /// `model.toml` does not declare).
    #[cfg(feature = "events")]
    pub fn consumer<S: Service>(
        consumer: impl cqrs_consumer::Consumer + 'static,
    ) -> Result<(), Error> {
        block_on(cqrs_consumer::run(S::MODEL, consumer))
    }

    /// The change log (`src/bin/change-log.rs`, deployed with `ChangeLog=on`): one entry per
    /// version of every item in the data table.
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::change_log::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_consumer::change_log::run`).
    #[cfg(feature = "events")]
    pub fn change_log<S: Service>() -> Result<(), Error> {
        block_on(cqrs_consumer::change_log::run(S::MODEL))
    }

    /// The realtime publisher (`src/bin/realtime.rs`, deployed with `RealtimeEvents=on`).
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::realtime::<Tasks>()
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// What stops its cold start (`cqrs_realtime::run`).
    #[cfg(feature = "realtime")]
    pub fn realtime<S: Service>() -> Result<(), Error> {
        block_on(cqrs_realtime::run(S::MODEL))
    }

    /// A route function of the service (`src/bin/<function>.rs`, `[routes.<function>]` in
    /// `model.toml`): `handlers` gives each declared operation its handler.
    ///
    /// ```no_run
    /// # struct Tasks;
    /// # impl cqrs_dynamo::Service for Tasks { const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML; }
    /// use cqrs_dynamo::routes::{Json, Tenant};
    ///
    /// async fn report(Tenant(tenant): Tenant) -> Json<String> {
    ///     Json(tenant)
    /// }
    ///
    /// fn main() -> Result<(), cqrs_dynamo::Error> {
    ///     cqrs_dynamo::run::routes::<Tasks>("task-report", |routes| routes.on("taskReport", report))
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// A function or operation `model.toml` does not declare, a declared operation without a
    /// handler, and what stops the cold start ([`cqrs_routes::Error`]).
    #[cfg(feature = "routes")]
    pub fn routes<S: Service>(
        function: &str,
        handlers: impl FnOnce(cqrs_routes::Routes) -> Result<cqrs_routes::Routes, cqrs_routes::Error>,
    ) -> Result<(), Error> {
        let routes = handlers(cqrs_routes::Routes::new(S::MODEL, function)?)?;
        block_on(async move { routes.run().await.map_err(Error::from) })
    }
}

/// What a service's tests use: feature `testkit`, a dev-dependency (`cqrs-dynamo = { …, features
/// = ["testkit"] }` under `[dev-dependencies]`), never in a deployed function.
///
/// - the checks of `tests/model.rs`: the model and the hooks ([`assert_model`](testkit::assert_model)),
///   the typed entities of `src/model.rs`
///   ([`assert_typed_entities`](testkit::assert_typed_entities)), the migrations
///   ([`assert_migrations`](testkit::assert_migrations)), `template.yaml`'s routes and the local
///   router ([`assert_routers`](testkit::assert_routers));
/// - DynamoDB Local: fresh tables as the template declares them ([`fresh_tables`](testkit::fresh_tables),
///   at `AWS_ENDPOINT_URL_DYNAMODB`, which `cqrs dynamodb-local start` sets), API Gateway events
///   ([`HttpApiRequest`](testkit::HttpApiRequest)) and stream events ([`stream_event`](testkit::stream_event));
/// - a client of the running stack (`make dev-up`): [`Api`](testkit::Api);
/// - the functions in-process against those tables, for tests of a service's rules:
///   [`command_handler`](testkit::command_handler), [`query_handler`](testkit::query_handler),
///   [`crate::data_sync::DataSync`], an own route's router with [`invoke`](testkit::invoke).
///
/// ```
/// struct Shop;
/// impl cqrs_dynamo::Service for Shop {
///     const MODEL: &'static str = cqrs_dynamo::model::EXAMPLE_TOML;
/// }
/// cqrs_dynamo::testkit::assert_model::<Shop>();
/// ```
#[cfg(feature = "testkit")]
pub mod testkit {
    use std::path::Path;

    use super::Service;

    pub use cqrs_caller::CallerMode;
    pub use cqrs_routes::invoke;
    pub use cqrs_store::{Store, Tables};
    pub use cqrs_testkit::api::Api;
    pub use cqrs_testkit::http_event::HttpApiRequest;
    pub use cqrs_testkit::{TestTables, fresh_tables, stream_event};

    /// The command handler in-process: [`App`](command_handler::App) (its store, caller mode,
    /// model and hooks) and [`handle`](command_handler::handle), one API Gateway request at a time.
    pub mod command_handler {
        pub use cqrs_command_handler::{App, handle};
    }

    /// The query handler in-process: [`App`](query_handler::App) and
    /// [`handle`](query_handler::handle).
    pub mod query_handler {
        pub use cqrs_query_handler::{App, handle};
    }

    /// Where the typed entities of a service on this crate take their items from:
    /// `cqrs model rust --crate cqrs_dynamo::item`.
    pub const ITEM_PATH: &str = "cqrs_dynamo::item";

    /// `S::MODEL`, parsed and checked; its problems, all of them, as text.
    fn model<S: Service>() -> Result<cqrs_model::Model, String> {
        cqrs_model::Model::parse(S::MODEL).map_err(|errors| format!("model.toml: {errors}"))
    }

    /// The model checks (every problem of `model.toml`, by entity and field) and every hook of
    /// [`Service::hooks`] is on an entity of it.
    ///
    /// # Panics
    ///
    /// With the model's problems, or the hooks on entities it does not have.
    pub fn assert_model<S: Service>() {
        let checked = model::<S>().and_then(|model| S::hooks().check(&model));
        if let Err(problem) = checked {
            panic!("{problem}");
        }
    }

    /// `committed` (the service's `src/model.rs`: `include_str!("../src/model.rs")`) is what
    /// `cqrs model rust --crate cqrs_dynamo::item` writes for `S::MODEL`: a model change shows
    /// its Rust consequence in the diff.
    ///
    /// # Panics
    ///
    /// When it is not, with the first line that differs and the command that writes it again.
    pub fn assert_typed_entities<S: Service>(committed: &str) {
        let model = model::<S>().unwrap_or_else(|problem| panic!("{problem}"));
        let generated = cqrs_model::rust::render_with_path(&model, ITEM_PATH);
        if generated != committed {
            let line = generated
                .lines()
                .zip(committed.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| generated.lines().count().min(committed.lines().count()));
            panic!(
                "src/model.rs does not match model.toml (from line {}): run `cqrs model rust \
                 --crate {ITEM_PATH} > src/model.rs`",
                line + 1
            );
        }
    }

    /// The migrations folder `dir` (`concat!(env!("CARGO_MANIFEST_DIR"), "/migrations")`) is up
    /// to date with `S::MODEL` (no migration to write), and [`Service::MIGRATIONS`] lists its
    /// files, in order: sql-sync applies them all.
    ///
    /// # Panics
    ///
    /// With what to run or change.
    pub fn assert_migrations<S: Service>(dir: impl AsRef<Path>) {
        let dir = dir.as_ref();
        let model = model::<S>().unwrap_or_else(|problem| panic!("{problem}"));
        let recorded =
            cqrs_sql::migrate::recorded(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let next =
            cqrs_sql::migrate::plan(recorded.as_ref(), &cqrs_sql::schema::Schema::of(&model))
                .unwrap_or_else(|e| panic!("a migration cannot be planned: {e}"));
        assert!(
            next.is_none(),
            "model.toml changed since the last migration: run `cqrs model sql --migrations migrations`"
        );
        let folder =
            cqrs_sql::migrate::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let files: Vec<(u32, &str, &str)> = folder
            .iter()
            .map(|(version, name, sql)| (*version, name.as_str(), sql.as_str()))
            .collect();
        assert!(
            files == S::MIGRATIONS,
            "src/lib.rs's MIGRATIONS must list every file of migrations/, in order: the folder \
             has {:?}, MIGRATIONS {:?}",
            files.iter().map(|f| f.1).collect::<Vec<_>>(),
            S::MIGRATIONS.iter().map(|f| f.1).collect::<Vec<_>>()
        );
    }

    /// `template.yaml`'s HTTP API routes (AWS) and `Cargo.toml`'s `cargo lambda watch` router
    /// (local) in the service's folder `dir` (`env!("CARGO_MANIFEST_DIR")`) route the same paths
    /// to the same functions: `cqrs template` writes both from `model.toml`.
    ///
    /// # Panics
    ///
    /// With every difference, or why a file could not be read.
    pub fn assert_routers(dir: impl AsRef<Path>) {
        let problems = cqrs_testkit::routers::differences(dir.as_ref())
            .unwrap_or_else(|e| panic!("template.yaml and Cargo.toml: {e}"));
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
