#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded time (the test command runs it briefly).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]    # default: 20 seconds for each target of `fuzz/`
#   scripts/fuzz.sh 3600 command_body        # one target for an hour
#
# Targets (fuzz/fuzz_targets/): `keys` (the key crate's parsers and validators), `command_body`
# (the command handler's body parsing), `query_request` (the query handler's route, path
# segments, query parameters and cursors). Each starts from the committed seeds in
# fuzz/seeds/<target> and grows its corpus in fuzz/corpus/<target> (ignored by git), so longer
# and repeated runs go deeper. A crash stops the script with a non-zero status; libFuzzer prints
# the input, saved under fuzz/artifacts/<target>/, and `cargo fuzz run <target> <file>` replays it.
#
# Needs only the stable toolchain: cargo-fuzz (pinned, installed once into .local/cargo) passes
# nightly flags (-Zsanitizer=address, coverage instrumentation), which RUSTC_BOOTSTRAP=1 lets the
# stable compiler accept. The first run builds the targets with the sanitizer (several minutes
# on 2 cores: the handlers pull in the AWS SDK); later runs reuse fuzz/target.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || {
	echo "usage: $0 [SECONDS] [TARGET...]" >&2
	exit 2
}

CARGO_FUZZ_VERSION=0.13.1
root=.local/cargo
if [[ $("$root/bin/cargo-fuzz" --version 2>/dev/null) != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
	echo "==> installing cargo-fuzz $CARGO_FUZZ_VERSION into $root (once, about a minute)"
	cargo install --quiet --root "$root" --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
export PATH="$PWD/$root/bin:$PATH"
export RUSTC_BOOTSTRAP=1

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
	mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi

# FUZZ_QUICK=1 (the test command): an unoptimised build without sanitizer instrumentation. It
# compiles in a fraction of the time (the AWS SDK is in the handlers' dependency tree) and still
# catches every panic, which is what safe Rust code can do wrong; for long runs leave it unset.
build_flags=()
if [[ -n ${FUZZ_QUICK:-} ]]; then build_flags=(--dev --sanitizer none); fi

echo "==> building the fuzz targets (${targets[*]}) ${build_flags[*]}"
cargo fuzz build --fuzz-dir fuzz "${build_flags[@]}"
# FUZZ_BUILD_ONLY=1: install and build, run nothing (the test command builds in the background
# while the end-to-end checks run, which leave a core idle, and runs the targets afterwards).
if [[ -n ${FUZZ_BUILD_ONLY:-} ]]; then exit 0; fi

for target in "${targets[@]}"; do
	corpus=fuzz/corpus/$target
	mkdir -p "$corpus"
	seeds=()
	[[ -d fuzz/seeds/$target ]] && seeds=("fuzz/seeds/$target")
	log=$(mktemp)
	echo "==> fuzzing $target for ${seconds}s"
	if ! cargo fuzz run --fuzz-dir fuzz "${build_flags[@]}" "$target" "$corpus" "${seeds[@]}" -- \
		-max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
		>"$log" 2>&1; then
		tail -n 60 "$log" >&2
		rm -f "$log"
		echo "fuzz: $target FAILED: see the input above, saved under fuzz/artifacts/$target/" >&2
		exit 1
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | tr -dc 0-9)
	rm -f "$log"
	echo "fuzz: $target: ${runs:-?} inputs in ${seconds}s, coverage ${coverage:-?} edges, corpus $(find "$corpus" -type f | wc -l) files, no crash"
done
