"""Renders the results of ``bench/run.py`` as BENCHMARKS.md (tables and the plain-words findings).

The findings are computed from the figures of the run (the thresholds below), never written in
advance: if a later run comes out differently, the words change with it.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional

NBSP_DASH = "–"


def _ns(ns: float) -> str:
    return f"{ns:.1f}" if ns < 100 else f"{ns:,.0f}"


def _ms(ms: Optional[float]) -> str:
    if ms is None or ms != ms:
        return "n/a"
    return f"{ms:.1f}" if ms < 100 else f"{ms:,.0f}"


def _ratio(r: Optional[float]) -> str:
    if r is None or r != r:
        return "n/a"
    if r < 0.01:
        return f"{r:.4f}"
    if r < 0.1:
        return f"{r:.3f}"
    return f"{r:.2f}"


def _mib(n: Optional[float]) -> str:
    return "n/a" if n is None else f"{n / 1048576:.1f} MiB"


def _kb_mib(kb: Optional[float]) -> str:
    return "n/a" if kb is None else f"{kb / 1024:.1f} MiB"


def _rate(x: float) -> str:
    return f"{x:,.0f}"


def _table(header: list[str], rows: list[list[str]], align: Optional[str] = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ sections ---


def _header(r: dict) -> str:
    m = r["machine"]
    phase_loads = []
    for phase in ("keys", "cold", "warm", "instructions", "memory", "projection", "sql", "events", "report", "sequences",
                  "profiles"):
        if phase in r:
            phase_loads.append(f"{phase} {r[phase]['load_before']} → {r[phase]['load_after']}")
    rows = [
        ["command", f"`{r['command']}` (`scripts/bench.sh`, driver `bench/run.py`)"],
        ["date", r["date"]],
        ["machine", f"{m['cpu']}, {m['cpus']} CPUs, {m['memory']} RAM, {m['os']}, Linux {m['kernel']} ({m['arch']})"],
        ["toolchain", f"{m['rustc']}; Node {m['node']}; {m['java']}; {m['dynamodb_local']}; {m['cargo_lambda']}"],
        ["commit", m["git"]],
        ["load (uptime)", f"before: `{r['uptime_before']}`<br>after: `{r['uptime_after']}`"],
        ["load per phase (1/5/15 min)", "; ".join(phase_loads) or "n/a"],
        ["duration of the measurements", f"{r['duration_s'] / 60:.1f} min (builds not included)"],
    ]
    if r.get("builds"):
        rows.append(["builds", r["builds"]])
    kept = r.get("kept") or {}
    labels = r.get("kept_from") or {p: kept for p in kept.get("phases") or []}
    runs: dict = {}
    for phase, label in labels.items():
        runs.setdefault((label.get("date"), label.get("commit"), label.get("command")), []).append(phase)
    for (date, commit, command), kept_phases in sorted(runs.items(), key=lambda kv: str(kv[0][0])):
        rows.append([
            "phases from an earlier run",
            f"{', '.join(kept_phases)}: not measured by this run; their sections are those of the run of "
            f"{date} (commit {commit}, `{command}`), whose code they measured (`BENCH_KEEP`).",
        ])
    if runs:
        rows.append(["measured by this run", ", ".join(r.get("phases") or [])])
    return _table(["", ""], rows, "ll")


def _keys_section(r: dict) -> str:
    k = r["keys"]
    from run import KEY_OPS, KEY_REFERENCES

    rows = []
    for name, rust_fn, node_fn, what in KEY_OPS:
        rust = k["rust"][name]["median_ns"]
        node = k["node"][name]["median_ns"]
        node_label = node_fn if node_fn.startswith("`") or " " in node_fn else f"`{node_fn}`"
        rows.append([what, f"`{rust_fn}`", node_label, _ns(rust), _ns(node), _ratio(rust / node)])
    for name, node_name, what in KEY_REFERENCES:
        rust = k["rust"][name]["median_ns"]
        node = k["node"][node_name]["median_ns"]
        rows.append([f"*{what}*", "*std only*", "(as above)", _ns(rust), _ns(node), _ratio(rust / node)])
    check = (
        "The Rust and Node results agree on every operation (check sums of lengths, versions and part counts)."
        if not k["check_mismatches"]
        else f"**The check sums differ for {', '.join(k['check_mismatches'])}**: Rust {k['check_rust']}, Node {k['check_node']}."
    )
    spread = []
    for name, *_ in KEY_OPS:
        n = k["node"][name]
        spread.append(f"{name} {_ns(n['min_ns'])}{NBSP_DASH}{_ns(n['max_ns'])}")
    return "\n\n".join([
        "## 1. Key operations",
        f"ns per operation, median, on the same {k['inputs']:,} generated inputs (seeded; `.local/bench/key-inputs.json`: "
        "partition keys `PREFIX#tenantNNN`, sort keys of three shapes with `@version`, composite keys of 3 to 6 parts, "
        "entity keys `TYPE#x#ULID`). Rust: `cqrs-keys` under criterion (`tools/bench-floor/benches/keys_vs_node.rs`, "
        "bench profile). Node: the functions of `@mbc-cqrs-serverless/core` "
        f"{k['package_version']} `dist/helpers/key.js` (checked to be the package's exports) on Node {k['node_version']} "
        "(`bench/node/keys.js`: 500 ms warm-up, 30 samples of at least 60 ms, median). "
        "Ratio = Rust ÷ Node (below 1: Rust takes less time).",
        _table(["operation", "Rust", "Node", "Rust ns/op", "Node ns/op", "Rust ÷ Node"], rows, "lllrrr"),
        check + " The package has no composite-key or entity-key helper, so the Node column for those rows is what "
        "its users write by hand (`join`/`split` with the package's `KEY_SEPARATOR`), which validates nothing; the Rust "
        "functions check every component (non-empty, no `#`/`@`, no control character, DynamoDB key size). The rows in "
        "italics measure Rust without that validation, to separate the language from the checks.",
        "Node's spread (fastest to slowest sample, ns/op): " + "; ".join(spread) + ". Criterion's 95 % interval of the "
        "Rust medians is in `.local/bench/results.json`.",
    ])


RATIO_GOAL = 1.1
SIZE_GOAL_BYTES = 8 * 1024 * 1024
OURS = ("command-handler", "query-handler", "data-sync")
FLOOR_OF = {"command-handler": "floor-create", "query-handler": "floor-get", "data-sync": "floor-batch",
            "command-handler-system-roots": "floor-create"}
COLD_ORDER = ("bench-floor", "command-handler", "floor-create", "command-handler-system-roots", "query-handler",
              "floor-get", "query-handler-pattern", "data-sync", "floor-batch", "node-floor", "node-mbc")


def _nan(x: Optional[float]) -> bool:
    return x is None or x != x


def _ms2(ms: Optional[float]) -> str:
    """Milliseconds with two decimals below 10 (warm requests are often under a millisecond)."""
    if _nan(ms):
        return "n/a"
    return f"{ms:.2f}" if ms < 10 else _ms(ms)


def _mib2(n: Optional[float]) -> str:
    return "n/a" if n is None else f"{n / 1048576:.2f} MiB"


def _div(a: Optional[float], b: Optional[float]) -> float:
    return float("nan") if _nan(a) or _nan(b) or not b else a / b


def _ci(p: dict) -> str:
    if _nan(p.get("ci_low")) or _nan(p.get("ci_high")):
        return "n/a"
    return f"{_ratio(p['ci_low'])}{NBSP_DASH}{_ratio(p['ci_high'])}"


def _goal(ratio: Optional[float]) -> str:
    """"met" only when the ratio (of medians, or of p99s) is at most the goal."""
    if _nan(ratio):
        return "n/a"
    return "met" if ratio <= RATIO_GOAL else "not met"


def _upper(p: dict) -> str:
    if _nan(p.get("ci_high")):
        return "n/a"
    return "yes" if p["ci_high"] <= RATIO_GOAL else "no"


def _cold_section(r: dict) -> str:
    cold = r["cold"]
    c = cold["candidates"]
    pairs = cold.get("pairs") or []

    def med(name: str) -> Optional[float]:
        return c[name]["median_ms"] if name in c else None

    node, echo = med("node-mbc"), med("bench-floor")
    every = cold.get("node_every", 1)
    runs_text = f"{cold['runs']} interleaved rounds"
    if every > 1:
        nth = {2: "2nd", 3: "3rd"}.get(every, f"{every}th")
        why = ("as `BENCH_COLD_NODE_EVERY` asked" if cold.get("node_every_forced") else
               f"since every round would have taken the phase past {cold.get('budget_s', 360) / 60:.0f} minutes "
               "(estimated from the last warm-up round)")
        runs_text += (f"; the two Node candidates ran in every {nth} round only "
                      f"({c.get('node-mbc', {}).get('n', '?')} runs), {why}")
    parts = [
        "## 2. Cold path: process start to the first answered invocation",
        "Milliseconds from spawning the process to the arrival of its first `POST .../invocation/{id}/response` at "
        f"the Runtime API stand-in (`bench/runtime_api.py`, Python, 127.0.0.1), {runs_text}: the candidates "
        "in a shuffled order every round so that they share the machine's noise, after two uncounted warm-up rounds. "
        "Rust: x86_64 release builds (`cargo build --release`). Each of our functions has a **hand-written floor**: a "
        "minimal `lambda_runtime` function built with the same profile, features, TLS roots and SDK trims, that "
        "answers the same event with the same DynamoDB calls and is checked the same way (create: statusCode 202, a "
        "new sort key every run; get: statusCode 200 on an item that exists; batch: `batchItemFailures: []`, a new "
        "item every run). `bench-floor` is an echo (no DynamoDB call), kept as a second reference. Node: "
        "`bench/node/runtime.js`, a Runtime API client of the same protocol. Every call reaches DynamoDB Local over "
        "plain HTTP on 127.0.0.1.",
    ]
    if pairs:
        rows = []
        for p in pairs:
            a, b = c[p["ours"]], c[p["floor"]]
            rows.append([
                f"`{p['ours']}`", f"`{p['floor']}`", f"{a['n']} / {b['n']}",
                _ms(a["median_ms"]), _ms(b["median_ms"]),
                f"**{_ratio(p['ratio'])}**", _ci(p), _goal(p["ratio"]), _upper(p),
                f"{p['init_diff_ms']:+.2f}", f"{p['invoke_diff_ms']:+.2f}",
                _ratio(p["ratio_node"]), _ratio(p["ratio_echo"]),
            ])
        parts.append(
            f"**Ours against the floor.** Ratio = our median ÷ the floor's median; the interval is a percentile "
            f"bootstrap ({pairs[0].get('resamples') or cold.get('bootstrap_resamples', 2000)} resamples, each "
            "candidate's runs drawn again with replacement, seeded) at 95 %. Goal: at most "
            f"{RATIO_GOAL}. *Δ init* and *Δ 1st invocation*: our median minus the floor's (ms), where the difference "
            "lies. The last two columns divide our median by the Node handler's and by the echo's."
        )
        parts.append(_table(["function", "floor", "runs", "median ms", "floor median ms", "ours ÷ floor",
                             "95 % CI", f"≤ {RATIO_GOAL}", f"CI upper ≤ {RATIO_GOAL}", "Δ init ms",
                             "Δ 1st invocation ms", "÷ Node mbc", "÷ echo"], rows, "lllrrrrllrrrr"))
    else:
        parts.append("**No hand-written floor was measured in this run** (`floor-create`, `floor-get`, `floor-batch`): "
                     "the ratios to the floor are not available.")
    rows = []
    names = [n for n in COLD_ORDER if n in c] + [n for n in c if n not in COLD_ORDER]
    for name in names:
        s = c[name]
        failed = f" ({len(s['failures'])} failed)" if s["failures"] else ""
        rows.append([
            f"`{name}`", s["label"],
            f"{s['n']}{failed}", _ms(s["median_ms"]),
            f"{_ms(s['p25_ms'])}{NBSP_DASH}{_ms(s['p75_ms'])}",
            f"{_ms(s['p10_ms'])}{NBSP_DASH}{_ms(s['p90_ms'])}",
            f"{_ms(s['min_ms'])}{NBSP_DASH}{_ms(s['max_ms'])}",
            _ms(s["init_median_ms"]), _ms(s["invoke_median_ms"]), _ms(s["warm_median_ms"]),
            _ratio(_div(s["median_ms"], node)), _ratio(_div(s["median_ms"], echo)),
            _kb_mib(None if _nan(s.get("hwm_median_kb")) else s["hwm_median_kb"]),
        ])
    parts.append(
        "**Every candidate.** *IQR* = p25–p75. *init* = spawn to the first `GET .../next`; *first invocation* = event "
        "handed out to response (the first connection to DynamoDB included); *2nd (warm)* = a second, equal event to "
        "the same process (not part of the cold path). Peak RSS = `VmHWM` read when the first response arrives."
    )
    parts.append(_table(["candidate", "first invocation does", "runs", "median ms", "IQR", "p10–p90", "min–max",
                         "init ms", "1st invocation ms", "2nd (warm) ms", "÷ Node mbc", "÷ echo", "peak RSS"],
                        rows, "llrrrrrrrrrrr"))
    sys_roots, ch = c.get("command-handler-system-roots"), c.get("command-handler")
    if sys_roots and ch:
        parts.append(
            "**TLS roots.** `command-handler-system-roots` is the same binary with `CQRS_TLS_ROOTS=system` (the "
            "system's root bundle loaded at start, as the SDK did before the roots were compiled in): init median "
            f"{_ms2(sys_roots['init_median_ms'])} ms (IQR {_ms2(sys_roots['init_p25_ms'])}{NBSP_DASH}"
            f"{_ms2(sys_roots['init_p75_ms'])}) against {_ms2(ch['init_median_ms'])} ms (IQR "
            f"{_ms2(ch['init_p25_ms'])}{NBSP_DASH}{_ms2(ch['init_p75_ms'])}), "
            f"{sys_roots['init_median_ms'] - ch['init_median_ms']:+.2f} ms; cold path "
            f"{sys_roots['median_ms'] - ch['median_ms']:+.2f} ms."
        )
    pattern, qh = c.get("query-handler-pattern"), c.get("query-handler")
    by_function = cold.get("model_load_us_by_function") or {}
    if pattern and qh:
        load = by_function.get("query-handler-pattern") or {}
        load_text = (f"; the model load itself, timed by the function (`load_micros` of its `entity model loaded` "
                     f"line), took a median {load['median'] / 1000:.2f} ms (p90 {load['p90'] / 1000:.2f} ms) over "
                     f"{load['n']} starts" if load.get("median") is not None else
                     "; no run logged the model load (`entity model loaded`)")
        parts.append(
            "**The first access-pattern request.** query-handler loads the entity model on its first "
            "`/query/{pattern}` request, not at start: item reads never need it. `query-handler-pattern` is the same "
            "binary answering `GET /query/products` first, so its first invocation pays the load: cold path "
            f"{_ms2(pattern['median_ms'])} ms against the get's {_ms2(qh['median_ms'])} ms, init "
            f"{pattern['init_median_ms'] - qh['init_median_ms']:+.2f} ms, first invocation "
            f"{pattern['invoke_median_ms'] - qh['invoke_median_ms']:+.2f} ms (a Query of the partition instead of a "
            "GetItem, and the model)" + load_text + "."
        )
    model_line = " ".join(
        f"Entity model in `{name}`: parsing and checking the compiled-in `model.toml` took a median "
        f"{m['median'] / 1000:.3f} ms (p90 {m['p90'] / 1000:.3f} ms), over {m['n']} starts "
        "(its `entity model loaded` log line)."
        for name, m in by_function.items() if m.get("median") is not None and name != "query-handler-pattern"
    )
    if model_line:
        parts.append(model_line)
    if cold.get("missing"):
        parts.append("Not measured (binary not built): " + ", ".join(f"`{n}`" for n in cold["missing"]) + ".")
    failures = [f"`{n}`: {s['failures'][0]}" for n, s in c.items() if s["failures"]]
    if failures:
        parts.append("Failed runs (not counted): " + "; ".join(failures))
    return "\n\n".join(parts)


def _init_section(r: dict) -> str:
    cold = r["cold"]
    c = cold["candidates"]
    breakdown = cold.get("init_breakdown") or {}
    columns = [n for n in ("command-handler", "query-handler", "data-sync", "command-handler-system-roots",
                           "floor-create", "floor-get", "floor-batch") if n in c]
    # Floors get a column only when they log the line themselves.
    columns = [n for n in columns if n in OURS or n == "command-handler-system-roots" or breakdown.get(n, {}).get("n")]
    logged = [n for n in columns if breakdown.get(n, {}).get("n")]
    node = c.get("node-mbc", {}).get("median_ms")
    parts = [
        "## 2b. Init: where the time before the first `next` goes",
        "Each of our functions logs once at start one line `cold start init` with the microseconds of each phase of "
        "its set-up (`*_us` fields: logging, configuration, model load, aws-config, TLS roots, client build, as the "
        "function names them). Medians over the cold runs of section 2 (the runs that logged the line). *Outside the "
        "logged phases* = median init (spawn to the first `next`) minus the median logged time (the function's "
        "`total_us` when it logs one, else the sum of its phases): process start to `main` and the runtime's set-up "
        "up to the first `next`.",
    ]
    if not columns:
        parts.append("None of our functions was measured in this run.")
        return "\n\n".join(parts)
    order: list[str] = []
    for n in logged:
        for key in breakdown[n]["order"]:
            if key not in order:
                order.append(key)
    rows = []
    if order:
        for key in order:
            cells = []
            for n in columns:
                ph = breakdown.get(n, {}).get("phases", {}).get(key)
                cells.append(f"{ph['median_us']:,.0f}" if ph else ("not logged" if not breakdown.get(n, {}).get("n") else "–"))
            rows.append([f"`{key}_us` (µs)"] + cells)
        rows.append(["sum of the logged phases (µs)"] + [
            f"{breakdown[n]['sum_median_us']:,.0f}" if breakdown.get(n, {}).get("n") else "not logged" for n in columns])
        if any(breakdown.get(n, {}).get("total_median_us") is not None for n in logged):
            rows.append(["logged total, `total_us` (µs)"] + [
                f"{breakdown[n]['total_median_us']:,.0f}" if breakdown.get(n, {}).get("total_median_us") is not None
                else "–" for n in columns])
    else:
        rows.append(["logged phases"] + ["not logged"] * len(columns))
    rows.append(["runs that logged the line"] + [
        f"{breakdown.get(n, {}).get('n', 0)} of {breakdown.get(n, {}).get('runs', c[n]['n'])}" for n in columns])
    rows.append(["init, spawn to the first `next` (ms)"] + [_ms2(c[n]["init_median_ms"]) for n in columns])
    rows.append(["outside the logged phases: process start to `main` and runtime set-up (ms)"] + [
        _ms2(breakdown[n]["outside_ms"]) if breakdown.get(n, {}).get("n") else "n/a" for n in columns])
    rows.append(["the floor's init (ms)"] + [
        f"{_ms2(c[FLOOR_OF[n]]['init_median_ms'])} (`{FLOOR_OF[n]}`)" if FLOOR_OF.get(n) in c else "n/a"
        for n in columns])
    rows.append(["cold path (ms)"] + [_ms2(c[n]["median_ms"]) for n in columns])
    rows.append(["the Node handler's cold path (ms)"] + [_ms(node) for _ in columns])
    rows.append(["cold path ÷ Node handler's"] + [_ratio(_div(c[n]["median_ms"], node)) for n in columns])
    parts.append(_table([""] + [f"`{n}`" for n in columns], rows, "l" + "r" * len(columns)))
    if not logged:
        parts.append("The breakdown is **not logged**: no measured function wrote a `cold start init` line in this "
                     "run.")
    return "\n\n".join(parts)


def _warm_section(r: dict) -> str:
    w = r["warm"]
    c = w["candidates"]
    parts = [
        "## 2c. Warm requests: one process, requests in sequence",
        f"Each candidate's process serves {w['requests'] + 1} events one after the other; the first (the cold one) is "
        f"dropped and the other {w['requests']} give one latency each: event handed out by the stand-in to response "
        f"arrived (`responded_ns[i] - served_ns[i]`; the stand-in's own time is in every candidate's figure alike). "
        f"{w['rounds']} round{'s' if w['rounds'] != 1 else ''}, a new process each time, samples pooled, after an "
        "uncounted warm-up of 20 requests each; in every round each of our functions runs right before or right after "
        "its floor (the order drawn every round), so that the two share the machine's moment. Every create carries a "
        "new sort key, every batch a new item; the get reads an item that exists. Every response is checked; a failed "
        f"one is counted, not timed. Goal: p50 and p99 each at most {RATIO_GOAL}x the floor's. The 95 % interval is a "
        "percentile bootstrap over **processes** (each resample draws the rounds' processes again and pools their "
        "requests): the requests of one process share its moment on the machine, so they are not independent samples. "
        "*Rounds ours faster*: the rounds whose p50 was below the floor's p50 of the same round.",
    ]
    pairs = w.get("pairs") or []
    if pairs:
        rows = []
        for p in pairs:
            a, b = c[p["ours"]], c[p["floor"]]
            per_round = p.get("round_p50_ratios") or []
            rows.append([
                f"`{p['ours']}`", f"`{p['floor']}`",
                _ms2(a["p50_ms"]), _ms2(b["p50_ms"]), f"**{_ratio(p['p50']['ratio'])}**", _ci(p["p50"]),
                f"{p.get('rounds_ours_faster', 0)} of {len(per_round)}" if per_round else "n/a",
                _ms2(a["p99_ms"]), _ms2(b["p99_ms"]), f"**{_ratio(p['p99']['ratio'])}**", _ci(p["p99"]),
                "met" if not _nan(p["p50"]["ratio"]) and p["p50"]["ratio"] <= RATIO_GOAL and p["p99"]["ratio"] <= RATIO_GOAL
                else ("n/a" if _nan(p["p50"]["ratio"]) else "not met"),
            ])
        parts.append(_table(["function", "floor", "p50 ms", "floor p50 ms", "p50 ÷ floor", "95 % CI",
                             "rounds ours faster", "p99 ms", "floor p99 ms", "p99 ÷ floor", "95 % CI",
                             f"both ≤ {RATIO_GOAL}"], rows, "llrrrrrrrrrl"))
    else:
        parts.append("**No hand-written floor was measured in this run**: the ratios to the floor are not available.")
    rows = []
    for name in [n for n in COLD_ORDER if n in c] + [n for n in c if n not in COLD_ORDER]:
        s = c[name]
        rows.append([f"`{name}`", s["label"], str(s["processes"]), str(s["n"]), str(s["failed"]),
                     _ms2(s["p50_ms"]), _ms2(s["p90_ms"]), _ms2(s["p99_ms"]), _ms2(s["max_ms"]), _ms2(s["mean_ms"])])
    parts.append(_table(["candidate", "request", "processes", "requests timed", "failed", "p50 ms", "p90 ms",
                         "p99 ms", "max ms", "mean ms"], rows, "llrrrrrrrr"))
    if w.get("missing"):
        parts.append("Not measured (binary not built): " + ", ".join(f"`{n}`" for n in w["missing"]) + ".")
    failures = [f"`{n}`: {s['failures'][0]}" for n, s in c.items() if s.get("failures")]
    if failures:
        parts.append("Failures: " + "; ".join(failures))
    return "\n\n".join(parts)


def _instructions_section(r: dict) -> str:
    ins = r["instructions"]
    parts = ["## 2d. Instructions: the work itself, without the machine's noise"]
    if ins.get("skipped"):
        parts.append(f"Not measured: {ins['skipped']}.")
        return "\n\n".join(parts)
    c = ins["candidates"]
    parts.append(
        f"Instructions executed by the process (every thread), counted by valgrind's callgrind ({ins['valgrind']}): one "
        f"process serving 1 event (init, the first request, the stop) and one serving {ins['requests'] + 1}; the "
        f"difference divided by {ins['requests']} is one warm request. {ins['runs']} run{'s' if ins['runs'] != 1 else ''} each, medians; the same "
        "binaries, events and DynamoDB Local as sections 2 and 2c. A count is not a time (a cache miss or a system call "
        "costs more than an add), but it does not change with the machine's load: where the timings of two candidates "
        "differ and their counts do not, the difference is not work one of them does."
    )
    rows = []
    for p in ins.get("pairs") or []:
        a, b = c[p["ours"]], c[p["floor"]]
        rows.append([f"`{p['ours']}`", f"`{p['floor']}`",
                     f"{a['first_median'] / 1e6:.2f}", f"{b['first_median'] / 1e6:.2f}", f"**{_ratio(p['first_ratio'])}**",
                     f"{a['per_request_median'] / 1e3:,.0f}", f"{b['per_request_median'] / 1e3:,.0f}",
                     f"**{_ratio(p['per_request_ratio'])}**"])
    if rows:
        parts.append(_table(["function", "floor", "first event, M instr.", "floor's", "ours ÷ floor",
                             "warm request, k instr.", "floor's", "ours ÷ floor"], rows, "llrrrrrr"))
    spread = []
    for name, x in c.items():
        per = [s["per_request"] for s in x["samples"]]
        first = [s["first"] for s in x["samples"]]
        spread.append(f"`{name}` first {min(first) / 1e6:.2f}{NBSP_DASH}{max(first) / 1e6:.2f} M, warm "
                      f"{min(per) / 1e3:,.0f}{NBSP_DASH}{max(per) / 1e3:,.0f} k")
    parts.append("Spread over the runs (min–max): " + "; ".join(spread) + ".")
    return "\n\n".join(parts)


def _settings(table: Optional[dict]) -> str:
    if not table:
        return "not in Cargo.toml"
    def setting(key: str, value) -> str:
        return f"{key}={value!r}".replace("'", '"') if isinstance(value, str) else f"{key}={str(value).lower()}"

    items = [setting(k, v) for k, v in table.items() if not isinstance(v, dict)]
    text = "`" + ", ".join(items) + "`" if items else "(defaults)"
    # Per-package overrides ([profile.<P>.package.<crate>]); a profile that inherits keeps them.
    overrides = [f"`{crate}`: `{', '.join(setting(k, v) for k, v in o.items())}`"
                 for crate, o in (table.get("package") or {}).items() if isinstance(o, dict)]
    if overrides:
        text += "; per package: " + "; ".join(overrides)
    return text


def _profiles_section(r: dict) -> str:
    pr = r["profiles"]
    profiles = pr["profiles"]
    base = profiles.get("release", {})
    goal = pr.get("goal_bytes", SIZE_GOAL_BYTES)

    def rel(value: Optional[float], ref: Optional[float]) -> str:
        q = _div(value, ref)
        return "" if _nan(q) else f" ({_ratio(q)})"

    rows = []
    for name in pr["names"]:
        e = profiles[name]
        row = [f"`{name}`", _settings(e.get("settings"))]
        for fn in OURS:
            arm = e["arm64"].get(fn)
            ref = base.get("arm64", {}).get(fn)
            row.append(_mib2(arm["bytes"]) + rel(arm["bytes"], ref and ref["bytes"]) if arm else "n/a")
        top = e.get("arm64_max_bytes")
        row.append(f"{_mib2(top)} ({'met' if top <= goal else 'not met'})" if top else "n/a")
        for kind, key in (("cold", "median_ms"), ("warm", "p50_ms")):
            for fn in OURS:
                x = e.get(kind, {}).get(fn)
                ref = base.get(kind, {}).get(fn)
                row.append(_ms2(x[key]) + rel(x[key], ref and ref[key]) if x else "n/a")
        rows.append(row)
    parts = [
        "## 4b. Release profiles: size and speed",
        f"Each Cargo profile of `BENCH_PROFILES` ({', '.join(f'`{p}`' for p in pr['names'])}), its settings as "
        "written in the root `Cargo.toml` (a profile that `inherits` another also keeps that one's per-package "
        "overrides, as Cargo documents). Size: the arm64 bootstrap of `cargo lambda build --profile <P> --arm64` "
        f"(`target/lambda-profiles/<P>/<bin>/bootstrap`), goal at most {_mib2(goal)} ({goal:,} bytes) each. Speed: "
        "the x86_64 binaries of `cargo build --profile <P>` (`target/<P>/`, `target/release/` for `release`): cold "
        f"path median over {pr['cold_runs']} runs per function, all profiles and functions interleaved in shuffled "
        f"rounds; warm p50 over one process serving {pr['requests']} requests (after its cold one). In parentheses: "
        "÷ the `release` profile's figure.",
        _table(["profile", "settings", "arm64 command-handler", "arm64 query-handler", "arm64 data-sync",
                f"arm64 max (≤ {_mib2(goal)})", "cold ms command-handler", "cold ms query-handler", "cold ms data-sync",
                "warm p50 ms command-handler", "warm p50 ms query-handler", "warm p50 ms data-sync"], rows,
               "llrrrrrrrrrr"),
    ]
    notes = []
    for name in pr["names"]:
        e = profiles[name]
        if not e["arm64"] and not e.get("measured"):
            notes.append(f"`{name}`: skipped, no binaries built ({len(e['missing'])} missing, e.g. `{e['missing'][0]}`)")
        elif e["missing"]:
            what = "sizes only, speed not measured" if not e.get("measured") else "measured, some sizes missing"
            notes.append(f"`{name}`: {what} (missing: {', '.join(f'`{m}`' for m in e['missing'])})")
        failed = sum(x.get("failed", 0) for kind in ("cold", "warm") for x in e.get(kind, {}).values())
        if failed:
            notes.append(f"`{name}`: {failed} failed runs or requests (not timed)")
    if notes:
        parts.append("; ".join(notes) + ".")
    return "\n\n".join(parts)


def _projection_rows(runs: list) -> list:
    rows = []
    for i, x in enumerate(runs, 1):
        rows.append([str(i), _rate(x["seq_puts_s"]), _rate(x["conc_puts_s"]), _rate(x["proj_records_s"]),
                     _ratio(x["ratio_seq"]), _ratio(x["ratio_conc"])])
    med = lambda key: statistics.median(x[key] for x in runs)  # noqa: E731
    rows.append(["**median**", _rate(med("seq_puts_s")), _rate(med("conc_puts_s")), _rate(med("proj_records_s")),
                 f"**{_ratio(med('ratio_seq'))}**", f"**{_ratio(med('ratio_conc'))}**"])
    return rows


def _projection_section(r: dict) -> str:
    p = r["projection"]
    parts = [
        "## 3. Data-sync throughput against DynamoDB Local",
        "`cargo bench -p cqrs-data-sync --bench projection` (`functions/data-sync/benches/projection.rs`), run "
        f"{p['repeats']} times per workload, workloads interleaved. Each run writes the items through the command "
        "table, reads its real stream into one Lambda event (interleaved as concurrent writers produce it), warms the "
        "server up, then on fresh tables measures: raw `PutItem` of the same items one at a time, raw `PutItem` with "
        "`DEFAULT_CONCURRENCY` in flight, and `DataSync::handle` on the batch: every version into history with "
        "`BatchGetItem` + `BatchWriteItem` (25 puts a call), then one conditional data write per item (its newest "
        "version), items concurrently. The figure that matters is the last column: projection records/s ÷ raw "
        "concurrent puts/s. **Goals: at least 1.0 with 4 versions per item, at least 0.6 with one version per item** "
        "(where nothing collapses and every record still costs a history row and a data write).",
    ]
    header = ["run", "raw PutItem seq. puts/s", "raw PutItem {conc} in flight puts/s", "projection records/s",
              "proj. ÷ raw seq.", "proj. ÷ raw conc."]
    for size in sorted(p["sizes"], key=int):
        runs = p["sizes"][size]
        conc = runs[0]["concurrency"] if runs else "?"
        parts.append(f"**{int(size):,} records, 4 versions per item**")
        parts.append(_table([h.format(conc=conc) for h in header], _projection_rows(runs)))
    single = p.get("single") or []
    if single:
        conc = single[0]["concurrency"]
        parts.append("**1,000 records, one version per item**")
        parts.append(_table([h.format(conc=conc) for h in header], _projection_rows(single)))
    rebuild = p.get("rebuild") or []
    if rebuild:
        rows = []
        for i, x in enumerate(rebuild, 1):
            rows.append([str(i), _rate(x["conc_puts_s"]), _rate(x["rebuild_items_s"]), _ratio(x["ratio_conc"])])
        med = lambda key: statistics.median(x[key] for x in rebuild)  # noqa: E731
        rows.append(["**median**", _rate(med("conc_puts_s")), _rate(med("rebuild_items_s")),
                     f"**{_ratio(med('ratio_conc'))}**"])
        x = rebuild[0]
        parts.append(
            f"**`cqrs rebuild`**: `cargo bench -p cqrs-cli --bench rebuild` (`tools/cli/benches/rebuild.rs`): "
            f"{x['items']:,} items of 4 versions (16 tenants) in a fresh history table, rebuilt into an empty data "
            f"table by the release `cqrs` binary ({x['segments']} scan segments, index keys computed by the embedded "
            "model; process start included), beside raw `PutItem` of one item each with "
            f"{x['concurrency']} in flight."
        )
        parts.append(_table(["run", f"raw PutItem {x['concurrency']} in flight puts/s", "rebuild items/s",
                             "rebuild ÷ raw conc."], rows))
    if "memory" in r:
        m = r["memory"]
        rows = []
        for size in sorted(m["sizes"], key=int):
            e = m["sizes"][size]
            rows.append([f"{int(size):,}", f"{e['event_bytes'] / 1024:,.0f} KiB", _ms(e["invoke_median_ms"]), _rate(e["records_per_s"])])
        parts.append(
            "The same projection through the release `data-sync` binary and the Runtime API stand-in (fresh tables, "
            f"median of {m['runs']} runs; the event's JSON parsing and the response included, the process already "
            "initialised):"
        )
        parts.append(_table(["records", "event size", "invocation ms", "records/s"], rows))
    return "\n\n".join(parts)


def _sql_batch_size() -> Optional[int]:
    """The BatchSize of sql-sync's mapping in template.yaml (the data table's stream), if found."""
    template = Path(__file__).resolve().parent.parent / "template.yaml"
    try:
        text = template.read_text()
    except OSError:
        return None
    # The mapping's properties follow its Stream line; the first BatchSize after it is its own.
    _, stream, after = text.partition("Stream: !GetAtt DataTable.StreamArn")
    for line in after.splitlines() if stream else []:
        if line.strip().startswith("BatchSize:"):
            return int(line.split(":", 1)[1])
    return None


def _sql_section(r: dict) -> str:
    q = r["sql"]
    rows = []
    for x in q["rates"]:
        runs = ", ".join(f"{o / f:.2f}" for o, f in zip(x["sql_sync_runs"], x["raw_runs"]))
        writes = x.get("writes_rows_s")
        values = x.get("values_rows_s")
        rows.append([f"{x['batch']:,}", x["pass"], _rate(x["raw_rows_s"]), _rate(x["sql_sync_rows_s"]),
                     f"**{_ratio(x['ratio'])}**", runs,
                     f"{_rate(writes)} ({_ratio(writes / x['raw_rows_s'])})" if writes else "n/a",
                     f"{_rate(values)} ({_ratio(x['sql_sync_rows_s'] / values)})" if values else "n/a"])
    m = q["memory"]
    return "\n\n".join([
        "## 3b. sql-sync throughput against PostgreSQL",
        "`cargo bench -p cqrs-sql-sync --bench throughput` (`functions/sql-sync/benches/throughput.rs`), against a "
        f"throwaway cluster of Debian's PostgreSQL {q.get('postgres', '?')} on 127.0.0.1 that the bench starts and stops. "
        f"{q['items']:,} loans (a model of five typed attributes and one undeclared, which goes to `jsonb`), written "
        "twice: as version 1 (inserts), then as version 2 (updates; each record carries both images, "
        "`NEW_AND_OLD_IMAGES`). **sql-sync**: `SqlSync::handle` on the data table's stream records, batch by batch "
        "(each image converted into an item and a row, the batch's changes deduplicated, one transaction per batch "
        "whose statements also keep the generic table and the removals in check; a batch goes in a few statements, "
        "50 records and then up to a quarter of the batch, and the next chunk's records are converted while "
        "PostgreSQL writes the one before). **Raw**: the same rows, computed "
        "before the clock starts, in one transaction per batch with the plain `INSERT ... SELECT ... FROM unnest($1::text[], "
        "...) ON CONFLICT (pk, sk) DO UPDATE ... WHERE t.version < excluded.version`, one text array a column, the "
        "statement prepared once, each batch freed once written (as sql-sync frees each event). One thread, one "
        f"connection each; the sides alternate on emptied tables, {q['repeats']} timed runs each after one warm-up; "
        "medians. **Goal: sql-sync at least 0.8x raw.**",
        _table(["batch", "pass", "raw upserts rows/s", "sql-sync rows/s", "sql-sync ÷ raw", "per run",
                "its writes alone rows/s (÷ raw)", "raw VALUES upserts rows/s (sql-sync ÷ it)"], rows),
        "Its writes alone: `cqrs_sql::write::Writer::apply` on the same prepared rows, one statement per batch, that "
        "is sql-sync's statements without the conversion of the stream records (each image into an item, then into "
        "a row) and without the pipeline (in large batches sql-sync can beat it: its chunks overlap the conversion "
        "and the encoding of one chunk with PostgreSQL's work on the one before). The last column is the form of raw upserts most hand-written consumers "
        "start with, and sql-sync's before it sent arrays: a `VALUES` list of one tuple a row, a new statement each "
        "batch, which PostgreSQL parses, analyses and plans in proportion to the batch. The ratio is to the faster "
        "raw form.",
        f"Memory: a fresh process (the bench's own binary, release settings) connected to PostgreSQL peaks at "
        f"{_kb_mib(m['before_kib'])} before the batch; reading, parsing and handling Lambda's largest batch of the data "
        f"table's stream, {m['records']:,} update records ({q['event_bytes'] / 1048576:.2f} MiB of JSON: with both images, "
        f"the 6 MB payload binds before the 10,000 records), takes its peak to **{_kb_mib(m['peak_kib'])}** "
        f"({m['seconds']:.2f} s).",
    ])


def _events_section(r: dict) -> str:
    e = r["events"]
    t, lat = e["throughput"], e["latency"]
    raw, con = t["raw"], t["consumer"]

    def runs(values: list) -> str:
        return ", ".join(_rate(v) for v in values)

    rows = [
        ["raw `SendMessageBatch` + `ReceiveMessage`/`DeleteMessageBatch`", _rate(raw["events_s"]), runs(raw["runs"]),
         _rate(raw["drain_events_s"]), runs(raw["drain_runs"]), "1.00"],
        ["consumer (`SqsMapper` + `Runtime`, markers in DynamoDB Local)", _rate(con["events_s"]), runs(con["runs"]),
         _rate(con["drain_events_s"]), runs(con["drain_runs"]),
         f"**{_ratio(t['ratio'])}** (drain alone {_ratio(t['drain_ratio'])})"],
    ]
    per_run = ", ".join(_ratio(x) for x in t["ratio_runs"])
    lat_rows = [[
        f"{lat['seen']:,} of {lat['commands']:,}", f"**{_ms(lat['p50_ms'])}**", _ms(lat["p90_ms"]), f"**{_ms(lat['p99_ms'])}**",
        _ms(lat["min_ms"]), _ms(lat["max_ms"]),
    ]]
    return "\n\n".join([
        "## Change events: a consumer beside raw SQS, and command→consumer latency",
        "`cargo bench -p cqrs-consumer --bench events` (`functions/consumer/benches/events.rs`), against moto's server "
        f"{e.get('moto', '?')} (SNS and SQS, from the project's `.venv`, on 127.0.0.1; started and stopped by the bench) "
        "and DynamoDB Local. "
        f"**Throughput**: {t['events']:,} change events ({t['items']:,} items × {t['versions']} versions; the publisher's "
        f"JSON bodies, {t['body_bytes_mean']:,.0f} bytes on average, with its `type`, `tenant`, `entity` attributes; "
        "message group = the item, deduplication id = the event id) sent with `SendMessageBatch` (10 a call, one call at "
        "a time, so that an item's versions stay in order) into a FIFO queue, in waves of "
        f"{t['wave']:,} (one version of every item) each drained before the next is sent. **Raw**: drained with "
        "`ReceiveMessage` (10, all attributes, no wait) and `DeleteMessageBatch`, nothing else. **Consumer**: the same "
        "events into another queue, drained by `cqrs_local_stack::sqs_mapper::SqsMapper` (the local SQS event source "
        "mapping: the same receive, then the delete of what the answer did not report) invoking `cqrs_consumer::Runtime` "
        "in process with Lambda's SQS event, parsed as the function parses it: a no-op handler, but every event's "
        "body parsed, the consumer's markers read (one consistent `BatchGetItem` a batch) and written (one conditional "
        "`UpdateItem` a handled version) in DynamoDB Local's idempotency table, as the runtime does in AWS. events/s = "
        "events ÷ (send + drain seconds); \"drain alone\" leaves the sends (the same for both sides) out. The sides "
        "alternate wave by wave (which goes first alternates too), so that a drift of the machine or of moto falls on "
        f"both alike; {t['repeats']} timed runs after a warm-up of one wave, fresh queues and a fresh consumer name (so "
        "fresh markers) each run; medians. Waves, because moto's `SendMessage` costs in proportion to the queue's depth (moto "
        "counts every message's visibility for the queue's attributes, several times a message): a queue thousands "
        "deep would measure moto. Absolute rates are moto's (a Python server on this machine), not SQS's; the ratio "
        "is what the figures are for. **Goal: the consumer at least 0.8x raw.**",
        _table(["side", "events/s (send + drain)", "per run", "drain alone events/s", "per run", "consumer ÷ raw"], rows),
        f"Ratio per run: send + drain {per_run}; drain alone {', '.join(_ratio(x) for x in t['drain_ratio_runs'])}. "
        "What the consumer adds to each batch of 10: Lambda's SQS event built and parsed, every body parsed into an "
        "event, one `BatchGetItem` of the markers and one conditional `UpdateItem` per handled version (the items of a "
        "batch concurrently) against DynamoDB Local.",
        "**Command→consumer latency**: an item version written to the command table (`Store::put_command`, "
        f"{lat['commands']:,} versions of {lat['items']} items, round robin, one every {lat['command_interval_ms']} ms), "
        "projected by data-sync (in process, on the command table's stream of DynamoDB Local), the data table's stream "
        "read and handed to `cqrs_event_publisher::Publisher` with its `SnsTopic` on moto's SNS FIFO topic, the "
        "consumer's FIFO queue subscribed with raw delivery, drained by `SqsMapper` + `Runtime` (markers in DynamoDB "
        "Local). Latency = the moment the handler saw the version − the moment the command write returned. "
        f"Polling: each stream read again after {lat['stream_poll_ms']} ms when it had nothing, the queue received "
        f"without wait and again after {lat['sqs_poll_ms']} ms when empty. **These intervals and the stream reads of "
        "DynamoDB Local dominate the figures**; in AWS, Lambda polls a stream about 4 times a second and SQS with long "
        "polling, so deployed latency is mostly the two mappings' polling, not this code. Everything runs in one "
        "process on a shared machine.",
        _table(["versions seen", "p50 ms", "p90 ms", "p99 ms", "min ms", "max ms"], lat_rows),
        f"data-sync reported {lat['sync_failures']} failed records, the publisher {lat['publish_failures']}, the "
        f"consumer retried {lat['retried']} messages; the run took {lat['seconds']:.1f} s. Machine load (1/5/15 min) "
        f"before → after the phase: {e['load_before']} → {e['load_after']}.",
    ])


def _sequences_section(r: dict) -> str:
    q = r["sequences"]
    return "\n\n".join([
        "## Sequence draws against DynamoDB Local",
        "`cargo bench -p cqrs-command-handler --bench sequences` (`functions/command-handler/benches/sequences.rs`): "
        f"{q['draws']:,} draws of one counter, {q['in_flight']} in flight (the worst case of a sequence: DynamoDB applies "
        "the updates of one item one after the other), each on a fresh counter after a warm-up: raw `UpdateItem` "
        "(`SET seq = if_not_exists(seq, 0) + 1`, nothing else) beside `POST /sequences/{typeCode}/next` through the "
        "command handler in-process (two `BatchGetItem` of the format and the time zone setting, with their `common` "
        "fallback, the `UpdateItem`, the formatting). Both check that every number from 1 to N came once. The figure "
        "that matters is the ratio: the share of the raw counter rate a draw keeps.",
        _table(["raw UpdateItem updates/s", "draws/s", "draws ÷ raw"],
               [[_rate(q["raw_updates_s"]), _rate(q["draws_s"]), f"**{_ratio(q['ratio'])}**"]]),
    ])


def _size_section(r: dict) -> str:
    parts = ["## 4. Size and memory"]
    s = r.get("sizes")
    if s:
        goal = s.get("goal_bytes", SIZE_GOAL_BYTES)
        rows = []
        for name in OURS + ("floor-create", "floor-get", "floor-batch", "bench-floor"):
            arm = s["arm64"].get(name)
            x86 = s["x86_64"].get(name)
            if name not in OURS and not arm and not x86:
                continue  # a floor this run did not build
            if name in OURS:
                verdict = ("met" if arm["bytes"] <= goal else "not met") if arm else "n/a"
            else:
                verdict = "(reference)"
            rows.append([
                f"`{name}`",
                _mib2(arm["bytes"]) if arm else "n/a",
                _mib(arm["zip_bytes"]) if arm else "n/a",
                _mib(x86["bytes"]) if x86 else "n/a",
                verdict,
            ])
        n = s["node"]
        rows.append([
            "Node: `@mbc-cqrs-serverless/core` + dependencies",
            f"{_mib(n['bytes'])} in {n['files']:,} files ({n['packages']} packages; the package alone {_mib(n['core_bytes'])})",
            _mib(n["zip_bytes"]),
            "(same)",
            "",
        ])
        built = {v.get("built") for v in s["arm64"].values()}
        parts.append(
            "Deployment size. arm64: `target/lambda/<bin>/bootstrap` from `cargo lambda build --release --arm64` "
            "(zig as the linker; the same command `sam build` runs for the template), built by the bench command "
            f"(files dated {', '.join(sorted(b for b in built if b))}). *zip* = deflate level 6 of what would be "
            "uploaded. The Node row is the installed `node_modules` of the bench (without the Node runtime, which "
            f"Lambda provides). Goal: each of our arm64 bootstraps at most {_mib2(goal)} ({goal:,} bytes)."
        )
        parts.append(_table(["function", "arm64 bootstrap", "zip", "x86_64 release", f"≤ {_mib2(goal)}"], rows,
                            "lrrrl"))
    m = r.get("memory")
    if m:
        rows = []
        for size in sorted(m["sizes"], key=int):
            e = m["sizes"][size]
            rows.append([f"{int(size):,} records ({e['items']} items x 4 versions)", _kb_mib(e["hwm_median_kb"]),
                         _kb_mib(e["hwm_max_kb"])])
        big = m.get("big")
        if big:
            rows.append([f"{big['records']:,} records ({big['items']:,} items x 4 versions, "
                         f"{big['event_bytes'] / 1e6:.2f} MB event; goal: at most 64 MiB)",
                         _kb_mib(big["hwm_median_kb"]), _kb_mib(big["hwm_max_kb"])])
        c = r.get("cold", {}).get("candidates", {})
        if "data-sync" in c:
            rows.insert(0, ["1 record (the cold-path runs)", _kb_mib(c["data-sync"]["hwm_median_kb"]), ""])
        parts.append(
            f"Peak RSS of the release `data-sync` (x86_64) on one batch, {m['runs']} runs, each a fresh process on "
            "fresh tables: `VmHWM` (the process's resident high-water mark since `exec`) read from "
            "`/proc/<pid>/status` when the response arrives, before the stand-in replies."
        )
        parts.append(_table(["batch", "peak RSS (median)", "peak RSS (max)"], rows))
    return "\n\n".join(parts)


def _report_section(r: dict) -> str:
    p = r["report"]
    rows = [
        [str(i + 1), f"{x['raw']['items']:,}", f"{x['raw']['s']:.2f}", _rate(x["raw"]["items_s"]),
         f"{x['report']['s']:.2f}", _rate(x["report"]["items_s"]), _ratio(x["report"]["items_s"] / x["raw"]["items_s"])]
        for i, x in enumerate(p["rounds"])
    ]
    rows.append(["median", "", "", _rate(p["raw_items_s"]), "", _rate(p["report_items_s"]), _ratio(p["ratio"])])
    seeded = f" (seeded in {p['seed_s']:.0f} s with BatchWriteItem)" if p.get("seed_s") else ""
    profile = "" if p.get("profile", "bench") == "bench" else f" Built with the `{p['profile']}` profile, not optimised."
    return "\n\n".join([
        "## `cqrs report` against a raw parallel scan",
        f"`cargo bench -p cqrs-cli --bench report` (`tools/cli/benches/report.rs`): a data table of {p['items']:,} items "
        f"in DynamoDB Local{seeded}, read by a raw parallel scan ({p['segments']} segments, items counted and dropped) "
        f"and by `cqrs report --segments {p['segments']} --json --html` (the process from start to exit: SDK set-up, "
        "DescribeTable, the same scan, item sizes, partition counts per entity and index, top lists, Gini, "
        "percentiles, the JSON and the HTML page), in interleaved rounds. Last column: report items/s ÷ raw scan "
        f"items/s; 1.0 would mean the report costs nothing beyond the scan.{profile}",
        _table(["round", "items", "raw scan s", "raw items/s", "report s", "report items/s", "report ÷ raw"], rows),
    ])


# ------------------------------------------------------------------------------------ findings ---


def _cold_findings(r: dict) -> list[str]:
    """The issue's cold, init and warm goals, one line each, with their verdicts; then Node."""
    out = []
    cold = r.get("cold")
    pairs = (cold or {}).get("pairs") or []
    if not cold:
        out.append(f"- **Goal: cold path ≤ {RATIO_GOAL}x the hand-written floor**: not measured in this run (no cold phase).")
    elif not pairs:
        out.append(f"- **Goal: cold path ≤ {RATIO_GOAL}x the hand-written floor**: not measured in this run (no floor "
                   "binaries `floor-create`, `floor-get`, `floor-batch`).")
    else:
        c = cold["candidates"]
        words = []
        for p in pairs:
            text = (f"`{p['ours']}` {_ms(c[p['ours']]['median_ms'])} ms ÷ `{p['floor']}` "
                    f"{_ms(c[p['floor']]['median_ms'])} ms = {_ratio(p['ratio'])} (95 % CI {_ci(p)}): "
                    f"**{_goal(p['ratio'])}**, CI upper bound ≤ {RATIO_GOAL}: {_upper(p)}")
            if _goal(p["ratio"]) == "not met":
                text += (f"; our median minus the floor's: init {p['init_diff_ms']:+.2f} ms, first invocation "
                         f"{p['invoke_diff_ms']:+.2f} ms")
            words.append(text)
        runs = min(c[n]["n"] for p in pairs for n in (p["ours"], p["floor"]))
        out.append(f"- **Goal: cold path ≤ {RATIO_GOAL}x the hand-written floor** (ratio of medians, at least {runs} "
                   "runs each, interleaved): " + "; ".join(words) + ".")
    if cold:
        c = cold["candidates"]
        ours = {n: c[n]["median_ms"] for n in OURS if n in c}
        node = c.get("node-mbc", {}).get("median_ms")
        echo = c.get("bench-floor", {}).get("median_ms")
        if ours and not _nan(node):
            lo, hi = min(ours.values()), max(ours.values())
            text = (f"- **Cold path against Node and the echo**: our three functions answer their first request "
                    f"{_ms(lo)}{NBSP_DASH}{_ms(hi)} ms after process start (medians), the Node handler built on "
                    f"`@mbc-cqrs-serverless/core` {_ms(node)} ms: {_ratio(lo / node)}{NBSP_DASH}{_ratio(hi / node)} of "
                    "its time")
            if not _nan(echo):
                text += (f"; {_ratio(lo / echo)}{NBSP_DASH}{_ratio(hi / echo)}x the Rust echo's {_ms(echo)} ms "
                         "(which makes no DynamoDB call)")
            out.append(text + ".")
        if "node-floor" in c and "node-mbc" in c:
            nf, nm = c["node-floor"], c["node-mbc"]
            out.append(
                f"- **Node's cold path is the package**: a Node echo with the same runtime loop answers in "
                f"{_ms(nf['median_ms'])} ms; loading `@mbc-cqrs-serverless/core` (its index loads NestJS, "
                "class-validator, the swagger decorators and six AWS SDK v3 clients), building its services and making "
                f"the first call adds {_ms(nm['median_ms'] - nf['median_ms'])} ms, of which "
                f"{_ms(nm['init_median_ms'] - nf['init_median_ms'])} ms before the first `next`. This is a lower bound for "
                "a real mbc-cqrs-serverless function, which also bootstraps a NestJS application before its first "
                "answer; we did not build one. In AWS both sides would also pay a TLS handshake with DynamoDB on the "
                "first call (DynamoDB Local here is plain HTTP)."
            )
        breakdown = cold.get("init_breakdown") or {}
        logged = [n for n in OURS if breakdown.get(n, {}).get("n")]
        if logged:
            words = []
            for n in logged:
                b = breakdown[n]
                top = sorted(b["phases"].items(), key=lambda kv: -kv[1]["median_us"])[:2]
                words.append(f"`{n}` init {_ms2(b['init_median_ms'])} ms, of which logged "
                             f"{b['logged_median_us'] / 1000:.2f} ms (largest: "
                             + ", ".join(f"`{k}` {v['median_us'] / 1000:.2f} ms" for k, v in top)
                             + f"), outside the logged phases {_ms2(b['outside_ms'])} ms")
            missing = [n for n in OURS if n in c and n not in logged]
            tail = f"; not logged by {', '.join(f'`{n}`' for n in missing)}" if missing else ""
            text = (f"- **Goal: init broken down**: given for {len(logged)} of {len(OURS)} functions (section 2b, "
                    "medians): " + "; ".join(words) + tail + ".")
            roots, ch = c.get("command-handler-system-roots"), c.get("command-handler")
            if roots and ch:
                text += (f" Loading the system's TLS roots instead of the compiled-in ones (`CQRS_TLS_ROOTS=system`) "
                         f"changes command-handler's init by {roots['init_median_ms'] - ch['init_median_ms']:+.2f} ms.")
            out.append(text)
        else:
            out.append("- **Goal: init broken down**: not given by this run: no function logged its `cold start init` "
                       "line.")
    else:
        out.append("- **Goal: init broken down**: not measured in this run (no cold phase).")
    w = r.get("warm")
    wp = (w or {}).get("pairs") or []
    title = f"- **Goal: warm p50 and p99 ≤ {RATIO_GOAL}x the floor**"
    if not w:
        out.append(f"{title}: not measured in this run (no warm phase).")
    elif not wp:
        out.append(f"{title}: not measured in this run (no floor binaries).")
    else:
        words = []
        for p in wp:
            met = p["p50"]["ratio"] <= RATIO_GOAL and p["p99"]["ratio"] <= RATIO_GOAL
            words.append(f"`{p['ours']}` p50 {_ratio(p['p50']['ratio'])} (95 % CI {_ci(p['p50'])}), p99 "
                         f"{_ratio(p['p99']['ratio'])}: **{'met' if met else 'not met'}**")
        failed = sum(s["failed"] for s in w["candidates"].values())
        tail = f" {failed} requests failed (section 2c)." if failed else ""
        n = min(w["candidates"][x]["n"] for p in wp for x in (p["ours"], p["floor"]))
        processes = f"{w['rounds']} process{'es' if w['rounds'] != 1 else ''}"
        out.append(f"{title} (at least {n} timed requests each, {processes} of {w['requests']}): "
                   + "; ".join(words) + "." + tail)
    ins = r.get("instructions") or {}
    if ins.get("pairs"):
        words = [f"`{p['ours']}` {_ratio(p['per_request_ratio'])} per warm request, {_ratio(p['first_ratio'])} for "
                 "the first event (init included)" for p in ins["pairs"]]
        out.append("- **Instructions, ours ÷ floor** (callgrind, section 2d; a count, unaffected by the machine's "
                   "load): " + "; ".join(words) + ".")
    return out


