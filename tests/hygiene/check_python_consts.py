#!/usr/bin/env python3
"""The Python binding's copies of the headers' numbers (macros are not in the
ABI, so bindings/python/delayq.py writes them out) agree with include/*.h.

Read from delayq.py's module level without importing it (no library needed):
every int constant, and every int of the dicts below, mirrors the DQ_ macro
or enum value its name says and has its value; a number of the headers is
written out once (one literal; other names refer to it); and each family of
numbers the binding takes from a header is complete: every error code has
its exception class, and every client option, consumer option, push flag,
push option, setting (and the words of the settings that take words),
listing, job state, outcome and cancel/nack flag the header has is in
delayq.py, unless NOT_EXPOSED below says why not.

usage: check_python_consts.py --include INCDIR --binding delayq.py
Exit 0 when every check passes; prints each failure otherwise.
"""
import argparse
import ast
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import report  # noqa: E402

HEADERS = ("delayq.h", "delayq-consumer.h", "delayq-event.h")

# Python name prefixes that differ from the header's.
ALIASES = {"PO_": "PUSHOPT_", "SET_COUNT": "SET__COUNT"}
# Dicts of delayq.py: the prefix of the macros their keys (str -> int) or
# values (int -> str) name.
DICTS = {"_COPT": "DQ_COPT_", "_OPT_INT": "DQ_OPT_", "_OPT_BOOL": "DQ_OPT_",
         "_OPT_STR": "DQ_OPT_", "_BACKOFF": "DQ_BACKOFF_",
         "_STATES": "DQ_JOB_", "_OUTCOMES": "DQ_",
         "_RESCHED_OUTCOMES": "DQ_RESCHED_"}
# {setting: {word: number}}: each word is the macro DQ_<SETTING>_<WORD>.
WORDS = "_SET_WORDS"
# Exception classes by error name: one per DQ_E* code.
CLASSES = "_CLASS_BY_NAME"
# The binding's own numbers, mirroring no macro.
BINDING_ONLY = {"_WAIT_SLICE_MS": "the slice of a long wait (Ctrl-C)"}

# Families that must be complete, and the members left out on purpose.
FAMILIES = ("DQ_OPT_", "DQ_COPT_", "DQ_PUSH_", "DQ_PUSHOPT_", "DQ_SET__",
            "DQ_BACKOFF_", "DQ_EXPIRED_", "DQ_LAYOUT_", "DQ_LIST_", "DQ_JOB_",
            "DQ_CANCEL", "DQ_NACK_", "DQ_PRIO_", "DQ_RESCHED_",
            ("DQ_PUSHED", "DQ_KEPT", "DQ_REPLACED", "DQ_DONE"))
