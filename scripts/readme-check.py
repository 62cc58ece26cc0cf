#!/usr/bin/env python3
"""The README and CONTRIBUTING.md hold: what they show is the real code, and their links resolve.

    python3 scripts/readme-check.py            (scripts/test.sh runs it; exit 1 on a problem)

1. The README's ```rust blocks are copies of real files, so they must stay equal to them:
   - the starter's hook `task_rules`: the one `cqrs new` writes (its snapshot for a service named
     `library`, tools/cli/tests/snapshots/new/library/src/lib.rs, held by tools/cli/tests/new.rs),
     with the service's name `tasks` of the README's quick start;
   - the example's command-handler binary: src/bin/command-handler.rs without its `//!` lines.
   (The README's ```sh quick start is not checked here: scripts/generated-service.sh runs it.)
2. Every relative link of README.md and CONTRIBUTING.md names a file of the checkout, and a
   `#anchor` on a markdown file names one of its headings (GitHub's slug of the heading: lower case,
   punctuation but `-` and `_` dropped, spaces to `-`, a repeated heading gets `-1`, `-2`, ...).
   Links into the book name its markdown sources (book/src/*.md), which scripts/book.sh checks
   further. Links with a scheme (https:, mailto:) are not fetched.
"""

import difflib
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
problems = []


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def same(want, got, want_name, what):
    """Records a problem with a diff when `got` is not `want`."""
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), want_name, "README.md"))
        problems.append(f"{what}\n{diff}")


def code_blocks():
    readme = read("README.md")
    blocks = re.findall(r"^```rust\n(.*?)^```", readme, re.S | re.M)
    snapshot = "tools/cli/tests/snapshots/new/library/src/lib.rs"
    hook = re.search(r"^pub fn task_rules.*?^}\n", read(snapshot), re.S | re.M)
    if hook is None:
        problems.append(f"{snapshot} has no `pub fn task_rules`: the README shows it")
    else:
        shown = [b for b in blocks if "fn task_rules" in b]
        want = hook.group(0).replace("urn:library:", "urn:tasks:")
        if len(shown) != 1:
            problems.append(f"README.md shows `fn task_rules` in {len(shown)} rust blocks, not 1")
        else:
            same(want, shown[0], f"{snapshot} (library -> tasks)",
                 "README.md: the starter's hook is not the one cqrs new writes")
    binary = "src/bin/command-handler.rs"
    code = "".join(line for line in read(binary).splitlines(True) if not line.startswith("//!")).lstrip("\n")
    shown = [b for b in blocks if "run::command_handler" in b]
    if len(shown) != 1:
        problems.append(f"README.md shows `run::command_handler` in {len(shown)} rust blocks, not 1")
    else:
        same(code, shown[0], binary, f"README.md: the command-handler binary is not {binary}")


def slugs(path):
    """GitHub's anchors of the headings of a markdown file."""
    found, seen, fence = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            heading = None if fence else re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not heading:
                continue
            text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.group(2))
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links(name):
    text = re.sub(r"^```.*?^```", "", read(name), flags=re.S | re.M)
    count = 0
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        count += 1
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(ROOT, os.path.dirname(name), path)) if path else os.path.join(ROOT, name)
        if not os.path.exists(full):
            problems.append(f"{name}: link {target}: no file {os.path.relpath(full, ROOT)}")
        elif anchor and full.endswith(".md") and anchor not in slugs(full):
            problems.append(f"{name}: link {target}: no heading #{anchor} in {os.path.relpath(full, ROOT)}")
    return count


def main():
    code_blocks()
    checked = sum(links(name) for name in ("README.md", "CONTRIBUTING.md"))
    for problem in problems:
        print(f"readme-check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"readme-check: the README's rust blocks are the real code; {checked} relative links of "
          "README.md and CONTRIBUTING.md resolve")


if __name__ == "__main__":
    main()
