#!/usr/bin/env bash
# Every framework crate packages, and checks from its package alone, against the others as packaged:
# what a service gets when it depends on one of them. Left out: what is not the framework's (the
# example service, the reliability suite, the bench floors). make test runs it after the workspace's
# tests.
#
# How, and why not `cargo package --workspace` with its own verification: that builds each package
# alone, resolving the features of its dependencies for it alone, so the AWS SDK, tokio and hyper
# were compiled again for nearly every crate (16 feature sets, 6 min 54 s of a CI run, growing by
# half a minute per crate). Here:
#
# 1. `cargo package --no-verify` writes each crate's `.crate` file, exactly what would be published
#    (the same file list and normalised manifest the verification would build from);
# 2. the packages are unpacked side by side into one workspace of their own, each depending on the
#    others *as packaged* (`[patch.crates-io]` to the unpacked folders, the repository's lock file);
# 3. `cargo check -p <crate>` for each, one at a time: each crate alone, with its own features, from
#    its packaged files. What the verification build caught is caught here too: a file left out of
#    the package (`include_str!` and `include_bytes!` are read when checking), a dependency or a
#    feature of one that the crate uses without declaring, a path dependency without a version. No
#    crate has a build script; code generation and linking do not depend on how the sources were
#    packaged, and the workspace's own build and tests cover them. Checking skips code generation,
#    and the metadata of a dependency checked for one feature set is reused by every crate that
#    asks for the same.
#
# The checks share the workspace's target folder and dev profile settings.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=$(cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
excluded=(cqrs-example-shop reliability bench-floor)
exclude_args=()
for name in "${excluded[@]}"; do exclude_args+=(--exclude "$name"); done
profile=(--config 'profile.dev.debug="line-tables-only"' --config 'profile.dev.package."*".debug=false')

# The framework's crates: the workspace's members but the excluded ones, as `name version`.
mapfile -t crates < <(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
excluded = set(sys.argv[1:])
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
for p in meta["packages"]:
    if p["id"] in members and p["name"] not in excluded:
        print(p["name"], p["version"])
' "${excluded[@]}")

cargo package --workspace --locked --allow-dirty --no-verify "${exclude_args[@]}"

verify="$target/package/verify"
rm -rf "$verify"
mkdir -p "$verify"
{
    echo '# Written by scripts/package-crates.sh: the framework crates as packaged, checked one by one.'
    echo '[workspace]'
    echo 'resolver = "3"'
    echo 'members = ['
    for crate in "${crates[@]}"; do
        read -r name version <<<"$crate"
        echo "    \"$name-$version\","
    done
    echo ']'
    echo '[patch.crates-io]'
    for crate in "${crates[@]}"; do
        read -r name version <<<"$crate"
        echo "$name = { path = \"$name-$version\" }"
    done
} >"$verify/Cargo.toml"
# -m: the files get the time of unpacking. A package's files all carry one fixed old time (cargo's
# reproducible archives), so a second run in the same target folder would find the previous run's
# check of a crate still fresh and never read the new sources.
for crate in "${crates[@]}"; do
    read -r name version <<<"$crate"
    tar -xzmf "$target/package/$name-$version.crate" -C "$verify"
done
# The repository's lock file: every third-party version as the workspace's tests built it (cargo
# drops the entries of the members left out; --offline: nothing is fetched).
cp "$root/Cargo.lock" "$verify/Cargo.lock"

start=$(date +%s)
for crate in "${crates[@]}"; do
    read -r name version <<<"$crate"
    echo "==> $name $version, from its package alone"
    (cd "$verify" && CARGO_TARGET_DIR="$target" cargo check --offline --quiet -p "$name" "${profile[@]}")
done
# The lock file the checks used pins what the repository's does: no version moved.
python3 - "$root/Cargo.lock" "$verify/Cargo.lock" <<'EOF'
import sys, tomllib
def versions(path):
    with open(path, "rb") as f:
        return {(p["name"], p["version"]) for p in tomllib.load(f)["package"]}
repo, packaged = versions(sys.argv[1]), versions(sys.argv[2])
moved = sorted(packaged - repo)
if moved:
    sys.exit(f"package-crates: the packaged crates resolved versions the repository does not lock: {moved}")
EOF
echo "    ${#crates[@]} crates packaged and checked alone from their packages in $(($(date +%s) - start)) s"
