#!/usr/bin/env python3
"""Embeds lib/lua/*.lua into C at build time.

usage: embed_lua.py [--depfile FILE] OUT.c OUT.h op1.lua op2.lua ...

Each op file (one script per operation) names what it needs at its top,
one line each, paths relative to the ops' directory, without ".lua":

    --- @include "include/keys"

An include names its own includes the same way; they are resolved
recursively, each file once, and each comes before the files that include
it (dependency order, which keeps Lua's scoping: a definition only sees
the ones before it).  An include file starts with a header (its leading
comment lines, the @include lines among them, up to the first blank line)
that stays out of the scripts.  A line

    --- @inline "include/compact/bucket"

(in include/compact/lib.lua) is replaced by that file's text after its
header, each line indented as the @inline line is: c_lib()'s body is kept
in several files but stays one closure, made only by the calls that use it.

Redis runs a script's whole body on every call, and each top-level `local
function` costs a closure per call whether the op calls it or not; so the
included text is cut into its top-level definitions (each with the comment
above it), and an op gets those whose names it mentions, then those they
mention, and so on, in dependency order.  Top-level text that defines no
name is always kept.  An op file that starts with a Redis 7 shebang line
("#!lua" or "#!lua flags=no-writes") has that line moved to the very top,
where Redis looks for it.  The C side gets one table, dq__scripts[],
indexed by DQ_SCRIPT_<NAME>, with the body, its length and its SHA1 (what
EVALSHA needs), so no SHA1 is computed at run time.

The build fails, naming the file and line, on an include of a file that
does not exist, an include whose names the including file never uses, a
name used from a file the user does not include (directly or through its
includes), a top-level name defined twice among a script's files, an
include cycle, and an include file that no script includes.
"""
import hashlib
import os
import re
import sys

DEF_FUNC = re.compile(rb"^local\s+function\s+([A-Za-z_][A-Za-z0-9_]*)")
DEF_VARS = re.compile(rb"^local\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*=")
NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
DIRECTIVE = re.compile(rb'^([ \t]*)---[ \t]*@(include|inline)[ \t]+"([^"]*)"[ \t]*$')
LOOSE_DIRECTIVE = re.compile(rb"^[ \t]*---[ \t]*@(include|inline)\b")
# the names a line of code uses, for the checks: strings, comments, fields
# (t.name, t:name) and targets (name = .., also a table's keys) left out
CODE_TOKEN = re.compile(rb"""--.*|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|"""
                        rb"""[.:][ \t]*[A-Za-z_][A-Za-z0-9_]*|"""
                        rb"""[A-Za-z_][A-Za-z0-9_]*[ \t]*=(?!=)|"""
                        rb"""([A-Za-z_][A-Za-z0-9_]*)""")


class EmbedError(Exception):
    """A mistake in the Lua sources, as "file:line: what"."""


def split_prelude(prelude: bytes):
    """Cuts an included file's text (the prelude of the scripts that
    include it) into chunks [(names, text)], each a top-level `local`
    definition with the comment lines right above it; text before the
    first definition is a chunk without names."""
    chunks, cur, names, pending = [], [], set(), []
    for line in prelude.splitlines(keepends=True):
        m = DEF_FUNC.match(line) or DEF_VARS.match(line)
        if m:
            if cur or names:
                chunks.append((names, b"".join(cur)))
            cur, pending = pending, []
            names = {n.strip() for n in m.group(1).split(b",")}
            cur.append(line)
        elif line.startswith(b"--"):
            pending.append(line)   # may be the comment of the next definition
        else:
            cur.extend(pending)
            pending = []
            cur.append(line)
    cur.extend(pending)
    if cur or names:
        chunks.append((names, b"".join(cur)))
    return chunks


def mentions(text: bytes):
    """The identifiers of text, full-line comments left out."""
    code = b"".join(l for l in text.splitlines(keepends=True)
                    if not l.lstrip().startswith(b"--"))
    return set(NAME.findall(code))


def prelude_for(chunks, op: bytes) -> bytes:
    """The chunks op needs, directly or through other chunks, in order."""
    want = mentions(op)
    keep = [not names for names, _ in chunks]
    changed = True
    while changed:
        changed = False
        for k, (names, text) in enumerate(chunks):
            if not keep[k] and names & want:
                keep[k] = True
                want |= mentions(text)
                changed = True
    return b"".join(text for k, (_, text) in enumerate(chunks) if keep[k])


