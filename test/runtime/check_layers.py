#!/usr/bin/env python3
"""The runtime's layering, checked (ctest runtime.layers).

runtime/src/ is laid out as Lightning Fabric's components (docs/architecture.md).
This reads every `#include` of runtime/src/ and fails when

  - a file is in no component (a new file is placed in LAYERS below);
  - a quoted include does not name a file by its path from runtime/src/
    ("strategies/strategy.h", not "strategy.h"), so that every include says
    which component it reaches into;
  - a file includes a component of a layer above its own;
  - two modules (X.h and X.cpp together) include each other, directly or not;
  - a file that must build without LibTorch (LIBTORCH_FREE: fabric-run, the
    option names fabricize validates against, the launcher) includes LibTorch,
    itself or through the headers it includes (public <fabric/...> ones too);
  - a file other than fabric.cpp names FabricState: what a Fabric keeps
    besides its strategy is that file's alone, and the other components are
    reached through the strategy that owns them;
  - a file below the facade's layer, or a public header other than the
    facade itself, includes the facade <fabric/fabric.h>: the components
    share types through <fabric/types.h> and reach each other through
    their own headers, never through the class that orchestrates them.

  test/runtime/check_layers.py [--root <checkout>] [--self-test]

--self-test first runs the check on small made-up trees that break each
rule once, and fails unless each is caught.
"""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tool"))
from check_layers import cycle_path, find_cycles, match, strip_comments  # noqa: E402  (the tool's check)

# Bottom up. A file may include files of its own layer and of the layers
# below it, never of one above. The first layer whose patterns match a
# module is its layer (checked in order).
LAYERS = [
    ("utilities", "no component of its own: messages, variables, c10d's compatibility, the options",
     ["utilities/*", "options", "verify_files"]),
    ("environments and accelerators", "where a process is in its job, and on which device",
     ["plugins/environments/*", "accelerators/*"]),
    ("launchers", "starting the ranks and watching them",
     ["launchers/*"]),
    ("plugins", "collectives (with the job monitor that watches them), precision, checkpoint IO, loggers: what a "
     "strategy owns",
     ["plugins/collectives/*", "job_monitor/*", "plugins/precision/*", "plugins/io/*", "loggers/*"]),
    ("strategies", "ddp, zero1/zero2, fsdp over the plugins",
     ["strategies/*"]),
    ("connector", "Options resolved into the strategy and its plugins",
     ["connector"]),
    ("fabric", "fabric::Fabric, its checkpoints, fabric-run",
     ["fabric", "set_up_models", "checkpoints/*", "data_sharding", "fabric_run"]),
]

# What builds without LibTorch: fabric-run (starts instantly), the option
# names (fabricize compiles options.cpp), the launcher and what it needs.
LIBTORCH_FREE = ["options", "fabric_run", "verify_files", "utilities/messages", "utilities/environment_variables",
                 "plugins/environments/*", "launchers/*", "loggers/*"]
LIBTORCH = re.compile(r"^(torch|ATen|c10|caffe2)/")
# The only file that may name FabricState (fabric.h declares it for the pimpl).
STATE_OWNER = "fabric.cpp"
STATE_NAME = re.compile(r"\bFabricState\b")
# The facade: only the files of its own layer (they implement its members)
# include it.
FACADE = "fabric/fabric.h"
FACADE_LAYER = "fabric"

