//! The subcommands that operate a deployment's tables: `rebuild` and `verify` (the read model
//! against the history table), `redrive` (parked records), `heads` (every item's head record,
//! and the migration of heads to their `(pk, sk)` key) and `change-log` (the migration of the
//! change log to its reserved prefix). This module owns what they share:
//! the table names and endpoint (flags, else the environment, else the standard AWS SDK
//! configuration), the store they build, progress bars, and exit codes.

pub mod change_log;
pub mod heads;
pub mod rebuild;
pub mod redrive;
pub mod redrive_consumer;
pub mod replay;
pub mod sql;
pub mod verify;

use std::process::ExitCode;

use clap::Args;
use cqrs_store::{Store, Tables};

/// Exit code: the command found a difference (or left items undone) that an operator must see.
pub const EXIT_DIFFERENCE: u8 = 1;
/// Exit code: the command itself failed (configuration, DynamoDB unreachable, a stopped run).
pub const EXIT_FAILURE: u8 = 2;

/// The tables a command works on, and where DynamoDB is. Every flag falls back to the
/// environment variable the functions read, so a shell with the stack's environment needs none.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The data table (the read model).
    #[arg(long, env = "DATA_TABLE", global = true)]
    pub data_table: Option<String>,
    /// The history table (every version).
    #[arg(long, env = "HISTORY_TABLE", global = true)]
    pub history_table: Option<String>,
    /// The parked-records table (records data-sync could not project, and those the event
    /// publisher could not publish).
    #[arg(long, env = "PARKED_TABLE", global = true)]
    pub parked_table: Option<String>,
    /// The command table (every version, `sk@version`).
    #[arg(long, env = "COMMAND_TABLE", global = true)]
    pub command_table: Option<String>,
    /// The idempotency table (idempotency records, item heads and the heads state).
    #[arg(long, env = "IDEMPOTENCY_TABLE", global = true)]
    pub idempotency_table: Option<String>,
    /// A DynamoDB endpoint other than AWS's, e.g. http://127.0.0.1:8000 for DynamoDB Local.
    /// Without it the standard SDK configuration applies (AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION,
    /// profiles, ...).
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB", global = true)]
    pub endpoint_url: Option<String>,
}

impl Connection {
    /// The store over the named tables; `needs` lists the tables the command reads or writes,
    /// and a missing one is an error naming its flag and variable.
    pub async fn store(&self, needs: &[Need]) -> Result<Store, String> {
        for need in needs {
            let (value, flag, var) = match need {
                Need::Data => (&self.data_table, "--data-table", "DATA_TABLE"),
                Need::History => (&self.history_table, "--history-table", "HISTORY_TABLE"),
                Need::Parked => (&self.parked_table, "--parked-table", "PARKED_TABLE"),
                Need::Command => (&self.command_table, "--command-table", "COMMAND_TABLE"),
                Need::Idempotency => (
                    &self.idempotency_table,
                    "--idempotency-table",
                    "IDEMPOTENCY_TABLE",
                ),
            };
            if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                return Err(format!("no table name: give {flag} or set {var}"));
            }
        }
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(url) = &self.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        let config = loader.load().await;
        let name = |value: &Option<String>| value.clone().unwrap_or_default();
        let mut tables = Tables::new(
            name(&self.command_table),
            name(&self.data_table),
            name(&self.history_table),
            name(&self.idempotency_table),
        );
        if let Some(parked) = &self.parked_table {
            tables = tables.with_parked(parked);
        }
        Ok(Store::new(aws_sdk_dynamodb::Client::new(&config), tables))
    }
}

/// A table a command needs.
#[derive(Debug, Clone, Copy)]
pub enum Need {
    /// `--data-table` / `DATA_TABLE`.
    Data,
    /// `--history-table` / `HISTORY_TABLE`.
    History,
    /// `--parked-table` / `PARKED_TABLE`.
    Parked,
    /// `--command-table` / `COMMAND_TABLE`.
    Command,
    /// `--idempotency-table` / `IDEMPOTENCY_TABLE`.
    Idempotency,
}

/// A spinner counting work whose total is unknown (a scan), drawn on standard error only when it
/// is a terminal and JSON output is off.
pub fn spinner(json: bool, message: &str) -> indicatif::ProgressBar {
    let bar = if json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    let style = indicatif::ProgressStyle::with_template(
        "{spinner} {msg}: {human_pos} {prefix} [{elapsed_precise}, {per_sec}]",
    );
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.set_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Reports a failed command on standard error and answers [`EXIT_FAILURE`].
pub fn fail(command: &str, error: impl std::fmt::Display) -> ExitCode {
    eprintln!("cqrs {command}: {error}");
    ExitCode::from(EXIT_FAILURE)
}

/// The item's key for reports: `pk / sk`.
pub fn key_text(pk: &str, sk: &str) -> String {
    format!("{pk} / {sk}")
}
