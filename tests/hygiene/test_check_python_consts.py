#!/usr/bin/env python3
"""check_python_consts.py fails where it must: on copies of include/*.h and
delayq.py in a temp dir, the unchanged copies pass, and each copy with a
number that differs from the header's, one that names no macro, one written
out twice, a new member of a family the binding lacks, or an error code without its
exception class fails with its own message.

usage: test_check_python_consts.py --include INCDIR --binding delayq.py
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_python_consts.py")
sys.path.insert(0, HERE)
from test_check_layers import expect  # noqa: E402

# (name, file changed, text replaced, its replacement, exit, output wanted)
CASES = [
    ("unchanged", None, "", "", 0, "ok:"),
    ("wrong value", "delayq.py", "\nQUEUE_MAX = 200\n", "\nQUEUE_MAX = 201\n",
     1, "QUEUE_MAX is 201, but DQ_QUEUE_MAX is 200"),
    ("no such macro", "delayq.py", "\n_COPT_PRIORITY = 10\n",
     "\n_COPT_PRIORITY = 10\n_PO_LATER = 10\n", 1,
     "DQ_PUSHOPT_LATER, which no header defines"),
    ("duplicate literal", "delayq.py", "\nREASON_MAX = 1024\n",
     "\nREASON_MAX = 1024\n_PUSHOPT_CRON = 6\n", 1,
     "writes DQ_PUSHOPT_CRON out 2 times"),
    ("new list", "delayq.h", "#define DQ_LIST_DEAD 3",
     "#define DQ_LIST_DONE 4\n#define DQ_LIST_DEAD 3", 1,
     "DQ_LIST_DONE is not in delayq.py"),
    ("new error", "delayq.h", "    XX(ENULL, -1,",
     "    XX(ENEW, -99, \"new\")  \\\n    XX(ENULL, -1,", 1,
     "DQ_ENEW has no exception class"),
]


def run(inc, binding, case):
    name, target, old, new, want_rc, want_text = case
    with tempfile.TemporaryDirectory() as d:
        dinc = os.path.join(d, "include")
        shutil.copytree(inc, dinc)
        dpy = os.path.join(d, "delayq.py")
        shutil.copy(binding, dpy)
        if target:
            path = dpy if target == "delayq.py" else os.path.join(dinc,
                                                                  target)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if old not in text:
                print("FAIL: %s: %r is not in %s" % (name, old, target))
                return False
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
        return expect(name, [sys.executable, CHECK, "--include", dinc,
                             "--binding", dpy], want_rc, want_text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--include", required=True)
    ap.add_argument("--binding", required=True)
    a = ap.parse_args()
    results = [run(a.include, a.binding, c) for c in CASES]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
