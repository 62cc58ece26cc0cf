#!/usr/bin/env bash
# The one bench command (`make bench` calls it): Rust beside @mbc-cqrs-serverless/core (Node), side
# by side in one run, written to BENCHMARKS.md.
#
#   bash scripts/bench.sh
#
# It installs what it needs (Node.js/npm and valgrind from apt when missing, the npm packages pinned in
# bench/node/package.json into .local/bench-node without a lock file, DynamoDB Local through
# `cqrs dynamodb-local install`, cargo-lambda and zig through scripts/tools.sh), builds what it
# measures, starts a private DynamoDB Local on 127.0.0.1, runs the measurements (bench/run.py), stops
# DynamoDB Local again (also on failure) and rewrites BENCHMARKS.md. Builds, each timed:
#   - per profile P of BENCH_PROFILES other than release: `cargo lambda build --profile P --arm64` of
#     our three functions, copied to target/lambda-profiles/P/<bin>/bootstrap, and `cargo build
#     --profile P` of the same (x86_64, target/P/<bin>), for the profiles phase (size and speed);
#   - release LAST, so that target/lambda holds the chosen profile: `cargo lambda build --release
#     --arm64` of our functions, the hand-written floors (floor-create, floor-get, floor-batch) and the
#     echo bench-floor (also copied to target/lambda-profiles/release), and `cargo build --release`
#     of the same (x86_64, run here);
#   - the operator CLI (creates the tables: `cqrs dev tables`) in its own `cargo build` (dev), so
#     that its features never unify into the function binaries;
#   - the Rust benches (bench profile, `cargo bench --no-run`), among them sql-sync's, which starts
#     and stops a PostgreSQL cluster of its own (Debian's server, apt-installed where missing), and
#     the consumer's events bench, which starts and stops moto's server from .venv (scripts/tools.sh).
#
# The benches report, they do not assert: a slow figure is written down, not failed on.
# Knobs (environment, all optional): BENCH_COLD_RUNS (100), BENCH_WARM_ROUNDS (20),
# BENCH_INSTR_REQUESTS (50), BENCH_INSTR_RUNS (3),
# BENCH_PROFILES (release,release-s,release-o3: names of [profile.*] in Cargo.toml),
# BENCH_PROFILE_COLD_RUNS (40), BENCH_MEMORY_RUNS (5), BENCH_PROJECTION_REPEATS (3), BENCH_ONLY
# (e.g. "keys,cold": a partial run writes .local/bench/BENCHMARKS.partial.md, and builds only what
# those phases need), BENCH_KEEP=<an earlier .local/bench/results.json> (the phases not run are
# taken from it, labelled with its date and commit, and BENCHMARKS.md is written), BENCH_SKIP_ARM64=1 (no
# arm64 build; sizes then come from whatever target/lambda and target/lambda-profiles hold); the
# others are in bench/run.py's docstring. Nothing reaches AWS: every endpoint is 127.0.0.1,
# credentials are dummies.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

step() { printf '\n==> %s\n' "$*" >&2; }
timed() { # timed <label> <command...>
    local label=$1 start
    shift
    start=$(date +%s)
    "$@"
    BUILDS+="${BUILDS:+; }$label $(($(date +%s) - start)) s"
}
BUILDS=""

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

step "Node.js and npm"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "[bench] installing nodejs npm (apt)" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
echo "[bench] node $(node --version), npm $(npm --version 2>/dev/null)" >&2

# wants <phase>: whether this run measures it (all phases unless BENCH_ONLY names some).
wants() { [[ -z ${BENCH_ONLY:-} || ",${BENCH_ONLY// /}," == *",$1,"* ]]; }

if wants instructions && ! command -v valgrind >/dev/null 2>&1; then
    step "valgrind (the instructions phase counts with callgrind)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi

