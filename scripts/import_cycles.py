"""Fail if any two of our modules import each other, directly or through others.

import-linter's layers keep the apps in order; this looks inside them too. The graph
is grimp's (the one import-linter builds), with every import statement counted, those
inside functions as well: a cycle hidden in a function is still a cycle.

    .venv/bin/python scripts/import_cycles.py
"""

import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACKAGES = (
    "config",
    "web",
    "api",
    "operations",
    "connectors",
    "pipeline",
    "retrieval",
    "documents",
    "formats",
    "core",
)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        # Iterative depth-first search: (module, its imports still to visit).
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            module, imports = work[-1]
            for imported in imports:
                if imported not in index:
                    index[imported] = low[imported] = counter
                    counter += 1
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append(
                        (imported, iter(sorted(graph.find_modules_directly_imported_by(imported))))
                    )
                    break
                if imported in on_stack:
                    low[module] = min(low[module], index[imported])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def main() -> int:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    found = cycles(graph)
    for group in found:
        print(f"import cycle among {len(group)} modules:")
        for module in group:
            inside = sorted(set(graph.find_modules_directly_imported_by(module)) & set(group))
            for imported in inside:
                lines = graph.get_import_details(importer=module, imported=imported)
                where = ", ".join(f"line {d['line_number']}" for d in lines)
                print(f"  {module} -> {imported} ({where})")
    print(f"{len(graph.modules)} modules, {len(found)} import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