class Source:
    """One .lua file: its directives, top-level names and the names its
    code uses (first line of each), its body without header and @include
    lines (@inline lines left for expand)."""

    def __init__(self, root, rel, is_op):
        self.rel, self.is_op = rel, is_op
        self.path = os.path.join(root, rel + ".lua")
        with open(self.path, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        start = 0 if is_op else header_end(lines)
        self.directives, self.defs, self.uses = [], {}, {}
        self.body = []   # (line number, text), directive lines as such
        for no, line in enumerate(lines[start:], start + 1):
            self.body.append((no, line))
            self.note_names(no, line)
        for no, line in enumerate(lines, 1):
            m = DIRECTIVE.match(line)
            if not m and LOOSE_DIRECTIVE.match(line):
                raise EmbedError('%s:%d: write the directive as --- @%s "path"'
                                 % (self.path, no, LOOSE_DIRECTIVE.match(line)
                                    .group(1).decode()))
            if m:
                self.directives.append((m.group(2).decode(), m.group(3).decode(),
                                        no, m.group(1)))

    def note_names(self, no, line):
        m = DEF_FUNC.match(line) or DEF_VARS.match(line)
        if m:
            for n in m.group(1).split(b","):
                name = n.strip().decode()
                if name in self.defs and not self.is_op:
                    raise EmbedError("%s:%d: %s is defined again (first at line %d)"
                                     % (self.path, no, name, self.defs[name]))
                self.defs.setdefault(name, no)
        for t in CODE_TOKEN.finditer(line):
            if t.group(1):
                self.uses.setdefault(t.group(1).decode(), no)

    def where(self, no):
        return "%s:%d" % (self.path, no)


def header_end(lines):
    """Where an include file's body starts: after its leading comment lines
    and the blank line that ends them."""
    for k, line in enumerate(lines):
        if not line.strip():
            return k + 1
        if not line.startswith(b"--"):
            return 0
    return 0


class Tree:
    """The Lua sources under root, loaded once each."""

    def __init__(self, root):
        self.root, self.cache = root, {}

    def load(self, rel, is_op=False, by=None):
        if rel not in self.cache:
            path = os.path.join(self.root, rel + ".lua")
            if not os.path.isfile(path):
                if by is None:
                    raise EmbedError("%s: no such file" % path)
                src, no = by
                raise EmbedError('%s: unknown include "%s" (no file %s)'
                                 % (src.where(no), rel, path))
            self.cache[rel] = Source(self.root, rel, is_op)
        return self.cache[rel]


def resolve(tree, op):
    """The files op includes, in dependency order, and those it inlines
    (with the file that inlines each)."""
    order, inlined, state, stack = [], {}, {}, []

    def visit(src):
        state[src.rel] = "open"
        stack.append(src.rel)
        for kind, rel, no, _ in src.directives:
            dep = tree.load(rel, by=(src, no))
            if state.get(rel) == "open":
                cycle = stack[stack.index(rel):] + [rel]
                raise EmbedError("%s: include cycle: %s"
                                 % (src.where(no), " -> ".join(cycle)))
            if kind == "inline":
                inlined[rel] = src
            if rel not in state:
                visit(dep)
                if kind == "include":
                    order.append(dep)
        stack.pop()
        state[src.rel] = "done"

    visit(op)
    return order, inlined


def reach(tree, src, memo):
    """The files src includes or inlines, directly or through others."""
    if src.rel not in memo:
        memo[src.rel] = set()
        for _, rel, _, _ in src.directives:
            memo[src.rel] |= {rel} | reach(tree, tree.cache[rel], memo)
    return memo[src.rel]


def check(tree, op, order, inlined):
    """Fails on a name defined twice, an unused include and a name used
    from a file its user does not include."""
    files = [op] + order + [tree.cache[r] for r in inlined]
    owner = {}
    for src in files[1:] + [op]:
        for name, no in sorted(src.defs.items(), key=lambda d: d[1]):
            if name in owner and owner[name][0] is not src:
                first, fno = owner[name]
                raise EmbedError("%s: %s is defined again (first at %s)"
                                 % (src.where(no), name, first.where(fno)))
            owner.setdefault(name, (src, no))
    memo = {}
    for src in files:
        for _, rel, no, _ in src.directives:
            if not set(tree.cache[rel].defs) & set(src.uses):
                raise EmbedError('%s: unused include "%s": %s uses none of its names'
                                 % (src.where(no), rel, src.rel + ".lua"))
        sees = reach(tree, src, memo) | {src.rel}
        if src.rel in inlined:
            sees |= reach(tree, inlined[src.rel], memo)
        for name, no in src.uses.items():
            home = owner.get(name, (op,))[0]
            if home is not op and home.rel not in sees | set(inlined):
                raise EmbedError('%s: %s comes from "%s", which %s does not include'
                                 % (src.where(no), name, home.rel, src.rel + ".lua"))


def expand(tree, src, indent=b""):
    """src's body, its @include lines left out and its @inline lines
    replaced by the inlined file's body, indented as the line."""
    out = []
    for _, line in src.body:
        m = DIRECTIVE.match(line)
        if not m:
            out.append(indent + line if line.strip() else line)
        elif m.group(2) == b"inline":
            out.append(expand(tree, tree.cache[m.group(3).decode()],
                              indent + m.group(1)))
    return b"".join(out)


def script_body(tree, name):
    op = tree.load(name, is_op=True)
    order, inlined = resolve(tree, op)
    check(tree, op, order, inlined)
    text = expand(tree, op)
    shebang = b""
    if text.startswith(b"#!"):
        shebang, _, text = text.partition(b"\n")
        shebang += b"\n"
    chunks = [c for src in order for c in split_prelude(expand(tree, src))]
    return shebang + prelude_for(chunks, text) + b"\n" + text


def orphans(tree):
    """Fails on a file under include/ that no script includes."""
    top = os.path.join(tree.root, "include")
    for dirpath, _, names in sorted(os.walk(top)):
        for n in sorted(names):
            if n.endswith(".lua"):
                rel = os.path.relpath(os.path.join(dirpath, n), tree.root)[:-4]
                if rel.replace(os.sep, "/") not in tree.cache:
                    raise EmbedError("%s:1: included by no script"
                                     % os.path.join(dirpath, n))


def c_string(data: bytes) -> str:
    lines, cur = [], []
    for b in data:
        if b == 0x0A:
            cur.append("\\n")
            lines.append('"' + "".join(cur) + '"')
            cur = []
        elif b in (0x22, 0x5C):
            cur.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            cur.append(chr(b))
        else:
            cur.append("\\%03o" % b)
    if cur:
        lines.append('"' + "".join(cur) + '"')
    return "\n    ".join(lines)


def write_h(out_h, names):
    with open(out_h, "w") as h:
        h.write("/* Generated by lib/embed_lua.py from the .lua files in lib/lua. */\n")
        h.write("#ifndef DQ_SCRIPTS_H\n#define DQ_SCRIPTS_H\n#include <stddef.h>\n\n")
        h.write("enum dq__script_id {\n")
        for n in names:
            h.write("    DQ_SCRIPT_%s,\n" % n.upper())
        h.write("    DQ_SCRIPT__COUNT\n};\n\n")
        h.write("typedef struct dq__script {\n")
        h.write("    const char *name; /* file name without .lua */\n")
        h.write("    const char *body; /* what it uses of its includes + the op's file */\n")
        h.write("    size_t len;       /* bytes in body */\n")
        h.write("    const char *sha;  /* SHA1 of body, 40 hex digits */\n")
        h.write("} dq__script;\n\n")
        h.write("extern const dq__script dq__scripts[DQ_SCRIPT__COUNT];\n\n#endif\n")


def write_c(out_c, entries):
    with open(out_c, "w") as c:
        c.write("/* Generated by lib/embed_lua.py from the .lua files in lib/lua. */\n")
        c.write('#include "scripts.h"\n\n')
        for name, body in entries:
            c.write("static const char body_%s[] =\n    %s;\n\n" % (name, c_string(body)))
        c.write("const dq__script dq__scripts[DQ_SCRIPT__COUNT] = {\n")
        for name, body in entries:
            c.write('    {"%s", body_%s, %d, "%s"},\n'
                    % (name, name, len(body), hashlib.sha1(body).hexdigest()))
        c.write("};\n")


def write_dep(depfile, out_c, tree):
    deps = sorted(s.path for s in tree.cache.values())
    with open(depfile, "w") as d:
        d.write("%s: %s\n" % (out_c.replace(" ", "\\ "),
                              " ".join(p.replace(" ", "\\ ") for p in deps)))


def main(argv) -> int:
    depfile = None
    if argv[:1] == ["--depfile"]:
        depfile, argv = argv[1], argv[2:]
    out_c, out_h, *ops = argv
    tree = Tree(os.path.dirname(ops[0]) or ".")
    entries = []
    try:
        for path in ops:
            name = os.path.splitext(os.path.basename(path))[0]
            entries.append((name, script_body(tree, name)))
        orphans(tree)
    except EmbedError as e:
        sys.stderr.write("embed_lua.py: %s\n" % e)
        return 1
    write_h(out_h, [n for n, _ in entries])
    write_c(out_c, entries)
    if depfile:
        write_dep(depfile, out_c, tree)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
