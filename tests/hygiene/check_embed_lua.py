#!/usr/bin/env python3
"""Tests lib/embed_lua.py on small Lua trees written to a temp dir: a good
tree embeds each script with exactly the pieces it needs, in dependency
order; each mistake the build must refuse fails with its file and line.

usage: check_embed_lua.py path/to/embed_lua.py
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

EMBED = None

# A good tree: x includes y; z is c_lib-like, its body inlined from zbody.
GOOD = {
    "a.lua": """\
        #!lua flags=no-writes
        --- @include "include/x"
        -- a.lua: calls f only.
        return f(1)
        """,
    "b.lua": """\
        --- @include "include/y"
        --- @include "include/z"
        -- b.lua: reads K and makes the closure.
        return { K, z_lib().two() }
        """,
    "include/x.lua": """\
        -- include/x.lua: f and g (header: stays out of the scripts).
        --- @include "include/y"

        -- f's comment
        local function f(n) return h(n) + 1 end

        -- g's comment
        local function g() return K end
        """,
    "include/y.lua": """\
        -- include/y.lua: h and K.

        local K = KEYS[1]

        local function h(n) return n * 2 end
        """,
    "include/z.lua": """\
        -- include/z.lua: a closure made on demand.

        local function z_lib()
            local TWO = 2
            --- @inline "include/zbody"
            return { two = z_two }
        end
        """,
    "include/zbody.lua": """\
        -- include/zbody.lua: inlined into z_lib.

        local function z_two()
            return TWO
        end
        """,
}
GOOD = {rel: textwrap.dedent(text) for rel, text in GOOD.items()}


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))


def embedded(c_text):
    """{name: (body, sha)} from a generated scripts.c."""
    out = {}
    for m in re.finditer(r'static const char body_(\w+)\[\] =\n((?:    ".*"\n?)+);',
                         c_text):
        s = "".join(re.findall(r'^    "(.*)"$', m.group(2), re.M))
        out[m.group(1)] = s.encode().decode("unicode_escape")
    for m in re.finditer(r'\{"(\w+)", body_\w+, (\d+), "([0-9a-f]{40})"\}', c_text):
        body = out[m.group(1)]
        out[m.group(1)] = (body, int(m.group(2)), m.group(3))
    return out


class EmbedLua(unittest.TestCase):
    def run_embed(self, files, ops=("a", "b")):
        """Writes files, embeds ops: (exit code, stderr, scripts.c or None)."""
        with tempfile.TemporaryDirectory(prefix="embed-lua-") as d:
            lua = os.path.join(d, "lua")
            write_tree(lua, files)
            out_c, out_h = os.path.join(d, "s.c"), os.path.join(d, "s.h")
            r = subprocess.run([sys.executable, EMBED, "--depfile",
                                os.path.join(d, "s.d"), out_c, out_h] +
                               [os.path.join(lua, o + ".lua") for o in ops],
                               capture_output=True, text=True)
            c_text = None
            if os.path.exists(out_c):
                with open(out_c) as f:
                    c_text = f.read()
            return r.returncode, r.stderr, c_text

    def refused(self, files, message, ops=("a", "b")):
        rc, err, c_text = self.run_embed(files, ops)
        self.assertNotEqual(rc, 0, "embedded a tree it should refuse")
        self.assertIsNone(c_text, "wrote scripts.c for a refused tree")
        self.assertRegex(err, message)

    def test_good_tree_keeps_exactly_what_each_script_uses(self):
        rc, err, c_text = self.run_embed(GOOD)
        self.assertEqual(rc, 0, err)
        got = embedded(c_text)
        a, a_len, a_sha = got["a"]
        self.assertEqual(a_len, len(a.encode()))
        self.assertEqual(a_sha, hashlib.sha1(a.encode()).hexdigest())
        self.assertTrue(a.startswith("#!lua flags=no-writes\n"), a)
        self.assertEqual(a, "#!lua flags=no-writes\n"
                         "local function h(n) return n * 2 end\n"
                         "-- f's comment\n"
                         "local function f(n) return h(n) + 1 end\n\n"
                         "\n-- a.lua: calls f only.\nreturn f(1)\n")
        b = got["b"][0]
        self.assertIn("local K = KEYS[1]", b)
        self.assertNotIn("function h", b)   # y's h: b uses only K
        self.assertNotIn("function f", b)   # x is not b's include
        # zbody inlined in z_lib, indented as its @inline line
        self.assertIn("    local TWO = 2\n    local function z_two()\n"
                      "        return TWO\n    end\n    return", b)
        for body in (a, b):
            self.assertNotIn("@include", body)
            self.assertNotIn("@inline", body)
            self.assertNotIn("header", body)

    def test_unknown_include(self):
        files = dict(GOOD)
        files["a.lua"] = '--- @include "include/x"\n--- @include "include/nope"\nreturn f(1)\n'
        self.refused(files, r'a\.lua:2: unknown include "include/nope"')

    def test_malformed_directive(self):
        files = dict(GOOD)
        files["a.lua"] = '--- @include "include/x"\n--- @include include/y\nreturn f(1)\n'
        self.refused(files, r'a\.lua:2: write the directive as --- @include "path"')

    def test_unused_include(self):
        files = dict(GOOD)
        files["a.lua"] = '--- @include "include/x"\n--- @include "include/z"\nreturn f(1)\n'
        files["b.lua"] = '--- @include "include/y"\nreturn K\n'
        self.refused(files, r'a\.lua:2: unused include "include/z"')

    def test_unused_include_in_an_include(self):
        files = dict(GOOD)
        files["include/z.lua"] = '-- z\n--- @include "include/y"\n\n' + \
            textwrap.dedent(GOOD["include/z.lua"]).split("\n\n", 1)[1]
        self.refused(files, r'z\.lua:2: unused include "include/y"')

    def test_name_defined_twice(self):
        files = dict(GOOD)
        files["include/y.lua"] = GOOD["include/y.lua"] + \
            "\nlocal function g() return 0 end\n"
        self.refused(files, r"x\.lua:\d+: g is defined again \(first at .*y\.lua:\d+\)")

    def test_name_defined_twice_in_one_file(self):
        files = dict(GOOD)
        files["include/y.lua"] = GOOD["include/y.lua"] + "\nlocal K = 1\n"
        self.refused(files, r"y\.lua:7: K is defined again \(first at line 3\)")

    def test_cycle(self):
        files = dict(GOOD)
        files["include/y.lua"] = '-- y\n--- @include "include/x"\n\n' \
            "local K = KEYS[1]\nlocal function h(n) return f(n) end\n"
        self.refused(files, r"y\.lua:2: include cycle: "
                            r"include/x -> include/y -> include/x")

    def test_name_from_a_file_not_included(self):
        files = dict(GOOD)
        # x uses y's h and K without including y: it works only because a
        # happens to include y first
        files["a.lua"] = '--- @include "include/y"\n--- @include "include/x"\n' \
            'return f(h(1))\n'
        files["include/x.lua"] = "-- x\n\n" + \
            GOOD["include/x.lua"].split("\n\n", 1)[1]
        self.refused(files, r'x\.lua:4: h comes from "include/y", which '
                            r'include/x\.lua does not include')

    def test_include_file_nobody_includes(self):
        files = dict(GOOD)
        files["include/extra.lua"] = "-- extra\n\nlocal function e() end\n"
        self.refused(files, r"include/extra\.lua:1: included by no script")


if __name__ == "__main__":
    EMBED = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
