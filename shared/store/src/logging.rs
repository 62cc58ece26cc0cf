//! The functions' log subscriber: Lambda's logging controls without a regular-expression engine.
//!
//! `lambda_runtime::tracing::init_default_subscriber()` filters with `EnvFilter`, which links a
//! regular-expression engine into every function (for span and field filters a function never
//! uses). [`init`] keeps what matters and filters with `Targets` instead:
//!
//! - `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced logging controls) sets the level, else a plain
//!   level in `RUST_LOG`, else `INFO`;
//! - `RUST_LOG` may also hold `target=level` directives (`info,aws_smithy_runtime=debug`);
//! - `AWS_LAMBDA_LOG_FORMAT=JSON` writes JSON lines, as `LoggingConfig: {LogFormat: JSON}` asks;
//! - no timestamps (CloudWatch stamps every line), no targets and no terminal colours (escape
//!   codes in CloudWatch), to standard output.

use std::str::FromStr;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The filter for `AWS_LAMBDA_LOG_LEVEL` and `RUST_LOG` (either may be unset); a value that does
/// not parse is ignored.
///
/// ```
/// use tracing_subscriber::filter::LevelFilter;
/// let filter = cqrs_store::logging::filter(None, Some("warn,aws_smithy_runtime=debug"));
/// assert_eq!(filter.default_level(), Some(LevelFilter::WARN));
/// assert!(filter.would_enable("aws_smithy_runtime::client", &tracing::Level::DEBUG));
/// assert!(!filter.would_enable("command_handler", &tracing::Level::INFO));
///
/// let filter = cqrs_store::logging::filter(Some("DEBUG"), Some("warn"));
/// assert_eq!(filter.default_level(), Some(LevelFilter::DEBUG));
/// assert_eq!(cqrs_store::logging::filter(None, Some("no such level!")).default_level(), Some(LevelFilter::INFO));
/// ```
pub fn filter(lambda_level: Option<&str>, rust_log: Option<&str>) -> Targets {
    let directives = rust_log
        .and_then(|v| Targets::from_str(v.trim()).ok())
        .unwrap_or_default();
    let level = lambda_level
        .and_then(|v| LevelFilter::from_str(v.trim()).ok())
        .or_else(|| directives.default_level())
        .unwrap_or(LevelFilter::INFO);
    directives.with_default(level)
}

/// Installs the subscriber for the process, from the environment (once, first thing in `main`).
///
/// ```
/// cqrs_store::logging::init();
/// tracing::info!("to standard output, at INFO and above unless the environment says otherwise");
/// ```
pub fn init() {
    let filter = filter(
        std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
        std::env::var("RUST_LOG").ok().as_deref(),
    );
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let format = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(false)
        .without_time()
        .with_writer(std::io::stdout);
    let registry = tracing_subscriber::registry().with(filter);
    // A second call (tests) keeps the first subscriber.
    let _ = if json {
        registry.with(format.json()).try_init()
    } else {
        registry.with(format).try_init()
    };
}
