//! `cqrs verify --sql` and `cqrs rebuild --sql`: the relational read model (PostgreSQL) compared
//! with the data table, and repaired from it (`cqrs_sql::verify`).
//!
//! The data table is scanned in parallel segments; each state is the row it must be under the
//! service's model; PostgreSQL is read back, from every table of the read model it holds, and
//! compared (`missing`, `behind`, `ahead`, `misplaced`, `content`, `orphan`, `unstorable`). The
//! scan and PostgreSQL are not read at one instant while sql-sync writes, so `verify --sql`
//! confirms each difference by reading its item again on both sides (a consistent `BatchGetItem`)
//! before it reports it. `rebuild --sql` repairs the differences newest-wins from the item read
//! again, as sql-sync writes (never a version lowered, never a removal undone; each item locked
//! against sql-sync while it is repaired), then reads every repaired item again on both sides to
//! say what remains (`cqrs_sql::verify::reconcile`).
//!
//! Where PostgreSQL is ([`SqlTarget`]) is said as sql-sync's environment says it, with the same
//! variables, so that an operator can run the CLI with the function's settings: a connection string
//! (`--sql-url`, `SQL_URL`; TLS when the server offers it or `sslmode=require` asks for it), or an
//! RDS Proxy with IAM authentication (`--sql-host`, `--sql-port`, `--sql-database`, `--sql-user`,
//! `--sql-region`): the password is an IAM token signed with the CLI's AWS credentials (the SDK's
//! chain: environment, profiles, SSO, ...), over TLS required. Either way a server's certificate is
//! verified against the Amazon Trust Services roots, plus `--sql-ca-file` (a private CA, a test's)
//! when given. The connection code is sql-sync's own (`cqrs_sql::connect`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::provider::ProvideCredentials;
use cqrs_sql::connect::{Database, tls};

use cqrs_model::Model;
use cqrs_sql::rows::Rows;
use cqrs_sql::verify::{SqlDifference, reconcile};
use cqrs_store::rebuild::{ItemTable, ScanScope};

use super::{Connection, EXIT_DIFFERENCE, Need, fail, spinner};

/// Where the relational read model is: a connection string, or an RDS Proxy with IAM
/// authentication (the variables are sql-sync's).
#[derive(Debug, Clone, clap::Args)]
pub struct SqlTarget {
    /// With --sql: the relational read model's connection string
    /// (postgres://user:password@host:port/db; TLS when the server offers it, required with
    /// sslmode=require). It wins over --sql-host, as in sql-sync.
    #[arg(long, env = "SQL_URL", requires = "sql")]
    pub sql_url: Option<String>,
    /// With --sql: the RDS Proxy's endpoint (IAM authentication over TLS, instead of --sql-url).
    #[arg(long, env = "SQL_HOST")]
    pub sql_host: Option<String>,
    /// With --sql-host: the proxy's port.
    #[arg(long, env = "SQL_PORT", default_value_t = 5432)]
    pub sql_port: u16,
    /// With --sql-host: the database.
    #[arg(long, env = "SQL_DATABASE")]
    pub sql_database: Option<String>,
    /// With --sql-host: the database user the CLI's AWS identity may connect as (its policy's
    /// `rds-db:connect`).
    #[arg(long, env = "SQL_USER")]
    pub sql_user: Option<String>,
    /// With --sql-host: the region the IAM token is signed for (default: the AWS configuration's
    /// region, AWS_REGION or the profile's).
    #[arg(long, env = "SQL_REGION")]
    pub sql_region: Option<String>,
    /// A PEM file of certificate authorities trusted besides the Amazon Trust Services roots (a
    /// private CA; a test's).
    #[arg(long, env = "SQL_CA_FILE")]
    pub sql_ca_file: Option<PathBuf>,
    /// Test hook: sign the IAM token as at this Unix time (seconds) instead of now.
    #[arg(long, hide = true)]
    pub sql_token_time: Option<u64>,
}

