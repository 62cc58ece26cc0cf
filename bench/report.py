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


def _times(r: float) -> str:
    """'12x' for a ratio below 1 seen from the other side."""
    return f"{1 / r:,.0f}x" if 1 / r >= 10 else f"{1 / r:.1f}x"


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
    for phase in ("keys", "cold", "memory", "projection", "report", "sequences"):
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


def _cold_section(r: dict) -> str:
    c = r["cold"]["candidates"]
    node = c["node-mbc"]["median_ms"]
    floor = c["bench-floor"]["median_ms"]
    rows = []
    for name in ("bench-floor", "command-handler", "command-handler-1root", "query-handler", "data-sync", "node-floor", "node-mbc"):
        if name not in c:
            continue
        s = c[name]
        failed = f" ({len(s['failures'])} failed)" if s["failures"] else ""
        rows.append([
            f"`{name}`", s["label"],
            f"{s['n']}{failed}", _ms(s["median_ms"]),
            f"{_ms(s['p25_ms'])}{NBSP_DASH}{_ms(s['p75_ms'])}",
            f"{_ms(s['p10_ms'])}{NBSP_DASH}{_ms(s['p90_ms'])}",
            f"{_ms(s['min_ms'])}{NBSP_DASH}{_ms(s['max_ms'])}",
            _ms(s["init_median_ms"]), _ms(s["invoke_median_ms"]), _ms(s["warm_median_ms"]),
            _ratio(s["median_ms"] / node), _ratio(s["median_ms"] / floor),
            _kb_mib(s["hwm_median_kb"]),
        ])
    failures = [f"`{n}`: {s['failures'][0]}" for n, s in c.items() if s["failures"]]
    by_function = r["cold"].get("model_load_us_by_function") or {"command-handler": r["cold"].get("model_load_us") or {}}
    model_line = " ".join(
        f"Entity model in `{name}`: parsing and checking the compiled-in `model.toml` (the example model) took a "
        f"median {m['median'] / 1000:.3f} ms (p90 {m['p90'] / 1000:.3f} ms) of its init, over {m['n']} starts in "
        "these runs (the function logs it at every start)."
        for name, m in by_function.items() if m.get("median") is not None
    )
    parts = [
        "## 2. Cold path: process start to the first answered invocation",
        f"Milliseconds from spawning the process to the arrival of its first `POST .../invocation/{{id}}/response` at "
        f"the Runtime API stand-in (`bench/runtime_api.py`, Python, 127.0.0.1), {r['cold']['runs']} runs each, the "
        "candidates interleaved in a shuffled order every round so that they share the machine's noise, after one "
        "uncounted warm-up round. Rust: x86_64 release builds (`cargo build --release`: thin LTO, 1 codegen unit, "
        "panic=abort, stripped). Node: `bench/node/runtime.js`, a Runtime API client of the same protocol. Every "
        "invocation that touches DynamoDB makes a real call to DynamoDB Local over plain HTTP on 127.0.0.1 (the "
        "create writes a new item each run; the GET reads an item that exists). *init* = spawn to the first "
        "`GET .../next` (process start, configuration, SDK client); *first invocation* = event handed out to "
        "response (includes the first connection to DynamoDB, credential and endpoint resolution, the call); "
        "*2nd (warm)* = a second, equal event to the same process (not part of the cold path: it shows what the "
        "call itself costs once everything is set up, DynamoDB Local's own time included). "
        "Peak RSS = `VmHWM` read when the first response arrives. Ratios (÷) are of the cold-path medians.",
        _table(["candidate", "first invocation does", "runs", "median ms", "p25–p75", "p10–p90", "min–max",
                "init ms", "1st invocation ms", "2nd (warm) ms", "÷ Node mbc", "÷ floor", "peak RSS"], rows, "llrrrrrrrrrrr"),
    ]
    if model_line:
        parts.append(model_line)
    if failures:
        parts.append("Failed runs (not counted): " + "; ".join(failures))
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
        "`cargo bench -p data-sync --bench projection` (`functions/data-sync/benches/projection.rs`), run "
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


