#!/usr/bin/env python3
"""Every public header (include/*.h) compiles alone, twice in a row (include
guard), as strict C99 and as C++11, and declares its DQ_EXTERN functions with
C linkage (a C++ object that uses them references unmangled names).

usage: check_headers.py --cc "CC" --cxx "CXX" --nm NM --include DIR
Exit 0 when every check passes; prints each failure otherwise.
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

C_FLAGS = ["-std=c99", "-pedantic", "-Werror", "-Wall", "-Wextra",
           "-Wstrict-prototypes", "-Wmissing-prototypes", "-Wundef",
           "-Wshadow"]
CXX_FLAGS = ["-std=c++11", "-pedantic", "-Werror", "-Wall", "-Wextra",
             "-Wundef", "-Wshadow", "-Wold-style-cast"]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def extern_functions(path):
    """Names of the functions declared DQ_EXTERN in a header."""
    with open(path, encoding="utf-8") as f:
        text = strip_comments(f.read())
    text = re.sub(r"#define[^\n]*(\\\n[^\n]*)*", " ", text)
    return re.findall(r"\bDQ_EXTERN\b[^;{}()]*?\b(dq_\w+)\s*\(", text)


def compile_tu(cmd, flags, lang, src, inc, out=None):
    with tempfile.NamedTemporaryFile("w", suffix=".c" if lang == "c"
                                     else ".cc", delete=False) as f:
        f.write(src)
        name = f.name
    try:
        args = cmd + flags + ["-I", inc, "-x", lang]
        args += ["-c", name, "-o", out] if out else ["-fsyntax-only", name]
        r = subprocess.run(args, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
        return r.returncode, r.stdout.decode(errors="replace"), args
    finally:
        os.unlink(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", required=True)
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--nm", required=True)
    ap.add_argument("--include", required=True)
    a = ap.parse_args()
    cc, cxx = shlex.split(a.cc), shlex.split(a.cxx)
    headers = sorted(glob.glob(os.path.join(a.include, "*.h")))
    failures = 0
    if not any(h.endswith("/delayq.h") for h in headers):
        print("FAIL: no delayq.h in %s" % a.include)
        return 1

    def check(ok, what, detail=""):
        nonlocal failures
        print("%s: %s" % ("ok" if ok else "FAIL", what))
        if not ok:
            failures += 1
            if detail:
                print(detail)

    for h in headers:
        base = os.path.basename(h)
        inc = '#include "%s"\n' % base
        # Alone, twice (include guard), in C99 and C++11.
        rc, out, args = compile_tu(cc, C_FLAGS, "c", inc + inc, a.include)
        check(rc == 0, "%s compiles alone as C99 (%s)" % (base,
              " ".join(C_FLAGS)), out + " ".join(args))
        rc, out, args = compile_tu(cxx, CXX_FLAGS, "c++", inc + inc,
                                   a.include)
        check(rc == 0, "%s compiles alone as C++11 (%s)" % (base,
              " ".join(CXX_FLAGS)), out + " ".join(args))
        # C linkage: a C++ object using every function references the plain
        # C names.
        funcs = extern_functions(h)
        check(len(funcs) > 0 or base != "delayq.h",
              "%s declares DQ_EXTERN functions (%d)" % (base, len(funcs)))
        if not funcs:
            continue
        body = inc + "typedef void (*dq_fp)(void);\n" \
            "extern dq_fp dq_hygiene_refs[];\ndq_fp dq_hygiene_refs[] = {\n"
        body += "".join("    reinterpret_cast<dq_fp>(&%s),\n" % f
                        for f in funcs)
        body += "};\n"
        with tempfile.TemporaryDirectory() as tmp:
            obj = os.path.join(tmp, "refs.o")
            rc, out, args = compile_tu(cxx, ["-std=c++11", "-Werror"], "c++",
                                       body, a.include, out=obj)
            if rc != 0:
                check(False, "%s: C++ object using its functions" % base,
                      out + " ".join(args))
                continue
            r = subprocess.run([a.nm, "-u", obj], stdout=subprocess.PIPE,
                               universal_newlines=True, timeout=60)
            undef = {line.split()[-1] for line in r.stdout.splitlines()
                     if line.strip()}
            missing = [f for f in funcs if f not in undef]
            check(not missing, "%s: %d functions have C linkage in C++"
                  % (base, len(funcs)),
                  "not referenced by their C name (mangled?): %s\n%s"
                  % (missing, r.stdout))
    print("%d header(s), %d failure(s)" % (len(headers), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