def _size_findings(r: dict) -> list[str]:
    out = []
    s = r.get("sizes")
    title = "- **Goal: release arm64 bootstraps ≤ 8 MiB each**"
    if s and any(n in s["arm64"] for n in OURS):
        goal = s.get("goal_bytes", SIZE_GOAL_BYTES)
        words = [f"`{n}` {_mib2(s['arm64'][n]['bytes'])} ({'met' if s['arm64'][n]['bytes'] <= goal else 'not met'})"
                 for n in OURS if n in s["arm64"]]
        met = all(s["arm64"][n]["bytes"] <= goal for n in OURS if n in s["arm64"])
        floors = [f"`{n}` {_mib2(s['arm64'][n]['bytes'])}" for n in ("floor-create", "floor-get", "floor-batch")
                  if n in s["arm64"]]
        text = f"{title}: **{'met' if met else 'not met'}**: " + ", ".join(words)
        if floors:
            text += "; the floors: " + ", ".join(floors)
        text += (f". The Node package's installed dependencies weigh {_mib(s['node']['bytes'])} "
                 f"({_mib(s['node']['zip_bytes'])} zipped).")
        out.append(text)
    else:
        out.append(f"{title}: not measured in this run (no arm64 bootstraps).")
    pr = r.get("profiles")
    if pr:
        base = pr["profiles"].get("release", {})
        words = []
        for name in pr["names"]:
            e = pr["profiles"][name]
            if not e["arm64"] and not e.get("measured"):
                words.append(f"`{name}` not built")
                continue
            text = f"`{name}` max {_mib2(e.get('arm64_max_bytes'))}" if e["arm64"] else f"`{name}` size n/a"
            if name != "release" and e.get("measured") and base.get("measured"):
                cold = [_div(e["cold"][fn]["median_ms"], base["cold"][fn]["median_ms"]) for fn in OURS]
                warm = [_div(e["warm"][fn]["p50_ms"], base["warm"][fn]["p50_ms"]) for fn in OURS]
                text += (f", cold {_ratio(min(cold))}{NBSP_DASH}{_ratio(max(cold))} and warm p50 "
                         f"{_ratio(min(warm))}{NBSP_DASH}{_ratio(max(warm))} of `release`'s")
            elif e.get("measured") and name == "release":
                text += " (the reference)"
            words.append(text)
        out.append("- **Profiles** (section 4b, arm64 size; speed relative to `release` per function): "
                   + "; ".join(words) + ".")
    return out


