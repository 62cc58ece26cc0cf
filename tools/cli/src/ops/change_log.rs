//! `cqrs change-log migrate`: moves the change log's entries written before its prefix was
//! reserved (`LOG#<tenant>#<YYYY-MM>`, the key space of the example model's `log` entity) to
//! `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`, with the store's [`migrate_legacy`] (data-sync re-exports it): each entry is
//! written under the new key if absent, then its old row is deleted on condition that it is still
//! that entry. A `log` entity's items and anything else under `LOG#` are never touched; safe while
//! data-sync runs (it writes only the new prefix) and to run again (a second run moves nothing).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use cqrs_store::change_log::migrate_legacy;

use super::{Connection, EXIT_DIFFERENCE, fail};

/// The change log's table and what to do with it.
#[derive(Debug, Args)]
pub struct ChangeLogArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// The table the change log is written to (data-sync's `CHANGE_LOG_TABLE`).
    #[arg(long, env = "CHANGE_LOG_TABLE", global = true)]
    pub table: Option<String>,
    #[command(subcommand)]
    pub command: ChangeLogCommand,
}

/// What to do with the change log.
#[derive(Debug, Subcommand)]
pub enum ChangeLogCommand {
    /// Move entries written under the old `LOG#` prefix to `CQRS_CHANGE_LOG#`. One scan of the
    /// table. Exit 1 when an entry's new key already holds another entry (it is left in place
    /// and counted).
    Migrate {
        /// Print the counts as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `cqrs change-log`.
pub async fn run(args: ChangeLogArgs) -> ExitCode {
    let Some(table) = args.table.filter(|t| !t.trim().is_empty()) else {
        return fail(
            "change-log",
            "no table name: give --table or set CHANGE_LOG_TABLE",
        );
    };
    let store = match args.connection.store(&[]).await {
        Ok(store) => store,
        Err(e) => return fail("change-log", e),
    };
    let ChangeLogCommand::Migrate { json } = args.command;
    let report = match migrate_legacy(&store, &table).await {
        Ok(report) => report,
        Err(e) => return fail("change-log", e),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "table": table,
                "scanned": report.scanned,
                "moved": report.moved,
                "alreadyMoved": report.already_moved,
                "conflicts": report.conflicts,
            })
        );
    } else {
        println!(
            "change-log migrate {table}: {} candidate rows read, {} entries moved, {} already moved \
             (old row deleted), {} left in place (their new key holds another entry)",
            report.scanned, report.moved, report.already_moved, report.conflicts
        );
    }
    if report.conflicts > 0 {
        ExitCode::from(EXIT_DIFFERENCE)
    } else {
        ExitCode::SUCCESS
    }
}
