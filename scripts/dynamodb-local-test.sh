#!/usr/bin/env bash
# Checks scripts/dynamodb-local.sh as a command with several instances of this checkout running at
# once (a `make dev`, a `make test`, one started by hand on a chosen port): `stop` and `status` with
# DDB_LOCAL_PORT act on the instance on that port and never on another one.
#
#   bash scripts/dynamodb-local-test.sh    # scripts/test.sh runs it
#
# Starts two instances of its own on free ports and stops both again, also when a check fails.
# Whatever else runs (the test run's own instance, a developer's) is left alone; if it was started
# from this checkout, the test checks that it still answers afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

ddb() { bash scripts/dynamodb-local.sh "$@"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
answers() { curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/"; }
fail() {
    echo "dynamodb-local-test: FAILED: $*" >&2
    exit 1
}

a=$(free_port)
b=$(free_port)
while [[ $b == "$a" ]]; do b=$(free_port); done
unused=$(free_port)
cleanup() {
    DDB_LOCAL_PORT=$a ddb stop >/dev/null 2>&1 || true
    DDB_LOCAL_PORT=$b ddb stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Whatever instance the default pid file names (the test run's own, when scripts/test.sh runs this).
other_port=""
default_pid_file=${DDB_LOCAL_DIR:-.local}/dynamodb-local.pid
if [[ -f $default_pid_file ]]; then
    other_port=$(sed -n 2p "$default_pid_file")
    answers "$other_port" || other_port=""
fi

DDB_LOCAL_PORT=$a ddb start >/dev/null 2>&1 || fail "start on $a"
DDB_LOCAL_PORT=$b ddb start >/dev/null 2>&1 || fail "start on $b"
answers "$a" || fail "nothing answers on $a after start"
answers "$b" || fail "nothing answers on $b after start"

status=$(DDB_LOCAL_PORT=$b ddb status) || fail "status on $b: $status"
[[ $status == *"127.0.0.1:$b"* ]] || fail "status with DDB_LOCAL_PORT=$b names another instance: $status"

DDB_LOCAL_PORT=$unused ddb stop >/dev/null 2>&1 || fail "stop on a port where nothing runs"
answers "$a" || fail "stopping port $unused stopped the instance on $a"
answers "$b" || fail "stopping port $unused stopped the instance on $b"

DDB_LOCAL_PORT=$a ddb stop >/dev/null 2>&1 || fail "stop on $a"
for _ in $(seq 50); do answers "$a" || break; sleep 0.1; done
answers "$a" && fail "the instance on $a still answers after its stop"
answers "$b" || fail "stopping $a stopped the instance on $b"
if [[ -n $other_port ]]; then
    answers "$other_port" || fail "stopping $a stopped the default instance on $other_port"
fi
if status=$(DDB_LOCAL_PORT=$a ddb status); then
    fail "status on $a says running after its stop: $status"
fi

DDB_LOCAL_PORT=$b ddb stop >/dev/null 2>&1 || fail "stop on $b"
for _ in $(seq 50); do answers "$b" || break; sleep 0.1; done
answers "$b" && fail "the instance on $b still answers after its stop"
if [[ -n $other_port ]]; then
    answers "$other_port" || fail "stopping $b stopped the default instance on $other_port"
fi
echo "dynamodb-local: two instances on ports $a and $b started, each stopped by its port alone;" \
    "stop on an unused port stopped nothing${other_port:+; the default instance on $other_port still answers}"
