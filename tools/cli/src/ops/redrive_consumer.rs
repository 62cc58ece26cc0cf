//! `cqrs redrive consumer`: a consumer's dead-letter queue moved back into its queue, oldest
//! first ([`cqrs_consumer::redrive`]), and where `cqrs redrive` takes it apart from the parked
//! records of data-sync ([`RedriveTop`]: `consumer`, or the subcommands of [`super::redrive`]).
//!
//! The queue URLs come from the flags, else `CONSUMER_QUEUE_URL` / `CONSUMER_DLQ_URL` (the
//! consumer function's own variable for its dead-letter queue); SQS from the standard AWS SDK
//! configuration, `--sqs-endpoint-url` / `AWS_ENDPOINT_URL_SQS` for a local server (moto).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use cqrs_consumer::redrive::{DeadLetter, RedriveOptions, RedriveReport, redrive};

use super::redrive::{RedriveArgs, RedriveCommand};
use super::{Connection, EXIT_DIFFERENCE, fail};

/// `cqrs redrive`: a consumer's dead-letter queue, or data-sync's parked records.
#[derive(Debug, Args)]
pub struct RedriveTop {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: RedriveTopCommand,
}

/// What `cqrs redrive` works on.
#[derive(Debug, Subcommand)]
pub enum RedriveTopCommand {
    /// Move a consumer's dead-letter queue back into its queue, oldest first, in order per item
    /// (each message keeps its group, body and attributes, gets `cqrs-redriven` and a fresh
    /// deduplication id; it leaves the dead-letter queue only once it is in the queue). The
    /// consumer's marker drops versions it already applied. Exit 1 when a message could not be
    /// moved (the rest stay in the dead-letter queue) or came back while the run went on (the
    /// consumer parked it again: the run stops there).
    Consumer(ConsumerArgs),
    #[command(flatten)]
    Parked(RedriveCommand),
}

/// `cqrs redrive consumer`.
#[derive(Debug, Args)]
pub struct ConsumerArgs {
    /// The consumer's queue (SQS FIFO).
    #[arg(long, env = "CONSUMER_QUEUE_URL")]
    pub queue_url: String,
    /// The consumer's dead-letter queue (SQS FIFO).
    #[arg(long, env = "CONSUMER_DLQ_URL")]
    pub dead_letter_url: String,
    /// Move at most this many messages.
    #[arg(long)]
    pub max: Option<usize>,
    /// Count the messages by parking reason; move nothing (an item's later messages are held
    /// back by the FIFO queue while its first ones are read: they count in "left" only).
    #[arg(long)]
    pub dry_run: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sqs: SqsEndpoint,
}

/// Where SQS is.
#[derive(Debug, Clone, Args)]
pub struct SqsEndpoint {
    /// An SQS endpoint other than AWS's, e.g. http://127.0.0.1:5000 for moto. Without it the
    /// standard SDK configuration applies (AWS_ENDPOINT_URL_SQS, AWS_REGION, profiles, ...).
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
    pub sqs_endpoint_url: Option<String>,
}

impl SqsEndpoint {
    /// The SQS client of the standard SDK configuration, at the endpoint when one is given.
    pub async fn client(&self) -> aws_sdk_sqs::Client {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let mut builder = aws_sdk_sqs::config::Builder::from(&config);
        if let Some(url) = &self.sqs_endpoint_url {
            builder = builder.endpoint_url(url);
        }
        aws_sdk_sqs::Client::from_conf(builder.build())
    }
}

/// Runs `cqrs redrive`.
pub async fn run(args: RedriveTop) -> ExitCode {
    match args.command {
        RedriveTopCommand::Consumer(consumer) => run_consumer(consumer).await,
        RedriveTopCommand::Parked(command) => {
            super::redrive::run(RedriveArgs {
                connection: args.connection,
                command,
            })
            .await
        }
    }
}

/// Runs `cqrs redrive consumer`.
async fn run_consumer(args: ConsumerArgs) -> ExitCode {
    let sqs = args.sqs.client().await;
    let options = RedriveOptions {
        max: args.max,
        dry_run: args.dry_run,
    };
    let result = redrive(&sqs, &args.dead_letter_url, &args.queue_url, &options).await;
    let (report, error) = match result {
        Ok(report) => (report, None),
        Err(e) if e.operation == "redrive" => return fail("redrive consumer", e.message),
        Err(e) => (e.report.clone(), Some(e.to_string())),
    };
    if args.json {
        println!("{}", summary_json(&report, args.dry_run, error.as_deref()));
    } else {
        println!("{}", summary_text(&report, args.dry_run));
    }
    for m in &report.came_back {
        eprintln!(
            "cqrs redrive consumer: stopped: {} v{} came back to the dead-letter queue ({}{}): the consumer still fails on it",
            m.subject.as_deref().unwrap_or("(no event)"),
            m.version.map_or("?".to_string(), |v| v.to_string()),
            m.reason_kind,
            m.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    match error {
        Some(error) => {
            eprintln!("cqrs redrive consumer: {error}");
            ExitCode::from(EXIT_DIFFERENCE)
        }
        None if !report.came_back.is_empty() => ExitCode::from(EXIT_DIFFERENCE),
        None => ExitCode::SUCCESS,
    }
}

/// The summary as JSON: `moved`, `byReason`, `left`, `dryRun`, `error`.
fn summary_json(report: &RedriveReport, dry_run: bool, error: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "moved": report.moved,
        "byReason": report.by_reason,
        "left": report.left,
        "dryRun": dry_run,
        "error": error,
        "messages": report.messages.iter().map(dead_letter_json).collect::<Vec<_>>(),
        "cameBack": report.came_back.iter().map(dead_letter_json).collect::<Vec<_>>(),
    })
}

/// One dead-letter message as JSON.
fn dead_letter_json(m: &DeadLetter) -> serde_json::Value {
    serde_json::json!({
        "messageId": m.message_id,
        "eventId": m.event_id,
        "subject": m.subject,
        "version": m.version,
        "reasonKind": m.reason_kind,
        "reason": m.reason,
        "attempts": m.attempts,
        "parkedAt": m.parked_at,
    })
}

/// The summary as a line of text.
fn summary_text(report: &RedriveReport, dry_run: bool) -> String {
    let reasons = if report.by_reason.is_empty() {
        "nothing".to_string()
    } else {
        report
            .by_reason
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if dry_run {
        let mut text = format!(
            "dry run, nothing moved: would move {reasons}; {} in the dead-letter queue",
            report.left
        );
        for m in &report.messages {
            text.push_str(&format!(
                "\n  {} v{}: {}",
                m.subject.as_deref().unwrap_or("(no event)"),
                m.version.map_or("?".to_string(), |v| v.to_string()),
                m.reason_kind
            ));
            match &m.reason {
                Some(reason) => text.push_str(&format!(": {reason}")),
                None if m.reason_kind == cqrs_consumer::redrive::UNKNOWN_REASON => {
                    text.push_str(" (moved there by SQS: the function crashed or timed out)")
                }
                None => {}
            }
            if let Some(attempts) = &m.attempts {
                text.push_str(&format!(", attempts {attempts}"));
            }
            if let Some(at) = &m.parked_at {
                text.push_str(&format!(", parked at {at}"));
            }
        }
        text
    } else {
        format!(
            "moved {} ({reasons}); {} left in the dead-letter queue",
            report.moved, report.left
        )
    }
}
