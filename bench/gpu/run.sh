#!/usr/bin/env bash
# The GPU check, in one script (issue: NCCL path on a real GPU, LibTorch 2.x,
# side by side with Python Lightning Fabric). From the repository root:
#
#   bash bench/gpu/run.sh            # GPU machine: wheel's LibTorch 2.x + CUDA + NCCL
#   bash bench/gpu/run.sh --cpu      # dry run (alias --dry-run): Debian's CPU
#                                    # LibTorch, tiny sizes, CUDA-only parts skipped
#
# Phases: 1 build the runtime alone (-DFABRIC_BUILD_TOOL=OFF, NCCL on a CUDA
# LibTorch); 2 build test/gpu and the bench programs with find_package(Fabric);
# 3 run the CUDA test subset; 4 run the transformer LM (single-device C++,
# migrated C++ under the runtime, Python under Lightning Fabric) in 32-true,
# bf16-mixed and 16-mixed (float16 autocast with the loss scaler) and print
# steps/s, ratios and peak GPU memory.
#
# Environment: BUILD_DIR (default build-gpu, build-gpu-cpu for --cpu),
# FABRIC_BUILD (an existing runtime build dir: phase 1 is skipped), JOBS,
# PYTHON (python3 with torch; with lightning on the GPU machine),
# LM_SIZES ("vocab dim heads layers seq batch steps warmup").
set -Eeuo pipefail

MODE=gpu
for arg in "$@"; do
  case "$arg" in
    --cpu|--dry-run) MODE=cpu ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$arg' (use --cpu / --dry-run, or nothing)" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
JOBS=${JOBS:-$(nproc)}
SCRIPT_START=$(date +%s)
PHASE=setup
PHASE_START=$SCRIPT_START
declare -a TIMINGS=()
declare -a RESULTS=()

phase() {  # phase NAME: closes the previous phase's timing, opens the next
  local now; now=$(date +%s)
  if [[ "$PHASE" != setup || $now -gt $SCRIPT_START ]]; then
    TIMINGS+=("$(printf '%-34s %4ds' "$PHASE" $((now - PHASE_START)))")
  fi
  PHASE=$1; PHASE_START=$now
  echo; echo "=== [$(date -u +%H:%M:%S)] $PHASE"
}
on_error() {
  local rc=$?
  echo >&2
  echo "run.sh: FAILED in phase '$PHASE' (exit $rc, line $1) after $(( $(date +%s) - SCRIPT_START ))s" >&2
  exit "$rc"
}
trap 'on_error $LINENO' ERR
die() { echo "run.sh: $*" >&2; exit 1; }

if [[ $MODE == cpu ]]; then
  BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu-cpu}
  PYTHON=${PYTHON:-/usr/bin/python3}   # Debian's python3-torch (1.13) in the dry run
  LM_SIZES=${LM_SIZES:-"64 32 2 1 16 8 4 1"}
  TORCH_PREFIX=""                      # Debian's LibTorch is found by default
else
  BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
  PYTHON=${PYTHON:-python3}
  LM_SIZES=${LM_SIZES:-"8192 1024 16 8 256 32 60 10"}
fi
mkdir -p "$BUILD_DIR"

phase "0 environment"
echo "mode=$MODE root=$ROOT build=$BUILD_DIR jobs=$JOBS"
command -v cmake >/dev/null || die "cmake not found"
command -v ninja >/dev/null || die "ninja not found"
GENERATOR=(-G Ninja)
cmake --version | sed -n 1p
if [[ $MODE == gpu ]]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PYTHON" - <<'PY' || die "python3 with a CUDA torch is required on the GPU machine"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
print("gpu", torch.cuda.get_device_name(0))
PY
  "$PYTHON" -c 'import lightning; print("lightning", lightning.__version__)' || die "python package lightning is missing"
  TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  echo "torch cmake prefix: $TORCH_PREFIX"
  # Hopper; set so that Caffe2's CUDA setup does not probe the GPU itself.
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
    export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  fi
  CUDA_ARGS=(-DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}")
  # ProcessGroupNCCL.hpp includes <nccl.h>, which the wheel keeps in its
  # nvidia-nccl package, not under torch/include; TorchConfig does not add it.
  NCCL_INCLUDE=$("$PYTHON" - <<'PY'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
found = sorted(glob.glob(os.path.join(site, "nvidia", "**", "nccl.h"), recursive=True))
found += [p for p in ("/usr/local/cuda/include/nccl.h", "/usr/include/nccl.h") if os.path.exists(p)]
print(os.path.dirname(found[0]) if found else "")
PY
)
  [[ -n "$NCCL_INCLUDE" ]] || die "nccl.h not found (wheel's nvidia/*nccl*, /usr/local/cuda/include, /usr/include)"
  echo "nccl.h in: $NCCL_INCLUDE"
  CUDA_ARGS+=(-DCMAKE_CXX_FLAGS="-isystem $NCCL_INCLUDE")
  CMAKE_TORCH=(-DCMAKE_PREFIX_PATH="$TORCH_PREFIX" "${CUDA_ARGS[@]}")
