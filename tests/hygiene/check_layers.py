#!/usr/bin/env python3
"""The library's layers, as docs/ARCHITECTURE.md places every lib/ file, hold
in the code: no file includes a header of a layer above its own, no function
calls (or takes the address of) a function of a layer above, and no two units
depend on each other, by their includes or by their calls.

The layer table is the markdown table of ARCHITECTURE.md whose header row
starts "| layer | files |": top to bottom, one layer per name in the first
column (an empty cell continues the layer above), its files as `code` in the
second.  Every lib/*.c and lib/*.h must be placed exactly once; an entry that
names no file (nor a file lib/meson.build generates) is stale.

A unit is a .c file with the headers of its stem (x.c, x.h, x_int.h).  An
include or a reference by name of a function defined (not static) in another
unit's .c is an edge between two units; edges may go sideways within a layer
or down, never up, and never round in a cycle.

usage: check_layers.py --doc ARCHITECTURE.md --lib LIBDIR --include INCDIR
                       [--no-allow]
Exit 0 when every check passes; prints each failure otherwise.
"""
import argparse
import glob
import os
import re
import sys

# Known edges that break the rule today, each with the reason it is still
# here.  An entry that no longer matches any include or call fails the test,
# so the list cannot outlive the fix.
# Known exceptions, each with its reason: (lower unit, upper unit) -> why.
# Empty: nothing below calls up.  An entry whose edge is gone fails the
# test, so the list cannot outlive the code it excuses.
ALLOWED = {}


def strip_code(text):
    """C text without comments, string and character literals."""
    pat = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"'
                     r"|'(?:\\.|[^'\\\n])*'", re.S)

    def blank(m):
        s = m.group(0)
        if s.startswith("/"):
            return " " + "\n" * s.count("\n")
        return s[0] + s[0]
    return pat.sub(blank, text)


