//! `cqrs model sql`: the relational read model's schema, and the service's migrations.

use std::path::Path;
use std::process::ExitCode;

use cqrs_model::Model;
use cqrs_sql::{migrate, schema::Schema};

/// Prints the DDL, or writes (or checks) the next migration of `migrations`.
pub fn run(model: &Model, migrations: Option<&Path>, check: bool) -> ExitCode {
    let schema = Schema::of(model);
    let Some(dir) = migrations else {
        print!("{}", schema.ddl());
        return ExitCode::SUCCESS;
    };
    if check {
        return match migrate::recorded(dir).and_then(|old| migrate::plan(old.as_ref(), &schema)) {
            Ok(None) => {
                println!("{}: up to date with the model", dir.display());
                ExitCode::SUCCESS
            }
            Ok(Some(sql)) => {
                eprintln!(
                    "{}: the model changed since the last migration; `cqrs model sql --migrations {}` writes the next one:\n{sql}",
                    dir.display(),
                    dir.display()
                );
                ExitCode::from(1)
            }
            Err(e) => crate::ops::fail("model sql", e),
        };
    }
    match migrate::next(dir, &schema) {
        Ok(Some(file)) => {
            println!("wrote {}", file.display());
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("{}: up to date with the model", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => crate::ops::fail("model sql", e),
    }
}