impl SqlTarget {
    /// The database these flags name, `region` standing in for a missing --sql-region; an error
    /// names the flag (and its variable) that is missing or wrong.
    fn database(&self, region: Option<String>) -> Result<Database, String> {
        if self.sql_url.is_none() && self.sql_host.is_none() {
            return Err(
                "give --sql-url (SQL_URL), a connection string, or --sql-host (SQL_HOST), \
                 an RDS Proxy reached with IAM authentication: the database"
                    .into(),
            );
        }
        let port = self.sql_port.to_string();
        let region = self.sql_region.clone().or(region);
        let get = |name: &str| match name {
            "SQL_URL" => self.sql_url.clone(),
            "SQL_HOST" => self.sql_host.clone(),
            "SQL_PORT" => Some(port.clone()),
            "SQL_DATABASE" => self.sql_database.clone(),
            "SQL_USER" => self.sql_user.clone(),
            "AWS_REGION" => region.clone(),
            _ => None,
        };
        Database::from_env(get).map_err(|e| {
            // sql-sync's message names its variable; the CLI's names the flag too.
            let message = e.to_string();
            for (var, flag) in [
                ("SQL_URL", "--sql-url (SQL_URL)"),
                ("SQL_HOST", "--sql-host (SQL_HOST)"),
                ("SQL_PORT", "--sql-port (SQL_PORT)"),
                ("SQL_DATABASE", "--sql-database (SQL_DATABASE)"),
                ("SQL_USER", "--sql-user (SQL_USER)"),
                (
                    "AWS_REGION",
                    "--sql-region (SQL_REGION; no region in the AWS configuration)",
                ),
            ] {
                if let Some(rest) = message.strip_prefix(var) {
                    return format!("{flag}{rest}");
                }
            }
            message
        })
    }
}

/// What `--sql` runs: compare, or compare and repair.
pub struct SqlRun<'a> {
    /// The tables.
    pub connection: &'a Connection,
    /// Where the database is.
    pub target: &'a SqlTarget,
    /// The service's model file.
    pub model: &'a Path,
    /// Parallel scan segments of the data table.
    pub segments: u32,
    /// How many differing keys to list.
    pub show: usize,
    /// JSON output.
    pub json: bool,
    /// Repair what differs.
    pub repair: bool,
}

/// Runs it; the exit code is 1 when differences remain.
pub async fn run(run: SqlRun<'_>) -> ExitCode {
    let command = if run.repair {
        "rebuild --sql"
    } else {
        "verify --sql"
    };
    // Where the database is, before anything is read: an incomplete form fails at once (exit 2,
    // as clap's usage errors), naming the flag.
    // The AWS configuration (region, credentials) only for a proxy: a connection string needs none.
    let config = match run.target.sql_url {
        Some(_) => None,
        None => Some(
            aws_config::defaults(aws_config::BehaviorVersion::latest())
                .load()
                .await,
        ),
    };
    let region = config
        .as_ref()
        .and_then(|c| c.region())
        .map(|r| r.to_string());
    let database = match run.target.database(region) {
        Ok(database) => database,
        Err(usage) => return fail(command, usage),
    };
    match go(&run, &database, config.as_ref()).await {
        Ok(code) => code,
        Err(e) => fail(command, e),
    }
}

/// Opens the connection `database` names: TLS verified against the Amazon roots (and
/// --sql-ca-file), an IAM token signed with the credentials of `config` for a proxy.
async fn connect(
    target: &SqlTarget,
    database: &Database,
    config: Option<&aws_config::SdkConfig>,
) -> Result<tokio_postgres::Client, String> {
    let mut roots = cqrs_store::client::AMAZON_ROOTS.to_vec();
    if let Some(file) = &target.sql_ca_file {
        let pem =
            std::fs::read(file).map_err(|e| format!("--sql-ca-file {}: {e}", file.display()))?;
        roots.push(b'\n');
        roots.extend_from_slice(&pem);
    }
    let tls = tls(&roots).map_err(|e| format!("--sql-ca-file: {e}"))?;
    let client = match database {
        Database::Url(_) => database.connect(&tls).await,
        Database::Iam(_) => {
            let provider = config.and_then(|c| c.credentials_provider()).ok_or(
                "no AWS credentials to sign the IAM token with (the SDK's chain found no provider)",
            )?;
            let credentials = provider
                .provide_credentials()
                .await
                .map_err(|e| format!("the AWS credentials to sign the IAM token with: {e}"))?;
            let now = target.sql_token_time.map_or_else(SystemTime::now, |secs| {
                UNIX_EPOCH + Duration::from_secs(secs)
            });
            database.connect_signed(&tls, credentials, now).await
        }
    };
    client.map_err(|e| e.to_string())
}

