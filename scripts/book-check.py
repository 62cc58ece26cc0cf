#!/usr/bin/env python3
"""The book's checks (Python's standard library only); scripts/book.sh runs both after `mdbook build`.

  python3 scripts/book-check.py          the sources and the built HTML:
      - every {{#include}} / {{#rustdoc_include}} of a chapter names a file that exists, and its
        anchor (ANCHOR: name ... ANCHOR_END: name) or line range (a, a:b, a:, :b) is in that file
        (mdbook itself includes nothing, or a part, without a word when they are not);
      - the built book has one page per SUMMARY.md entry, and every .md file under src/ is either
        an entry or included by one;
      - every relative href/src of every built page names a file of the build and every #fragment
        an id of the page it names; a script, stylesheet or image from the network is an error
        (the book must render offline); links to other sites are counted, never fetched.
  python3 scripts/book-check.py render   headless Chromium opens index.html and the getting-started
      page: the DOM it renders (JavaScript ran) holds the sidebar with one link per SUMMARY.md entry
      in order, and every code block highlighted (`hljs` spans); screenshots (PNG, the window's
      size, over a minimum size: a page without its stylesheet is smaller) are kept in
      target/test-artifacts/book/. Chromium is $CHROMIUM or `chromium` on PATH; without it the
      check fails when CI=true and is skipped, loudly, elsewhere.

Options: --book DIR (default: book), --out DIR (default: book.toml's build-dir),
--artifacts DIR (render; default: target/test-artifacts/book). Exit 1 with one line per problem.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Pages the render check opens: the book's front page and the first chapter a newcomer reads.
RENDERED = ("index.html", "getting-started.html")
WINDOW = (1280, 1000)
# A screenshot of a chapter with its stylesheet, sidebar and highlighted code is 100-200 KB at
# 1280x1000; the same page without its CSS about 60 KB, an empty page 5 KB (measured, see
# scripts/book.sh's notes). Below this the page did not render as a book.
MIN_PNG_BYTES = 90_000


def fail(problems):
    for p in problems:
        print(f"book-check: {p}", file=sys.stderr)
    print(f"book-check: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)


def options(argv):
    opts = {"book": os.path.join(ROOT, "book"), "out": None,
            "artifacts": os.path.join(ROOT, "target", "test-artifacts", "book")}
    rest = []
    it = iter(argv)
    for a in it:
        if a in ("--book", "--out", "--artifacts"):
            opts[a[2:]] = os.path.abspath(next(it, "") or fail([f"{a} needs a value"]))
        elif a.startswith("--") and a[2:].split("=")[0] in ("book", "out", "artifacts"):
            k, _, v = a[2:].partition("=")
            opts[k] = os.path.abspath(v)
        else:
            rest.append(a)
    with open(os.path.join(opts["book"], "book.toml"), "rb") as f:
        config = tomllib.load(f)
    opts["src"] = os.path.normpath(os.path.join(opts["book"], config.get("book", {}).get("src", "src")))
    if opts["out"] is None:
        opts["out"] = os.path.normpath(
            os.path.join(opts["book"], config.get("build", {}).get("build-dir", "book")))
    return opts, rest


# ---------------------------------------------------------------- SUMMARY.md

def summary_entries(src):
    """[(title, path or None for a draft, line)] in the order of SUMMARY.md."""
    entries = []
    link = re.compile(r"^\s*(?:[-*]\s+)?\[(?P<title>.*)\]\((?P<path>[^)]*)\)\s*$")
    with open(os.path.join(src, "SUMMARY.md"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = link.match(line)
            if m:
                entries.append((m["title"], m["path"].strip() or None, n))
    return entries


def page_of(md_path):
    """The HTML page mdbook writes for a chapter's source (README.md becomes index.html)."""
    base, _ = os.path.splitext(md_path)
    if os.path.basename(base) == "README":
        base = os.path.join(os.path.dirname(base), "index")
    return base.replace(os.sep, "/") + ".html"


# ---------------------------------------------------------------- includes

