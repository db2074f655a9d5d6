#!/usr/bin/env python3
"""Fails when an import circle between the top modules of src/ comes back.

Reads every `crate::...` path in src/ (use trees with braces included,
comments and strings left out), maps each file to its top module (src/X.rs
and src/X/** are module X) and each path to the module it names, and looks
for strongly connected components of more than one module. On a circle it
prints one cycle with, for each edge, the file and line that makes it, and
exits 1. docs/DEVELOPING.md ("Layers") gives the order the graph keeps.

    scripts/check-layers.py            # check; prints the layers when clean
    scripts/check-layers.py --graph    # the module graph: modules, edges, cycles
    scripts/check-layers.py --files    # also the file-level circles
    scripts/check-layers.py --graph --src DIR   # of another tree's src/
"""

import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def strip_code(text):
    """The text with comments and string/char literals blanked (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_tree(s, i):
    """Parses a use tree at s[i:]; returns (paths, end) with paths as lists of segments."""
    while i < len(s) and s[i].isspace():
        i += 1
    if i < len(s) and s[i] == "{":
        i += 1
        paths = []
        while True:
            while i < len(s) and (s[i].isspace() or s[i] == ","):
                i += 1
            if i >= len(s) or s[i] == "}":
                return paths, i + 1
            sub, i = parse_tree(s, i)
            paths.extend(sub)
    m = re.compile(r"(\w+|\*)").match(s, i)
    if not m:
        return [[]], i
    seg, i = m.group(1), m.end()
    j = i
    while j < len(s) and s[j].isspace():
        j += 1
    if s.startswith("::", j):
        rest, end = parse_tree(s, j + 2)
        return [[seg] + r for r in rest], end
    return [[seg]], i


def module_of(rel):
    """src-relative file path -> (top module, module path as a list)."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return None, []
    return parts[0], parts


def collect():
    files = {}
    for dirpath, _, names in os.walk(ROOT):
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding="utf-8") as f:
                    files[rel] = strip_code(f.read())
    modpaths = {}
    for rel in files:
        top, mp = module_of(rel)
        if top:
            modpaths[tuple(mp)] = rel
    # (from file, line, to module path, whether it is a `crate::` path).
    # `super::` paths count for the file graph only (an inline `mod tests`
    # adds a level this reading does not track).
    refs = []
    for rel, text in files.items():
        top, mp = module_of(rel)
        if not top:
            continue
        for m in re.finditer(r"(?<![\w$])crate\s*::", text):
            line = text.count("\n", 0, m.start()) + 1
            paths, _ = parse_tree(text, m.end())
            for p in paths:
                if p and p[0] not in ("*", "self"):
                    refs.append((rel, line, p, True))
        # super:: within the module's own files (file-level graph only).
        for m in re.finditer(r"(?<![\w:])((?:super\s*::\s*)+)", text):
            ups = m.group(1).count("super")
            line = text.count("\n", 0, m.start()) + 1
            paths, _ = parse_tree(text, m.end())
            base = mp[: len(mp) - ups] if ups <= len(mp) else []
            for p in paths:
                if p and p[0] != "*":
                    refs.append((rel, line, base + p, False))
    return files, modpaths, refs


def resolve(modpaths, path):
    """The file that defines the longest module prefix of path."""
    for k in range(len(path), 0, -1):
        if tuple(path[:k]) in modpaths:
            return modpaths[tuple(path[:k])]
    return None


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def a_cycle(comp, edges):
    """One shortest cycle through the component's first node."""
    members = set(comp)
    start = comp[0]
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def layers(nodes, edges):
    """Each module's layer: 0 for modules that import none, else 1 + the highest below."""
    level = {}

    def lv(v):
        if v not in level:
            level[v] = 0
            level[v] = 1 + max((lv(w) for w in edges.get(v, ())), default=-1)
        return level[v]

    for v in nodes:
        lv(v)
    return level


def main(argv):
    global ROOT
    if "--src" in argv:
        ROOT = argv[argv.index("--src") + 1]
    files, modpaths, refs = collect()
    tops = sorted({module_of(r)[0] for r in files if module_of(r)[0]})
    edges, why = defaultdict(set), {}
    fedges = defaultdict(set)
    for rel, line, path, absolute in refs:
        src_top = module_of(rel)[0]
        dst_file = resolve(modpaths, path)
        if dst_file and dst_file != rel:
            fedges[rel].add(dst_file)
        dst_top = path[0]
        if absolute and dst_top in tops and dst_top != src_top and (path[0],) in modpaths:
            edges[src_top].add(dst_top)
            why.setdefault((src_top, dst_top), f"src/{rel}:{line}")
    comps = [c for c in sccs(tops, edges) if len(c) > 1]

    if "--graph" in argv or "--files" in argv:
        print(f"top modules ({len(tops)}): {' '.join(tops)}")
        n_edges = sum(len(v) for v in edges.values())
        print(f"edges ({n_edges}):")
        for v in tops:
            if edges.get(v):
                print(f"  {v} -> {', '.join(sorted(edges[v]))}")
        print(f"module circles: {len(comps)}")
        for c in comps:
            print(f"  {len(c)} modules: {' '.join(c)}")
            print(f"  e.g. {' -> '.join(a_cycle(c, edges))}")
        if not comps:
            lv = layers(tops, edges)
            print("layers (a module imports only from layers below it):")
            for k in range(max(lv.values()) + 1):
                print(f"  {k}: {' '.join(sorted(v for v in tops if lv[v] == k))}")
        if "--files" in argv:
            fcomps = [c for c in sccs(list(files), fedges) if len(c) > 1]
            print(f"file circles: {len(fcomps)}")
            for c in fcomps:
                print(f"  {len(c)} files: {' '.join('src/' + f for f in c)}")
        return 0

    if comps:
        for c in comps:
            cyc = a_cycle(c, edges)
            print(f"check-layers: import circle between top modules of src/: {' -> '.join(cyc)}", file=sys.stderr)
            for a, b in zip(cyc, cyc[1:]):
                print(f"  {a} -> {b}: {why[(a, b)]}", file=sys.stderr)
            print(f"  (the whole circle: {' '.join(c)})", file=sys.stderr)
        print("check-layers: a module may import only from layers below it (docs/DEVELOPING.md, Layers)", file=sys.stderr)
        return 1
    print(f"check-layers: ok, {len(tops)} top modules, no import circle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
