#!/usr/bin/env bash
# API conformance: schemathesis generates requests from openapi.yaml (valid ones and ones that break
# the schema), sends them to a running local stack, and checks every answer against the document:
# no 5xx, only documented status codes, content types, headers and bodies, and schema-breaking
# requests refused. Deterministic (fixed seed), bounded in examples per operation.
#
# openapi.yaml is generated from model.toml (`cqrs model openapi`): every entity's command bodies
# and items, one path per access pattern, so each constraint the model declares is tried with
# valid and invalid input. The hooks (tests/conformance/hooks.py) create items of every entity first
# and point the valid requests at those items, so they reach the code behind the 404s.
# Any schemathesis warning fails the run (tests/conformance/schemathesis.toml), and so does an
# operation that never answered a 2xx; the 2xx / 4xx counts per operation are printed at the end.
#
#   scripts/conformance.sh http://127.0.0.1:9000     (the local stack: make dev-up)
#
# Checks left out, and why:
#   ignored_auth              the local stack reads the caller from headers (CALLER_MODE=local), not
#                             from a token, so "invalid auth" cannot be tested here;
#   positive_data_acceptance  a schema-valid body may still be refused for what a schema cannot say
#                             (a version that does not exist, a key of another tenant);
#   unsupported_method        a method the API does not route is answered by the gateway (cargo
#                             lambda watch locally), not by our functions.
set -euo pipefail
cd "$(dirname "$0")/.."
url=${1:?usage: scripts/conformance.sh BASE_URL}

# shellcheck source=scripts/tools.sh
source scripts/tools.sh >/dev/null

export SCHEMATHESIS_HOOKS=hooks
export PYTHONPATH="$PWD/tests/conformance${PYTHONPATH:+:$PYTHONPATH}"
export CONFORMANCE_URL="$url"
# The hooks' own checks first: a hook that lets a case through which the local gateway cannot carry
# would fail the run on the emulator, not on the product.
(cd tests/conformance && python3 -m unittest -q test_hooks)
counts=$(mktemp)
trap 'rm -f "$counts"' EXIT
export CONFORMANCE_COUNTS="$counts"
schemathesis --config-file tests/conformance/schemathesis.toml run openapi.yaml \
    --url "$url" \
    -H 'x-tenant-code: t1' -H 'x-user-id: conformance' \
    --checks all \
    --exclude-checks ignored_auth,positive_data_acceptance,unsupported_method \
    --max-examples "${CONFORMANCE_EXAMPLES:-40}" \
    --seed "${CONFORMANCE_SEED:-20261122}" \
    --generation-database none \
    --request-timeout 60 \
    --workers 1 \
    --no-color

# What reached the code: answers per operation by status class. An operation without a 2xx only
# ever tested its refusals.
python3 - "$counts" <<'PY'
import json, sys
document = json.load(open(sys.argv[1]))
counts = document["operations"]
retries = document.get("emulatorRetries", [])
if retries:
    print(f"{len(retries)} answer(s) were cargo lambda watch's own 500 and were sent again: " + "; ".join(retries))
width = max(len(label) for label in counts)
print(f"\n{'operation':<{width}}  {'2xx':>5}  {'4xx':>5}  {'5xx':>5}  {'total':>6}")
never = []
for label in sorted(counts):
    c = counts[label]
    total = sum(c.values())
    print(f"{label:<{width}}  {c.get('2xx', 0):>5}  {c.get('4xx', 0):>5}  {c.get('5xx', 0):>5}  {total:>6}")
    if not c.get("2xx"):
        never.append(label)
print(f"{len(counts)} operations, {sum(c.get('2xx', 0) for c in counts.values())} answers 2xx "
      f"of {sum(sum(c.values()) for c in counts.values())}")
if never:
    sys.exit("never answered 2xx: " + ", ".join(never))
PY