INCLUDE = re.compile(r"\\\{\{#.*\}\}|\{\{\s*#(include|rustdoc_include)\s+([^}]+?)\s*\}\}")
ANCHOR_START = re.compile(r"ANCHOR:\s*([\w_-]+)")
ANCHOR_END = re.compile(r"ANCHOR_END:\s*([\w_-]+)")


def check_include(where, spec, base, problems, seen):
    """One {{#include path[:anchor | :range]}} as mdbook reads it (mdbook-driver links.rs)."""
    path, _, rest = spec.split()[0].partition(":")
    target = os.path.normpath(os.path.join(base, path))
    shown = os.path.relpath(target, ROOT)
    if not os.path.isfile(target):
        problems.append(f"{where}: {{{{#include {spec}}}}}: no file {shown}")
        return None
    with open(target, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    parts = rest.split(":", 2) if rest else []
    first = parts[0] if parts else ""
    if first and not first.isdigit():
        starts = [i for i, l in enumerate(lines) if (m := ANCHOR_START.search(l)) and m[1] == first]
        ends = [i for i, l in enumerate(lines) if (m := ANCHOR_END.search(l)) and m[1] == first]
        if not starts:
            problems.append(f"{where}: {{{{#include {spec}}}}}: no `ANCHOR: {first}` in {shown}")
        elif not ends:
            problems.append(f"{where}: {{{{#include {spec}}}}}: no `ANCHOR_END: {first}` in {shown}")
        elif ends[-1] < starts[0] + 2:
            problems.append(f"{where}: {{{{#include {spec}}}}}: anchor {first} of {shown} holds no line")
    elif parts:
        start = int(first) - 1 if first else 0
        if len(parts) == 1:
            end = start + 1
        elif parts[1].isdigit():
            end = int(parts[1])
        else:
            end = len(lines)
        if not (0 <= start < end <= len(lines)):
            problems.append(f"{where}: {{{{#include {spec}}}}}: lines {start + 1}..{end} are not "
                            f"in {shown} ({len(lines)} lines)")
    if target.endswith(".md") and target not in seen:
        seen.add(target)
        check_includes_of(target, problems, seen)
    return target


def check_includes_of(md, problems, seen):
    with open(md, encoding="utf-8") as f:
        text = f.read()
    included = []
    for m in INCLUDE.finditer(text):
        if m[1] is None:
            continue  # an escaped \{{#include}} is text
        line = text.count("\n", 0, m.start()) + 1
        where = f"{os.path.relpath(md, ROOT)}:{line}"
        target = check_include(where, m[2], os.path.dirname(md), problems, seen)
        if target:
            included.append(target)
    return included


# ---------------------------------------------------------------- built HTML

class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (tag, attr, value, line)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for attr in ("href", "src"):
            v = a.get(attr)
            if v is not None and not (tag == "link" and a.get("rel") in ("preconnect", "dns-prefetch")):
                self.links.append((tag, attr, v, self.getpos()[0]))


def parse_pages(out):
    pages = {}
    for d, _, files in os.walk(out):
        for f in files:
            if f.endswith(".html"):
                p = os.path.join(d, f)
                parser = Page()
                with open(p, encoding="utf-8", errors="replace") as fh:
                    parser.feed(fh.read())
                pages[p] = parser
    return pages


def check_links(out, pages, problems):
    checked = external = 0
    for p, page in sorted(pages.items()):
        rel = os.path.relpath(p, out)
        for tag, attr, v, line in page.links:
            u = urlsplit(v)
            if u.scheme or v.startswith("//"):
                if u.scheme in ("http", "https", "") and (attr == "src" or tag == "link"):
                    problems.append(f"{rel}:{line}: <{tag} {attr}={v!r}> loads from the network "
                                    "(the book must render offline)")
                external += 1
                continue
            if v == "":
                continue
            checked += 1
            if u.path:
                base = out if u.path.startswith("/") else os.path.dirname(p)
                target = os.path.normpath(os.path.join(base, unquote(u.path).lstrip("/")))
            else:
                target = p
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.isfile(target):
                problems.append(f"{rel}:{line}: {attr}={v!r}: no file {os.path.relpath(target, out)} "
                                "in the build")
                continue
            frag = unquote(u.fragment)
            if frag and target.endswith(".html") and frag not in pages[target].ids:
                problems.append(f"{rel}:{line}: {attr}={v!r}: no id {frag!r} in "
                                f"{os.path.relpath(target, out)}")
    return checked, external


def check(opts):
    src, out = opts["src"], opts["out"]
    problems = []
    # 1. Includes, from every chapter of SUMMARY.md (and the .md files they include).
    entries = summary_entries(src)
    if not entries:
        fail([f"{os.path.relpath(src, ROOT)}/SUMMARY.md lists no chapter"])
    seen, included, includes = set(), set(), 0
    for title, path, line in entries:
        if path is None:
            continue
        md = os.path.normpath(os.path.join(src, path))
        if not os.path.isfile(md):
            problems.append(f"SUMMARY.md:{line}: [{title}]({path}): no file {os.path.relpath(md, ROOT)}")
            continue
        seen.add(md)
        targets = check_includes_of(md, problems, seen)
        includes += len(targets)
        included.update(targets)
    chapters = {os.path.normpath(os.path.join(src, p)) for _, p, _ in entries if p}
    for d, _, files in os.walk(src):
        for f in sorted(files):
            md = os.path.join(d, f)
            if f.endswith(".md") and f != "SUMMARY.md" and md not in chapters and md not in included:
                problems.append(f"{os.path.relpath(md, ROOT)}: neither an entry of SUMMARY.md nor "
                                "included by one (mdbook would not render it)")
    # 2. One page per entry.
    if not os.path.isfile(os.path.join(out, "index.html")):
        fail(problems + [f"no book in {out}: run `mdbook build book` (scripts/book.sh) first"])
    pages = parse_pages(out)
    for title, path, line in entries:
        if path and not os.path.isfile(os.path.join(out, page_of(path))):
            problems.append(f"SUMMARY.md:{line}: [{title}]({path}): no page {page_of(path)} in the build")
    drafts = sum(1 for _, p, _ in entries if p is None)
    # 3. Links and anchors of the built pages.
    checked, external = check_links(out, pages, problems)
    if problems:
        fail(problems)
    print(f"book-check: {len(entries) - drafts} chapters (+{drafts} drafts) with a page each, "
          f"{includes} includes resolved, {len(pages)} pages, "
          f"{checked} internal links and anchors checked, {external} external links not fetched")


# ---------------------------------------------------------------- render (Chromium)

def chromium():
    if os.environ.get("CHROMIUM"):
        path = shutil.which(os.environ["CHROMIUM"])
        if not path:
            fail([f"CHROMIUM={os.environ['CHROMIUM']} is not an executable"])
        return path
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(binary, page, args):
    """Headless Chromium on a file:// page (flags as tools/cli/tests/report_html.rs), killed after
    60 s, its profile in a temporary folder removed afterwards. Returns stdout."""
    with tempfile.TemporaryDirectory(prefix="cqrs-book-chromium-") as profile:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars", "--no-first-run", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               f"--user-data-dir={profile}", *args, "file://" + page]
        # A session of its own, so that the kill reaches Chromium's helper processes too.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            fail([f"chromium did not finish in 60 s on {page}"])
        if proc.returncode != 0:
            fail([f"chromium failed (exit {proc.returncode}) on {page}: {' '.join(cmd)}"])
        return out.decode("utf-8", "replace")


class Dom(HTMLParser):
    """What the rendered DOM holds: the sidebar's chapter links, highlighted code."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0  # > 0 inside <mdbook-sidebar-scrollbox>
        self.sidebar = []
        self.blocks = 0  # <pre><code class="language-...">
        self.highlighted = 0  # of which highlight.js marked (class hljs)
        self.tokens = 0  # <span class="hljs-...">
        self.in_pre = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "mdbook-sidebar-scrollbox":
            self.depth += 1
        elif self.depth and tag == "a" and a.get("href") and "header-in-summary" not in classes \
                and not a["href"].startswith("#"):
            self.sidebar.append(a["href"])
        if tag == "pre":
            self.in_pre = True
        if tag == "code" and self.in_pre and any(c.startswith("language-") for c in classes):
            self.blocks += 1
            self.highlighted += "hljs" in classes
        if tag == "span" and any(c.startswith("hljs-") for c in classes):
            self.tokens += 1

    def handle_endtag(self, tag):
        if tag == "mdbook-sidebar-scrollbox" and self.depth:
            self.depth -= 1
        if tag == "pre":
            self.in_pre = False


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def render(opts):
    binary = chromium()
    if not binary:
        if os.environ.get("CI") == "true":
            fail(["chromium is not installed (CI=true): scripts/test.sh installs Debian's chromium; "
                  "or set CHROMIUM"])
        print("book-check: SKIPPED the render check: chromium is not installed (apt-get install "
              "chromium, or set CHROMIUM); CI fails here", file=sys.stderr)
        return
    out, artifacts = opts["out"], opts["artifacts"]
    entries = [page_of(p) for _, p, _ in summary_entries(opts["src"]) if p]
    os.makedirs(artifacts, exist_ok=True)
    problems, said = [], []
    for name in RENDERED:
        page = os.path.join(out, name)
        if not os.path.isfile(page):
            problems.append(f"no page {name} in {out}")
            continue
        stem = os.path.splitext(name)[0]
        started = time.monotonic()
        dom_text = run_chromium(binary, page, ["--dump-dom"])
        with open(os.path.join(artifacts, f"{stem}.dom.html"), "w", encoding="utf-8") as f:
            f.write(dom_text)
        dom = Dom()
        dom.feed(dom_text)
        static = Dom()
        with open(page, encoding="utf-8") as f:
            static.feed(f.read())
        if dom.sidebar != entries:
            problems.append(f"{name}: the rendered sidebar links {dom.sidebar} are not SUMMARY.md's "
                            f"entries {entries} (toc.js did not run, or the sidebar changed)")
        if static.blocks and (dom.highlighted != static.blocks or dom.tokens == 0):
            problems.append(f"{name}: {dom.highlighted} of {static.blocks} code blocks highlighted, "
                            f"{dom.tokens} hljs token spans (highlight.js did not run)")
        if name == "getting-started.html" and not static.blocks:
            problems.append(f"{name}: no code block to see highlighted")
        shot = os.path.join(artifacts, f"{stem}.png")
        if os.path.exists(shot):
            os.remove(shot)
        run_chromium(binary, page, [f"--screenshot={shot}"])
        data = open(shot, "rb").read() if os.path.isfile(shot) else b""
        size = png_size(data)
        if size is None:
            problems.append(f"{name}: {shot} is not a PNG ({len(data)} bytes)")
        elif size != WINDOW:
            problems.append(f"{name}: the screenshot is {size[0]}x{size[1]}, not the window's "
                            f"{WINDOW[0]}x{WINDOW[1]}")
        elif len(data) < MIN_PNG_BYTES:
            problems.append(f"{name}: the screenshot is {len(data)} bytes, under {MIN_PNG_BYTES} "
                            "(a page without its stylesheet or content)")
        said.append(f"{name}: {len(dom.sidebar)} sidebar links, {dom.highlighted}/{static.blocks} "
                    f"code blocks highlighted ({dom.tokens} hljs spans), {len(data)} byte PNG "
                    f"({time.monotonic() - started:.1f} s)")
    if problems:
        fail(problems)
    for s in said:
        print(f"book-check: rendered {s}")
    print(f"book-check: screenshots in {os.path.relpath(artifacts, ROOT)}/")


def main(argv):
    opts, rest = options(argv)
    if rest == []:
        check(opts)
    elif rest == ["render"]:
        render(opts)
    else:
        fail([f"unknown arguments {rest}; usage: book-check.py [render] [--book DIR] [--out DIR] "
              "[--artifacts DIR]"])


if __name__ == "__main__":
    main(sys.argv[1:])
