#!/usr/bin/env bash
# Checks that the project's own C++ (tool/, tidy/, rewrite-rules/, runtime/)
# is laid out as .clang-format says, with clang-format 19 (scripts/setup.sh
# installs it): ctest tool.format runs this.
#
#   scripts/check_format.sh         list the files that differ; exit 1 if any
#   scripts/check_format.sh --fix   rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/.."
format=$(command -v clang-format-19 || true)
if [ -z "$format" ]; then
  echo "check_format.sh: clang-format-19 is missing (scripts/setup.sh installs it); the layout was NOT checked" >&2
  exit 2
fi
folders=(tool tidy rewrite-rules runtime)
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "${folders[@]/%//*.cpp}" "${folders[@]/%//*.h}")
else
  mapfile -t files < <(find "${folders[@]}" -name '*.cpp' -o -name '*.h' | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
bad=()
for file in "${files[@]}"; do
  "$format" --dry-run --Werror "$file" > /dev/null 2>&1 || bad+=("$file")
done
if ((${#bad[@]})); then
  echo "check_format.sh: ${#bad[@]} of ${#files[@]} files are not laid out as .clang-format says:" >&2
  for file in "${bad[@]}"; do
    echo "  $file" >&2
    "$format" "$file" | diff -u "$file" - | head -12 | sed 's/^/    /' >&2 || true
  done
  echo "check_format.sh: run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format.sh: ${#files[@]} files laid out as .clang-format says"
