#!/usr/bin/env python3
"""Follows a README's steps verbatim: runs, in order, every ```sh block of one section.

    scripts/follow-readme.py README.md "Quick start"        (in the folder the README speaks of)
    scripts/follow-readme.py --blocks 1-2 README.md "Quick start"   (its first two blocks; 3- the rest)
    scripts/follow-readme.py --one-shell --blocks 2- README.md "Quick start"   (blocks share a shell)
    scripts/follow-readme.py --print toml CHANGELOG.md "For generated services"

The section is the heading `<#...> <title>` (any level) up to the next heading of the same level
or above. `--print LANG` prints the section's ```LANG blocks instead of running anything (the text
a step says to add to a file). `--blocks FIRST-LAST` (either end may be left out) runs some of the
blocks, so that a test can do its own checks between two of them; a caller that runs every block in
turn still follows the section whole. Each block runs
as written, with `bash -euo pipefail` in the current folder, its commands echoed first; the first
block that fails stops the run with its exit status. `--one-shell` runs the chosen blocks in one
shell, as a reader types them into one terminal: a `cd` or a variable of one block holds for the
next ones. Blocks fenced as anything but `sh` (```console
for what needs an AWS account or machine setup, ```toml for a file's text) are shown, not run, so
the README says itself which of its steps a test follows. A section without a ```sh block is an
error: a renamed heading must not make a check pass that ran nothing.
"""

import re
import subprocess
import sys


def blocks(text, title, lang="sh"):
    """The ```lang blocks of the section `title`, in order."""
    lines = text.splitlines()
    start, level = None, None
    for i, line in enumerate(lines):
        match = re.fullmatch(r"(#{1,6})\s+" + re.escape(title) + r"\s*", line)
        if match:
            start, level = i + 1, len(match.group(1))
            break
    if start is None:
        raise SystemExit(f"follow-readme: no section '{title}'")
    found, current, fence = [], None, None
    for line in lines[start:]:
        heading = re.match(r"(#{1,6})\s", line)
        if fence is None and heading and len(heading.group(1)) <= level:
            break
        if fence is None:
            match = re.fullmatch(r"```(\w*)\s*", line)
            if match:
                fence = match.group(1)
                current = [] if fence == lang else None
            continue
        if line.strip() == "```":
            if current is not None:
                found.append("\n".join(current))
            fence, current = None, None
            continue
        if current is not None:
            current.append(line)
    if not found:
        raise SystemExit(f"follow-readme: section '{title}' has no ```{lang} block")
    return found


def main():
    args = sys.argv[1:]
    if len(args) == 4 and args[0] == "--print":
        with open(args[2], encoding="utf-8") as f:
            for block in blocks(f.read(), args[3], args[1]):
                print(block)
        return
    one_shell = bool(args) and args[0] == "--one-shell"
    if one_shell:
        args = args[1:]
    first, last = 1, None
    if len(args) == 4 and args[0] == "--blocks":
        low, _, high = args[1].partition("-")
        first, last = int(low or 1), int(high) if high else None
        args = args[2:]
    if len(args) != 2:
        raise SystemExit(__doc__)
    path, title = args
    with open(path, encoding="utf-8") as f:
        steps = blocks(f.read(), title)
    last = len(steps) if last is None else last
    if not 1 <= first <= last <= len(steps):
        raise SystemExit(f"follow-readme: blocks {first}-{last} of '{title}', which has {len(steps)}")
    chosen = [(n, block) for n, block in enumerate(steps, 1) if first <= n <= last]
    if one_shell:
        # One script: each block preceded by its banner (printed by the shell itself, so that it
        # comes when the block starts) and the number of the block running, for the failure line.
        on_error = ('__status=$?; echo "follow-readme: block $__block of "' +
                    shell_quote(f"'{title}'") + '" failed (exit $__status)" >&2')
        script = [f"__block=0; trap {shell_quote(on_error)} ERR"]
        for n, block in chosen:
            banner = "\n".join([f"==> {path}, '{title}', block {n} of {len(steps)}:"] +
                               [f"    $ {line}" for line in block.splitlines()])
            script.append(f"__block={n}; printf '%s\\n' {shell_quote(banner)}")
            script.append(block)
        status = subprocess.run(["bash", "-Eeuo", "pipefail", "-c", "\n".join(script)]).returncode
        sys.exit(status)
    for n, block in chosen:
        print(f"==> {path}, '{title}', block {n} of {len(steps)}:", flush=True)
        for line in block.splitlines():
            print(f"    $ {line}", flush=True)
        status = subprocess.run(["bash", "-euo", "pipefail", "-c", block]).returncode
        if status != 0:
            print(f"follow-readme: block {n} of '{title}' failed (exit {status})", file=sys.stderr)
            sys.exit(status)


def shell_quote(text):
    """`text` as one single-quoted word of bash."""
    return "'" + text.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    main()