def _findings(r: dict) -> str:
    out = []
    if "keys" in r:
        k = r["keys"]
        from run import KEY_OPS

        ratios = {name: k["rust"][name]["median_ns"] / k["node"][name]["median_ns"] for name, *_ in KEY_OPS}
        fmt = lambda names: ", ".join(f"`{n}` ({_ratio(ratios[n])})" for n in names)  # noqa: E731
        faster = [n for n, x in ratios.items() if x < 0.5]
        close = [n for n, x in ratios.items() if 0.5 <= x <= 1]
        slower = [n for n, x in ratios.items() if x > 1]
        text = (
            f"- **Key operations**: Rust ÷ Node ranges from {_ratio(min(ratios.values()))} to "
            f"{_ratio(max(ratios.values()))}. "
        )
        if faster:
            text += f"Clearly faster (under half of Node's time): {fmt(faster)}. "
        if close:
            text += (
                f"Closer than we expected (half of Node's time or more): {fmt(close)}: V8 builds a concatenation as a "
                "rope (a `ConsString`, two pointers, no copy) and `substring` as a slice, while the Rust functions "
                "allocate and copy a new `String` (the copy is paid later in Node, when the string is hashed or "
                "serialised) and, for composite keys, validate every component. "
            )
        if slower:
            text += (
                f"**Slower than Node**: {fmt(slower)}. This is our validation, not the language: the Node column "
                "checks nothing, while `cqrs-keys` checks every part: a scan for `#`, `@` and control characters, "
                "a second pass for empty segments and the DynamoDB length limit, on top of the split itself. "
            )
        out.append(text.rstrip())
        ref = k["rust"]
        pairs = [
            ("composite_key", "composite_key_join_unvalidated", "a plain `join`"),
            ("parse_composite_key", "parse_composite_key_split_unvalidated", "a plain `split`"),
            ("parse_entity_key", "parse_entity_key_split_unvalidated", "a plain `split_once`"),
        ]
        parts = [
            f"`{a}` {_ns(ref[a]['median_ns'])} ns against {_ns(ref[b]['median_ns'])} ns for {what} "
            f"({ref[a]['median_ns'] / ref[b]['median_ns']:.1f}x)"
            for a, b, what in pairs
            if a in ref and b in ref
        ]
        out.append(
            "- **Validation is most of the cost of the composite and entity keys**: " + "; ".join(parts) + ". "
            "Without it Rust is well ahead of Node on these rows too (see the italic rows). The checks refuse bad "
            "keys at the boundary, which the Node package does not do. They already scan bytes, not characters (the "
            "separators and controls are single bytes, or `0xC2` pairs, in UTF-8): replacing the per-character "
            "scan with that did not move these rows much, so what is left is the number of passes over each key, "
            "not the decoding. One fused pass per key is the next thing to try."
        )
    out += _cold_findings(r)
    if "projection" in r:
        p = r["projection"]["sizes"]
        med = {int(s): statistics.median(x["ratio_conc"] for x in runs) for s, runs in p.items() if runs}

        def verdict(ratio: float, goal: float) -> str:
            return "meets the goal" if ratio >= goal else "short of the goal"

        words = []
        for size, ratio in sorted(med.items()):
            spread = [x["ratio_conc"] for x in p.get(size, p.get(str(size), []))]
            words.append(f"{size:,} records of 4 versions per item: {_ratio(ratio)}, "
                         f"{verdict(ratio, 1.0) if size == 1000 else 'the small batch'} "
                         f"(runs {_ratio(min(spread))}{NBSP_DASH}{_ratio(max(spread))})")
        single = r["projection"].get("single") or []
        if single:
            ratio = statistics.median(x["ratio_conc"] for x in single)
            spread = [x["ratio_conc"] for x in single]
            words.append(f"1,000 records of one version per item: {_ratio(ratio)}, {verdict(ratio, 0.6)} "
                         f"(runs {_ratio(min(spread))}{NBSP_DASH}{_ratio(max(spread))})")
        big = med.get(1000)
        binary = ""
        m = r.get("memory", {}).get("sizes", {})
        big_bin = m.get(1000) or m.get("1000")
        if big_bin and big and p.get(1000, p.get("1000")):
            bench_rate = statistics.median(x["proj_records_s"] for x in p.get(1000, p.get("1000")))
            binary = (
                f" Through the release binary and the Runtime API stand-in (event parsing, logging and the runtime "
                f"included, fresh process) the 1 000-record batch runs at {_rate(big_bin['records_per_s'])} records/s, "
                f"{_ratio(big_bin['records_per_s'] / bench_rate)} of the bench's median."
            )
        rebuild = r["projection"].get("rebuild") or []
        rebuild_text = ""
        if rebuild:
            rebuild_text = (
                f" `cqrs rebuild` re-projects {_rate(statistics.median(x['rebuild_items_s'] for x in rebuild))} items/s, "
                f"{_ratio(statistics.median(x['ratio_conc'] for x in rebuild))} of raw concurrent puts."
            )
        out.append(
            "- **Projection against the store** (projection records/s ÷ raw PutItem/s at 32 in flight; goals 1.0 with "
            "4 versions per item, 0.6 with one): " + "; ".join(words) + ". A batch's versions collapse into one data "
            "write per item and history goes in batch writes of 25, so 4 versions per item cost about a quarter of the "
            "round trips of raw puts; with one version per item every record still costs a history row and a data "
            "write, after one batch read and the batch writes." + rebuild_text +
            " Each figure is one timed batch, so the runs scatter widely; DynamoDB Local (a JVM on the same 2 CPUs) is "
            "the bottleneck of every figure here, so the absolute rates say little about DynamoDB itself."
            + binary
        )
    out += _size_findings(r)
    if "memory" in r:
        m = r["memory"]["sizes"]
        small, big = m.get(100) or m.get("100"), m.get(1000) or m.get("1000")
        if small and big:
            ratio = big["hwm_median_kb"] / small["hwm_median_kb"]
            out.append(
                f"- **Memory**: data-sync peaks at {_kb_mib(big['hwm_median_kb'])} on a 1 000-record batch "
                f"({big['event_bytes'] / 1024:,.0f} KiB of JSON) and {_kb_mib(small['hwm_median_kb'])} on 100 records "
                f"({ratio:.1f}x for 10x the records): the event's text, its typed records and the items built from them "
                "are all held until the batch is answered. "
                f"The 1 000-record peak is {_ratio(big['hwm_median_kb'] / (256 * 1024))} of the template's 256 MB."
            )
        largest = r["memory"].get("big")
        if largest:
            peak = largest["hwm_max_kb"]
            out.append(
                f"- **Lambda's largest batch** ({largest['records']:,} records, {largest['event_bytes'] / 1e6:.2f} MB of "
                f"JSON, inside the 6 MB invocation payload): peak RSS {_kb_mib(largest['hwm_median_kb'])} (median), "
                f"{_kb_mib(peak)} at most, {'within' if peak <= 64 * 1024 else 'over'} the 64 MiB goal; the batch "
                f"projected in {_ms(largest['invoke_median_ms'])} ms ({_rate(largest['records_per_s'])} records/s)."
            )
    if "sql" in r:
        q = r["sql"]
        words = [f"{x['batch']:,}-record batches, {x['pass']}s: {_ratio(x['ratio'])}" for x in q["rates"]]
        worst = min(x["ratio"] for x in q["rates"])
        mapped = _sql_batch_size()
        at_mapped = [x["ratio"] for x in q["rates"] if x["batch"] == mapped]
        verdict = f"**{'met' if worst >= 0.8 else 'not met'}** (lowest {_ratio(worst)})"
        if at_mapped and worst < 0.8 <= min(at_mapped):
            verdict = (
                f"**met at the batch size of sql-sync's mapping in `template.yaml` ({mapped:,}): lowest "
                f"{_ratio(min(at_mapped))}**; not in smaller batches (lowest {_ratio(worst)}), where a batch's "
                "first chunk is converted before PostgreSQL has anything to write"
            )
        writes = [x["writes_rows_s"] / x["raw_rows_s"] for x in q["rates"] if x.get("writes_rows_s")]
        split = ""
        if writes:
            split = (
                f"Its statements alone, on the same prepared rows, run at {_ratio(min(writes))}{NBSP_DASH}"
                f"{_ratio(max(writes))} of raw (one statement per batch that also keeps the generic table and the "
                "removals in check and counts what it wrote); the rest is converting each record's image into an item "
                "and a row, and freeing them, which the pipeline hides behind PostgreSQL's work except for a batch's "
                "first chunk. "
            )
        values = [x["sql_sync_rows_s"] / x["values_rows_s"] for x in q["rates"] if x.get("values_rows_s")]
        if values:
            split += (
                f"Beside raw upserts in the `VALUES` form (a new statement each batch), sql-sync writes "
                f"{_ratio(min(values))}{NBSP_DASH}{_ratio(max(values))}x as many rows a second. "
            )
        m = q["memory"]
        out.append(
            "- **Goal: sql-sync at least 0.8x raw batched upserts** (rows/s into the same PostgreSQL, medians): "
            + "; ".join(words) + f": {verdict}. " + split +
            f"Peak RSS on Lambda's largest batch of the data table's stream ({m['records']:,} update records, "
            f"{q['event_bytes'] / 1048576:.2f} MiB of JSON): {_kb_mib(m['peak_kib'])}, of which "
            f"{_kb_mib(m['before_kib'])} before the batch."
        )
    if "events" in r:
        t, lat = r["events"]["throughput"], r["events"]["latency"]
        out.append(
            f"- **Goal: a consumer at least 0.8x raw SQS** (events/s through the same local FIFO queue, send + drain, "
            f"medians of {t['repeats']} alternated runs): consumer {_rate(t['consumer']['events_s'])}, raw "
            f"{_rate(t['raw']['events_s'])}: {_ratio(t['ratio'])}, **{'met' if t['ratio'] >= 0.8 else 'not met'}**; "
            f"drain alone (the sends, the same on both sides, left out): {_ratio(t['drain_ratio'])}, "
            f"{'met too' if t['drain_ratio'] >= 0.8 else 'not met'} (consumer {_rate(t['consumer']['drain_events_s'])}, "
            f"raw {_rate(t['raw']['drain_events_s'])} events/s). Command→consumer latency through data-sync, "
            f"the publisher, SNS FIFO and SQS FIFO (in process, moto, DynamoDB Local): p50 {_ms(lat['p50_ms'])} ms, "
            f"p99 {_ms(lat['p99_ms'])} ms over {lat['seen']:,} versions, mostly the polling intervals chosen "
            f"({lat['stream_poll_ms']} ms a stream, {lat['sqs_poll_ms']} ms the queue)."
        )
    if "report" in r:
        p = r["report"]
        pace = (
            "the scan sets the pace; the report's own work costs little beyond it."
            if p["ratio"] >= 0.8
            else "the report's own work (item sizes, counts, the JSON and HTML) and its start cost a visible share "
            "beyond the scan."
        )
        out.append(
            f"- **`cqrs report`** reads {p['items']:,} items at {_rate(p['report_items_s'])} items/s, "
            f"{_ratio(p['ratio'])} of a raw parallel scan's {_rate(p['raw_items_s'])} items/s over the same "
            f"{p['segments']} segments (medians of {len(p['rounds'])} rounds): {pace}"
        )
    return "\n".join(out)


