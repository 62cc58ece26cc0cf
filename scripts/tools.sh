#!/usr/bin/env bash
# The project's Python-packaged tools (cargo-lambda with zig, the SAM CLI, cfn-lint) in `.venv/`,
# pinned by requirements-tools.txt, and the Rust target of the Lambda functions (arm64).
#
#   bash scripts/tools.sh         installs (or checks) the tools
#   source scripts/tools.sh       the same, then puts .venv/bin on PATH of the current shell
#
# The requirements are installed only when requirements-tools.txt changed since the last install
# (its hash is kept in .venv/.requirements-tools.sha256), so a second run takes well under a second.

# Strict mode only when run, not when sourced (it would leak into the caller's shell).
tools_sourced=0
if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then tools_sourced=1; fi
if [[ $tools_sourced -eq 0 ]]; then set -euo pipefail; fi

tools_main() {
    local root venv requirements stamp want have
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="$root/.venv"
    requirements="$root/requirements-tools.txt"
    stamp="$venv/.requirements-tools.sha256"

    tools_say() { printf '[tools] %s\n' "$*"; }
    tools_fail() { printf '[tools] error: %s\n' "$*" >&2; return 1; }

    command -v python3 >/dev/null || { tools_fail "python3 is needed"; return 1; }

    # 1. The virtual environment.
    if [[ ! -x "$venv/bin/python" ]]; then
        if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
            # Debian and Ubuntu ship venv/ensurepip separately.
            command -v apt-get >/dev/null || { tools_fail "python3 lacks the venv module"; return 1; }
            local sudo=""
            if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
            local pyver
            pyver="$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
            tools_say "installing python3-venv (apt)"
            $sudo apt-get update -qq || return 1
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv \
                || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "python${pyver}-venv" \
                || { tools_fail "cannot install python3-venv"; return 1; }
        fi
        tools_say "creating $venv"
        rm -rf "$venv"
        python3 -m venv "$venv" || { tools_fail "python3 -m venv failed"; return 1; }
    fi

    # 2. The pinned tools, only when the requirements changed.
    want="$(python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$requirements")" \
        || return 1
    have="$(cat "$stamp" 2>/dev/null || true)"
    if [[ "$want" != "$have" ]]; then
        tools_say "installing $(grep -cE '^[^#[:space:]]' "$requirements") pinned tools from requirements-tools.txt"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip \
            || { tools_fail "pip upgrade failed"; return 1; }
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" \
            || { tools_fail "pip install -r requirements-tools.txt failed"; return 1; }
        printf '%s\n' "$want" >"$stamp"
    else
        tools_say "tools up to date (requirements-tools.txt unchanged)"
    fi

    # 3. The Lambda target (cargo lambda would add it too; explicit is clearer, and quiet).
    if command -v rustup >/dev/null; then
        if ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
            tools_say "adding rustup target aarch64-unknown-linux-gnu"
            rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1 \
                || { tools_fail "rustup target add aarch64-unknown-linux-gnu failed"; return 1; }
        fi
    else
        tools_say "warning: rustup not found; cannot add the aarch64-unknown-linux-gnu target"
    fi

    # 4. PATH (only matters when sourced) and the versions in use.
    case ":$PATH:" in
        *":$venv/bin:"*) ;;
        *) export PATH="$venv/bin:$PATH" ;;
    esac
    # No SAM telemetry, ever (also keeps sam from reaching the network on its own).
    export SAM_CLI_TELEMETRY=0
    tools_say "$("$venv/bin/cargo-lambda" lambda --version 2>/dev/null | head -n1), $("$venv/bin/sam" --version 2>/dev/null), cfn-lint $("$venv/bin/cfn-lint" --version 2>/dev/null | awk '{print $2}')"
    unset -f tools_say tools_fail
}

if [[ $tools_sourced -eq 1 ]]; then
    tools_main
    tools_rc=$?
    unset tools_sourced
    unset -f tools_main
    return $tools_rc
else
    tools_main
fi