SOURCE = "runtime/src"
PUBLIC = "runtime/include"
SUFFIXES = (".h", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def layer_of(module):
    """Index of the first of LAYERS whose patterns match the module; None when none does."""
    for index, (_, _, patterns) in enumerate(LAYERS):
        if match(module, patterns):
            return index
    return None


def read_files(root, folder):
    """{path relative to `folder`: text} of the C++ files under root/folder."""
    files = {}
    base = os.path.join(root, folder)
    for directory, _, names in os.walk(base):
        for name in sorted(names):
            if name.endswith(SUFFIXES):
                full = os.path.join(directory, name)
                with open(full, encoding="utf-8", errors="replace") as f:
                    files[os.path.relpath(full, base).replace(os.sep, "/")] = f.read()
    return files


def includes_of(text):
    """(line, quoted, target) of every include outside comments."""
    text = strip_comments(text)
    return [(text.count("\n", 0, m.start()) + 1, m.group(1) == '"', m.group(2)) for m in INCLUDE.finditer(text)]


def module_of(path):
    return os.path.splitext(path)[0]


def check(root):
    """Problems found in the checkout at `root` (empty: it is layered)."""
    sources = read_files(root, SOURCE)
    public = read_files(root, PUBLIC)
    problems = []
    graph = {}

    # Where each file's includes lead, for the LibTorch check: ("src", path)
    # or ("public", path) of the project's files, ("lib", name) otherwise.
    def resolve(quoted, target):
        if quoted and target in sources:
            return ("src", target)
        if not quoted and target in public:
            return ("public", target)
        return ("lib", target)

    edges = {}
    for path, text in sorted(sources.items()):
        module = module_of(path)
        graph.setdefault(module, set())
        layer = layer_of(module)
        if layer is None:
            problems.append(f"{SOURCE}/{path}: in no component of the runtime: add it to LAYERS in "
                            "test/runtime/check_layers.py (and to docs/architecture.md)")
        edges[("src", path)] = []
        for line, quoted, target in includes_of(text):
            where = resolve(quoted, target)
            edges[("src", path)].append(where)
            if not quoted and target == FACADE and layer is not None and LAYERS[layer][0] != FACADE_LAYER:
                problems.append(f"{SOURCE}/{path}:{line}: {LAYERS[layer][0]} ({module}) includes the facade "
                                f"<{FACADE}>: include <fabric/types.h> for the shared types, or the header of "
                                "the component it needs")
            if not quoted:
                continue
            if where[0] != "src":
                problems.append(f"{SOURCE}/{path}:{line}: \"{target}\" is not a file of {SOURCE}/: name it by its "
                                f"path from {SOURCE}/ (\"component/file.h\")")
                continue
            included = module_of(target)
            if included == module:
                continue
            graph[module].add(included)
            their_layer = layer_of(included)
            if layer is not None and their_layer is not None and their_layer > layer:
                problems.append(f"{SOURCE}/{path}:{line}: {LAYERS[layer][0]} ({module}) includes \"{target}\" "
                                f"of {LAYERS[their_layer][0]}, a layer above it (bottom up: "
                                f"{', '.join(name for name, _, _ in LAYERS)})")
        if STATE_NAME.search(strip_comments(text)) and path != STATE_OWNER:
            problems.append(f"{SOURCE}/{path}: names FabricState, which only {SOURCE}/{STATE_OWNER} may: reach "
                            "the process group, precision and checkpoint IO through the strategy (Fabric::strategy())")
    for path, text in public.items():
        edges[("public", path)] = [resolve(quoted, target) for _, quoted, target in includes_of(text)]
        for line, quoted, target in includes_of(text):
            if not quoted and target == FACADE and path != FACADE:
                problems.append(f"{PUBLIC}/{path}:{line}: includes the facade <{FACADE}>: a public header "
                                "below it includes <fabric/types.h> for the shared types")

    for members in find_cycles(graph):
        problems.append(f"{SOURCE}: include cycle: {cycle_path(graph, members)}")

    # LibTorch reached from a file that must build without it.
    for path in sorted(sources):
        if not match(module_of(path), LIBTORCH_FREE):
            continue
        seen = {("src", path): None}
        pending = [("src", path)]
        found = None
        while pending and found is None:
            node = pending.pop(0)
            for following in edges.get(node, []):
                if following in seen:
                    continue
                seen[following] = node
                if following[0] == "lib" and LIBTORCH.match(following[1]):
                    found = following
                    break
                if following[0] != "lib":
                    pending.append(following)
        if found is not None:
            chain = []
            node = found
            while node is not None:
                chain.append(node[1])
                node = seen[node]
            problems.append(f"{SOURCE}/{path}: must build without LibTorch (LIBTORCH_FREE), but includes "
                            f"{' -> '.join(reversed(chain))}")
    return problems


# Made-up trees, each breaking one rule (file -> text), and what must be said.
SELF_TESTS = [
    ("a file in no component",
     {f"{SOURCE}/helpers.cpp": ""},
     "in no component"),
    ("an include not named from runtime/src",
     {f"{SOURCE}/strategies/strategy.h": "", f"{SOURCE}/strategies/strategy.cpp": '#include "strategy.h"\n'},
     "is not a file of"),
    ("a layer above",
     {f"{SOURCE}/strategies/strategy.h": "", f"{SOURCE}/plugins/precision/precision.cpp":
      '#include "strategies/strategy.h"\n'},
     "a layer above"),
    ("a cycle",
     {f"{SOURCE}/plugins/io/a.h": '#include "plugins/io/b.h"\n', f"{SOURCE}/plugins/io/b.h":
      '#include "plugins/io/a.h"\n'},
     "include cycle"),
    ("LibTorch through a public header",
     {f"{SOURCE}/launchers/launcher.cpp": "#include <fabric/fabric.h>\n",
      f"{PUBLIC}/fabric/fabric.h": "#include <torch/torch.h>\n"},
     "must build without LibTorch"),
    ("LibTorch through a quoted header",
     {f"{SOURCE}/options.cpp": '#include "utilities/c10d_compat.h"\n',
      f"{SOURCE}/utilities/c10d_compat.h": "#include <c10/util/Exception.h>\n"},
     "must build without LibTorch"),
    ("a component including the facade",
     {f"{SOURCE}/plugins/io/checkpoint_io.cpp": "#include <fabric/fabric.h>\n"},
     "includes the facade"),
    ("a public header including the facade",
     {f"{PUBLIC}/fabric/data.h": "#include <fabric/fabric.h>\n"},
     "includes the facade"),
    ("the state named elsewhere",
     {f"{SOURCE}/checkpoints/checkpoints.cpp": "void f(detail::FabricState& state);\n"},
     "names FabricState"),
]
# And a tree that breaks none: nothing may be reported.
CLEAN_TREE = {
    f"{SOURCE}/utilities/messages.h": "#include <string>\n",
    f"{SOURCE}/launchers/launcher.cpp": '#include "utilities/messages.h"\n// #include <torch/torch.h>\n',
    f"{SOURCE}/strategies/strategy.h": '#include "utilities/messages.h"\n#include <torch/torch.h>\n',
    f"{SOURCE}/fabric.cpp": '#include <fabric/fabric.h>\n#include "strategies/strategy.h"\nstruct FabricState {};\n',
    f"{SOURCE}/plugins/io/checkpoint_io.cpp": "#include <fabric/types.h>\n",
    f"{PUBLIC}/fabric/fabric.h": "#include <fabric/types.h>\n",
}


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def self_test():
    failures = []
    for name, files, expected in SELF_TESTS:
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, files)
            problems = check(root)
            if not any(expected in problem for problem in problems):
                failures.append(f"self-test '{name}': expected a problem saying '{expected}', got {problems}")
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, CLEAN_TREE)
        problems = check(root)
        if problems:
            failures.append(f"self-test 'a layered tree': expected nothing, got {problems}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    arguments = parser.parse_args()
    if arguments.self_test:
        failures = self_test()
        for failure in failures:
            print(failure, file=sys.stderr)
        if failures:
            return 1
    if not os.path.isdir(os.path.join(arguments.root, SOURCE)):
        print(f"check_layers: no {SOURCE}/ under {arguments.root}", file=sys.stderr)
        return 2
    problems = check(arguments.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"runtime layering: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    sources = read_files(arguments.root, SOURCE)
    print(f"runtime layering: {len(sources)} files in {len(LAYERS)} layers, no problem")
    return 0


if __name__ == "__main__":
    sys.exit(main())
