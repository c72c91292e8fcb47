#!/usr/bin/env bash
# LibTorch 2.x, once per machine: PyPI's torch wheel (a CUDA build with c10d,
# Gloo and NCCL; it runs on CPU too) in a virtual environment outside the
# clone, reused by every clone and every later run. Prints the LibTorch root
# to build against (-DCMAKE_PREFIX_PATH=<it>; headers in include/, the CMake
# package in share/cmake/Torch).
#
#   scripts/libtorch2.sh               install if missing (~4.6 GB, ~2 min here); print the root
#   scripts/libtorch2.sh --lightning   the same, with lightning-fabric (the bench's reference)
#   scripts/libtorch2.sh --tensorboard the same, with the tensorboard package (its reader checks
#                                      the runtime's event files in scripts/test_libtorch2.sh)
#   scripts/libtorch2.sh --python      print the environment's Python instead of the root
#
# FABRIC_TORCH2_VERSION (default 2.11.0, the GPU machine's version) and
# FABRIC_TORCH2_HOME (default ~/.cache/fabricize; /var/cache/fabricize for
# root) choose another.
set -euo pipefail
version="${FABRIC_TORCH2_VERSION:-2.11.0}"
# Readable by every user (the fault tests run a rank as nobody): root's
# home is not, so root installs under /var/cache.
if [ -z "${FABRIC_TORCH2_HOME:-}" ] && [ "$(id -u)" = 0 ]; then
  home=/var/cache/fabricize
else
  home="${FABRIC_TORCH2_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/fabricize}"
fi
venv="$home/torch-$version"
python="${FABRIC_PYTHON:-python3}"
lightning=0 tensorboard=0 print_python=0
for option in "$@"; do
  case "$option" in
    --lightning) lightning=1 ;;
    --tensorboard) tensorboard=1 ;;
    --python) print_python=1 ;;
    *) echo "libtorch2.sh: unknown option $option (--lightning, --tensorboard, --python)" >&2; exit 2 ;;
  esac
done

mkdir -p "$home"
# One installer at a time (two clones set up at once share the folder); an
# install is complete only once its marker exists, so an interrupted one is
# redone, never used.
exec 9>"$home/.torch-$version.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  echo "libtorch2.sh: installing torch==$version from PyPI into $venv (once per machine)" >&2
  rm -rf "$venv"
  if ! "$python" -m venv "$venv" >&2; then
    echo "libtorch2.sh: '$python -m venv' failed: install Debian's python3-venv (scripts/setup.sh does)" >&2
    exit 1
  fi
  "$venv/bin/python" -m pip install --quiet --no-cache-dir "torch==$version" >&2
  touch "$venv/.complete"
fi
if [ "$lightning" = 1 ] && [ ! -f "$venv/.lightning-numpy" ]; then
  "$venv/bin/python" -m pip install --quiet --no-cache-dir "lightning-fabric" numpy >&2
  touch "$venv/.lightning-numpy"
fi
if [ "$tensorboard" = 1 ] && [ ! -f "$venv/.tensorboard" ]; then
  "$venv/bin/python" -m pip install --quiet --no-cache-dir tensorboard >&2
  touch "$venv/.tensorboard"
fi
if [ "$print_python" = 1 ]; then
  echo "$venv/bin/python"
  exit 0
fi
root="$("$venv/bin/python" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])')"
if [ ! -f "$root/share/cmake/Torch/TorchConfig.cmake" ]; then
  echo "libtorch2.sh: $root has no share/cmake/Torch/TorchConfig.cmake: not a LibTorch" >&2
  exit 1
fi
echo "$root"