else
  CUDA_ARGS=()
  CMAKE_TORCH=()
  echo "dry run: Debian's CPU LibTorch; CUDA, NCCL and Lightning parts are skipped with a message"
fi

# ---------------------------------------------------------------- phase 1
if [[ -n "${FABRIC_BUILD:-}" ]]; then
  phase "1 runtime (reused)"
  [[ -f "$FABRIC_BUILD/FabricConfig.cmake" ]] || die "FABRIC_BUILD=$FABRIC_BUILD has no FabricConfig.cmake"
  RUNTIME_BUILD=$FABRIC_BUILD
  echo "reusing the runtime built in $RUNTIME_BUILD"
else
  phase "1 configure runtime"
  RUNTIME_BUILD=$BUILD_DIR/runtime
  NCCL_FLAG=()
  [[ $MODE == gpu ]] && NCCL_FLAG=(-DFABRIC_WITH_NCCL=ON)
  cmake -S "$ROOT" -B "$RUNTIME_BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DFABRIC_BUILD_TOOL=OFF -DFABRIC_BUILD_TESTS=OFF "${NCCL_FLAG[@]}" "${CMAKE_TORCH[@]}"
  phase "1 build runtime"
  cmake --build "$RUNTIME_BUILD" -j "$JOBS" --target fabric
fi
grep -E '^set\(Fabric_WITH_NCCL' "$RUNTIME_BUILD/FabricConfig.cmake" || true
if [[ $MODE == gpu ]] && ! grep -q 'Fabric_WITH_NCCL ON' "$RUNTIME_BUILD/FabricConfig.cmake"; then
  die "the runtime was built without NCCL: is the wheel's LibTorch a CUDA build?"
fi

# ---------------------------------------------------------------- phase 2
phase "2 configure test/gpu + bench/gpu"
PREFIX="$RUNTIME_BUILD${TORCH_PREFIX:+;$TORCH_PREFIX}"
# Fabric_DIR explicitly: a cached one from an earlier run would win otherwise.
cmake -S "$ROOT/test/gpu" -B "$BUILD_DIR/test" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DFabric_DIR="$RUNTIME_BUILD" "${CUDA_ARGS[@]}"
cmake -S "$ROOT/bench/gpu" -B "$BUILD_DIR/bench" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DFabric_DIR="$RUNTIME_BUILD" "${CUDA_ARGS[@]}"
phase "2 build test/gpu + bench/gpu"
# One ninja call per project, both at once: three translation units in all.
cmake --build "$BUILD_DIR/test" -j "$JOBS" &
TEST_BUILD=$!
cmake --build "$BUILD_DIR/bench" -j "$JOBS" &
BENCH_BUILD=$!
wait "$TEST_BUILD" || die "building test/gpu failed"
wait "$BENCH_BUILD" || die "building bench/gpu failed"

# ---------------------------------------------------------------- phase 3
phase "3 CUDA test subset"
if [[ $MODE == gpu ]]; then
  "$BUILD_DIR/test/fabric_gpu_test"
else
  "$BUILD_DIR/test/fabric_gpu_test" --cpu
fi

# ---------------------------------------------------------------- phase 4
phase "4 transformer LM side by side"
read -r -a SIZES <<<"$LM_SIZES"
echo "sizes (vocab dim heads layers seq batch steps warmup): ${SIZES[*]}"
LIGHTNING=(--plain)
if [[ $MODE == gpu ]]; then
  LIGHTNING=()
