#!/usr/bin/env bash
# layers.sh: checks that the modules of a Rust crate import only downwards.
#
# Usage:
#   layers.sh SRC_DIR LAYER_TABLE [--allow FILE] [--include-tests] [--edges] [--graph] [--cycles]
#
# SRC_DIR      the crate's src directory (lib.rs at its top).
# LAYER_TABLE  a text file, one "MODULE_PATH LAYER" per line ('#' starts a comment), e.g.
#                  <root>      9     # lib.rs itself (re-exports)
#                  format      0
#                  mem         1
#                  kinds::fixed 5
#              A module takes the layer of the longest table prefix of its path (by path
#              segments: `kinds::fixed::move_` matches `kinds::fixed`, not `kinds::fix`).
#              Every module must match an entry: one that matches none is an error, so a
#              new module cannot slip in unplaced.
#
# What counts as an import of module M by module A: every path `crate::M::...` in A's
# code (a `use` line or an inline path), every name of a `use crate::{M, ...}` group, a
# `super::` path resolved against A's own path, and `crate::Name` where lib.rs re-exports
# `Name` from M. Comments and string literals are ignored. Items under `#[cfg(test)]`
# (or any cfg that requires `test`) are skipped unless --include-tests: a module's unit
# tests may open a whole store.
#
# Prints every import that goes to a strictly higher layer, as
#   FILE:LINE: A (layer a) -> M (layer m): the line
# and exits 1 if there is any (2 for a usage error or an unplaced module), else 0.
# Imports within one layer are allowed (modules of a layer may use each other; put them
# in different layers to forbid it). --allow FILE names upward imports still tolerated
# while a restructuring is under way, one "FROM -> TO" module pair per line ('#'
# comments): they are printed as "allowed:" and do not fail the check, and a pair that
# no longer occurs fails it (so the list can only shrink). --edges also prints every edge (any direction);
# --graph the module graph (A -> M (count), ...); --cycles its strongly connected
# components of more than one module.
#
# Needs python3 (standard library only).

set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
exec python3 - "$@" <<'PY'
import os, re, sys
from collections import defaultdict

argv = sys.argv[1:]
allow_path = None
if '--allow' in argv:
    i = argv.index('--allow')
    if i + 1 >= len(argv):
        print("--allow needs a file", file=sys.stderr)
        sys.exit(2)
    allow_path = argv[i + 1]
    del argv[i:i + 2]
args = [a for a in argv if not a.startswith('--')]
flags = {a for a in argv if a.startswith('--')}
unknown = flags - {'--include-tests', '--edges', '--graph', '--cycles'}
if len(args) != 2 or unknown:
    print("usage: layers.sh SRC_DIR LAYER_TABLE [--allow FILE] [--include-tests] [--edges] [--graph] [--cycles]", file=sys.stderr)
    sys.exit(2)
allowed = {}
if allow_path:
    with open(allow_path) as f:
        for n, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split('->')]
            if len(parts) != 2 or not all(parts):
                print(f"{allow_path}:{n}: expected 'FROM -> TO'", file=sys.stderr)
                sys.exit(2)
            allowed[(parts[0], parts[1])] = 0
src, table_path = args
include_tests = '--include-tests' in flags

