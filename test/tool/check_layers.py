#!/usr/bin/env python3
"""The tool's layering, checked (ctest tool.layers).

Reads the `#include "..."` lines of tool/, rewrite-rules/ and tidy/ and
fails when

  - a module (X.h and X.cpp together) is in an include cycle with another:
    X includes Y and Y, directly or not, includes X, so neither can be read,
    built or replaced without the other;
  - a file includes a module of a layer above its own (the layers below,
    from the bottom up);
  - a front end (a subcommand, the clang-tidy plugin) includes another front
    end's files, or names a function another front end's headers declare:
    each subcommand is its own file over the shared layers, and none calls
    another;
  - a file is in no layer (a new file is placed in LAYERS below), or a
    quoted include names a file of two of the scanned folders.

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

# Bottom up. A file may include files of its own layer and of the layers
# below it, never of one above.
LAYERS = [
    ("utilities", "generic helpers with no project types (a stable sort without libstdc++'s deprecated buffer, HTML escaping)",
     ["tool/StableOrder", "tool/HtmlEscape"]),
    ("outputs", "writing files whole or not at all; -o's copy of the rest of the project",
     ["tool/Output", "tool/ProjectCopy"]),
    ("edits", "text edits: merged, rendered, diffed; findings as shown; rule selection; CMake edits",
     ["tool/EditSet", "tool/Diff", "tool/LintFinding", "tool/RuleSelection", "tool/BuildFiles",
      "tool/MigrationReport"]),
    ("catalogue", "the rules, one per file, and their matcher/edit helpers",
     ["rewrite-rules/*"]),
    ("engine", "runs the catalogue over translation units (the LibTorch PCH, a document's preamble)",
     ["tool/Pch", "tool/Preamble", "tool/EngineOptions", "tool/MatchRecording", "tool/UnitParse", "tool/Engine"]),
    ("inputs and compile commands", "project root, compile database, compiler include folders",
     ["tool/Project", "tool/CMakeFileApi", "tool/QueryDriver", "tool/CompileCommands"]),
    ("front-end services", "engine options, findings of a run, rule selection per file, the Fabric include",
     ["tool/EngineSetup", "tool/CommandLine", "tool/Findings", "tool/FabricInclude"]),
    ("front ends", "one per subcommand, and the clang-tidy plugin; none includes another",
     ["tool/MigrateCommand", "tool/MigrateInputs", "tool/MigrateOutputs", "tool/LintCommand", "tool/LintReport", "tool/LspCommand", "tool/LspServer", "tool/LspProtocol", "tool/VerifyCommand", "tool/VerifyHarness", "tool/VerifyChecks", "tool/VerifyReport",
      "tidy/*"]),
    ("dispatch", "picks the subcommand",
     ["tool/main"]),
]

# The front ends: a module of one may not include (or call) a module of another.
FRONT_ENDS = {
    "migrate": ["tool/MigrateCommand", "tool/MigrateInputs", "tool/MigrateOutputs"],
    "lint": ["tool/LintCommand", "tool/LintReport"],
    "lsp": ["tool/LspCommand", "tool/LspServer", "tool/LspProtocol"],
    # verify runs the fabricize executable (migrate) as a process: no code shared.
    "verify": ["tool/VerifyCommand", "tool/VerifyHarness", "tool/VerifyChecks", "tool/VerifyReport"],
    "clang-tidy plugin": ["tidy/*"],
}

SCANNED = ["tool", "rewrite-rules", "tidy"]
SUFFIXES = (".h", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# A function declared at namespace scope in a header: `type name(` at column 0.
DECLARED = re.compile(r"^(?!return\b|using\b|typedef\b|#)[A-Za-z_][\w:<>,*& ]*?[\s*&]([A-Za-z_]\w*)\s*\(", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def match(module, patterns):
    return any(fnmatch.fnmatchcase(module, p) for p in patterns)


def layer_of(module, layers=None):
    """Index of the first of `layers` (this check's LAYERS by default) whose
    patterns match `module`; None when none does."""
    for index, (name, _, patterns) in enumerate(LAYERS if layers is None else layers):
        if match(module, patterns):
            return index
    return None


def front_end_of(module):
    for name, patterns in FRONT_ENDS.items():
        if match(module, patterns):
            return name
    return None


def read_tree(root):
    """{relative file: text} of the scanned folders."""
    files = {}
    for folder in SCANNED:
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith(SUFFIXES) and os.path.isfile(os.path.join(path, name)):
                with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                    files[f"{folder}/{name}"] = f.read()
    return files


def module_of(path):
    return os.path.splitext(path)[0]


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
    where = {}  # file name -> folders holding it
    for path in files:
        folder, name = path.split("/", 1)
        where.setdefault(name, []).append(folder)

    graph = {}  # module -> modules it includes (other than itself)
    edges = []  # (file, line, included module)
    for path, text in files.items():
        graph.setdefault(module_of(path), set())
        folder = path.split("/", 1)[0]
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            if f"{folder}/{target}" in files:
                resolved = f"{folder}/{target}"
            elif "/" in target or target not in where:
                continue  # a library's header (clang/..., llvm/..., <...>)
            elif len(where[target]) > 1:
                problems.append(f"{path}:{line}: \"{target}\" is in {', '.join(where[target])}: "
                                "which one it means depends on the include path; rename one")
                continue
            else:
                resolved = f"{where[target][0]}/{target}"
            if module_of(resolved) != module_of(path):
                graph[module_of(path)].add(module_of(resolved))
                edges.append((path, line, module_of(resolved)))

    for module in sorted(graph):
        if layer_of(module) is None:
            problems.append(f"{module}: in no layer; add it to LAYERS in test/tool/check_layers.py "
                            "(the lowest layer whose files it needs)")

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
        for index, (name, what, patterns) in enumerate(LAYERS):
            modules = sorted(m for m in graph if layer_of(m) == index)
            print(f"  {index} {name}: {what}")
            for module in modules:
                uses = sorted(graph[module])
                front_end = front_end_of(module)
                tag = f" [{front_end}]" if front_end else ""
                print(f"      {module}{tag}" + (" -> " + ", ".join(uses) if uses else ""))
    return problems


def self_test():
    """Each rule broken once in a made-up tree: each must be caught."""
    base = {
        "tool/Output.h": "",
        "tool/Output.cpp": '#include "Output.h"\n',
        "tool/Engine.h": '#include "Rule.h"\n#include "Pch.h"\n',
        "tool/Pch.h": "",
        "tool/Engine.cpp": '#include "Engine.h"\n',
        "rewrite-rules/Rule.h": "",
        "tool/Findings.h": '#include "Engine.h"\n',
        "tool/Findings.cpp": '#include "Findings.h"\n#include "Output.h"\n',
        "tool/LintCommand.h": "int runLint(int argc, const char** argv);\n",
        "tool/LintCommand.cpp": '#include "LintCommand.h"\n#include "Findings.h"\n',
        "tool/MigrateCommand.h": "int runMigrate(int argc, const char** argv);\n",
        "tool/MigrateCommand.cpp": '#include "MigrateCommand.h"\n#include "Engine.h"\n',
        "tool/main.cpp": '#include "LintCommand.h"\n#include "MigrateCommand.h"\n',
    }
    broken = {
        "a layered tree": ({}, None),
        "a cycle": ({"tool/Output.cpp": '#include "Output.h"\n#include "Findings.h"\n'}, "include cycle"),
        "a cycle inside one layer": ({"tool/Pch.h": '#include "Engine.h"\n'}, "include cycle"),
        "a cycle through headers": ({"tool/Output.h": '#include "Engine.h"\n',
                                     "tool/Engine.h": '#include "Output.h"\n'}, "include cycle"),
        "a subcommand including another": (
            {"tool/LintCommand.cpp": '#include "LintCommand.h"\n#include "MigrateCommand.h"\n'},
            "the lint front end includes tool/MigrateCommand"),
        "a subcommand calling another": (
            {"tool/LintCommand.cpp": '#include "LintCommand.h"\nint runMigrate(int, const char**);\n'
                                     'int f() { return runMigrate(0, nullptr); }\n'},
            "the lint front end calls runMigrate()"),
        "a shared layer including a subcommand": (
            {"tool/Findings.cpp": '#include "Findings.h"\n#include "LintCommand.h"\n'}, "a layer above"),
        "a file in no layer": ({"tool/Stray.cpp": '#include "Output.h"\n'}, "in no layer"),
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
