#!/usr/bin/env bash
# The upgrade path, proved: every service kept in tests/upgrade/<commit>/ (exactly as `cqrs new`
# wrote it at that commit of the framework) is upgraded to this checkout by following the steps of
# "Upgrading the framework" in the README that this release's `cqrs new` writes, verbatim
# (scripts/follow-readme.py), and must then pass its own tests (`make test`, its Makefile of then),
# with template.yaml and the local router what this release writes (`cqrs template --check`).
#
# What the README's prose asks before its steps, this script does: the CHANGELOG's entries for
# generated services (the declaration of the starter's own route, added to model.toml as its
# section says), and, the cheap way:
#   - "change the cqrs-* dependencies to the new release": the fixture names the framework by path
#     (`../../..`, this checkout as seen from tests/upgrade/<commit>/); its copy names this
#     checkout by its absolute path;
#   - "install the operator CLI of the same release": .local/cqrs/bin/cqrs is the CLI built here
#     (`cargo install` would build the same sources again in release mode).
# Its Cargo.lock is this workspace's (a fixture keeps none), and its builds share the workspace's
# target folder, offline.
#
#   scripts/upgrade-test.sh                 (make test runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)

# The operator CLI: $CQRS when the caller built it (make test does), else built here.
if [[ -z ${CQRS:-} ]]; then
    cargo build --quiet --locked -p cqrs-cli --bin cqrs
    CQRS="$root/target/debug/cqrs"
fi
export DYNAMODB_LOCAL_DIR="$root/.local/dynamodb-local"
export CARGO_TARGET_DIR="$root/target" CARGO_NET_OFFLINE=true
# The shell's own DynamoDB Local (make test's) is not the service's: its Makefile starts its own.
unset AWS_ENDPOINT_URL_DYNAMODB DDB_LOCAL_PORT

cleanup() {
    local status=$?
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT

# The README a service of this release gets, whose upgrade steps are followed.
"$CQRS" new "$work/this-release" --framework "path:$root" >/dev/null 2>&1
readme="$work/this-release/README.md"

fixtures=(tests/upgrade/*/)
[[ -e ${fixtures[0]} ]] || { echo "upgrade-test: no fixture in tests/upgrade/" >&2; exit 1; }
for fixture in "${fixtures[@]}"; do
    commit=$(basename "$fixture")
    service="$work/$commit"
    echo "==> the service generated at $commit, upgraded to this checkout"
    cp -r "$fixture" "$service"
    # Its framework: this checkout, by absolute path (the fixture's `../../..`).
    sed -i "s#\.\./\.\./\.\.#$root#g" "$service/Cargo.toml" "$service/Makefile"
    if grep -q '\.\./\.\./\.\.' "$service/Cargo.toml"; then
        echo "upgrade-test: $commit still names ../../.. after the rewrite" >&2
        exit 1
    fi
    # The operator CLI of this release, where its Makefile looks for it.
    mkdir -p "$service/.local/cqrs/bin"
    ln -s "$CQRS" "$service/.local/cqrs/bin/cqrs"
    cp Cargo.lock "$service/Cargo.lock"
    (
        cd "$service"
        # Step 1 of the README: the CHANGELOG's section for generated services. A service of then
        # that still has the starter's own route adds the declaration it gives to model.toml.
        if [[ -f src/bin/task-report.rs ]] && ! grep -q '^\[routes\.task-report\]' model.toml; then
            echo "==> $commit: the CHANGELOG's declaration of the starter's route, added to model.toml"
            { echo; python3 "$root/scripts/follow-readme.py" --print toml "$root/CHANGELOG.md" \
                "For generated services: own routes declared once, a template they own"; } >>model.toml
        fi
        python3 "$root/scripts/follow-readme.py" "$readme" "Upgrading the framework"
        echo "==> $commit upgraded: template.yaml and the local router are this release's"
        .local/cqrs/bin/cqrs template --check
        # Every function the upgraded template deploys has its binary (the event publisher, added
        # by the README's step for change events, among them): sam build would fail without it.
        for binary in $(sed -n 's/^ *Binary: //p' template.yaml); do
            [[ -f src/bin/$binary.rs ]] || {
                echo "upgrade-test: $commit: template.yaml deploys $binary, src/bin/$binary.rs is missing" >&2
                exit 1
            }
        done
        # The route its router served and its template lacked (the defect of then) now deploys.
        while read -r binary; do
            grep -q "Binary: $binary\$" template.yaml || {
                echo "upgrade-test: $commit: $binary is in the local router, not in template.yaml" >&2
                exit 1
            }
        done < <(python3 - <<'EOF'
import tomllib
router = tomllib.load(open("Cargo.toml", "rb"))["package"]["metadata"]["lambda"]["watch"]["router"]
names = set()
for target in router.values():
    for entry in target if isinstance(target, list) else [{"function": target}]:
        names.add(entry["function"])
print("\n".join(sorted(names)))
EOF
        )
    )
done
echo "upgrade-test: ${#fixtures[@]} service(s) upgraded, their tests pass"