def _patterns_section(r: dict) -> str:
    p = r["patterns"]
    rows = []
    for x in p["rows"]:
        rows.append([x["pattern"], str(x["limit"]), str(x["pages"]), _ms(x["p50_ms"]), _ms(x["p95_ms"]),
                     f"{x['entries_per_item']:.2f}", f"{x['queries_per_page']:.1f}"])
    by = {(x["pattern"], x["limit"]): x for x in p["rows"]}
    ratios = []
    for limit in sorted({x["limit"] for x in p["rows"]}):
        fan, one = by.get(("fan-out (10 shards)", limit)), by.get(("single partition", limit))
        if fan and one and one["p50_ms"]:
            ratios.append(f"pages of {limit}: a fan-out page's p50 is {fan['p50_ms'] / one['p50_ms']:.1f}x a single-partition page's")
    return "\n\n".join([
        "## 6. Access patterns: a 10-shard fan-out beside one partition",
        f"`cargo bench -p cqrs-query-handler --bench patterns` (`functions/query-handler/benches/patterns.rs`): {p['items']:,} "
        "orders of one user, all `PENDING`, written into a fresh data table with their index keys. `orders_by_status` "
        "spreads them uniformly over 10 write shards (gsi2, keys only); `orders_of_user` holds them in one partition "
        "(gsi1). Both are read to the end, pages interleaved, through the query handler's reader: a query per shard "
        "(concurrently, each for its share of the page), the merge, and one `BatchGetItem` of the page's items from the "
        "data table. **Index entries per item** is the read amplification (a naive fan-out that reads `limit` from every "
        "shard reads 10 per item; the goal is at most 2.0). Every page also reads its items once from the data table.",
        _table(["pattern", "limit", "pages", "page p50", "page p95", "index entries per item", "queries per page"], rows),
        "; ".join(ratios) + "." if ratios else "",
    ])


