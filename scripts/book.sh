#!/usr/bin/env bash
# The book (book/, mdBook): built into target/book and checked (`make book`; scripts/test.sh runs it).
#
#   1. mdbook, pinned, installed once per machine outside the clone:
#      ${XDG_CACHE_HOME:-~/.cache}/cqrs-dynamo/tools/mdbook-<version>/bin/mdbook (cargo install
#      --locked, in a throwaway target folder); kept while it reports that version. MDBOOK=<path>
#      uses another binary instead (its version is not checked).
#   2. `mdbook build book`: any error or warning it logs fails the run (a missing include is only
#      logged by mdbook, which still writes the page).
#   3. scripts/book-check.py: every include resolves (file, anchor, line range), one page per
#      SUMMARY.md entry, every relative link and #anchor of the built pages resolves (offline).
#   4. scripts/book-check.py render: headless Chromium renders the front page and the getting
#      started chapter (sidebar, highlighted code) and keeps screenshots in
#      target/test-artifacts/book/. Without Chromium: fails when CI=true, skipped loudly elsewhere.
#
# The reference pages book/src/reference/{cli,model}.md are generated from the code and checked by
# cargo tests (tools/cli/tests/book_reference.rs, shared/model/tests/reference.rs), not here.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
# Only what `mdbook build` needs: the search index (the book's search box), not `serve`/`watch`
# (an HTTP server and a file watcher, a third of the install's compile time).
MDBOOK_FEATURES=(--no-default-features --features search)

say() { printf '[book] %s\n' "$*"; }
die() { printf '[book] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# 1. mdbook
started=$(now)
if [[ -n ${MDBOOK:-} ]]; then
    mdbook=$MDBOOK
    [[ -x $mdbook ]] || die "MDBOOK=$mdbook is not an executable"
    say "mdbook: $mdbook (MDBOOK; $("$mdbook" --version))"
else
    root="${XDG_CACHE_HOME:-$HOME/.cache}/cqrs-dynamo/tools/mdbook-$MDBOOK_VERSION"
    mdbook="$root/bin/mdbook"
    if [[ -x $mdbook && $("$mdbook" --version 2>/dev/null) == "mdbook v$MDBOOK_VERSION" ]]; then
        say "mdbook $MDBOOK_VERSION: cached at $mdbook"
    else
        command -v cargo >/dev/null || die "cargo is needed to install mdbook $MDBOOK_VERSION"
        say "installing mdbook $MDBOOK_VERSION into $root (once per machine; a few minutes)"
        build=$(mktemp -d "${TMPDIR:-/tmp}/cqrs-mdbook-build.XXXXXX")
        # The throwaway build folder goes, whatever happens; the checkout gets nothing.
        trap 'rm -rf "$build"' EXIT
        if ! CARGO_TARGET_DIR="$build" cargo install --locked --quiet --force \
            "mdbook@$MDBOOK_VERSION" "${MDBOOK_FEATURES[@]}" --root "$root"; then
            die "cargo install mdbook@$MDBOOK_VERSION failed"
        fi
        rm -rf "$build"
        trap - EXIT
        [[ $("$mdbook" --version 2>/dev/null) == "mdbook v$MDBOOK_VERSION" ]] \
            || die "$mdbook does not report v$MDBOOK_VERSION after the install"
        say "installed mdbook $MDBOOK_VERSION in $(took "$started")"
    fi
fi

# 2. build
started=$(now)
log=$(mktemp "${TMPDIR:-/tmp}/cqrs-mdbook-log.XXXXXX")
if ! "$mdbook" build book >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "mdbook build book failed"
fi
if grep -E '(^|[[:space:]])(ERROR|WARN)[[:space:]]' "$log" >/dev/null; then
    cat "$log" >&2
    rm -f "$log"
    die "mdbook build book logged errors or warnings (above)"
fi
rm -f "$log"
say "built target/book in $(took "$started")"

# 3. includes, pages, links and anchors
started=$(now)
python3 scripts/book-check.py || die "the book's includes, pages or links (above)"
say "checked in $(took "$started")"

# 4. rendered in Chromium
started=$(now)
python3 scripts/book-check.py render || die "the book does not render (above)"
say "rendered in $(took "$started")"
say "the book: target/book/index.html"
