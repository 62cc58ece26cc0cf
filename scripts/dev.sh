#!/usr/bin/env bash
# The whole stack on this machine: DynamoDB Local with streams, the tables of template.yaml, the
# three functions under `cargo lambda watch` behind one base URL, and the stream mapping that feeds
# the command table's stream to data-sync.
#
#   scripts/dev.sh         run in the foreground, logs on screen; Ctrl-C stops everything (make dev)
#   scripts/dev.sh up      start in the background and return once the API answers (make dev-up)
#   scripts/dev.sh down    stop what `up` started (make dev-down)
#   scripts/dev.sh status  what is running
#
# Settings (environment): API_PORT (9000), DDB_LOCAL_PORT (8000), STACK_PREFIX (local: tables
# local-command, local-data, ...), DEV_STATE_DIR (.local/dev: logs, pids), DEV_NO_RELOAD=1 (do not
# rebuild and restart a function when its code changes: for scripted runs such as the tests). Everything binds 127.0.0.1 except DynamoDB Local, which cannot be
# told an address and is only ever reached through 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

API_PORT=${API_PORT:-9000}
export DDB_LOCAL_PORT=${DDB_LOCAL_PORT:-8000}
STACK_PREFIX=${STACK_PREFIX:-local}
state="${DEV_STATE_DIR:-$root/.local/dev}"
export DDB_LOCAL_DIR="$state"
api="http://127.0.0.1:$API_PORT"

step() { printf '\n==> %s\n' "$*"; }
say() { printf '    %s\n' "$*"; }

# Waits until something answers HTTP on 127.0.0.1:$1 (any status), at most $2 seconds.
wait_http() {
    python3 - "$1" "$2" <<'PY'
import sys, time, urllib.request, urllib.error
port, limit = int(sys.argv[1]), float(sys.argv[2])
deadline = time.time() + limit
while time.time() < deadline:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)
    except Exception:
        time.sleep(0.3)
sys.exit(1)
PY
}

# Starts "$@" in its own process group, output to $state/$name.log, pid in $state/$name.pid.
start_service() {
    local name=$1
    shift
    setsid "$@" >"$state/$name.log" 2>&1 </dev/null &
    echo $! >"$state/$name.pid"
}