def read_table(doc):
    """[(layer, [file patterns])] top to bottom, from the layer table."""
    layers, in_table = [], False
    with open(doc, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.lstrip().startswith("|"):
                if in_table:
                    break
                continue
            if not in_table:
                in_table = [c.lower() for c in cells[:2]] == ["layer",
                                                              "files"]
                continue
            if set(line.strip()) <= set("|-: "):
                continue
            if cells[0] or not layers:
                layers.append((cells[0].strip("*` "), []))
            layers[-1][1].extend(re.findall(r"`([^`]+)`", cells[1]))
    return layers


def generated(lib):
    """Files lib/meson.build names as build outputs."""
    path = os.path.join(lib, "meson.build")
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    names = set()
    for m in re.finditer(r"output\s*:\s*\[([^\]]*)\]", text):
        names.update(re.findall(r"'([^']+)'", m.group(1)))
    return names


def place_files(layers, lib, failures):
    """{file: layer index} of lib/*.c and *.h (and generated headers)."""
    present = sorted(os.path.basename(p) for ext in ("*.c", "*.h")
                     for p in glob.glob(os.path.join(lib, ext)))
    made = generated(lib)
    where = {}
    for i, (name, pats) in enumerate(layers):
        for pat in pats:
            hits = sorted(glob.glob(os.path.join(lib, pat)))
            hits = [os.path.relpath(h, lib) for h in hits]
            if not hits and pat in made:
                hits = [pat]
            if not hits:
                failures.append("the layer table places %s (layer %s), "
                                "which is no file of lib/" % (pat, name))
            for h in hits:
                if h in where and where[h] != i:
                    failures.append("the layer table places %s twice" % h)
                where[h] = i
    for f in present:
        if f not in where:
            failures.append("lib/%s is not placed in the layer table of the "
                            "architecture doc: put it in its layer" % f)
    return where


def unit_of(name):
    stem = os.path.splitext(os.path.basename(name))[0]
    return stem[:-4] if stem.endswith("_int") else stem


def includes(path):
    """The quoted #include names of a file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, flags=re.M)


def functions(text):
    """{name: static?} of the functions defined at file level in stripped C
    text."""
    code = re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", " ", text, flags=re.M)
    defs, depth, head = {}, 0, []
    for ch in code:
        if depth == 0 and ch == "{":
            h = "".join(head)
            m = re.search(r"\b([A-Za-z_]\w*)\s*\([^;]*\)\s*$", h)
            if m and "=" not in h[:m.start()]:
                defs[m.group(1)] = re.search(r"\bstatic\b", h) is not None
        if depth == 0 and ch not in "{;}":
            head.append(ch)
        elif depth == 0:
            head = []
        depth = max(0, depth + (ch == "{") - (ch == "}"))
    return defs


def call_edges(lib, where):
    """{(caller unit, callee unit): [(file, function)]}: references by name
    (calls, addresses, declarations) in one unit's .c to a function another
    unit's .c defines."""
    texts, owner, statics = {}, {}, {}
    for f in sorted(where):
        path = os.path.join(lib, f)
        if not f.endswith(".c") or not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as fh:
            texts[f] = strip_code(fh.read())
        defs = functions(texts[f])
        statics[f] = {n for n, st in defs.items() if st}
        for n, st in defs.items():
            if not st:
                owner[n] = f
    edges = {}
    for f, body in texts.items():
        for name in sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", body))):
            g = owner.get(name)
            if g is None or unit_of(g) == unit_of(f) or name in statics[f]:
                continue
            edges.setdefault((unit_of(f), unit_of(g)), []).append((f, name))
    return edges


def include_edges(lib, inc, where, failures):
    """{(unit, unit): [(file, header)]} of the quoted includes of lib/."""
    edges = {}
    for f in sorted(where):
        path = os.path.join(lib, f)
        if not f.endswith((".c", ".h")) or not os.path.exists(path):
            continue
        for h in includes(path):
            if h not in where:
                if not os.path.exists(os.path.join(inc, h)):
                    failures.append("lib/%s includes \"%s\", neither a "
                                    "placed lib/ file nor a public header"
                                    % (f, h))
                continue
            if unit_of(h) != unit_of(f):
                edges.setdefault((unit_of(f), unit_of(h)), []).append((f, h))
    return edges


def unit_layers(where, failures):
    """{unit: layer index}; a unit's files share one layer."""
    layer = {}
    code = [f for f in where if f.endswith((".c", ".h"))]
    for f in sorted(code, key=lambda f: (not f.endswith(".c"), f)):
        u = unit_of(f)
        if u in layer and layer[u] != where[f]:
            failures.append("lib/%s is placed apart from the rest of its "
                            "unit %s" % (f, u))
        layer.setdefault(u, where[f])
    return layer


def cycles(edges):
    """The strongly connected components of more than one unit."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_edges(kind, edges, layer, layers, allowed, failures):
    """Fails each edge that goes up, then each cycle, of one kind."""
    kept = {e: w for e, w in edges.items() if e not in allowed}
    for (a, b), why in sorted(kept.items()):
        if layer[b] < layer[a]:
            f, x = why[0]
            failures.append("%s %s %s: layer %s uses layer %s above it"
                            % (f, kind, x, layers[layer[a]][0],
                               layers[layer[b]][0]))
    for comp in cycles(kept):
        detail = ["%s -> %s (%s %s %s)" % (a, b, w[0][0], kind, w[0][1])
                  for (a, b), w in sorted(kept.items())
                  if a in comp and b in comp]
        failures.append("units %s depend on each other (%s): %s"
                        % (", ".join(comp), kind, "; ".join(detail)))


def report(failures, ok):
    """Prints each failure, or ok when there is none; the exit status."""
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("ok: " + ok)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--allow", action="append", default=[],
                    metavar="LOW,UP", help="one more allowed edge (the "
                    "selftest's stale entry)")
    ap.add_argument("--no-allow", action="store_true",
                    help="ignore the list of known violations")
    a = ap.parse_args()

    failures = []
    layers = read_table(a.doc)
    if not layers:
        print("FAIL: %s has no layer table (| layer | files | ...)" % a.doc)
        return 1
    where = place_files(layers, a.lib, failures)
    layer = unit_layers(where, failures)
    allowed = {} if a.no_allow else dict(ALLOWED)
    for pair in a.allow:
        low, _, up = pair.partition(",")
        allowed[(low, up)] = "given with --allow"
    inc = include_edges(a.lib, a.include, where, failures)
    calls = call_edges(a.lib, where)
    check_edges("includes", inc, layer, layers, allowed, failures)
    check_edges("calls", calls, layer, layers, allowed, failures)
    for e, why in sorted(allowed.items()):
        if e in inc or e in calls:
            print("known: %s -> %s (%s)" % (e[0], e[1], why))
        else:
            failures.append("the known violation %s -> %s is gone: take it "
                            "off the allow-list of %s"
                            % (e[0], e[1], os.path.basename(__file__)))
    print("%d layers, %d files, %d include and %d call edges between units"
          % (len(layers), len(where), len(inc), len(calls)))
    return report(failures, "every lib/ file placed; nothing includes or "
                  "calls up; no cycle")


if __name__ == "__main__":
    sys.exit(main())
