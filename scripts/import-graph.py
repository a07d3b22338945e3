#!/usr/bin/env python3
"""The module import graph of every crate of the workspace, and its circles.

    python3 scripts/import-graph.py            # each crate's layers; exit 1 on a circle
    python3 scripts/import-graph.py --edges    # also every edge, "from -> to"
    python3 scripts/import-graph.py --dot      # the graphs in Graphviz's language

A node is a module file (inline modules, such as `mod tests { .. }`, belong to their
file). An edge goes from a file to every module it names in a `use` declaration or in a
path (`crate::a::b`, `super::c`, `self::d`) in its code, comments and strings left out.
A path that names an item re-exported by a module (`pub use x::Item`) leads to the module
that defines the item, as the compiler resolves it; a re-export is itself an edge from
the re-exporting module to the defining one, and `mod x;` alone is not an edge. Paths
into other crates, also through a re-export, are not edges: Cargo already keeps the
crates' graph acyclic.

A circle is a strongly connected component of more than one file; each is printed with
one cycle through it. With none, each crate's files are printed by layer: a file's layer
is one more than the highest layer it imports from.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a name re-exported from another crate resolves to: no module of this crate.
EXTERN = ("<extern>",)
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The text without comments, string and char literals (kept as blanks)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4] + " "):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_paths(tree, prefix=()):
    """The paths of a `use` tree (`a::{b, c::d as e}`), each a tuple of segments."""
    tree = tree.strip()
    if not tree:
        return []
    # Split the top level on the first `::{`.
    depth = 0
    for k, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                head = tree[:k].rstrip(":").strip()
                inner = tree[k + 1:tree.rindex("}")]
                base = prefix + tuple(s for s in head.split("::") if s)
                parts, d, start = [], 0, 0
                for m, c2 in enumerate(inner):
                    if c2 == "{":
                        d += 1
                    elif c2 == "}":
                        d -= 1
                    elif c2 == "," and d == 0:
                        parts.append(inner[start:m])
                        start = m + 1
                parts.append(inner[start:])
                out = []
                for p in parts:
                    p = p.strip()
                    if p == "self":
                        out.append(base)
                    elif p:
                        out.extend(use_paths(p, base))
                return out
            depth += 1
    tree = re.sub(r"\s+as\s+" + IDENT + r"$", "", tree)
    return [prefix + tuple(s for s in tree.split("::") if s)]


class Crate:
    def __init__(self, name, root_file):
        self.name = name
        self.files = {}  # module path (tuple) -> file
        self.inline = {}  # inline module path -> the file module path it lives in
        self.reexports = {}  # module path -> {name: full path it re-exports}
        self.defines = {}  # module path -> set of item names defined there
        self.raw_uses = {}  # file module path -> [(scope path, use path, is_pub)]
        self.raw_paths = {}  # file module path -> [(scope path, path)]
        self.names = {}
        self.load((), root_file)

    def load(self, path, file):
        self.files[path] = file
        text = strip(file.read_text())
        scopes = [(path, -1)]  # (module path, brace depth it opened at)
        depth = 0
        uses, paths, defines = [], [], set()
        self.reexports.setdefault(path, {})
        token = re.compile(
            r"(?P<open>\{)|(?P<close>\})"
            r"|(?P<mod>\b(?:pub(?:\([^)]*\))?\s+)?mod\s+(?P<mname>" + IDENT + r")\s*(?P<mend>[;{]))"
            r"|(?P<use>\b(?P<pub>pub(?:\([^)]*\))?\s+)?use\s+(?P<tree>[^;]*);)"
            r"|(?P<export>#\[macro_export\]\s*macro_rules!\s*(?P<ename>" + IDENT + r"))"
            r"|(?P<item>\b(?:fn|struct|enum|trait|type|const|static|macro_rules!)\s+(?P<iname>" + IDENT + r"))"
            r"|(?P<path>(?<![\w:])" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)"
        )
        cfg_attr = re.compile(r"#\[path\s*=")
        if cfg_attr.search(text):
            raise SystemExit(f"{file}: #[path] attributes are not understood")
        for m in token.finditer(text):
            scope = scopes[-1][0]
            if m.group("open"):
                depth += 1
            elif m.group("close"):
                depth -= 1
                if len(scopes) > 1 and depth == scopes[-1][1]:
                    scopes.pop()
            elif m.group("mod"):
                name = m.group("mname")
                child = scope + (name,)
                if m.group("mend") == "{":
                    self.inline[child] = self.inline.get(scope, scope) if scope in self.inline else scope
                    self.reexports.setdefault(child, {})
                    scopes.append((child, depth))
                    depth += 1
                else:
                    here = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.with_suffix("")
                    for candidate in (here / f"{name}.rs", here / name / "mod.rs"):
                        if candidate.exists():
                            self.load(child, candidate)
                            break
                    else:
                        raise SystemExit(f"{file}: no file for module {name}")
            elif m.group("use"):
                for p in use_paths(re.sub(r"\s+", " ", m.group("tree")).replace(" ::", "::").replace(":: ", "::")):
                    uses.append((scope, p, bool(m.group("pub"))))
            elif m.group("export"):
                # Exported macros live at the crate root, wherever they are defined.
                defines.add((scope, m.group("ename")))
                self.reexports.setdefault((), {})[m.group("ename")] = scope + (m.group("ename"),)
            elif m.group("item"):
                defines.add((scope, m.group("iname")))
            elif m.group("path"):
                p = tuple(s.strip() for s in m.group("path").split("::"))
                paths.append((scope, p))
        self.raw_uses[path] = uses
        self.raw_paths[path] = paths
        for scope, name in defines:
            self.defines.setdefault(scope, set()).add(name)

    def file_of(self, module):
        """The file module a module path lives in (itself, or the file of an inline one)."""
        while module not in self.files:
            if module in self.inline:
                module = self.inline[module]
            else:
                module = module[:-1]
        return module

    def is_module(self, module):
        return module in self.files or module in self.inline

    def absolute(self, scope, path):
        """`path` as an absolute module path from `scope`; None for other crates."""
        if not path:
            return None
        head, rest = path[0], list(path[1:])
        if head == "crate":
            base = ()
        elif head == "self":
            base = scope
        elif head == "super":
            base = scope[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        else:
            # A name in scope: a child module, or a name `use`d there; else extern.
            if self.is_module(scope + (head,)):
                base, rest = scope + (head,), rest
            elif head in self.names.get(scope, {}):
                base = self.names[scope][head]
            else:
                return None
        return base + tuple(rest)

    def resolve(self, full, seen=()):
        """The file module that defines what `full` (absolute) names."""
        module = ()
        segments = list(full)
        while segments and self.is_module(module + (segments[0],)):
            module = module + (segments.pop(0),)
        if segments and segments[0] != "*":
            name = segments[0]
            target = self.reexports.get(module, {}).get(name)
            if target == EXTERN and name not in self.defines.get(module, set()):
                return None
            if target and target not in seen and name not in self.defines.get(module, set()):
                return self.resolve(target, seen + (target,))
        return self.file_of(module)

    def graph(self):
        # Re-exports first: the names each module makes visible through `use` (a name from
        # another crate leads out of this crate's graph).
        for file_module in self.files:
            for scope, p, is_pub in self.raw_uses[file_module]:
                absolute = self.absolute(scope, p)
                if absolute is not None and absolute[-1] != "*":
                    self.reexports.setdefault(scope, {})[absolute[-1]] = absolute
                elif absolute is None and len(p) > 1 and p[-1] != "*":
                    self.reexports.setdefault(scope, {})[p[-1]] = EXTERN
        # The names each scope brings in with `use`, for paths that start with one.
        self.names = {}
        for file_module in self.files:
            for scope, p, _ in self.raw_uses[file_module]:
                if p and p[-1] != "*" and p[0] in ("crate", "self", "super"):
                    absolute = self.absolute(scope, p)
                    if absolute is not None:
                        self.names.setdefault(scope, {})[absolute[-1]] = absolute
        edges = {m: set() for m in self.files}
        for file_module in self.files:
            named = [(scope, p) for scope, p, _ in self.raw_uses[file_module]]
            for scope, p in named + list(self.raw_paths[file_module]):
                absolute = self.absolute(scope, p)
                if absolute is None:
                    continue
                target = self.resolve(absolute)
                if target is not None and target != file_module:
                    edges[file_module].add(target)
        return edges


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def one_cycle(edges, component):
    inside = set(component)
    start = min(component)
    path, seen = [start], {start}

    def walk(v):
        for w in sorted(edges[v]):
            if w == start and len(path) > 1:
                return True
            if w in inside and w not in seen:
                seen.add(w)
                path.append(w)
                if walk(w):
                    return True
                path.pop()
        return False

    walk(start)
    return path + [start]


def name(crate, module):
    return crate.name + ("::" + "::".join(module) if module else "")


def crates():
    members = ["", "runtime", "kernels", "factorizations", "bounds", "clusters", "cli"]
    lab = ROOT / "lab"
    if lab.exists():
        members.insert(1, "lab")
    for member in members:
        folder = ROOT / member
        manifest = (folder / "Cargo.toml").read_text()
        crate_name = re.search(r'^name\s*=\s*"([^"]+)"', manifest, re.M).group(1)
        for root in ("src/lib.rs", "src/main.rs"):
            if (folder / root).exists():
                yield Crate(crate_name.replace("-", "_"), folder / root)


def main():
    show_edges = "--edges" in sys.argv
    dot = "--dot" in sys.argv
    circles = 0
    for crate in crates():
        edges = crate.graph()
        found = cycles(edges)
        if dot:
            print(f'digraph "{crate.name}" {{')
            for v in sorted(edges):
                for w in sorted(edges[v]):
                    print(f'  "{name(crate, v)}" -> "{name(crate, w)}";')
            print("}")
            continue
        count = sum(len(e) for e in edges.values())
        print(f"{crate.name}: {len(edges)} files, {count} imports, {len(found)} circle(s)")
        for component in found:
            circles += 1
            cycle = one_cycle(edges, component)
            print("  circle: " + " -> ".join(name(crate, m) for m in cycle))
            print("    through: " + ", ".join(sorted(name(crate, m) for m in component)))
        if not found:
            layer = {}

            def depth(v):
                if v not in layer:
                    layer[v] = 0
                    layer[v] = 1 + max((depth(w) for w in edges[v]), default=-1)
                return layer[v]

            for v in edges:
                depth(v)
            for level in range(max(layer.values()) + 1):
                members = sorted(n for n, lv in layer.items() if lv == level)
                shown = ", ".join("::".join(m) or "(root)" for m in members)
                print(f"  layer {level}: {shown}")
        if show_edges:
            for v in sorted(edges):
                for w in sorted(edges[v]):
                    print(f"    {name(crate, v)} -> {name(crate, w)}")
    if circles:
        print(f"{circles} circle(s)")
        sys.exit(1)
    if not dot:
        print("no import circle")


if __name__ == "__main__":
    main()
