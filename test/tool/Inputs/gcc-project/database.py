"""Writes <build>/compile_commands.json with one command: what CMake writes
for a GCC build (`<compiler> <flags> -o x.o -c <source>`).

usage: database.py <build dir> <compiler> <source> [flags...]
"""
import json
import os
import sys

build, compiler, source, *flags = sys.argv[1:]
os.makedirs(build, exist_ok=True)
command = [compiler, *flags, "-o", "x.o", "-c", source]
with open(os.path.join(build, "compile_commands.json"), "w") as f:
    json.dump([{"directory": build, "file": source, "arguments": command}], f, indent=2)