step "the Node side: bench/node/package.json (exact versions) into .local/bench-node"
NODE_DIR=.local/bench-node
mkdir -p "$NODE_DIR"
if ! cmp -s bench/node/package.json "$NODE_DIR/package.json" || [[ ! -d $NODE_DIR/node_modules/@mbc-cqrs-serverless/core ]]; then
    rm -rf "$NODE_DIR/node_modules"
    cp bench/node/package.json "$NODE_DIR/package.json"
    # No lock file is written (it would name the registry); install scripts are not needed.
    (cd "$NODE_DIR" && npm install --no-package-lock --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
else
    echo "[bench] up to date" >&2
fi
cp bench/node/*.js "$NODE_DIR/"

step "DynamoDB Local (install, with the operator CLI: cqrs dynamodb-local)"
cargo build --quiet --locked -p cqrs-cli --bin cqrs
CQRS="$ROOT/target/debug/cqrs"
"$CQRS" dynamodb-local install

# Our functions (per profile), the hand-written floors and the echo (release only).
FUNCTIONS=(command-handler query-handler data-sync)
FUNCTION_BINS=(--bin command-handler --bin query-handler --bin data-sync)
# The floors are not default members (Cargo.toml): built in their own invocation, with `-p`, so
# that neither side's features unify into the other's binaries.
REFERENCE_BINS=(-p bench-floor --bin floor-create --bin floor-get --bin floor-batch --bin bench-floor)
IFS=, read -r -a PROFILES <<<"${BENCH_PROFILES:-release,release-s,release-o3}"
PROFILES=("${PROFILES[@]// /}")
# The other profiles are built only when their phase runs.
wants profiles || PROFILES=(release)
TARGET=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')

# clear_bootstraps: so that a build that writes its bootstraps elsewhere fails the copy below instead
# of copying the previous build's under another profile's name.
clear_bootstraps() {
    local name
    for name in "${FUNCTIONS[@]}"; do rm -f "$TARGET/lambda/$name/bootstrap"; done
}
# keep_bootstraps <profile>: target/lambda/<bin>/bootstrap -> target/lambda-profiles/<profile>/<bin>/bootstrap
keep_bootstraps() {
    local profile=$1 name
    for name in "${FUNCTIONS[@]}"; do
        mkdir -p "$TARGET/lambda-profiles/$profile/$name"
        cp "$TARGET/lambda/$name/bootstrap" "$TARGET/lambda-profiles/$profile/$name/bootstrap"
    done
}

if [[ ${BENCH_SKIP_ARM64:-} != 1 ]]; then
    step "tools (cargo-lambda, zig) and the arm64 bootstraps (cargo lambda build --arm64, per profile)"
    # shellcheck source=scripts/tools.sh
    source scripts/tools.sh
    for profile in "${PROFILES[@]}"; do
        [[ $profile == release ]] && continue
        clear_bootstraps
        timed "arm64 $profile (cargo lambda build --profile $profile --arm64)" \
            cargo lambda build --profile "$profile" --arm64 "${FUNCTION_BINS[@]}"
        keep_bootstraps "$profile"
    done
    # release last: target/lambda keeps the chosen profile's bootstraps.
    timed "arm64 release (cargo lambda build --release --arm64)" \
        cargo lambda build --release --arm64 "${FUNCTION_BINS[@]}"
    timed "arm64 release floors (cargo lambda build --release --arm64 -p bench-floor)" \
        cargo lambda build --release --arm64 "${REFERENCE_BINS[@]}"
    keep_bootstraps release
fi

step "x86_64 binaries to run here (cargo build, per profile)"
for profile in "${PROFILES[@]}"; do
    [[ $profile == release ]] && continue
    timed "x86_64 $profile (cargo build --profile $profile)" \
        cargo build --profile "$profile" "${FUNCTION_BINS[@]}"
done
timed "x86_64 release (cargo build --release)" \
    cargo build --release "${FUNCTION_BINS[@]}"
timed "x86_64 release floors (cargo build --release -p bench-floor)" \
    cargo build --release "${REFERENCE_BINS[@]}"

if wants keys || wants projection || wants patterns; then
    step "the Rust benches (bench profile)"
    timed "benches (cargo bench --no-run)" \
        cargo bench -p bench-floor --bench keys_vs_node -p cqrs-data-sync --bench projection \
            -p cqrs-query-handler --bench patterns --no-run
fi

if wants sql; then
    step "the sql-sync bench (bench profile; it starts a PostgreSQL cluster of its own, apt installs the server where missing)"
    timed "sql-sync bench (cargo bench -p cqrs-sql-sync --no-run)" \
        cargo bench --locked -p cqrs-sql-sync --bench throughput --no-run
fi

if wants events; then
    step "the events bench (bench profile; moto's server from .venv, installed by scripts/tools.sh)"
    if [[ ! -x .venv/bin/moto_server ]]; then
        # shellcheck source=scripts/tools.sh
        source scripts/tools.sh
    fi
    timed "events bench (cargo bench -p cqrs-consumer --no-run)" \
        cargo bench --locked -p cqrs-consumer --bench events --no-run
fi

step "DynamoDB Local (start)"
eval "$("$CQRS" dynamodb-local start)"
trap '"$CQRS" dynamodb-local stop --port "$DDB_LOCAL_PORT"' EXIT

step "measuring (bench/run.py)"
export BENCH_BUILDS="$BUILDS (incremental; a fresh machine compiles the AWS SDK twice more, several minutes each)"
export BENCH_COMMAND="${BENCH_COMMAND:-make bench}"
python3 bench/run.py
echo "[bench] done: $(cd "$ROOT" && ls BENCHMARKS.md 2>/dev/null || echo .local/bench/BENCHMARKS.partial.md)" >&2