NOT_EXPOSED = {
    "DQ_COPT_EXTEND": "libevent consumer only; the binding's is the sync one",
    "DQ_COPT_HANDLER_TIMEOUT_MS": "libevent consumer only, as above",
    "DQ_JOB_ASYNC": "the sync consumer: a handler's return is its outcome",
    "DQ_JOB_UNKNOWN": "JobInfo.state says 'unknown' for any other number",
    "DQ_NACK_BACKOFF": "Client.nack offers no backoff flag: its delay holds",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def c_value(expr, known):
    """The int of a macro's or enumerator's C expression, or None."""
    expr = re.sub(r"\bINT64_C\(([^()]*)\)", r"(\1)", expr.strip())
    if not re.fullmatch(r"[\w\s()+\-*]+", expr):
        return None
    try:
        v = eval(expr, {"__builtins__": {}}, dict(known))
    except Exception:
        return None
    return v if isinstance(v, int) else None


def header_values(inc):
    """{macro: int} of the DQ_ macros, enumerators and error codes."""
    known = {}
    for h in HEADERS:
        path = os.path.join(inc, h)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        text = re.sub(r"\\\n", " ", text)
        for m in re.finditer(r"\bXX\((E\w+),\s*(-\d+),", text):
            known["DQ_" + m.group(1)] = int(m.group(2))
        pats = (r"^\s*#\s*define\s+(DQ_\w+)[ \t]+([^\n]+)$",
                r"^\s*(DQ_\w+)\s*=\s*([^,\n}]+)")
        for pat in pats:
            for m in re.finditer(pat, text, flags=re.M):
                v = c_value(m.group(2), known)
                if v is not None:
                    known[m.group(1)] = v
    return known


class Mirror:
    """One number of delayq.py: its name there, the macro it mirrors, its
    value, and whether it is written as a literal."""

    def __init__(self, where, macro, value, literal):
        self.where, self.macro = where, macro
        self.value, self.literal = value, literal


def py_eval(node, ns):
    """The value of a constant expression of delayq.py, or raises."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return ns[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(py_eval(e, ns) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {py_eval(k, ns): py_eval(v, ns)
                for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -py_eval(node.operand, ns)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add,
                                                            ast.Mult)):
        a, b = py_eval(node.left, ns), py_eval(node.right, ns)
        return a + b if isinstance(node.op, ast.Add) else a * b
    raise ValueError("not a constant")


def is_literal(node):
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant)


def assignments(tree):
    """[(name, value node)] of the module-level assignments, tuples split."""
    out = []
    for st in tree.body:
        if not isinstance(st, ast.Assign) or len(st.targets) != 1:
            continue
        t, v = st.targets[0], st.value
        if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple):
            out.extend((n.id, e) for n, e in zip(t.elts, v.elts)
                       if isinstance(n, ast.Name))
        elif isinstance(t, ast.Name):
            out.append((t.id, v))
    return out


def macro_of(name):
    n = name.lstrip("_")
    for a, b in ALIASES.items():
        if n.startswith(a):
            n = b + n[len(a):]
    return "DQ_" + n


def word_macro(prefix, word):
    return prefix + str(word).upper().replace("-", "_")


def dict_mirrors(name, node, value, failures):
    """Mirrors of the entries of one dict of delayq.py."""
    out = []
    pairs = list(zip(node.keys, node.values)) if isinstance(
        node, ast.Dict) else []
    if name == WORDS:
        for k, sub in value.items():
            out.append(Mirror("%s key %r" % (name, k),
                              word_macro("DQ_SET_", k), None, False))
            subnode = dict(zip([getattr(x, "value", None)
                                for x in node.keys], node.values))[k]
            for w, num in sub.items():
                lit = isinstance(subnode, ast.Dict) and any(
                    getattr(kk, "value", None) == w and is_literal(vv)
                    for kk, vv in zip(subnode.keys, subnode.values))
                out.append(Mirror("%s[%r][%r]" % (name, k, w),
                                  word_macro("DQ_%s_" % k.upper(), w), num,
                                  lit))
        return out
    prefix = DICTS[name]
    for k, v in pairs:
        key, val = py_eval(k, {}), value[py_eval(k, {})]
        if isinstance(key, str):
            out.append(Mirror("%s[%r]" % (name, key), word_macro(prefix, key),
                              val, is_literal(v)))
        else:
            out.append(Mirror("%s[%r]" % (name, key), word_macro(prefix, val),
                              key, is_literal(k)))
    return out


def is_constant(name):
    return re.fullmatch(r"_?[A-Z][A-Z0-9_]*", name) is not None


def binding_mirrors(path, failures):
    """([Mirror], {error names of the exception classes})."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    ns, mirrors, seen, classes = {}, [], set(), set()
    for name, node in assignments(tree):
        if name in seen and is_constant(name):
            failures.append("delayq.py assigns %s twice" % name)
        seen.add(name)
        if name == CLASSES and isinstance(node, ast.Dict):
            classes = {k.value for k in node.keys}
            continue
        try:
            value = py_eval(node, ns)
        except (ValueError, KeyError, TypeError):
            continue
        ns[name] = value
        if isinstance(value, bool) or not isinstance(value, (int, dict)):
            continue
        if name in BINDING_ONLY or not is_constant(name):
            continue
        if isinstance(value, dict) and not value:
            continue              # filled at run time (ERRORS)
        if isinstance(value, dict):
            if name != WORDS and name not in DICTS:
                failures.append("delayq.py's %s: this test does not know "
                                "which macros it mirrors (add it to DICTS)"
                                % name)
                continue
            mirrors.extend(dict_mirrors(name, node, value, failures))
        else:
            mirrors.append(Mirror(name, macro_of(name), value,
                                  is_literal(node)))
    return mirrors, classes


def in_family(macro, fam):
    return macro in fam if isinstance(fam, tuple) else macro.startswith(fam)


def check(headers, mirrors, classes):
    failures, literal = [], {}
    for m in mirrors:
        if m.macro not in headers:
            failures.append("delayq.py's %s mirrors %s, which no header "
                            "defines" % (m.where, m.macro))
        elif m.value is not None and m.value != headers[m.macro]:
            failures.append("delayq.py's %s is %d, but %s is %d"
                            % (m.where, m.value, m.macro, headers[m.macro]))
        if m.literal:
            literal.setdefault(m.macro, []).append(m.where)
    for macro, where in sorted(literal.items()):
        if len(where) > 1:
            failures.append("delayq.py writes %s out %d times (%s): write "
                            "it once, refer to that name elsewhere"
                            % (macro, len(where), ", ".join(where)))
    errors = {n[3:] for n, v in headers.items()
              if re.fullmatch(r"DQ_E[A-Z]+", n) and v < 0}
    for e in sorted(errors - classes):
        failures.append("DQ_%s has no exception class in delayq.py's %s"
                        % (e, CLASSES))
    for e in sorted(classes - errors):
        failures.append("delayq.py's %s names %s, no DQ_ error code"
                        % (CLASSES, e))
    count = headers.get("DQ_SET__COUNT")
    settings = sorted(v for n, v in headers.items()
                      if n.startswith("DQ_SET_") and n != "DQ_SET__COUNT")
    if settings != list(range(1, (count or 0) + 1)):
        failures.append("the DQ_SET_* numbers %s are not 1..DQ_SET__COUNT "
                        "(%s), the settings delayq.py asks for" % (settings,
                                                                   count))
    mirrored = {m.macro for m in mirrors}
    fams = [f for f in FAMILIES if any(in_family(x, f) for x in mirrored)]
    for fam in FAMILIES:
        if fam not in fams:
            failures.append("delayq.py mirrors nothing of the family %s "
                            "(left out of the binding, or renamed?)"
                            % (fam,))
    for macro in sorted(headers):
        if macro in mirrored or macro in NOT_EXPOSED:
            continue
        if any(in_family(macro, f) for f in fams):
            failures.append("%s is not in delayq.py (add it, or list it "
                            "in NOT_EXPOSED with the reason)" % macro)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--include", required=True)
    ap.add_argument("--binding", required=True)
    a = ap.parse_args()
    headers = header_values(a.include)
    failures = []
    mirrors, classes = binding_mirrors(a.binding, failures)
    failures += check(headers, mirrors, classes)
    print("%d numbers in the headers, %d mirrored in delayq.py, "
          "%d exception classes" % (len(headers), len(mirrors), len(classes)))
    return report(failures, "delayq.py's numbers are the headers', each "
                  "written once, every family complete")


if __name__ == "__main__":
    sys.exit(main())
