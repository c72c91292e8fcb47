#!/usr/bin/env python3
"""The tool's layering, checked (ctest tool.layers).

The tool's folders are its layers: tool/utilities/, tool/outputs/, ...,
tool/migrate/, tool/lint/ (LAYERS below orders the folders, bottom up; a
file's layer is its folder, so a new file needs no entry here). Reads the
`#include "..."` lines of tool/, rewrite-rules/ and tidy/ and fails when

  - a module (X.h and X.cpp together) is in an include cycle with another:
    X includes Y and Y, directly or not, includes X, so neither can be read,
    built or replaced without the other;
  - a file includes a module of a layer above its own;
  - a front end (a subcommand's folder, the clang-tidy plugin) includes
    another front end's files, or names a function another front end's
    headers declare: each subcommand is its own folder over the shared
    layers, and none calls another;
  - a file is in a folder that is no layer (a new folder is placed in
    LAYERS below);
  - an include does not name its file by its path from an include root
    (tool/, rewrite-rules/, tidy/): "engine/Engine.h", not "Engine.h" found
    beside the including file, so that an include says which layer it
    reaches into; or it names a file that two roots hold.

  test/tool/check_layers.py [--root <checkout>] [--self-test]

--self-test first runs the check on small made-up trees that break each
rule once, and fails unless each is caught.
"""
import argparse
import fnmatch
import os
import re
import sys
import tempfile

# Bottom up: (layer, what it holds, its folders). A file may include files
# of its own layer and of the layers below it, never of one above.
LAYERS = [
    ("utilities", "generic helpers with no project types (a stable sort without libstdc++'s deprecated buffer, "
     "HTML escaping)", ["tool/utilities"]),
    ("outputs", "writing files whole or not at all; -o's copy of the rest of the project", ["tool/outputs"]),
    ("edits", "text edits: merged, rendered, diffed; findings as shown; rule selection; CMake edits; the "
     "migration report", ["tool/edits"]),
    ("catalogue", "the rules, one per file, and beside them the helpers several rules share",
     ["rewrite-rules", "rewrite-rules/rule-helpers"]),
    ("engine", "runs the catalogue over translation units (the LibTorch PCH, a document's preamble)",
     ["tool/engine"]),
    ("inputs", "project root, compile database, CMake's file API, compiler include folders", ["tool/inputs"]),
    ("services", "what the front ends share: engine options from a command line, findings of a run, the Fabric "
     "include", ["tool/services"]),
    ("front ends", "one folder per subcommand, and the clang-tidy plugin; none includes another",
     ["tool/migrate", "tool/lint", "tool/lsp", "tool/verify", "tidy"]),
    ("dispatch", "picks the subcommand", ["tool"]),
]

# The front ends: a module of one may not include (or call) a module of another.
# (verify runs the fabricize executable, migrate, as a process: no code shared.)
FRONT_ENDS = {"tool/migrate": "migrate", "tool/lint": "lint", "tool/lsp": "lsp", "tool/verify": "verify",
              "tidy": "clang-tidy plugin"}

