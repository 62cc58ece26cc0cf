//! The example service's own code: the PostgreSQL migrations of its relational read model, compiled
//! into its `sql-sync` function (`tests/model.rs` holds the list equal to `migrations/`).

/// The migrations of `migrations/`, in order: (version, file name, SQL). A new one
/// (`cqrs model sql --migrations migrations`) is added here too; the model test fails until it is.
pub const MIGRATIONS: &[(u32, &str, &str)] = &[(
    1,
    "V1__model.sql",
    include_str!("../migrations/V1__model.sql"),
)];
