#!/usr/bin/env python3
"""Fail on a module cycle in any crate, or on a crate dependency the architecture forbids.

Each crate's modules are its source files (`a.rs` or `a/mod.rs` is `a`, `a/b.rs` is `a::b`); the
crate root (`lib.rs`, `main.rs`) is its facade and not a node. Module A depends on module B when
A's non-test code names B or an item in it: `crate::b::...`, `super::...`, `self::...`, a child
declared with `mod b;` used as `b::...`, and every path of a `use` tree. A child naming
one of its ancestors is not an edge (a child module is part of its parent's implementation, as
the `grade/` stages use the types of `grade/mod.rs`). A strongly connected component of more
than one module is a cycle.

FORBIDDEN_DEPS names, per crate, the workspace crates it must not depend on, directly (normal, dev
or build dependencies, read from its Cargo.toml) or through other workspace crates (their normal
dependencies): the protocol layer `ls-server` depends on no report, store, agent, workbench or
product crate (the product routes and the workbench are `ls-product`'s, over `ls-server`).

ALLOWED lists the cycles of crates whose code is being changed by other work, as the sorted
module names of the component; the list can only shrink: a new cycle fails, and so does a listed
cycle that is gone (remove it from the list).
"""
import os
import re
import sys
import tomllib

ALLOWED = set([
])

FORBIDDEN_DEPS = {
    "ls-server": ["ls-report", "ls-store", "ls-agents", "ls-ui", "ls-product"],
}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def modules(src):
    """Module path -> file, for every .rs file under src (roots excluded)."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]) or rel[:1] == ["bin"]:
                continue
            out["::".join(rel)] = os.path.join(dirpath, f)
    return out


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    # Test modules are not part of the module graph.
    m = re.search(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{", text)
    return text[: m.start()] if m else text


def expand_use(tree):
    """`a::{b::{C, D}, e}` -> ['a::b::C', 'a::b::D', 'a::e']."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [tree.split(" as ")[0].strip()]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [prefix + p2 for p in parts if p.strip() for p2 in expand_use(p)]


def refs(text, children):
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        paths += expand_use(m.group(1))
    text = re.sub(r"\buse\s+[^;]+;", "", text)
    heads = "|".join(["crate", "super", "self"] + sorted(children))
    paths += re.findall(rf"(?<![\w:])((?:{heads})(?:::{IDENT})+)", text)
    return [p.replace(" ", "").strip(":") for p in paths]


def resolve(path, me, mods, children):
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        base = me.split("::")
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    elif segs[0] in children:
        base = me.split("::")
    else:
        return None
    full = base + segs
    for n in range(len(full), 0, -1):
        cand = "::".join(full[:n])
        if cand in mods:
            return cand
    return None


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
    for v in graph:
        if v not in index:
            visit(v)
    return out


def crate_cycles(crate_dir):
    src = os.path.join(crate_dir, "src")
    mods = modules(src)
    graph = {m: set() for m in mods}
    for me, path in mods.items():
        text = strip(open(path, encoding="utf-8").read())
        children = set(re.findall(rf"\bmod\s+({IDENT})\s*;", text))
        for p in refs(text, children):
            target = resolve(p, me, mods, children)
            # A child naming its parent (or any ancestor) is not a dependency: a child module is
            # part of its parent's implementation (`grade/` stages use `super::` types).
            if target and target != me and not me.startswith(target + "::"):
                graph[me].add(target)
    if os.environ.get("CYCLES_VERBOSE"):
        for c in sccs(graph):
            for m in c:
                if len(c) > 1:
                    print(f"  {m} -> {sorted(graph[m] & set(c))}")
    return [c for c in sccs(graph) if len(c) > 1]


def manifest_deps(crates, name, sections):
    """Workspace-or-not package names `name` declares in `sections` of its Cargo.toml."""
    with open(os.path.join(crates, name, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    out = []
    for section in sections:
        for dep, spec in manifest.get(section, {}).items():
            out.append((section, spec.get("package", dep) if isinstance(spec, dict) else dep))
    return out


def forbidden_deps(crates):
    """`crate -> dependency (how)` for each dependency FORBIDDEN_DEPS rules out."""
    members = {n for n in os.listdir(crates) if os.path.isfile(os.path.join(crates, n, "Cargo.toml"))}
    normal = {n: {d for _, d in manifest_deps(crates, n, ["dependencies"]) if d in members} for n in members}
    out = []
    for name, banned in sorted(FORBIDDEN_DEPS.items()):
        sections = ["dependencies", "dev-dependencies", "build-dependencies"]
        direct = manifest_deps(crates, name, sections)
        for section, dep in direct:
            if dep in banned:
                out.append(f"{name} -> {dep} ({section})")
        # Through workspace crates: walk their normal dependencies.
        seen, todo = set(), [(d, d) for _, d in direct if d in members]
        while todo:
            dep, via = todo.pop()
            if dep in seen:
                continue
            seen.add(dep)
            if dep in banned and dep != via:
                out.append(f"{name} -> {dep} (through {via})")
            todo += [(d, via) for d in normal.get(dep, ())]
    return out


def main():
    crates = os.path.join(ROOT, "crates")
    bad_deps = forbidden_deps(crates)
    for d in bad_deps:
        print(f"FORBIDDEN dependency {d}")
    found = set()
    for name in sorted(os.listdir(crates)):
        if os.path.isdir(os.path.join(crates, name, "src")):
            for comp in crate_cycles(os.path.join(crates, name)):
                found.add(f"{name}: {' <-> '.join(comp)}")
    new = sorted(found - ALLOWED)
    gone = sorted(ALLOWED - found)
    for c in sorted(found):
        print(("allowed  " if c in ALLOWED else "CYCLE    ") + c)
    for g in gone:
        print(f"FIXED    {g}: no longer a cycle; remove it from ALLOWED")
    if new or gone or bad_deps:
        sys.exit(
            f"{len(new)} new module cycle(s), {len(gone)} stale allowlist entr(ies), "
            f"{len(bad_deps)} forbidden crate dependenc(ies)"
        )
    print(f"ok: no new module cycle ({len(found)} allowlisted remain), no forbidden crate dependency")


if __name__ == "__main__":
    main()