def render(r: dict) -> str:
    sections = [
        "# Benchmarks: cqrs-dynamo (Rust) beside @mbc-cqrs-serverless/core (Node)",
        "Generated by `make bench` (`scripts/bench.sh`); do not edit by hand, re-run the command. Every table comes from "
        "the one run described below, on a shared and noisy machine: the figures report, they do not assert, and every "
        "comparison is a ratio of two things measured in the same run. Raw results: `.local/bench/results.json`.",
        _header(r),
        "## Findings in plain words",
        _findings(r),
    ]
    if "keys" in r:
        sections.append(_keys_section(r))
    if "cold" in r:
        sections.append(_cold_section(r))
        sections.append(_init_section(r))
    if "warm" in r:
        sections.append(_warm_section(r))
    if "instructions" in r:
        sections.append(_instructions_section(r))
    if "projection" in r:
        sections.append(_projection_section(r))
    if "sql" in r:
        sections.append(_sql_section(r))
    if "events" in r:
        sections.append(_events_section(r))
    if "sequences" in r:
        sections.append(_sequences_section(r))
    if "sizes" in r or "memory" in r:
        sections.append(_size_section(r))
    if "profiles" in r:
        sections.append(_profiles_section(r))
    if "report" in r:
        sections.append(_report_section(r))
    write_cost = Path(__file__).with_name("write-cost.md")  # kept by hand: WCU per command
    if write_cost.exists():
        sections.append(write_cost.read_text().strip())
    if "patterns" in r:
        sections.append(_patterns_section(r))
    sections.append(
        "## Reproduce\n\n"
        "```sh\nmake bench          # = bash scripts/bench.sh\n```\n\n"
        "Needs the Rust toolchain, Python 3 and root or sudo for `apt-get` (Node.js/npm, Java 17 and valgrind when missing). The "
        "command installs the pinned npm packages (`bench/node/package.json`) into `.local/bench-node`, DynamoDB Local "
        "into `.local/` (`cqrs dynamodb-local install`), PostgreSQL from apt for the sql phase, cargo-lambda, zig and moto (the events phase's SNS/SQS server) into `.venv` (`scripts/tools.sh`); builds the "
        "release binaries (x86_64 for the runs, arm64 for the sizes; the same for every profile of `BENCH_PROFILES`); starts a private DynamoDB Local on 127.0.0.1; "
        "runs `bench/run.py`; rewrites this file. Knobs: `BENCH_COLD_RUNS`, `BENCH_WARM_ROUNDS`, `BENCH_PROFILES`, "
        "`BENCH_PROFILE_COLD_RUNS`, `BENCH_MEMORY_RUNS`, `BENCH_PROJECTION_REPEATS`, `BENCH_ONLY=keys,cold,...` (a "
        "partial run writes `.local/bench/BENCHMARKS.partial.md`); the full list is in `bench/run.py`'s docstring. "
        "Nothing reaches AWS: every endpoint is 127.0.0.1 and the credentials are dummies."
    )
    return "\n\n".join(s for s in sections if s) + "\n"
