#!/usr/bin/env python3
"""Generates docs/API.md, the API reference, from the comments of the public
headers (include/*.h): the headers are the single source of truth.

usage: gen_api_md.py [-o docs/API.md] [--check docs/API.md] [INCLUDE_DIR]

  -o FILE       write the page to FILE (default: stdout)
  --check FILE  regenerate and compare with FILE: exit 1 with a diff if it is
                out of date (the hygiene test suite runs this)

INCLUDE_DIR defaults to include/ next to this script's directory.

What it reads (the conventions of delayq.h):
  - the header's opening block comment: its introduction;
  - section rulers, /* ---- Title ----- */: one section each;
  - blank-line separated blocks inside a section: a block's leading comment
    documents the code that follows it (#defines, enums, typedefs,
    DQ_EXTERN prototypes), shown verbatim in a code block;
  - every DQ_EXTERN function gets an entry (and an anchor) of its own; a
    block that declares several functions documents them together.
"""
import argparse
import difflib
import glob
import os
import re
import sys

RULER = re.compile(r"^/\*\s*-{2,}\s*(.*?)\s*-*\s*\*/\s*$")
FUNC = re.compile(r"\bDQ_EXTERN\b[^;{}()]*?\b(dq_\w+)\s*\(")


def comment_lines(text):
    """The text of a /* ... */ comment, one string per line: the leading
    " * " of each line removed, deeper indentation kept."""
    body = text.strip()
    if body.startswith("/*"):
        body = body[2:]
    if body.endswith("*/"):
        body = body[:-2]
    out = []
    for ln in body.split("\n"):
        m = re.match(r"^\s*\*(?!/) ?(.*)$", ln)
        out.append((m.group(1) if m else ln.strip()).rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def md_escape(s):
    """Escapes what Markdown would read as emphasis, HTML or an escape,
    outside `code` spans."""
    parts = re.split(r"(`[^`]*`)", s)
    for i in range(0, len(parts), 2):
        parts[i] = (parts[i].replace("\\", "\\\\").replace("*", "\\*")
                    .replace("<", "&lt;"))
    return "".join(parts)


def render_prose(lines):
    """Comment lines -> Markdown: prose paragraphs, '-' lists, and anything
    laid out by hand (indented or aligned) kept verbatim in a text block."""
    out = []
    paras, cur = [], []
    for ln in lines:
        if ln.strip():
            cur.append(ln)
        elif cur:
            paras.append(cur)
            cur = []
    if cur:
        paras.append(cur)
    for p in paras:
        if p[0].lstrip().startswith("- ") and \
                all(x.lstrip().startswith("- ") or x.startswith(" ")
                    for x in p):
            items = []
            for x in p:
                if x.lstrip().startswith("- "):
                    items.append(x.lstrip()[2:].strip())
                else:
                    items[-1] += " " + x.strip()
            out.append("\n".join("- " + md_escape(i) for i in items))
        elif any(x.startswith(" ") for x in p) or \
                re.match(r"^[\w.\[\]*]+:\s{2,}", p[0]) or \
                any(re.match(r"^\S+\s{3,}\S", x) for x in p):
            out.append("```text\n" + "\n".join(p) + "\n```")
        else:
            out.append(md_escape(" ".join(x.strip() for x in p)))
    return "\n\n".join(out)


def split_blocks(lines):
    """Splits source lines into blank-line separated blocks, never inside
    a comment."""
    blocks, cur, in_comment = [], [], False
    for ln in lines:
        if not ln.strip() and not in_comment:
            if cur:
                blocks.append(cur)
                cur = []
            continue
        cur.append(ln)
        # Track /* ... */ state across lines (no nesting in C).
        s = ln
        while s:
            if in_comment:
                e = s.find("*/")
                if e < 0:
                    s = ""
                else:
                    in_comment = False
                    s = s[e + 2:]
            else:
                b = s.find("/*")
                if b < 0:
                    s = ""
                else:
                    in_comment = True
                    s = s[b + 2:]
    if cur:
        blocks.append(cur)
    return blocks


def leading_comment(block):
    """(comment lines, code lines) of a block whose first line opens a
    comment; the comment may span several lines."""
    if not block[0].lstrip().startswith("/*"):
        return [], block
    text = []
    for i, ln in enumerate(block):
        text.append(ln)
        if "*/" in ln and (i > 0 or ln.find("*/") > ln.find("/*")):
            return comment_lines("\n".join(text)), block[i + 1:]
    return comment_lines("\n".join(text)), []


class Header:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.intro = []
        self.sections = []   # [(title, [blocks])]
        self.functions = []  # every DQ_EXTERN function, in order
        self.parse()

    def parse(self):
        lines = self.lines
        i = 0
        # The opening comment: the file's introduction.
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i < len(lines) and lines[i].lstrip().startswith("/*"):
            j = i
            while "*/" not in lines[j]:
                j += 1
            self.intro = comment_lines("\n".join(lines[i:j + 1]))
            # Drop the "name.h - " of the first line: the heading says it.
            if self.intro:
                self.intro[0] = re.sub(r"^\S+\.h\s+-\s+", "", self.intro[0])
            i = j + 1
        # Declarations before the first ruler form an untitled section.
        title, cur = "", []
        for ln in lines[i:]:
            m = RULER.match(ln.strip())
            if m:
                self.sections.append((title, cur))
                title, cur = m.group(1).strip(), []
                continue
            cur.append(ln)
        self.sections.append((title, cur))
        parsed = []
        for title, body in self.sections:
            blocks = []
            for b in split_blocks(body):
                b = [x for x in b if not re.match(
                    r"^\s*#\s*(ifdef __cplusplus|endif|ifndef DELAYQ|include|"
                    r"define DELAYQ_\w+_H\s*$|define DELAYQ_H\s*$)", x)
                    and x.strip() not in ("}", 'extern "C" {')
                    and not x.strip().startswith("#endif /*")]
                b = [x for x in b if x.strip()]
                if not b:
                    continue
                comment, code = leading_comment(b)
                funcs = FUNC.findall(re.sub(r"/\*.*?\*/", "",
                                            "\n".join(code), flags=re.S))
                self.functions += funcs
                blocks.append((comment, code, funcs))
            if blocks:
                parsed.append((title, blocks))
        self.sections = parsed
        # Nothing may be dropped: every DQ_EXTERN prototype gets an entry.
        text = re.sub(r"/\*.*?\*/", "", "\n".join(lines), flags=re.S)
        text = re.sub(r"#\s*define[^\n]*(\\\n[^\n]*)*", "", text)
        declared = FUNC.findall(text)
        if declared != self.functions:
            raise SystemExit("gen_api_md: %s: found %d DQ_EXTERN functions, "
                             "documented %d: %s" % (
                                 self.name, len(declared),
                                 len(self.functions),
                                 sorted(set(declared) ^
                                        set(self.functions))))


def split_functions(comment, code):
    """Splits a block's code into one entry per DQ_EXTERN function:
    [(name, code lines, comment lines)].  A comment right before a
    prototype documents it; the block's leading comment documents the first
    function; other lines (#defines, typedefs) go with the next function."""
    entries, pending, i = [], [], 0
    first_doc = comment
    while i < len(code):
        ln = code[i]
        m = FUNC.search(ln)
        if not m:
            pending.append(ln)
            i += 1
            continue
        j = i
        while ";" not in code[j] and j + 1 < len(code):
            j += 1
        proto = code[i:j + 1]
        doc = []
        # A comment that ends right before the prototype is its doc.
        if pending and pending[-1].rstrip().endswith("*/"):
            k = len(pending) - 1
            while k > 0 and not pending[k].lstrip().startswith("/*"):
                k -= 1
            doc = comment_lines("\n".join(pending[k:]))
            pending = pending[:k]
        if not entries and first_doc:
            doc = first_doc + ([""] + doc if doc else [])
        entries.append((m.group(1), pending + proto, doc))
        pending = []
        i = j + 1
    if pending and entries:
        name, c, d = entries[-1]
        entries[-1] = (name, c + pending, d)
    return entries


def anchor(name):
    return name.lower()


def render(headers, version):
    out = ["# libdelayq API reference", ""]
    out.append("Version %s.  Generated by `tools/gen_api_md.py` from the "
               "comments of the public headers; do not edit by hand: change "
               "the header, then run `python3 tools/gen_api_md.py -o "
               "docs/API.md` (the `hygiene` test suite fails while this "
               "page is out of date)." % version)
    out.append("")
    total = sum(len(h.functions) for h in headers)
    out.append("%d functions in %d headers:" % (total, len(headers)))
    out.append("")
    for h in headers:
        out.append("- [`%s`](#%s): %d functions" %
                   (h.name, anchor(h.name.replace(".", "")),
                    len(h.functions)))
    out.append("")
    for h in headers:
        out.append("## %s" % h.name)
        out.append("")
        if h.intro:
            out.append(render_prose(h.intro))
            out.append("")
        if h.functions:
            out.append("Functions: " + ", ".join(
                "[`%s`](#%s)" % (f, anchor(f)) for f in h.functions) + ".")
            out.append("")
        for title, blocks in h.sections:
            if title:
                out.append("### %s" % title)
                out.append("")
            for comment, code, funcs in blocks:
                if funcs:
                    for name, fcode, doc in split_functions(comment, code):
                        out.append('<a id="%s"></a>' % anchor(name))
                        out.append("#### `%s`" % name)
                        out.append("")
                        out.append("```c")
                        out.extend(fcode)
                        out.append("```")
                        out.append("")
                        if doc:
                            out.append(render_prose(doc))
                            out.append("")
                    continue
                if code:
                    out.append("```c")
                    out.extend(code)
                    out.append("```")
                    out.append("")
                if comment:
                    out.append(render_prose(comment))
                    out.append("")
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def generate(include_dir):
    paths = sorted(glob.glob(os.path.join(include_dir, "*.h")),
                   key=lambda p: (os.path.basename(p) != "delayq.h", p))
    if not paths:
        raise SystemExit("gen_api_md: no headers in %s" % include_dir)
    headers = [Header(p) for p in paths]
    version = "?"
    with open(paths[0], encoding="utf-8") as f:
        m = re.search(r'#define DQ_VERSION_STRING "([^"]+)"', f.read())
        if m:
            version = m.group(1)
    return render(headers, version)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("include", nargs="?",
                    default=os.path.join(here, "..", "include"))
    ap.add_argument("-o", "--output")
    ap.add_argument("--check")
    a = ap.parse_args()
    page = generate(a.include)
    if a.check:
        try:
            with open(a.check, encoding="utf-8") as f:
                old = f.read()
        except OSError as e:
            print("gen_api_md: %s: %s" % (a.check, e))
            return 1
        if old == page:
            print("ok: %s is up to date with %s/*.h" % (a.check, a.include))
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            old.splitlines(True), page.splitlines(True),
            a.check, "regenerated"))
        print("\nFAIL: %s is out of date: run python3 tools/gen_api_md.py "
              "-o docs/API.md" % a.check)
        return 1
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
