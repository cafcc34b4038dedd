#!/usr/bin/env bash
# The agent on a GPU node, in one run of a few minutes (issue 16): builds the Python extension
# against the torch of this machine's python3 (agent-only: no gRPC, protobuf, CLI11 or GoogleTest;
# the CUDA path when that torch has CUDA), then runs bench/gpu_check.py, which measures and checks
# the resnet50 traced/plain ratio (bf16 autocast, batch 64, 224x224; target <= 1.05), no host sync
# from our hooks under torch.cuda.set_sync_debug_mode("error"), per-layer memory deltas against
# torch.cuda.memory_allocated() by hand, CUDA-event latency against a hand-timed layer, and the
# origin of a NaN injected at one layer. Writes OUT/gpu_check.{json,md} and prints the markdown.
#
#   bench/gpu_check.sh [--cpu] [OUT]        (OUT default: build-gpu-check/out)
#
# --cpu (or no CUDA device) runs the CPU half: the same checks with device=cpu, plus the deferred
# route's CPU mode (TRACETORCH_DEFERRED_STATS=1); the CUDA-only checks say "ok": null.
# Environment:
#   PYTHON                 the interpreter with torch (default python3)
#   TRACETORCH_DEPS_PREFIX where abseil, simdjson, fmt and spdlog (CMake packages) are installed,
#                          when not in the system's default places (a GPU node without the
#                          distribution's -dev packages: build them once into a prefix)
#   TRACETORCH_PREBUILT    a folder holding an already built tracetorch package (e.g. build/python):
#                          skip the build and use it
#   BUILD_JOBS             build parallelism (default: all cores)
# Exit status: 0 when every check that could run is ok; 1 when one failed; 2 when the build failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
device=auto
if [ "${1:-}" = "--cpu" ]; then
  device=cpu
  shift
fi
OUT=$(realpath -m "${1:-build-gpu-check/out}")
PY=$(command -v "${PYTHON:-python3}")
if [ "$device" = auto ]; then
  device=$("$PY" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
fi
start=$SECONDS

if [ -n "${TRACETORCH_PREBUILT:-}" ]; then
  PKG=$(realpath "$TRACETORCH_PREBUILT")
else
  BUILD=$ROOT/build-gpu-check
  mkdir -p "$BUILD"
  args=(-DCMAKE_BUILD_TYPE=Release -DTRACETORCH_AGENT_ONLY=ON "-DTRACETORCH_PYTHON=$PY")
  if [ "$("$PY" -c 'import torch; print(torch.version.cuda is not None)')" = True ]; then
    args+=(-DTRACETORCH_WITH_CUDA=ON)
  fi
  if pybind11_dir=$("$PY" -m pybind11 --cmakedir 2>/dev/null); then
    args+=("-Dpybind11_DIR=$pybind11_dir")
  fi
  if [ -n "${TRACETORCH_DEPS_PREFIX:-}" ]; then
    args+=("-DCMAKE_PREFIX_PATH=$TRACETORCH_DEPS_PREFIX")
  fi
  generator=()
  command -v ninja >/dev/null && [ ! -f "$BUILD/CMakeCache.txt" ] && generator=(-G Ninja)
  if ! cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" "${args[@]}" >"$BUILD/configure.log" 2>&1; then
    tail -40 "$BUILD/configure.log" >&2
    echo "gpu_check: configuring failed (log: $BUILD/configure.log). The agent needs abseil," \
         "simdjson, fmt and spdlog as CMake packages (Debian/Ubuntu: libabsl-dev libsimdjson-dev" \
         "libfmt-dev libspdlog-dev), pybind11 and a torch with its CMake files; set" \
         "TRACETORCH_DEPS_PREFIX to where they are installed." >&2
    exit 2
  fi
  if ! cmake --build "$BUILD" --target tracetorch_python_ext -j "${BUILD_JOBS:-$(nproc)}" \
      >"$BUILD/build.log" 2>&1; then
    grep -m 20 -B2 -A8 "error" "$BUILD/build.log" >&2 || tail -40 "$BUILD/build.log" >&2
    echo "gpu_check: the build failed (log: $BUILD/build.log)" >&2
    exit 2
  fi
  PKG=$BUILD/python
  echo "gpu_check: built in $((SECONDS - start)) s"
fi

mkdir -p "$OUT"
status=0
PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" timeout 420 \
  "$PY" "$ROOT/bench/gpu_check.py" --device "$device" --out "$OUT" || status=$?
echo "gpu_check: $device checks done after $((SECONDS - start)) s (exit $status); $OUT/gpu_check.json"
exit "$status"
