//! `cqrs`: the operator CLI. `cqrs model check` checks a model file (every error names the entity
//! and the field); `cqrs model template` prints the data table's `AttributeDefinitions`, `KeySchema`
//! and `GlobalSecondaryIndexes` exactly as `template.yaml` must hold them; `cqrs model openapi`
//! prints the HTTP API's OpenAPI document for the model ([`openapi`]); `cqrs model events` the change
//! events' AsyncAPI document ([`events`]); `cqrs model rust` its typed
//! entities (`cqrs_model::rust::render`, a service's `src/model.rs`); `cqrs model sam` the SAM
//! template of a service with the model, and `cqrs new` a new service ([`new`]). `cqrs template`
//! writes a service's `template.yaml` (the framework's, its own routes, its own part) and its
//! local router, or checks them ([`template`]).
//!
//! `cqrs model lint` lints the key design; `cqrs report` reports partition heat and skew from the
//! tables; `cqrs rebuild`, `cqrs verify`, `cqrs redrive`, `cqrs heads` and `cqrs change-log`
//! operate the tables ([`ops`]).
//!
//! Exit codes: 0 clean, 1 the model has errors (or the report flagged something, or a difference
//! was found), 2 the command itself failed (e.g. unreadable file).
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cqrs_model::Model;

mod dev;
mod events;
mod lint;
mod new;
mod openapi;
mod ops;
mod report;
mod sql;
mod template;

/// Operate a cqrs-dynamo deployment: its entity model first.
#[derive(Parser)]
#[command(name = "cqrs", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new service in DIR: Cargo.toml on the framework's crate (cqrs-dynamo), a starter
    /// model.toml, template.yaml from the model, every function's binary (with an example command
    /// hook, an own route and a consumer of the change events), migrations, events/, tests, a
    /// Makefile and a README.
    New {
        /// The folder to create (it must not exist, or be empty).
        dir: PathBuf,
        /// The service's name: its package name and its stack's default prefix (default: the
        /// folder's name).
        #[arg(long)]
        name: Option<String>,
        /// Where the framework's crates come from: version:REQ (the registry), git:URL, or
        /// path:DIR (a checkout of the framework, relative to the new service's folder or
        /// absolute). Default: the checkout this cqrs was built from, when it is still there;
        /// else version:<this cqrs's version>.
        #[arg(long)]
        framework: Option<String>,
        /// With version:REQ, write the service without checking that the crates resolve from
        /// the registry (they are not published yet; offline generation for later).
        #[arg(long)]
        no_registry_check: bool,
    },
    /// The entity model (model.toml).
    #[command(subcommand)]
    Model(ModelCommand),
    /// Write the service's template.yaml from model.toml (its indexes and `[routes]`), the
    /// framework's template and template.own.yaml (the service's own Parameters, Conditions,
    /// Resources, Outputs and Rules), and the cargo lambda watch router of its Cargo.toml (the
    /// framework's routes and the declared ones). With --check: write nothing, exit 1 naming
    /// what drifted.
    Template(template::TemplateArgs),
    /// The service's local stack, run in its folder: DynamoDB Local with streams, the tables of
    /// template.yaml, the functions under cargo lambda watch on 127.0.0.1, the command table's
    /// stream feeding data-sync. `run` (the default) follows the logs until Ctrl-C; `up`, `down`
    /// and `status` are for scripts.
    Dev(dev::DevArgs),
    /// DynamoDB Local alone, for tests: install, start (on a free port), stop, status.
    DynamodbLocal(dev::DynamoDbLocalArgs),
    /// Partition heat and skew from the data: items, partitions, top partitions, Gini, item
    /// sizes per entity and index; write heat (history versions) and read heat (the query
    /// handler's access log) as per-second peaks, flagged near 1,000 WCU / 3,000 RCU per
    /// partition. Exit 1 when something is flagged.
    Report(Box<report::ReportArgs>),
    /// Re-project the data table from the history table with the current entity model
    /// (backfills new index keys); resumable from a checkpoint. `--sql`: the relational read model
    /// instead; `--constraints`: repair the declared constraints' guard items.
    Rebuild(ops::rebuild::RebuildArgs),
    /// Compare the data table with the newest history version of every item; exit 1 on a
    /// difference. `--sql`: the relational read model instead; `--constraints`: the declared
    /// constraints' guard items against the stored items.
    Verify(ops::verify::VerifyArgs),
    /// List and show parked records, and re-project the items they name; `events`: publish the
    /// event publisher's parked change events again; `consumer`: move a consumer's dead-letter
    /// queue back into its queue.
    Redrive(ops::redrive_consumer::RedriveTop),
    /// Feed one consumer's queue with the versions written since a time, from the history table
    /// (a full scan: the whole table is read, whatever the window). Exit 1 when an event could
    /// not be sent.
    Replay(ops::replay::ReplayArgs),
    /// Every item's head record (its latest version): `status`, `seed` (give every stored item
    /// a head, moving id-keyed legacy heads, then mark the heads complete: creates become one
    /// transaction) and `mark shared` for tables another writer shares.
    Heads(ops::heads::HeadsArgs),
    /// The change log data-sync writes: `migrate` moves entries written under the old `LOG#`
    /// prefix to the reserved `CQRS_CHANGE_LOG#`.
    ChangeLog(ops::change_log::ChangeLogArgs),
}

