#!/usr/bin/env python3
"""check_layers.py fails where it must: on small trees written to a temp dir,
a clean one passes and each one with an upward include, an include cycle, a
call cycle hidden behind a shared header, a call up (or a function's address
taken up), an unplaced file, a stale table entry or a stale allow-list entry
fails with its own message.

usage: test_check_layers.py
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")

TABLE = """# fixture

| layer | files | what they own |
|---|---|---|
| top | `top.c` `top.h` | the driver |
| mid | `a.c` `a.h` | one part |
| | `b.c` `b.h` | another |
| low | `low.c` `low.h` `shared.h` | the base |
"""

# A tree that keeps the rules: top uses a and low, a uses b, b uses low.
CLEAN = {
    "top.h": '#include "a.h"\nint top_run(void);\n',
    "top.c": '#include "top.h"\n#include "low.h"\n'
             "int top_run(void) { return a_f() + low_f(); }\n",
    "a.h": '#include "b.h"\nint a_f(void);\n',
    "a.c": '#include "a.h"\nint a_f(void) { return b_f(); }\n',
    "b.h": '#include "low.h"\nint b_f(void);\n',
    "b.c": '#include "b.h"\n'
           "static int twice(int x) { return 2 * x; }\n"
           "int b_f(void) { return twice(low_f()); }\n",
    "low.h": "int low_f(void);\n",
    "low.c": '#include "low.h"\n'
             "/* top_run() in a comment is no call */\n"
             "int low_f(void) { const char *s = \"a_f()\"; return s[0]; }\n",
    "shared.h": "int a_f(void);\nint b_f(void);\n",
}

CASES = [
    ("clean", {}, None, 0, "ok:"),
    ("upward include", {"low.h": '#include "top.h"\nint low_f(void);\n'},
     None, 1, "low.h includes top.h: layer low uses layer top above it"),
    ("include cycle", {"b.h": '#include "low.h"\n#include "a.h"\n'
                              "int b_f(void);\n"},
     None, 1, "units a, b depend on each other (includes)"),
    ("call cycle", {"b.c": '#include "shared.h"\n'
                           "int b_f(void) { return a_f() + 1; }\n"},
     None, 1, "units a, b depend on each other (calls)"),
    ("call up", {"low.c": "int top_run(void);\n"
                          "int low_f(void) { return top_run(); }\n"},
     None, 1, "low.c calls top_run: layer low uses layer top above it"),
    ("function pointer up", {"low.c": "int top_run(void);\n"
                                      "static int (*f)(void) = top_run;\n"
                                      "int low_f(void) { return f(); }\n"},
     None, 1, "low.c calls top_run: layer low uses layer top above it"),
    ("unplaced file", {"extra.c": "int extra(void) { return 0; }\n"},
     None, 1, "lib/extra.c is not placed in the layer table"),
    ("stale entry", {}, TABLE + "| | `gone.c` | removed |\n", 1,
     "places gone.c (layer low), which is no file of lib/"),
    ("unknown header", {"a.c": '#include "a.h"\n#include "nowhere.h"\n'
                               "int a_f(void) { return b_f(); }\n"},
     None, 1, "includes \"nowhere.h\", neither a placed lib/ file"),
    # An allowed edge the tree does not have (--allow, in run()).
    ("stale allow-list", {}, None, 1, "take it off the allow-list"),
]


def run(name, change, table, want_rc, want_text):
    with tempfile.TemporaryDirectory() as d:
        lib, inc = os.path.join(d, "lib"), os.path.join(d, "include")
        os.mkdir(lib)
        os.mkdir(inc)
        for f, text in dict(CLEAN, **change).items():
            with open(os.path.join(lib, f), "w") as fh:
                fh.write(text)
        doc = os.path.join(d, "ARCHITECTURE.md")
        with open(doc, "w") as fh:
            fh.write(table or TABLE)
        args = [sys.executable, CHECK, "--doc", doc, "--lib", lib,
                "--include", inc]
        args.append("--no-allow")
        if name == "stale allow-list":
            args += ["--allow", "a,top"]
        return expect(name, args, want_rc, want_text)


def expect(name, args, want_rc, want_text):
    """Runs a checker; True when it exits want_rc and says want_text."""
    r = subprocess.run(args, stdout=subprocess.PIPE, universal_newlines=True,
                       timeout=60)
    if r.returncode != want_rc or want_text not in r.stdout:
        print("FAIL: %s: exit %d (want %d), output lacks %r:\n%s"
              % (name, r.returncode, want_rc, want_text, r.stdout))
        return False
    print("ok: %s: exit %d, %r" % (name, r.returncode, want_text))
    return True


def main():
    results = [run(*case) for case in CASES]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
