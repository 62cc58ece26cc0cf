#!/usr/bin/env bash
# The typed TypeScript client of clients/typescript/: types generated from openapi.yaml with
# openapi-typescript, used through openapi-fetch wired for exact (lossless-json) numbers.
#
#   scripts/typescript-client.sh check           install (npm ci), generate the types from openapi.yaml,
#                                                type-check the client, the example and the deliberate
#                                                type errors (tsc --noEmit); then the negative test (the
#                                                type errors with their @ts-expect-error comments removed
#                                                must fail with exactly the announced codes and lines)
#                                                and the lossless wiring's tests against a stand-in
#                                                server on 127.0.0.1 (node --test); the realtime API's
#                                                onSubscribe handler run under Node against its table of
#                                                callers and linted as APPSYNC_JS. No stack needed.
#   scripts/typescript-client.sh run BASE_URL    install and generate as needed, compile (tsc to
#                                                clients/typescript/dist) and run the example against a
#                                                running stack: create an order with a 20-digit
#                                                totalCents, PATCH it to PAID, read it back through the
#                                                access pattern orders_of_user; fails on any mismatch.
#
# Settings (environment, run): TENANT_CODE (t1), ROLES (admin): the local caller's headers.
# Needs Node.js 20 or later and npm (the versions are pinned in clients/typescript/package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
client="$root/clients/typescript"

step() { printf '\n==> %s\n' "$*"; }
die() { printf 'typescript-client: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null 2>&1 || die "node is not installed (Node.js 20 or later)"
command -v npm >/dev/null 2>&1 || die "npm is not installed"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "Node.js $(node --version) is too old: 20 or later"

install() {
    # A lockfile made anywhere must name no registry host (clients/typescript/.npmrc says so to npm).
    if grep -q '"resolved"' "$client/package-lock.json"; then
        die "clients/typescript/package-lock.json carries registry URLs (\"resolved\"): remake it with the .npmrc there"
    fi
    (cd "$client" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

generate() {
    (cd "$client" && node scripts/generate.mjs "$root/openapi.yaml" src/generated/api.d.ts)
}

tsc() {
    (cd "$client" && node node_modules/typescript/bin/tsc "$@")
}

case "${1:-}" in
check)
    step "TypeScript client: npm ci (clients/typescript)"
    install
    step "TypeScript client: generate the types from openapi.yaml (openapi-typescript)"
    generate
    step "TypeScript client: tsc --noEmit (client, example, deliberate type errors)"
    tsc --noEmit -p tsconfig.json
    echo "    type-check passed"
    step "TypeScript client: the type errors without @ts-expect-error must fail"
    (cd "$client" && node scripts/negative-check.mjs)
    step "TypeScript client: lossless wiring (node --test, stand-in server on 127.0.0.1)"
    rm -rf "$client/dist"
    tsc -p tsconfig.json
    (cd "$client" && node --test dist/wiring.test.js)
    step "Realtime: the onSubscribe handler of the AppSync Events namespaces under Node (its table of callers, linted as APPSYNC_JS)"
    (cd "$client" && node --test test/realtime.test.mjs)
    ;;
run)
    base_url=${2:-}
    [ -n "$base_url" ] || die "usage: scripts/typescript-client.sh run BASE_URL (e.g. http://127.0.0.1:9000)"
    step "TypeScript client: install, generate, compile"
    [ -d "$client/node_modules/openapi-typescript" ] || install
    generate
    rm -rf "$client/dist"
    tsc -p tsconfig.json
    step "TypeScript client: the example against $base_url"
    (cd "$client" && node dist/example.js "$base_url")
    ;;
*)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