elif "$PYTHON" -c 'import lightning' 2>/dev/null; then
  LIGHTNING=()
else
  echo "dry run: python package lightning is not installed here; the Python side runs its plain-PyTorch loop (--plain), 32-true only"
fi
run_one() {  # run_one LABEL COMMAND...: runs it (a failure stops the script), keeps its RESULT line
  local label=$1; shift
  local log="$BUILD_DIR/run-${label//\//-}.log"
  echo "--- $label: $*"
  "$@" 2>&1 | tee "$log"
  local out
  out=$(grep '^RESULT ' "$log" | tail -1 || true)
  [[ -n "$out" ]] || die "$label printed no RESULT line (log: $log)"
  RESULTS+=("$label $out")
}
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

for precision in 32-true bf16-mixed 16-mixed; do
  if [[ $precision == 32-true ]]; then
    run_one "cpp-single/$precision" "$BUILD_DIR/bench/transformer_lm_gpu" "${SIZES[@]}"
  fi
  run_one "cpp-fabric/$precision" env LT_PRECISION=$precision "$BUILD_DIR/bench/lm_fabric" "${SIZES[@]}"
  if [[ ${#LIGHTNING[@]} -gt 0 && $precision != 32-true ]]; then
    echo "--- python/$precision: skipped (needs Lightning)"
    continue
  fi
  if [[ $MODE == cpu && $precision == 16-mixed ]]; then
    echo "--- python/$precision: skipped on CPU (Lightning refuses float16 autocast there)"
    continue
  fi
  run_one "python/$precision" "$PYTHON" "$ROOT/bench/gpu/lightning_lm.py" "${LIGHTNING[@]}" \
    --precision $precision "${SIZES[@]}"
done

phase "done"
echo
echo "=== results (steps/s over ${SIZES[6]} timed steps after ${SIZES[7]} warm-up steps)"
printf '%-22s %-11s %12s %14s %12s\n' run precision steps/s peak_MiB final_loss
declare -A RATE=() MEM=() PROGRAM=()
for line in "${RESULTS[@]}"; do
  label=${line%% *}
  rate=$(field "$line" steps_per_s); mem=$(field "$line" peak_mem_mib)
  RATE[$label]=$rate; MEM[$label]=$mem; PROGRAM[$label]=$(field "$line" program)
  printf '%-22s %-11s %12s %14s %12s\n' "${label%%/*}" "$(field "$line" precision)" "$rate" "$mem" \
    "$(field "$line" final_loss)"
done
echo
for precision in 32-true bf16-mixed 16-mixed; do
  c=${RATE[cpp-fabric/$precision]:-}; p=${RATE[python/$precision]:-}
  if [[ -n "$c" && -n "$p" ]]; then
    awk -v c="$c" -v p="$p" -v cm="${MEM[cpp-fabric/$precision]}" -v pm="${MEM[python/$precision]}" \
      -v pr="$precision" -v py="${PROGRAM[python/$precision]}" \
      'BEGIN { printf "ratio %-10s C++ Fabric / Python %s: steps/s %.3f, peak memory %s\n", pr, py, c / p, (pm > 0 ? sprintf("%.3f", cm / pm) : "n/a (CPU)") }'
  fi
done
s=${RATE[cpp-single/32-true]:-}; f=${RATE[cpp-fabric/32-true]:-}
[[ -n "$s" && -n "$f" ]] && awk -v s="$s" -v f="$f" 'BEGIN { printf "ratio 32-true    C++ Fabric / C++ single-device: steps/s %.3f\n", f / s }'
echo
echo "=== phase timings"
printf '%s\n' "${TIMINGS[@]}"
TOTAL=$(( $(date +%s) - SCRIPT_START ))
echo "total ${TOTAL}s (budget: 480s on the GPU machine)"
if [[ $MODE == gpu && $TOTAL -gt 480 ]]; then
  echo "run.sh: WARNING: over the 8-minute budget; lower LM_SIZES' steps or reuse a runtime build (FABRIC_BUILD)" >&2
fi
[[ $MODE == cpu ]] && echo "dry run only: nothing here was measured on a GPU"
exit 0
