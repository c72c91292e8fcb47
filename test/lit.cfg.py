# lit configuration for the rule and tool tests: each test migrates a small program
# written against the LibTorch stub (test/stubs) and checks the result with
# FileCheck. Run by ctest (see test/CMakeLists.txt), or by hand:
#   python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv \
#     -Dfabricize=build/bin/fabricize test/rules test/tool
import os
import sys
import lit.formats

config.name = "fabricize"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".cpp"]
config.test_source_root = os.path.dirname(__file__)
# Temporary files go to the build tree, never into the sources. Each ctest
# runs lit on one file with an exec root of its own: lit rewrites
# .lit_test_times.txt there at the end of every run, and lit runs that share
# one (ctest -j) read each other's half-written file and fail.
config.test_exec_root = lit_config.params.get("exec_root", os.path.join("/tmp", "fabricize-lit"))
# What the runs share: the PCHs fabricize builds of the real headers.
cache_root = lit_config.params.get("cache_root", config.test_exec_root)
# Only the rule tests (test/rules), the tool's own (test/tool) and the lint's
# (test/lint) are lit tests.
config.excludes = ["Inputs", "stubs", "runtime", "e2e", "bench"]

fabricize = lit_config.params.get("fabricize")
if not fabricize or not os.path.exists(fabricize):
    lit_config.fatal("pass -Dfabricize=<path to the fabricize binary>")
llvm_bin = lit_config.params.get("llvm_bin", "/usr/lib/llvm-19/bin")
stubs = os.path.join(config.test_source_root, "stubs")

# PCHs the tool builds go under the build tree, not the user's cache.
config.environment["FABRICIZE_CACHE_DIR"] = os.path.join(cache_root, "pch-cache")
config.environment["PATH"] = os.pathsep.join([llvm_bin, config.environment.get("PATH", "/usr/bin:/bin")])
flags = "-std=c++17 -isystem " + stubs
config.substitutions.append(("%fabricize", fabricize))
config.substitutions.append(("%flags", flags))
# Migrate one file to stdout; diagnostics to stderr.
config.substitutions.append(("%migrate", fabricize + " --stdout --quiet"))
# fabricize lint, and the python that runs the lint tests' checkers.
config.substitutions.append(("%lint", fabricize + " lint"))
config.substitutions.append(("%python", sys.executable))
# The clang-tidy plugin's tests (test/tidy): clang-tidy 19 and the plugin it
# loads. test/tidy/lit.local.cfg stops those tests when either is missing.
clang_tidy = lit_config.params.get("clang_tidy")
tidy_plugin = lit_config.params.get("tidy_plugin")
if clang_tidy:
    config.substitutions.append(("%clang_tidy", os.path.abspath(clang_tidy)))
if tidy_plugin:
    config.substitutions.append(("%tidy_plugin", os.path.abspath(tidy_plugin)))
# lit itself, for the test that lit refuses test/tidy without its params.
config.substitutions.append(
    ("%lit", sys.executable + " " + os.path.join(os.path.dirname(os.path.dirname(lit.__file__)), "lit.py")))
