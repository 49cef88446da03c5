#!/usr/bin/env python3
"""Import circles between the source files of each crate under crates/.

A file imports another when it names the other's module through `crate::` or `super::` (in a
`use` or in a path). The files of a crate and those edges form a graph; every strongly
connected component of more than one file is a circle. Prints each circle and exits 1 if there
is any (ARCHITECTURE.md: no import circles between source files), 0 otherwise.

It reads the text, not the compiler's view: a path in a string or a doc comment's code would
count, so comments are stripped first. Good enough for a layout check; a false circle is a
prompt to look, not a verdict.
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "crates"
PATH = re.compile(r"\b(crate|super)((?:::\w+)+)(::\{([^}]*)\})?")


def module_of(src, path):
    parts = os.path.relpath(path, src)[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def edges_of(module, text, modules):
    """The modules `module`'s text names, found by the longest module prefix of each path."""
    text = re.sub(r"//[^\n]*", "", text)
    found = set()
    for match in PATH.finditer(text):
        start = () if match.group(1) == "crate" else module[:-1]
        path = start + tuple(p for p in match.group(2).split("::") if p)
        candidates = [path]
        for item in (match.group(4) or "").split(","):
            item = item.strip().split(" as ")[0]
            if item:
                candidates.append(path + tuple(p for p in item.split("::") if p))
        for candidate in candidates:
            for k in range(len(candidate), 0, -1):
                if candidate[:k] in modules:
                    if candidate[:k] != module:
                        found.add(candidate[:k])
                    break
    return found


def circles(graph):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def main():
    found = 0
    for crate in sorted(os.listdir(ROOT)):
        src = os.path.join(ROOT, crate, "src")
        if not os.path.isdir(src):
            continue
        files = {}
        for directory, _, names in os.walk(src):
            if os.sep + "bin" in directory:
                continue
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.join(directory, name)
                    files[module_of(src, path)] = path
        graph = {m: edges_of(m, open(p).read(), files) - {()} for m, p in files.items()}
        for circle in circles(graph):
            found += 1
            print(f"{crate}: a circle among " + ", ".join("/".join(m) or "lib" for m in circle))
    print(f"import circles: {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