# ---- the layer table ----
table = {}
with open(table_path) as f:
    for n, line in enumerate(f, 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            print(f"{table_path}:{n}: expected 'MODULE_PATH LAYER'", file=sys.stderr)
            sys.exit(2)
        key = '' if parts[0] in ('<root>', 'crate') else parts[0]
        table[key] = float(parts[1])

def layer_of(mod):
    """(table key, layer) of the longest table prefix of `mod`, or None."""
    segs = mod.split('::') if mod else []
    for n in range(len(segs), -1, -1):
        key = '::'.join(segs[:n])
        if key in table and (n > 0 or key == ''):
            # The root entry covers lib.rs only, not every module.
            if n == 0 and mod != '':
                break
            return key, table[key]
    return None

# ---- the crate's modules ----
def module_of(path):
    rel = os.path.relpath(path, src)[:-3]  # strip .rs
    parts = rel.split(os.sep)
    if parts[-1] in ('lib', 'main') and len(parts) == 1:
        return ''
    if parts[-1] == 'mod':
        parts = parts[:-1]
    return '::'.join(parts)

files = []
for root, _, names in os.walk(src):
    for nm in names:
        if nm.endswith('.rs'):
            files.append(os.path.join(root, nm))
files.sort()
modules = {module_of(p) for p in files}

def strip_code(lines):
    """Lines with comments and string/char literals blanked (positions kept)."""
    out = []
    in_block = 0
    in_str = False
    raw_hashes = None
    for line in lines:
        res = []
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if in_block:
                if line.startswith('*/', i):
                    in_block -= 1; i += 2; continue
                if line.startswith('/*', i):
                    in_block += 1; i += 2; continue
                res.append(' '); i += 1; continue
            if in_str:
                if raw_hashes is not None:
                    end = '"' + '#' * raw_hashes
                    if line.startswith(end, i):
                        in_str = False; raw_hashes = None
                        res.append(' ' * len(end)); i += len(end); continue
                    res.append(' '); i += 1; continue
                if c == '\\':
                    res.append('  '); i += 2; continue
                if c == '"':
                    in_str = False
                res.append(' '); i += 1; continue
            if line.startswith('//', i):
                break
            if line.startswith('/*', i):
                in_block += 1; i += 2; continue
            m = re.match(r'b?r(#*)"', line[i:])
            if m and (i == 0 or not (line[i-1].isalnum() or line[i-1] == '_')):
                in_str = True; raw_hashes = len(m.group(1))
                res.append(' ' * len(m.group(0))); i += len(m.group(0)); continue
            if c == '"':
                in_str = True; raw_hashes = None
                res.append(' '); i += 1; continue
            if c == "'":
                m = re.match(r"'(\\.[^']*|[^'\\])'", line[i:])
                if m:
                    res.append(' ' * len(m.group(0))); i += len(m.group(0)); continue
            res.append(c); i += 1
        out.append(''.join(res))
    return out

# ---- lib.rs re-exports: crate::Name -> module ----
reexports = {}
lib = os.path.join(src, 'lib.rs')
if os.path.exists(lib):
    code = '\n'.join(strip_code(open(lib).read().split('\n')))
    for m in re.finditer(r'pub\s+use\s+((?:[a-z_][a-z0-9_]*::)+)(\{[^}]*\}|[A-Za-z0-9_]+)\s*;', code):
        mod, names = m.group(1)[:-2], m.group(2)
        for nm in re.findall(r'[A-Za-z_][A-Za-z0-9_]*', names):
            reexports[nm] = mod

def resolve(path_segs, here):
    """The crate module a path (list of segments after `crate`) names: the longest prefix
    that is a module of the crate, or a lib.rs re-export, or the root."""
    for n in range(len(path_segs), 0, -1):
        cand = '::'.join(path_segs[:n])
        if cand in modules:
            return cand
    if path_segs and path_segs[0] in reexports:
        return reexports[path_segs[0]]
    return ''

def is_test_cfg(attr):
    inner = re.sub(r'not\([^()]*\)', '', attr)
    return re.search(r'\btest\b', inner) is not None

edges = []  # (file, line, from_mod, to_mod, text)
for path in files:
    here = module_of(path)
    raw = open(path).read().split('\n')
    code = strip_code(raw)
    # Module path inside the file (inline `mod x { ... }`), for `super::`.
    depth = 0
    inline = []          # stack of (name, depth at which it closes)
    skip_until = None    # brace depth at which a skipped test item ends
    pending_test = False
    pending_use = None   # (start line, text) of a multi-line `use crate::{`
    for ln, line in enumerate(code, 1):
        stripped = line.strip()
        opens, closes = line.count('{'), line.count('}')
        if skip_until is not None:
            depth += opens - closes
            if depth <= skip_until:
                skip_until = None
            continue
        if not include_tests and stripped.startswith('#[cfg') and is_test_cfg(stripped):
            pending_test = True
            depth += opens - closes
            continue
        if pending_test:
            # The item under a test cfg: skip it whole (its signature may span lines
            # before its `{`; an item without a body ends at its `;`).
            if stripped.startswith('#[') and pending_test is True:
                depth += opens - closes
                continue
            if opens > closes:
                pending_test = False
                skip_until = depth
                depth += opens - closes
                continue
            if stripped.endswith(';') or (opens == closes and opens > 0):
                pending_test = False
                continue
            pending_test = 'await'
            depth += opens - closes
            continue
        m = re.match(r'(pub(\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*\{', stripped)
        if m:
            inline.append((m.group(3), depth))
        depth += opens - closes
        while inline and depth <= inline[-1][1]:
            inline.pop()
        cur = '::'.join([p for p in [here] + [n for n, _ in inline] if p])
        text = raw[ln - 1].strip()
        found = []
        # use crate::{a, b::c} groups, possibly over several lines.
        if pending_use is not None:
            pending_use = (pending_use[0], pending_use[1] + ' ' + line)
            if ';' in line:
                found_line, body = pending_use
                pending_use = None
                inner = body.split('{', 1)[1].rsplit('}', 1)[0]
                d, item = 0, ''
                items = []
                for ch in inner:
                    if ch == '{': d += 1
                    if ch == '}': d -= 1
                    if ch == ',' and d == 0:
                        items.append(item); item = ''
                    else:
                        item += ch
                items.append(item)
                for it in items:
                    segs = re.findall(r'[A-Za-z_][A-Za-z0-9_]*', it)
                    if segs and segs[0] not in ('self', 'super'):
                        edges.append((path, found_line, cur, resolve(segs, cur), raw[found_line - 1].strip()))
            continue
        mg = re.search(r'\buse\s+(\$)?crate::\{', line)
        if mg:
            pending_use = (ln, line[mg.end() - 1:])
            if ';' in line:
                body = pending_use[1]
                pending_use = None
                inner = body.split('{', 1)[1].rsplit('}', 1)[0]
                d, item, items = 0, '', []
                for ch in inner:
                    if ch == '{': d += 1
                    if ch == '}': d -= 1
                    if ch == ',' and d == 0:
                        items.append(item); item = ''
                    else:
                        item += ch
                items.append(item)
                for it in items:
                    segs = re.findall(r'[A-Za-z_][A-Za-z0-9_]*', it)
                    if segs:
                        edges.append((path, ln, cur, resolve(segs, cur), text))
            continue
        for m in re.finditer(r'(?<![A-Za-z0-9_])\$?crate((?:::[A-Za-z_][A-Za-z0-9_]*)+)', line):
            segs = m.group(1).split('::')[1:]
            found.append(resolve(segs, cur))
        for m in re.finditer(r'(?<![A-Za-z0-9_:])((?:super::)+)((?:[A-Za-z_][A-Za-z0-9_]*::?)*)', line):
            ups = m.group(1).count('super::')
            base = cur.split('::') if cur else []
            if ups > len(base):
                continue
            base = base[:len(base) - ups]
            rest = [s for s in m.group(2).split('::') if s]
            segs = base + rest
            target = resolve(segs, cur) if segs else ''
            found.append(target)
        for t in found:
            edges.append((path, ln, cur, t, text))

bad = []
unplaced = set()
graph = defaultdict(lambda: defaultdict(int))
for path, ln, a, b, text in edges:
    if a == b:
        continue
    la, lb = layer_of(a), layer_of(b)
    if la is None:
        unplaced.add(a)
    if lb is None:
        unplaced.add(b)
    ka = la[0] if la else a
    kb = lb[0] if lb else b
    if ka != kb:
        graph[ka][kb] += 1
    if la and lb and lb[1] > la[1]:
        bad.append((path, ln, a, la[1], b, lb[1], text))

def fmt_layer(x):
    return str(int(x)) if x == int(x) else str(x)

if '--edges' in flags:
    for path, ln, a, b, text in edges:
        if a != b:
            print(f"{os.path.relpath(path, src)}:{ln}: {a or '<root>'} -> {b or '<root>'}: {text}")
if '--graph' in flags:
    for a in sorted(graph):
        outs = ', '.join(f"{b or '<root>'}({c})" for b, c in sorted(graph[a].items()))
        print(f"{a or '<root>'} -> {outs}")
if '--cycles' in flags:
    # Tarjan's strongly connected components over the table-key graph.
    idx, low, on, st, sccs, counter = {}, {}, set(), [], [], [0]
    nodes = set(graph) | {b for a in graph for b in graph[a]}
    sys.setrecursionlimit(10000)
    def strong(v):
        idx[v] = low[v] = counter[0]; counter[0] += 1
        st.append(v); on.add(v)
        for w in graph.get(v, {}):
            if w not in idx:
                strong(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            sccs.append(comp)
    for v in sorted(nodes):
        if v not in idx:
            strong(v)
    for comp in sccs:
        if len(comp) > 1:
            print("cycle: " + ' '.join(sorted(c or '<root>' for c in comp)))
for m in sorted(unplaced):
    print(f"error: module {m or '<root>'} has no entry in {table_path}", file=sys.stderr)
failing = []
for path, ln, a, la, b, lb, text in bad:
    key = (a or '<root>', b or '<root>')
    where = f"{os.path.relpath(path, src)}:{ln}: {key[0]} (layer {fmt_layer(la)}) -> {key[1]} (layer {fmt_layer(lb)}): {text}"
    if key in allowed:
        allowed[key] += 1
        print("allowed: " + where)
    else:
        failing.append(where)
        print(where)
stale = [k for k, n in allowed.items() if n == 0]
for a, b in stale:
    print(f"error: {allow_path}: '{a} -> {b}' no longer occurs: remove it", file=sys.stderr)
if failing:
    print(f"{len(failing)} upward import(s)", file=sys.stderr)
    sys.exit(1)
if unplaced or stale:
    sys.exit(2)
PY