# The include roots (each is on the include path of what is built from it).
SCANNED = ["tool", "rewrite-rules", "tidy"]
SUFFIXES = (".h", ".cpp", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# A function declared at namespace scope in a header: `type name(` at column 0.
DECLARED = re.compile(r"^(?!return\b|using\b|typedef\b|#)[A-Za-z_][\w:<>,*& ]*?[\s*&]([A-Za-z_]\w*)\s*\(", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def match(module, patterns):
    """Whether a module matches one of the glob patterns (test/runtime/check_layers.py's layers)."""
    return any(fnmatch.fnmatchcase(module, p) for p in patterns)


def folder_of(path):
    return os.path.dirname(path)


def layer_of(module):
    """Index of the layer holding the module's folder; None when no layer does."""
    for index, (name, _, folders) in enumerate(LAYERS):
        if folder_of(module) in folders:
            return index
    return None


def front_end_of(module):
    return FRONT_ENDS.get(folder_of(module))


def read_tree(root):
    """{relative file: text} of the scanned folders and the folders below them."""
    files = {}
    for folder in SCANNED:
        top = os.path.join(root, folder)
        for dirpath, dirnames, names in os.walk(top):
            dirnames.sort()
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        files[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    return files


def module_of(path):
    return os.path.splitext(path)[0]


def resolve(path, target, files):
    """(the file an include names, a problem or None); (None, None) for a
    library's header (clang/..., llvm/..., nlohmann/...)."""
    from_roots = [f"{root}/{target}" for root in SCANNED if f"{root}/{target}" in files]
    beside = f"{folder_of(path)}/{target}"
    if len(from_roots) > 1:
        return None, (f"\"{target}\" is in {', '.join(from_roots)}: which one it means depends on the include "
                      "path; rename one")
    if from_roots:
        return from_roots[0], None
    if beside in files:
        root = next(r for r in SCANNED if beside.startswith(r + "/"))
        return beside, (f"\"{target}\" is found beside the file only: name it by its path from {root}/, "
                        f"\"{beside[len(root) + 1:]}\"")
    return None, None


def find_cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def cycle_path(graph, members):
    """One cycle through the component, as a -> b -> ... -> a."""
    start = members[0]
    inside = set(members)
    # Breadth-first from start back to start, inside the component.
    previous = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in inside:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return " -> ".join(reversed(path)) + " -> " + start
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return " <-> ".join(members)


def check(root, verbose=True):
    """Problems found in the tree at `root` (empty: it is layered)."""
    files = read_tree(root)
    problems = []
    graph = {}  # module -> modules it includes (other than itself)
    edges = []  # (file, line, included module)
    for path, text in files.items():
        graph.setdefault(module_of(path), set())
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            resolved, problem = resolve(path, m.group(1), files)
            if problem:
                problems.append(f"{path}:{line}: {problem}")
            if resolved and module_of(resolved) != module_of(path):
                graph[module_of(path)].add(module_of(resolved))
                edges.append((path, line, module_of(resolved)))

    for module in sorted(graph):
        if layer_of(module) is None:
            problems.append(f"{module}: its folder {folder_of(module)}/ is in no layer; move it to the folder "
                            "of the lowest layer whose files it needs, or add the folder to LAYERS in "
                            "test/tool/check_layers.py")

    for path, line, target in edges:
        source_layer, target_layer = layer_of(module_of(path)), layer_of(target)
        if source_layer is None or target_layer is None:
            continue
        if target_layer > source_layer:
            problems.append(f"{path}:{line}: includes {target} ({LAYERS[target_layer][0]}), a layer above "
                            f"its own ({LAYERS[source_layer][0]})")
        mine, theirs = front_end_of(module_of(path)), front_end_of(target)
        if mine and theirs and mine != theirs:
            problems.append(f"{path}:{line}: the {mine} front end includes {target}, a file of the {theirs} "
                            "front end; move what both need to a shared layer")

    for members in find_cycles(graph):
        problems.append("include cycle: " + cycle_path(graph, members))

    # Calls across front ends: a function one front end's headers declare,
    # named in another front end's files (say, through a declaration of its own).
    declared = {}  # function -> (front end, header)
    for path, text in files.items():
        owner = front_end_of(module_of(path))
        if owner and path.endswith(".h"):
            for m in DECLARED.finditer(strip_comments(text)):
                declared.setdefault(m.group(1), (owner, path))
    for path, text in files.items():
        mine = front_end_of(module_of(path))
        if not mine:
            continue
        code = strip_comments(text)
        for function, (owner, header) in sorted(declared.items()):
            if owner != mine and re.search(r"\b" + re.escape(function) + r"\s*\(", code):
                problems.append(f"{path}: the {mine} front end calls {function}() of the {owner} front end "
                                f"({header}); move it to a shared layer")

    if verbose:
        print("front ends' own functions, called by no other front end: " +
              ", ".join(f"{f}() [{owner}]" for f, (owner, _) in sorted(declared.items())))
        print(f"checked {len(files)} files, {len(graph)} modules, {len(edges)} includes between modules "
              f"under {root}")
        print("layers, bottom up (a file includes its own layer and those below):")
        for index, (name, what, folders) in enumerate(LAYERS):
            modules = sorted(m for m in graph if layer_of(m) == index)
            print(f"  {index} {name} ({', '.join(f + '/' for f in folders)}): {what}")
            for module in modules:
                uses = sorted(graph[module])
                front_end = front_end_of(module)
                tag = f" [{front_end}]" if front_end else ""
                print(f"      {module}{tag}" + (" -> " + ", ".join(uses) if uses else ""))
    return problems


def self_test():
    """Each rule broken once in a made-up tree: each must be caught."""
    base = {
        "tool/outputs/Output.h": "",
        "tool/outputs/Output.cpp": '#include "outputs/Output.h"\n',
        "tool/engine/Engine.h": '#include "Rule.h"\n#include "engine/Pch.h"\n',
        "tool/engine/Pch.h": "",
        "tool/engine/Engine.cpp": '#include "engine/Engine.h"\n#include "rule-helpers/Matchers.h"\n',
        "rewrite-rules/Rule.h": "",
        "rewrite-rules/rule-helpers/Matchers.h": '#include "Rule.h"\n',
        "rewrite-rules/fabric-step.cpp": '#include "Rule.h"\n#include "rule-helpers/Matchers.h"\n',
        "tool/services/Findings.h": '#include "engine/Engine.h"\n',
        "tool/services/Findings.cpp": '#include "services/Findings.h"\n#include "outputs/Output.h"\n',
        "tool/lint/LintCommand.h": "int runLint(int argc, const char** argv);\n",
        "tool/lint/LintCommand.cpp": '#include "lint/LintCommand.h"\n#include "services/Findings.h"\n',
        "tool/migrate/MigrateCommand.h": "int runMigrate(int argc, const char** argv);\n",
        "tool/migrate/MigrateCommand.cpp": '#include "migrate/MigrateCommand.h"\n#include "engine/Engine.h"\n',
        "tidy/CatalogueCheck.cpp": '#include "Rule.h"\n#include "outputs/Output.h"\n',
        "tool/main.cpp": '#include "lint/LintCommand.h"\n#include "migrate/MigrateCommand.h"\n',
    }
    broken = {
        "a layered tree": ({}, None),
        "a cycle": ({"tool/outputs/Output.cpp": '#include "outputs/Output.h"\n#include "services/Findings.h"\n'},
                    "include cycle"),
        "a cycle inside one layer": ({"tool/engine/Pch.h": '#include "engine/Engine.h"\n'}, "include cycle"),
        "a cycle through headers": ({"tool/outputs/Output.h": '#include "engine/Engine.h"\n',
                                     "tool/engine/Engine.h": '#include "outputs/Output.h"\n'}, "include cycle"),
        "a rule helper including the engine": (
            {"rewrite-rules/rule-helpers/Matchers.h": '#include "engine/Engine.h"\n'}, "a layer above"),
        "a subcommand including another": (
            {"tool/lint/LintCommand.cpp": '#include "lint/LintCommand.h"\n#include "migrate/MigrateCommand.h"\n'},
            "the lint front end includes tool/migrate/MigrateCommand"),
        "a subcommand calling another": (
            {"tool/lint/LintCommand.cpp": '#include "lint/LintCommand.h"\nint runMigrate(int, const char**);\n'
                                          'int f() { return runMigrate(0, nullptr); }\n'},
            "the lint front end calls runMigrate()"),
        "a shared layer including a subcommand": (
            {"tool/services/Findings.cpp": '#include "services/Findings.h"\n#include "lint/LintCommand.h"\n'},
            "a layer above"),
        "a file in a folder that is no layer": ({"tool/misc/Stray.cpp": '#include "outputs/Output.h"\n'},
                                                "is in no layer"),
        "an include found only beside the file": (
            {"tool/engine/Engine.cpp": '#include "Engine.h"\n'}, "name it by its path from tool/"),
        "a name two roots hold": ({"tidy/Rule.h": "", "tidy/CatalogueCheck.cpp": '#include "Rule.h"\n'},
                                  "which one it means depends on the include path"),
    }
    failures = []
    for name, (changes, expected) in broken.items():
        with tempfile.TemporaryDirectory() as tmp:
            for path, text in {**base, **changes}.items():
                os.makedirs(os.path.dirname(os.path.join(tmp, path)), exist_ok=True)
                with open(os.path.join(tmp, path), "w") as f:
                    f.write(text)
            problems = check(tmp, verbose=False)
        if expected is None and problems:
            failures.append(f"{name}: reported {problems}")
        elif expected is not None and not any(expected in p for p in problems):
            failures.append(f"{name}: not caught (expected '{expected}', got {problems})")
        else:
            print(f"self-test: {name}: " + ("passes" if expected is None else "caught"))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        failures = self_test()
        if failures:
            print("check_layers.py self-test FAILED:\n  " + "\n  ".join(failures))
            return 1
    problems = check(args.root)
    if problems:
        print(f"{len(problems)} layering problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("no include cycle, no include upward, no front end including or calling another")
    return 0


if __name__ == "__main__":
    sys.exit(main())