/// Runs an async subcommand on a runtime of its own.
fn block_on(command: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(command),
        Err(e) => ops::fail("", format!("cannot start the async runtime: {e}")),
    }
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Check a model file; every problem names the entity and the field.
    Check {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
        /// Print the result as JSON (for scripts and CI).
        #[arg(long)]
        json: bool,
    },
    /// Lint the key design: low-cardinality or sequential partitions, keys without delimiters,
    /// overly complex keys, unsharded index partitions. Each finding names the rule, the entity,
    /// the template and the fix; exit 1 on an error the model does not allow
    /// (`allow.<rule> = "reason"` on the entity).
    Lint {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
        /// Print the findings as JSON (for scripts and CI).
        #[arg(long)]
        json: bool,
    },
    /// Print the data table's key attributes and GSIs as template.yaml must declare them (under
    /// the DataTable's Properties). CloudFormation adds or removes one GSI per table per stack
    /// update: deploy a new index on its own.
    Template {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
    },
    /// Print the SAM template of a service with this model: the framework's template, its data
    /// table's GSIs the model's, a function per `[routes.<name>]`; without the service's own part
    /// (template.own.yaml): `cqrs template` writes the whole template.yaml.
    Sam {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
        /// The stack's default resource prefix (the template's `Prefix` parameter).
        #[arg(long, default_value = "cqrs")]
        prefix: String,
    },
    /// The relational read model's PostgreSQL schema for the model: a table per entity (keys,
    /// tenant, version, audit columns, soft delete, a typed column per declared attribute with its
    /// constraints, the rest as jsonb), a generic table, row-level security per tenant. Without
    /// --migrations: print the whole DDL. With it: write the folder's next migration
    /// (`V<n>__model.sql`, and `schema.json`), or say it is up to date; with --check, write nothing
    /// and exit 1 when the model changed since the last migration.
    Sql {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
        /// The service's migrations folder.
        #[arg(long)]
        migrations: Option<PathBuf>,
        /// With --migrations: only check that they are up to date.
        #[arg(long, requires = "migrations")]
        check: bool,
    },
    /// Print the HTTP API's OpenAPI 3.0 document for the model: the routes every deployment has,
    /// the command bodies and items of each entity, and one path per access pattern
    /// (`cqrs model openapi > openapi.yaml`).
    Openapi {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
    },
    /// Print the change events' contract for the model: an AsyncAPI 3.0 document with a channel
    /// per entity (its created, updated and deleted CloudEvents) and each entity event's schema
    /// (`cqrs model events > events.asyncapi.yaml`). With --schema ENTITY: that entity event's
    /// JSON Schema 2020-12 alone, as JSON (its `$id` is the events' `dataschema`).
    Events {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
        /// Print this entity's event JSON Schema instead of the document.
        #[arg(long)]
        schema: Option<String>,
    },
    /// Print the service's typed entities: a serde struct per entity (required attributes
    /// required, optional ones `Option`, enums as enums, `cqrs_item::TypedEntity`), for hooks and
    /// routes to read a command as `command.typed::<Loan>()` (`cqrs model rust > src/model.rs`;
    /// the service's tests/model.rs checks that file against model.toml).
    Rust {
        /// The model file.
        #[arg(long, default_value = "model.toml")]
        file: PathBuf,
        /// The Rust path the file takes TypedEntity, Number, Map and Value from:
        /// `cqrs_dynamo::item` for a service on the facade crate (cqrs new writes those), the
        /// crate cqrs-item for a service generated before it.
        #[arg(long = "crate", value_name = "PATH", default_value = cqrs_model::rust::DEFAULT_PATH)]
        krate: String,
    },
}

