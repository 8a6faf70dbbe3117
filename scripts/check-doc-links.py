#!/usr/bin/env python3
"""Checks every relative link of the repository's Markdown files: the file (or directory) it
points at exists, and its #anchor, if any, is a heading of the target (GitHub's anchors). And
what the prose names of the code: every source path (`src/gate/mod.rs`, `store/lua/*.lua`,
`tests/rooms.rs`; written from the repository's root, from src/, or from the document) exists,
and every module path (`waitroom::store::memory`, `crate::core::room::Room`) names a module
file, with its last one or two names defined there. And two lists kept whole: docs/testing.md
names every integration test file, docs/redis.md every Lua script.

    scripts/check-doc-links.py            # every *.md outside target/, node_modules/, .git/
    scripts/check-doc-links.py README.md docs/operations.md

Links to other sites (http:, https:, mailto:) are not followed. Markdown links and the src/href
of inline HTML are checked; fenced code blocks are skipped, and inline code for links. Exit 1 with one line
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


# A path to a file of the code: a folder, then a name with one of these extensions (or a glob).
SOURCE = re.compile(
    r"(?<![\w./:-])((?:[\w.*-]+/)+[\w.*-]+\.(?:rs|lua|html|py|sh|js|toml|css))\b"
)
MODULE = re.compile(r"\b(?:waitroom|crate)((?:::\w+)+)")
DEFINITION = r"\b(?:fn|struct|enum|trait|type|const|static|mod|macro_rules!)\s+{}\b"


def source_exists(name, doc):
    """`name` from the repository's root, from src/, or from the document's folder."""
    for base in (ROOT, ROOT / "src", ROOT / "tests", doc.parent):
        if "*" in name:
            if any(base.glob(name)):
                return True
        elif (base / name).exists():
            return True
    return False


def module_file(segments):
    """The file of module `segments` under src/, or None."""
    base = ROOT / "src" / Path(*segments) if segments else ROOT / "src" / "lib.rs"
    for candidate in (base.with_suffix(".rs"), base / "mod.rs"):
        if segments and candidate.is_file():
            return candidate
    return ROOT / "src" / "lib.rs" if not segments else None


def module_problem(path_text):
    """Why `::a::b::c` names nothing, or None: the longest prefix that is a module file, then at
    most two names (an item, and a method or variant of it) defined in that file."""
    segments = path_text.strip(":").split("::")
    for split in range(len(segments), -1, -1):
        file = module_file(segments[:split])
        if file is None:
            continue
        rest = segments[split:]
        if len(rest) > 2:
            return f"no module {'::'.join(segments[: split + 1])}"
        text = file.read_text(encoding="utf-8")
        for name in rest:
            word = re.escape(name)
            defined = re.search(DEFINITION.format(word), text)
            # A variant or a field (a line that starts with it), or a re-export.
            member = re.search(rf"^\s*(?:pub(?:\([\w:]+\))?\s+)?{word}\b", text, re.M)
            exported = re.search(rf"^\s*pub use\b.*\b{word}\b", text, re.M)
            if not (defined or member or exported):
                return f"{name} is not defined in {file.relative_to(ROOT)}"
        return None
    return "no such module"


_literals = None


def string_literal_in_source(name):
    """`name` written as a string in the code: a log target such as `waitroom::access`."""
    global _literals
    if _literals is None:
        _literals = "".join(
            p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.rs")
        )
    return f'"{name}"' in _literals


def check_code_names(path, number, raw):
    problems = []
    where = f"{path.relative_to(ROOT)}:{number}"
    for name in SOURCE.findall(raw):
        # Another project's file (`pingora-core/src/...`), or a site's.
        first = name.split("/")[0]
        if first.startswith("pingora") or "." in first:
            continue
        if not source_exists(name, path):
            problems.append(f"{where}: {name}: no such file")
    for rest in MODULE.findall(raw):
        why = module_problem(rest)
        if why and not string_literal_in_source(f"waitroom{rest}"):
            problems.append(f"{where}: waitroom{rest}: {why}")
    return problems


def check(path):
    problems = []
    text = path.read_text(encoding="utf-8")
    for number, raw, line in prose_lines(text):
        problems += check_code_names(path, number, raw)
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


# Lists a page must keep whole: every file of a folder named in it, by its name.
COMPLETE = [
    ("docs/testing.md", "tests", "*.rs", lambda p: p.name),
    ("docs/redis.md", "src/store/lua", "*.lua", lambda p: p.stem),
]


def check_complete():
    problems = []
    for page, folder, pattern, name in COMPLETE:
        text = (ROOT / page).read_text(encoding="utf-8")
        for path in sorted((ROOT / folder).glob(pattern)):
            if not re.search(rf"`[^`]*\b{re.escape(name(path))}\b[^`]*`", text):
                problems.append(f"{page}: does not name {path.relative_to(ROOT)}")
    return problems


def main():
    problems = [] if sys.argv[1:] else check_complete()
    for path in markdown_files(sys.argv[1:]):
        problems += check(path)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