stop_service() {
    local name=$1 pid
    [[ -f "$state/$name.pid" ]] || return 0
    pid=$(cat "$state/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$pid" 2>/dev/null || true
        say "stopped $name"
    fi
    rm -f "$state/$name.pid"
}

down() {
    stop_service stream-mapper
    stop_service functions
    # shellcheck source=scripts/dynamodb-local.sh
    source scripts/dynamodb-local.sh
    # The stack's state folder holds only its own instance: stop it whatever port it was given.
    DDB_LOCAL_PORT='' ddb_local_stop
}

status() {
    local name pid
    for name in functions stream-mapper dynamodb-local; do
        pid=$(cat "$state/$name.pid" 2>/dev/null || true)
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
            say "$name: running (pid $pid)"
        else
            say "$name: stopped"
        fi
    done
}

up() {
    mkdir -p "$state"
    if [[ -f "$state/functions.pid" ]] && kill -0 "$(cat "$state/functions.pid")" 2>/dev/null; then
        echo "the local stack is already running (scripts/dev.sh down stops it)" >&2
        exit 1
    fi

    step "tools (cargo-lambda from PyPI into .venv)"
    # shellcheck source=scripts/tools.sh
    source scripts/tools.sh

    step "DynamoDB Local on 127.0.0.1:$DDB_LOCAL_PORT"
    # shellcheck source=scripts/dynamodb-local.sh
    source scripts/dynamodb-local.sh
    ddb_local_install
    ddb_local_start

    step "build (the three functions and the local-stack helper; the first build takes minutes)"
    cargo build --bin command-handler
    cargo build --bin data-sync
    cargo build --bin query-handler
    cargo build -p local-stack --bin local-stack

    step "tables from template.yaml (prefix $STACK_PREFIX)"
    target/debug/local-stack create-tables "$STACK_PREFIX" | sed 's/^/    /'

    cat >"$state/functions.env" <<EOF
AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB
AWS_REGION=$AWS_REGION
AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
COMMAND_TABLE=$STACK_PREFIX-command
DATA_TABLE=$STACK_PREFIX-data
HISTORY_TABLE=$STACK_PREFIX-history
IDEMPOTENCY_TABLE=$STACK_PREFIX-idempotency
PARKED_TABLE=$STACK_PREFIX-parked
SEQUENCES_TABLE=$STACK_PREFIX-sequences
CALLER_MODE=local
RUST_LOG=${RUST_LOG:-info}
EOF

    step "functions: cargo lambda watch on $api"
    local reload=()
    if [[ -n ${DEV_NO_RELOAD:-} ]]; then reload=(--ignore-changes); fi
    start_service functions cargo lambda watch "${reload[@]}" -A 127.0.0.1 -P "$API_PORT" --env-file "$state/functions.env"
    if ! wait_http "$API_PORT" 120; then
        tail -n 30 "$state/functions.log" >&2
        echo "cargo lambda watch did not answer on $api" >&2
        exit 1
    fi

    step "stream mapping: $STACK_PREFIX-command stream -> data-sync"
    export STREAM_FAILURES_FILE="$state/stream-failures.jsonl"
    start_service stream-mapper target/debug/local-stack stream-mapper "$STACK_PREFIX-command" "$api" data-sync
    sleep 1
    if ! kill -0 "$(cat "$state/stream-mapper.pid")" 2>/dev/null; then
        cat "$state/stream-mapper.log" >&2
        exit 1
    fi

    cat <<EOF

The local stack is up.
    API (both functions, the HTTP API's routes)  $api
        POST/PATCH $api/commands
        GET        $api/items/{pk}[/{sk}[/versions[/{v}]]]   (keys percent-encoded: # is %23)
        POST       $api/sequences/{typeCode}/next, $api/master-data/copy
        GET        $api/settings/{category}/{code}
        callers: CALLER_MODE=local, so send x-tenant-code, x-user-id and x-roles headers
    DynamoDB Local                               $AWS_ENDPOINT_URL_DYNAMODB
        tables $STACK_PREFIX-command (stream), $STACK_PREFIX-data, $STACK_PREFIX-history, $STACK_PREFIX-idempotency,
        $STACK_PREFIX-parked (records data-sync can never project, with their reason), $STACK_PREFIX-sequences
    logs                                         $state/functions.log, $state/stream-mapper.log
    records that failed every retry              $state/stream-failures.jsonl
    records data-sync parked (never projectable) target/debug/local-stack parked $STACK_PREFIX-parked <tenant> [<item id>]

Try:
    curl -sS -X POST $api/commands -H 'content-type: application/json' \\
      -H 'x-tenant-code: t1' -H 'x-user-id: u1' \\
      -d '{"pk":"PRODUCT#t1","sk":"P001","version":0,"name":"Coffee","attributes":{"price":1200}}'
    curl -sS $api/items/PRODUCT%23t1/P001 -H 'x-tenant-code: t1' -H 'x-user-id: u1'
EOF
}

case "${1:-run}" in
up)
    up
    echo
    echo "Running in the background: scripts/dev.sh down (make dev-down) stops it."
    ;;
down) down ;;
status) status ;;
run)
    trap 'echo; echo "stopping the local stack"; down; exit 0' INT TERM
    trap 'down' EXIT
    up
    echo
    echo "Logs follow. Ctrl-C stops everything."
    tail -n +1 -F "$state/functions.log" "$state/stream-mapper.log" &
    wait
    ;;
*)
    echo "usage: scripts/dev.sh [up|down|status]" >&2
    exit 2
    ;;
esac
