#!/usr/bin/env python3
"""Checks every relative link of the repository's Markdown files: the file (or directory) it
points at exists, and its #anchor, if any, is a heading of the target (GitHub's anchors).

    scripts/check-doc-links.py            # every *.md outside target/, node_modules/, .git/
    scripts/check-doc-links.py README.md docs/operations.md

Links to other sites (http:, https:, mailto:) are not followed. Markdown links and the src/href
of inline HTML are checked; fenced code blocks and inline code are skipped. Exit 1 with one line
per broken link, 0 when all resolve. Standard library only.
"""
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", "target", "node_modules"}

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML = re.compile(r"""<(?:img|a|source)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"""<[^>]+\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)


def markdown_files(args):
    if args:
        return [Path(a).resolve() for a in args]
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        found += [Path(dirpath) / f for f in filenames if f.endswith(".md")]
    return sorted(found)


def prose_lines(text):
    """The lines outside fenced code blocks: number, the line, the line with inline code blanked."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        marker = stripped[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        yield number, line, re.sub(r"`+[^`]*`+", "``", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("`", "").lower()
    return "".join(
        "-" if c == " " else c for c in text if c.isalnum() or c in " -_"
    )


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        result = set()
        text = path.read_text(encoding="utf-8")
        for _, line, _ in prose_lines(text):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                result.add(base if n == 0 else f"{base}-{n}")
        result.update(HTML_ID.findall(text))
        _anchors[path] = result
    return _anchors[path]


def check(path):
    problems = []
    text = path.read_text(encoding="utf-8")
    for number, _, line in prose_lines(text):
        for target in LINK.findall(line) + HTML.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else (path.parent / file_part).resolve()
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return problems


def main():
    problems = []
    for path in markdown_files(sys.argv[1:]):
        problems += check(path)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