async fn go(
    run: &SqlRun<'_>,
    database: &Database,
    config: Option<&aws_config::SdkConfig>,
) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(run.model)
        .map_err(|e| format!("cannot read the model file {}: {e}", run.model.display()))?;
    let model = Model::parse(&text).map_err(|e| format!("{}: {e}", run.model.display()))?;
    let rows = Rows::new(model);
    let store = run.connection.store(&[Need::Data]).await?;
    let progress = spinner(run.json, "data table rows read");
    let scope = ScanScope {
        tenant: None,
        entity: None,
    };
    let items =
        super::verify::scan_all(&store, ItemTable::Data, &scope, run.segments, &progress).await?;
    progress.finish_and_clear();
    let count = items.len();
    let expected: Vec<_> = items.into_iter().map(|item| rows.row(item)).collect();
    let mut client = connect(run.target, database, config).await?;
    // The data table's items of some keys as they are now (strongly consistent).
    let reread = |keys: Vec<(String, String)>| {
        let store = &store;
        async move { store.get_data_items(&keys).await }
    };
    let outcome = reconcile(&mut client, &rows, &expected, run.repair, reread)
        .await
        .map_err(|e| e.to_string())?;
    let differences = outcome.remaining;
    report(run, count, &outcome.found, outcome.repaired, &differences);
    Ok(if differences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIFFERENCE)
    })
}

fn counts(differences: &[SqlDifference]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for d in differences {
        *counts.entry(d.kind).or_default() += 1;
    }
    counts
}

fn report(
    run: &SqlRun<'_>,
    items: usize,
    found: &[SqlDifference],
    repaired: usize,
    remaining: &[SqlDifference],
) {
    let first = |list: &[SqlDifference]| -> Vec<serde_json::Value> {
        list.iter()
            .take(run.show)
            .map(|d| {
                serde_json::json!({"kind": d.kind, "pk": d.pk, "sk": d.sk,
                    "dataVersion": d.data_version, "sqlVersion": d.sql_version})
            })
            .collect()
    };
    if run.json {
        let out = serde_json::json!({
            "dataItems": items,
            "differences": found.len(),
            "byKind": counts(found),
            "first": first(found),
            "repaired": repaired,
            "remaining": remaining.len(),
            "remainingByKind": counts(remaining),
            "remainingFirst": first(remaining),
        });
        println!("{out}");
        return;
    }
    let kinds: Vec<String> = counts(found)
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    println!(
        "{}: {items} items in the data table: {} differences in PostgreSQL{}",
        if run.repair {
            "rebuild --sql"
        } else {
            "verify --sql"
        },
        found.len(),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    );
    let v = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for d in found.iter().take(run.show) {
        println!(
            "  {:<10} {} / {}  data v{}  sql v{}",
            d.kind,
            d.pk,
            d.sk,
            v(d.data_version),
            v(d.sql_version)
        );
    }
    if run.repair {
        let kinds: Vec<String> = counts(remaining)
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        println!(
            "repaired {repaired}; {} differences remain (each item read again on both sides){}",
            remaining.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        for d in remaining.iter().take(run.show) {
            println!(
                "  {:<10} {} / {}  data v{}  sql v{}",
                d.kind,
                d.pk,
                d.sk,
                v(d.data_version),
                v(d.sql_version)
            );
        }
    }
}