fn load(file: &PathBuf) -> Result<Result<Model, cqrs_model::ModelErrors>, ExitCode> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(Model::parse(&text)),
        Err(e) => {
            eprintln!("cqrs: cannot read {}: {e}", file.display());
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Model(ModelCommand::Check { file, json }) => {
            let model = match load(&file) {
                Ok(m) => m,
                Err(code) => return code,
            };
            match (model, json) {
                (Ok(m), false) => {
                    println!(
                        "{}: ok ({} entities, {} indexes, {} access patterns)",
                        file.display(),
                        m.entities().len(),
                        m.indexes().len(),
                        m.patterns().len()
                    );
                    ExitCode::SUCCESS
                }
                (Ok(m), true) => {
                    let out = serde_json::json!({"ok": true, "entities": m.entities().len(),
                        "indexes": m.indexes().len(), "patterns": m.patterns().len(), "revision": m.revision()});
                    println!("{out}");
                    ExitCode::SUCCESS
                }
                (Err(errors), false) => {
                    eprintln!("{}: {errors}", file.display());
                    ExitCode::from(1)
                }
                (Err(errors), true) => {
                    let list: Vec<_> = errors
                        .0
                        .iter()
                        .map(|e| serde_json::json!({"place": e.place, "field": e.field, "message": e.message}))
                        .collect();
                    println!("{}", serde_json::json!({"ok": false, "errors": list}));
                    ExitCode::from(1)
                }
            }
        }
        Command::Model(ModelCommand::Lint { file, json }) => lint::run(&file, json),
        Command::Report(args) => report::run(*args),
        Command::Model(ModelCommand::Template { file }) => match load(&file) {
            Ok(Ok(model)) => {
                print!("{}", model.data_table_yaml());
                ExitCode::SUCCESS
            }
            Ok(Err(errors)) => {
                eprintln!("{}: {errors}", file.display());
                ExitCode::from(1)
            }
            Err(code) => code,
        },
        Command::Model(ModelCommand::Openapi { file }) => match load(&file) {
            Ok(Ok(model)) => match openapi::document(&model) {
                Ok(yaml) => {
                    print!("{yaml}");
                    ExitCode::SUCCESS
                }
                Err(e) => ops::fail("model openapi", e),
            },
            Ok(Err(errors)) => {
                eprintln!("{}: {errors}", file.display());
                ExitCode::from(1)
            }
            Err(code) => code,
        },
        Command::Model(ModelCommand::Events { file, schema }) => match load(&file) {
            Ok(Ok(model)) => {
                let out = match &schema {
                    Some(entity) => events::entity_json_schema(&model, entity),
                    None => events::document(&model),
                };
                match out {
                    Ok(text) => {
                        print!("{text}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => ops::fail("model events", e),
                }
            }
            Ok(Err(errors)) => {
                eprintln!("{}: {errors}", file.display());
                ExitCode::from(1)
            }
            Err(code) => code,
        },
        Command::Model(ModelCommand::Rust { file, krate }) => match load(&file) {
            Ok(Ok(model)) => {
                if let Err(e) = cqrs_model::rust::check_path(&krate) {
                    return ops::fail("model rust", e);
                }
                print!("{}", cqrs_model::rust::render_with_path(&model, &krate));
                ExitCode::SUCCESS
            }
            Ok(Err(errors)) => {
                eprintln!("{}: {errors}", file.display());
                ExitCode::from(1)
            }
            Err(code) => code,
        },
        Command::Model(ModelCommand::Sam { file, prefix }) => {
            if let Err(e) = new::check_name(&prefix) {
                return ops::fail("model sam", e);
            }
            match load(&file) {
                // The framework's template and the model's route functions, without the
                // service's own part (`cqrs template` writes the whole file).
                Ok(Ok(model)) => match template::render(&model, &prefix, None) {
                    Ok(rendered) => {
                        print!(
                            "{}",
                            rendered
                                .text
                                .strip_prefix(template::HEADER)
                                .unwrap_or(&rendered.text)
                        );
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("{}: {e}", file.display());
                        ExitCode::from(1)
                    }
                },
                Ok(Err(errors)) => {
                    eprintln!("{}: {errors}", file.display());
                    ExitCode::from(1)
                }
                Err(code) => code,
            }
        }
        Command::Model(ModelCommand::Sql {
            file,
            migrations,
            check,
        }) => match load(&file) {
            Ok(Ok(model)) => sql::run(&model, migrations.as_deref(), check),
            Ok(Err(errors)) => {
                eprintln!("{}: {errors}", file.display());
                ExitCode::from(1)
            }
            Err(code) => code,
        },
        Command::New {
            dir,
            name,
            framework,
            no_registry_check,
        } => {
            let name = match name {
                Some(name) => name,
                None => match dir.file_name() {
                    Some(n) => n.to_string_lossy().into_owned(),
                    None => return ops::fail("new", format!("{}: give --name", dir.display())),
                },
            };
            let framework = match new::Framework::resolve(framework.as_deref(), no_registry_check) {
                Ok(f) => f,
                Err(e) => return ops::fail("new", e),
            };
            match new::write(&dir, &name, &framework) {
                Ok(files) => {
                    println!("created service {name} in {}:", dir.display());
                    for file in files {
                        println!("  {}", file.display());
                    }
                    println!("next: cd {} && make test", dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => ops::fail("new", e),
            }
        }
        Command::Template(args) => template::run(args),
        Command::Dev(args) => block_on(dev::run(args)),
        Command::DynamodbLocal(args) => dev::run_dynamodb_local(args),
        Command::Rebuild(args) => block_on(ops::rebuild::run(args)),
        Command::Verify(args) => block_on(ops::verify::run(args)),
        Command::Redrive(args) => block_on(ops::redrive_consumer::run(args)),
        Command::Replay(args) => block_on(ops::replay::run(args)),
        Command::Heads(args) => block_on(ops::heads::run(args)),
        Command::ChangeLog(args) => block_on(ops::change_log::run(args)),
    }
}
