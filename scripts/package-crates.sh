#!/usr/bin/env bash
# Every framework crate packages, and builds from its package against the others as packaged
# (`cargo package --workspace`, with verification): what a service gets when it depends on them.
# Left out: what is not the framework's (the example service, the reliability suite, the bench
# floors, the local stack's helper). make test runs it after the workspace's tests.
#
# The verification builds use the workspace's dev profile, so that they share the dependencies the
# tests built. Cargo extracts the packaged crates into a registry of its own under CARGO_HOME
# (`registry/src/-<hash>/`) and, as for any registry crate, never looks at them again while their
# version stays the same: a second run after a change to a crate (still 0.1.0) would build the first
# run's copy. So the copies of our crates a previous run extracted, and what was built from them, go
# first.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo_home=${CARGO_HOME:-$HOME/.cargo}
target=$(cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
for depinfo in "$target"/debug/deps/cqrs_*.d; do
    [[ -e $depinfo ]] || continue
    if grep -q "$cargo_home/registry/src/-" "$depinfo"; then
        hash=${depinfo##*-}
        hash=${hash%.d}
        rm -rf "$target"/debug/.fingerprint/*-"$hash" "$target"/debug/deps/*-"$hash"*
    fi
done
rm -rf "$cargo_home"/registry/src/-*/cqrs-*

cargo package --workspace --locked --allow-dirty \
    --exclude cqrs-example-shop --exclude reliability --exclude bench-floor \
    --config 'profile.dev.debug="line-tables-only"' --config 'profile.dev.package."*".debug=false'