def _sequences_section(r: dict) -> str:
    q = r["sequences"]
    return "\n\n".join([
        "## Sequence draws against DynamoDB Local",
        "`cargo bench -p command-handler --bench sequences` (`functions/command-handler/benches/sequences.rs`): "
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
        rows = []
        for name in ("command-handler", "query-handler", "data-sync", "bench-floor"):
            arm = s["arm64"].get(name)
            x86 = s["x86_64"].get(name)
            rows.append([
                f"`{name}`",
                _mib(arm["bytes"]) if arm else "n/a",
                _mib(arm["zip_bytes"]) if arm else "n/a",
                _mib(x86["bytes"]) if x86 else "n/a",
            ])
        n = s["node"]
        rows.append([
            "Node: `@mbc-cqrs-serverless/core` + dependencies",
            f"{_mib(n['bytes'])} in {n['files']:,} files ({n['packages']} packages; the package alone {_mib(n['core_bytes'])})",
            _mib(n["zip_bytes"]),
            "(same)",
        ])
        built = {v.get("built") for v in s["arm64"].values()}
        parts.append(
            "Deployment size. arm64: `target/lambda/<bin>/bootstrap` from `cargo lambda build --release --arm64` "
            "(zig as the linker; the same command `sam build` runs for the template), built by the bench command "
            f"(files dated {', '.join(sorted(b for b in built if b))}). *zip* = deflate level 6 of what would be "
            "uploaded. The Node row is the installed `node_modules` of the bench (without the Node runtime, which "
            "Lambda provides)."
        )
        parts.append(_table(["function", "arm64 bootstrap", "zip", "x86_64 release"], rows, "lrrr"))
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
    if "cold" in r:
        c = r["cold"]["candidates"]
        floor, node, node_floor = c["bench-floor"]["median_ms"], c["node-mbc"]["median_ms"], c["node-floor"]["median_ms"]
        names = ("command-handler", "query-handler", "data-sync")
        ours = {n: c[n]["median_ms"] for n in names}
        lo, hi = min(ours.values()), max(ours.values())
        init_over = [c[n]["init_median_ms"] - c["bench-floor"]["init_median_ms"] for n in names]
        first = [c[n]["invoke_median_ms"] for n in names]
        warm = [c[n]["warm_median_ms"] for n in names]
        first_over = [f - w for f, w in zip(first, warm)]
        rng = lambda xs: f"{_ms(min(xs))}{NBSP_DASH}{_ms(max(xs))}"  # noqa: E731
        out.append(
            f"- **Cold path, against Node**: our three functions answer their first request {_ms(lo)}{NBSP_DASH}{_ms(hi)} ms "
            f"after process start (medians), the Node handler built on `@mbc-cqrs-serverless/core` {_ms(node)} ms: "
            f"{_ratio(lo / node)}{NBSP_DASH}{_ratio(hi / node)} of its time ({_times(hi / node)} to {_times(lo / node)} faster)."
        )
        text = (
            f"- **Cold path, against the floor** (slower than we expected): {_ratio(lo / floor)}{NBSP_DASH}{_ratio(hi / floor)}x "
            f"the floor's {_ms(floor)} ms. The ratio looks poor; the milliseconds are few. Where they go: init (spawn to the first `next`) is {rng(init_over)} ms longer "
            "than the floor's: the logging set-up, the configuration, `aws_config::load_from_env()` (region and "
            "credential provider chains, the HTTP client with rustls and its crypto provider) and the DynamoDB client. "
            f"The first invocation takes {rng(first)} ms, but the same invocation on the warm process takes {rng(warm)} ms, "
            f"so only {rng(first_over)} ms of it is first-call set-up (connection, lazily resolved credentials and "
            "endpoint); the rest is the DynamoDB call itself, i.e. DynamoDB Local's own latency on this loaded machine, "
            "which the floor does not make."
        )
        if "command-handler-1root" in c:
            diag = c["command-handler-1root"]
            delta = c["command-handler"]["init_median_ms"] - diag["init_median_ms"]
            ch = c["command-handler"]
            apart = diag["init_p75_ms"] < ch["init_p25_ms"] or ch["init_p75_ms"] < diag["init_p25_ms"]
            certs = "loading the system's TLS root certificates (rustls-native-certs reads the bundle and every file of `/etc/ssl/certs`)"
            if apart and delta > 0:
                verdict = f"and the interquartile ranges do not overlap: {certs} is a real part of init"
            elif apart:
                verdict = "the diagnostic is slower, which we cannot explain"
            else:
                verdict = f"but the interquartile ranges overlap: within this run's noise, {certs} is not shown to matter"
            text += (
                f" A diagnostic run with the TLS roots cut to one certificate changes command-handler's init by "
                f"{-delta:+.1f} ms (median {_ms(ch['init_median_ms'])} ms, IQR {_ms(ch['init_p25_ms'])}{NBSP_DASH}{_ms(ch['init_p75_ms'])}, "
                f"to {_ms(diag['init_median_ms'])} ms, IQR {_ms(diag['init_p25_ms'])}{NBSP_DASH}{_ms(diag['init_p75_ms'])}), {verdict}."
            )
        out.append(text)
        node_pkg = node - node_floor
        out.append(
            f"- **Node's cold path is the package, not Node**: a Node echo with the same runtime loop answers in "
            f"{_ms(node_floor)} ms; loading `@mbc-cqrs-serverless/core` (its index loads NestJS, class-validator, "
            f"the swagger decorators and six AWS SDK v3 clients), building its services and making the first call adds "
            f"{_ms(node_pkg)} ms, of which {_ms(c['node-mbc']['init_median_ms'] - c['node-floor']['init_median_ms'])} ms "
            "before the first `next`. This is a lower bound for a real mbc-cqrs-serverless function, which also "
            "bootstraps a NestJS application before its first answer; we did not build one. In AWS both sides would also "
            "pay a TLS handshake with DynamoDB on the first call (DynamoDB Local here is plain HTTP)."
        )
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
    if "sizes" in r and r["sizes"]["arm64"]:
        s = r["sizes"]
        fn = [s["arm64"][n]["bytes"] for n in ("command-handler", "query-handler", "data-sync") if n in s["arm64"]]
        fl = s["arm64"].get("bench-floor", {}).get("bytes")
        out.append(
            f"- **Size**: the arm64 bootstraps are {_mib(min(fn))}{NBSP_DASH}{_mib(max(fn))} (zip "
            f"{_mib(min(s['arm64'][n]['zip_bytes'] for n in ('command-handler', 'query-handler', 'data-sync')))}"
            f"{NBSP_DASH}{_mib(max(s['arm64'][n]['zip_bytes'] for n in ('command-handler', 'query-handler', 'data-sync')))}), "
            + (f"against {_mib(fl)} for the floor: " if fl else "")
            + "almost all of it is the AWS SDK (aws-sdk-dynamodb with every operation's (de)serialisers, aws-config "
            "with its credential providers, the STS/SSO clients they bring and the TLS stack), not our code. The Node "
            f"package's installed dependencies weigh {_mib(s['node']['bytes'])} ({_mib(s['node']['zip_bytes'])} zipped)."
        )
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
        f"`cargo bench -p query-handler --bench patterns` (`functions/query-handler/benches/patterns.rs`): {p['items']:,} "
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
    if "projection" in r:
        sections.append(_projection_section(r))
    if "sequences" in r:
        sections.append(_sequences_section(r))
    if "sizes" in r or "memory" in r:
        sections.append(_size_section(r))
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
        "Needs the Rust toolchain, Python 3 and root or sudo for `apt-get` (Node.js/npm and Java 17 when missing). The "
        "command installs the pinned npm packages (`bench/node/package.json`) into `.local/bench-node`, DynamoDB Local "
        "into `.local/` (`scripts/dynamodb-local.sh`), cargo-lambda and zig into `.venv` (`scripts/tools.sh`); builds the "
        "release binaries (x86_64 for the runs, arm64 for the sizes); starts a private DynamoDB Local on 127.0.0.1; "
        "runs `bench/run.py`; rewrites this file. Knobs: `BENCH_COLD_RUNS`, `BENCH_MEMORY_RUNS`, "
        "`BENCH_PROJECTION_REPEATS`, `BENCH_ONLY=keys,cold,...` (a partial run writes `.local/bench/BENCHMARKS.partial.md`). "
        "Nothing reaches AWS: every endpoint is 127.0.0.1 and the credentials are dummies."
    )
    return "\n\n".join(s for s in sections if s) + "\n"
