#!/usr/bin/env python3
"""The dynamic symbols exported by the shared libraries are exactly the public
API: every one is named dq_*, carries a version node of a linker version
script in lib/*.map and matches that script's global patterns; every function
declared DQ_EXTERN in include/*.h is exported (by one of the libraries) and
nothing else is (no internal dq_* helper leaks).

usage: check_symbols.py --nm NM --maps LIBDIR --include INCDIR LIB.so...
"""
import argparse
import fnmatch
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_headers import extern_functions  # noqa: E402


def parse_map(path):
    """{version node: [global patterns]} of a GNU ld version script."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
        text = re.sub(r"#[^\n]*", " ", text)
    nodes = {}
    for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_.]*)\s*\{(.*?)\}\s*"
                         r"[A-Za-z0-9_.]*\s*;", text, flags=re.S):
        node, body = m.group(1), m.group(2)
        pats, section = [], "global"
        for tok in re.split(r"[;\s]+", body):
            if not tok:
                continue
            if tok in ("global:", "local:"):
                section = tok[:-1]
            elif section == "global":
                pats.append(tok)
        nodes[node] = pats
    return nodes


def exported(nm, lib):
    """[(name, version, type)] of the defined dynamic symbols of lib."""
    r = subprocess.run([nm, "-D", "--defined-only", lib],
                       stdout=subprocess.PIPE, universal_newlines=True,
                       check=True, timeout=60)
    syms = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        typ, name = parts[-2], parts[-1]
        ver = ""
        if "@" in name:
            name, _, ver = name.partition("@")
            ver = ver.lstrip("@")
        syms.append((name, ver, typ))
    return syms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nm", required=True)
    ap.add_argument("--maps", required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--skip-header", action="append", default=[],
                    help="a header whose functions this build leaves out")
    ap.add_argument("libs", nargs="+")
    a = ap.parse_args()

    nodes = {}
    for m in sorted(glob.glob(os.path.join(a.maps, "*.map"))):
        nodes.update(parse_map(m))
    if not nodes:
        print("FAIL: no version script (*.map) in %s" % a.maps)
        return 1
    declared = {}
    for h in sorted(glob.glob(os.path.join(a.include, "*.h"))):
        if os.path.basename(h) in a.skip_header:
            print("%s: skipped (not in this build)" % os.path.basename(h))
            continue
        for f in extern_functions(h):
            declared[f] = os.path.basename(h)

    failures = []
    all_exported = {}
    for lib in a.libs:
        syms = exported(a.nm, lib)
        funcs = 0
        for name, ver, typ in syms:
            if typ == "A" and name in nodes:
                continue          # the version node itself
            if not name.startswith("dq_"):
                failures.append("%s exports %s (%s): not dq_*"
                                % (os.path.basename(lib), name, typ))
                continue
            if ver not in nodes:
                failures.append("%s exports %s with version '%s', not a node "
                                "of lib/*.map (%s)" % (os.path.basename(lib),
                                                       name, ver,
                                                       sorted(nodes)))
            elif not any(fnmatch.fnmatchcase(name, p) for p in nodes[ver]):
                failures.append("%s exports %s@%s, not matched by that "
                                "node's global patterns %s"
                                % (os.path.basename(lib), name, ver,
                                   nodes[ver]))
            if typ not in ("T", "W", "i"):
                failures.append("%s exports data symbol %s (%s): the API "
                                "has functions only"
                                % (os.path.basename(lib), name, typ))
            all_exported[name] = lib
            funcs += 1
        print("%s: %d exported dq_* symbols" % (os.path.basename(lib), funcs))

    for f, h in sorted(declared.items()):
        if f not in all_exported:
            failures.append("%s declares %s DQ_EXTERN but no library "
                            "exports it" % (h, f))
    skipped = set()
    for h in a.skip_header:
        p = os.path.join(a.include, h)
        if os.path.exists(p):
            skipped.update(extern_functions(p))
    for name in sorted(all_exported):
        if name in skipped:
            failures.append("%s is exported although its header %s was "
                            "said to be left out of this build"
                            % (name, a.skip_header))
        elif name not in declared:
            failures.append("%s is exported by %s but declared in no public "
                            "header (internal symbol leaking)"
                            % (name, os.path.basename(all_exported[name])))
    print("%d functions declared in include/*.h, %d exported"
          % (len(declared), len(all_exported)))
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("ok: exports == declarations, all dq_*, all versioned")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
