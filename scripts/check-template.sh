#!/usr/bin/env bash
# Checks the SAM template and builds its Lambda functions from it (the framework's three, sql-sync,
# which deploys only when SqlReadModel is not none, event-publisher and the service's consumers,
# which deploy only when ChangeEvents is on, and the service's own routes), offline:
#
#   1. sam validate --lint   (the SAM transform's schema and cfn-lint, through the SAM CLI)
#   2. cfn-lint              (CloudFormation rules, SAM transform included)
#   3. SAM's transform       (scripts/sam-transform.py, aws-sam-translator offline): the template
#                             transforms, and no role gets AWSLambdaDynamoDBExecutionRole
#   4. sam build             (cargo lambda build --release --arm64 per function, through zig; no
#                             container) into .aws-sam/build
#   5. each function's bootstrap exists and is an aarch64 (arm64) ELF executable
#   6. what sam build compiled holds the functions' features alone (Cargo.toml's default-members),
#      nothing the CLI, the bench floors or the tests ask of shared dependencies
#
# What the template means (routes, stream mapping, IAM, environment) is tested by
# shared/testkit/tests/sam_template.rs on the YAML and by shared/testkit/tests/sam_transformed.rs on
# the transformed template (it runs scripts/sam-transform.py with .venv's Python), which `cargo
# test` runs after this script has made sure .venv is there.
#
# Never calls AWS: the commands run with no credentials, no profile and no config file, and a dummy
# region (validate needs one). SAM telemetry is off. The tools come from scripts/tools.sh (.venv).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n--> %s\n' "$*"; }
fail() { printf '\ncheck-template: FAILED: %s\n' "$*" >&2; exit 1; }
trap 'fail "command failed (line $LINENO): $BASH_COMMAND"' ERR

step "tools (scripts/tools.sh)"
# shellcheck source=scripts/tools.sh
source scripts/tools.sh

# Offline and anonymous: whatever the caller's shell has, these commands see no AWS account.
export SAM_CLI_TELEMETRY=0
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN \
    AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_WEB_IDENTITY_TOKEN_FILE

TEMPLATE=template.yaml
BUILD_DIR=.aws-sam/build
# Every function of the template: the framework's five, the service's own routes and consumers.
mapfile -t FUNCTIONS < <(python - "$TEMPLATE" <<'PY'
import sys, yaml
class Loader(yaml.SafeLoader):
    pass
Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
template = yaml.load(open(sys.argv[1]), Loader=Loader)
for name, resource in template["Resources"].items():
    if resource.get("Type") == "AWS::Serverless::Function":
        print(name)
PY
)

timed() { # timed <label> <command...>: runs it, prints how long it took
    local label=$1 start end
    shift
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    printf '    (%s: %.1f s)\n' "$label" "$(python3 -c "print($end - $start)")"
}

step "sam validate --lint"
timed "sam validate --lint" sam validate --lint --template "$TEMPLATE"

step "cfn-lint"
timed "cfn-lint" cfn-lint "$TEMPLATE"
echo "    no findings"

step "SAM transform (scripts/sam-transform.py, offline)"
transformed=$(mktemp)
# Not through `timed`: its timing line goes to stdout and would land in the JSON.
python scripts/sam-transform.py "$TEMPLATE" >"$transformed"
if grep -q AWSLambdaDynamoDBExecutionRole "$transformed"; then
    rm -f "$transformed"
    fail "the transformed template attaches AWSLambdaDynamoDBExecutionRole (every stream of the account)"
fi
printf '    %s resources after the transform\n' "$(python -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["Resources"]))' "$transformed")"
rm -f "$transformed"

step "sam build (cargo lambda build --release --arm64, no container) into $BUILD_DIR"
# One cargo build of every function first (the default members' binaries, as sam builds them), so
# that they compile and link in parallel; sam build's build of each, the same command for one
# binary, then finds it done and copies it.
timed "cargo lambda build of every function" cargo lambda build --release --arm64
timed "sam build" sam build --template "$TEMPLATE" --build-dir "$BUILD_DIR"

step "bootstraps are aarch64 ELF executables"
for function in "${FUNCTIONS[@]}"; do
    bootstrap="$BUILD_DIR/$function/bootstrap"
    [[ -f "$bootstrap" ]] || fail "$bootstrap is missing"
    [[ -x "$bootstrap" ]] || fail "$bootstrap is not executable"
    # ELF header: magic, 64-bit, little endian, executable (ET_EXEC, or ET_DYN for a PIE), and
    # e_machine 0xB7 (EM_AARCH64).
    python3 - "$bootstrap" <<'PY' || fail "$bootstrap is not an aarch64 ELF executable"
import struct, sys
path = sys.argv[1]
with open(path, "rb") as f:
    header = f.read(20)
problems = []
if header[:4] != b"\x7fELF":
    problems.append("not ELF")
elif header[4] != 2:
    problems.append("not 64-bit")
elif header[5] != 1:
    problems.append("not little endian")
else:
    e_type, e_machine = struct.unpack_from("<HH", header, 16)
    if e_type not in (2, 3):
        problems.append(f"e_type {e_type} is not an executable")
    if e_machine != 0xB7:
        problems.append(f"e_machine {e_machine:#x} is not aarch64 (0xb7)")
if problems:
    print(f"    {path}: " + ", ".join(problems), file=sys.stderr)
    sys.exit(1)
PY
    size=$(stat -c %s "$bootstrap")
    description=""
    if command -v file >/dev/null; then description=" - $(file -b "$bootstrap" | cut -d, -f1-2)"; fi
    printf '    %-24s %6.1f MiB (%s bytes)%s\n' "$function" "$(python3 -c "print($size / 1048576)")" "$size" "$description"
done

step "what sam build compiled: the functions' features alone (cargo tree -e features)"
# `sam build` runs `cargo lambda build --bin <function>` in the workspace root (CodeUri: .); a cargo
# command that names no package resolves the workspace's default members, which Cargo.toml sets to
# the three functions. So the deployed build's features are those of `cargo tree` with no package
# named; they must be exactly the functions' own, and hold nothing only the operator CLI, the bench
# floors or the tests ask for. Without default-members they would be the whole workspace's.
target=aarch64-unknown-linux-gnu
deployed=$(cargo tree --locked -e features,no-dev --target "$target" --prefix none | sed "s/ (\*)$//" | sort -u)
functions=$(cargo tree --locked -e features,no-dev --target "$target" --prefix none \
    -p cqrs-example-shop | sed "s/ (\*)$//" | sort -u)
workspace=$(cargo tree --locked -e features,no-dev --target "$target" --prefix none --workspace | sed "s/ (\*)$//" | sort -u)
[[ "$deployed" == "$functions" ]] ||
    fail "the default members' features differ from the three functions' (Cargo.toml default-members)"
for only_tools in 'clap v' 'indicatif v' 'aws-config v' 'serde_yaml v'; do
    if grep -q "^$only_tools" <<<"$deployed"; then
        fail "the deployed build pulls in ${only_tools% v}, which only tools and tests use"
    fi
    grep -q "^$only_tools" <<<"$workspace" ||
        fail "the check is vacuous: the workspace no longer uses ${only_tools% v}"
done
printf '    %s feature edges deployed, %s in the whole workspace; none of clap, indicatif, aws-config, serde_yaml\n' \
    "$(wc -l <<<"$deployed")" "$(wc -l <<<"$workspace")"

trap - ERR
printf '\ncheck-template: OK\n'
