#!/usr/bin/env bash
# The agent on a GPU node, in one run of a few minutes (issues 16, 27): builds the Python extension
# against the torch of this machine's python3 (agent-only: no gRPC, protobuf or GoogleTest; the
# CUDA path when that torch has CUDA), then runs bench/gpu_check.py, which measures and checks
# the resnet50 traced/plain ratio (bf16 autocast, batch 64, 224x224; target <= 1.05), no host sync
# from our hooks under torch.cuda.set_sync_debug_mode("error"), per-layer memory deltas against
# torch.cuda.memory_allocated() by hand, CUDA-event latency against a hand-timed layer, the
# origin of a NaN injected at one layer, and ops="on_nan" on a GPU transformer. Writes
# OUT/gpu_check.{json,md} and prints the markdown.
#
#   bench/gpu_check.sh [--cpu] [OUT]        (OUT default: build-gpu-check/out)
#
# The prepared GPU command (a node with torch, CMake, ninja, pybind11 and nvcc but none of
# Debian's C++ libraries and no network), with the prefix made here by tools/torch2/make_prefix
# build-deps-prefix (9.9 MiB; tools/check_torch2 makes it and rehearses this build in CI with the
# system's copies hidden):
#
#   TRACETORCH_DEPS_PREFIX=build-deps-prefix bench/gpu_check.sh "$OUT"      (carry build-deps-prefix)
#
# --cpu (or no CUDA device) runs the CPU half: the same checks with device=cpu, plus the deferred
# route's CPU mode (TRACETORCH_DEFERRED_STATS=1); the CUDA-only checks say "ok": null.
# Environment:
#   PYTHON                 the interpreter with torch (default python3)
#   TRACETORCH_DEPS_PREFIX where abseil, simdjson, fmt, spdlog, Graphviz and CLI11 are (a prefix
#                          from tools/torch2/make_prefix), when not in the system's default places;
#                          Graphviz's plugins are then linked in (svg and dot)
#   TRACETORCH_PREBUILT    a folder holding an already built tracetorch package (e.g. build/python):
#                          skip the build and use it
#   TRACETORCH_BUILD_TYPE  CMake build type (default Release)
#   TRACETORCH_BUILD_DIR   the build folder (default build-gpu-check)
#   CUDA_HOME              the CUDA toolkit (default: nvcc's on PATH, else /usr/local/cuda)
#   BUILD_JOBS             build parallelism (default: all cores)
# Exit status: 0 when every check that could run is ok; 1 when one failed; 2 when the build failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1  # Where ccache is (CI): hits on the same objects.
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
  BUILD=$(realpath -m "${TRACETORCH_BUILD_DIR:-$ROOT/build-gpu-check}")
  mkdir -p "$BUILD"
  args=("-DCMAKE_BUILD_TYPE=${TRACETORCH_BUILD_TYPE:-Release}" -DTRACETORCH_AGENT_ONLY=ON
        -DTRACETORCH_BUILD_TESTS=OFF -DTRACETORCH_BUILD_BENCH=OFF "-DTRACETORCH_PYTHON=$PY"
        -DCMAKE_DISABLE_FIND_PACKAGE_gRPC=ON -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON
        -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON)
  if [ "$("$PY" -c 'import torch; print(torch.version.cuda is not None)')" = True ]; then
    args+=(-DTRACETORCH_WITH_CUDA=ON)
    if [ -z "${CUDA_HOME:-}" ]; then
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      CUDA_HOME=$(dirname "$(dirname "$(realpath -m "$nvcc")")")
    fi
    export CUDACXX=$CUDA_HOME/bin/nvcc CUDAToolkit_ROOT=$CUDA_HOME
  fi
  if pybind11_dir=$("$PY" -m pybind11 --cmakedir 2>/dev/null); then
    args+=("-Dpybind11_DIR=$pybind11_dir")
  fi
  if [ -n "${TRACETORCH_DEPS_PREFIX:-}" ]; then
    prefix=$(realpath "$TRACETORCH_DEPS_PREFIX")
    args+=("-DCMAKE_PREFIX_PATH=$prefix" -DTRACETORCH_GRAPHVIZ_PLUGINS=builtin)
    export PKG_CONFIG_PATH=$prefix/lib/x86_64-linux-gnu/pkgconfig:$prefix/share/pkgconfig
  fi
  generator=()
  command -v ninja >/dev/null && [ ! -f "$BUILD/CMakeCache.txt" ] && generator=(-G Ninja)
  if ! cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" "${args[@]}" >"$BUILD/configure.log" 2>&1; then
    tail -40 "$BUILD/configure.log" >&2
    echo "gpu_check: configuring failed (log: $BUILD/configure.log). The agent needs abseil," \
         "simdjson, fmt, spdlog and Graphviz as CMake/pkg-config packages (Debian/Ubuntu:" \
         "libabsl-dev libsimdjson-dev libfmt-dev libspdlog-dev libgraphviz-dev), pybind11 and a" \
         "torch with its CMake files; set TRACETORCH_DEPS_PREFIX to where they are installed" \
         "(tools/torch2/make_prefix)." >&2
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
if [ -n "${TRACETORCH_DEPS_PREFIX:-}" ]; then
  # The extension's run path names the prefix's libraries it links, but not what those need in
  # turn (libgvc needs libcdt, ...): the loader finds those through LD_LIBRARY_PATH.
  prefix=$(realpath "$TRACETORCH_DEPS_PREFIX")
  export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
status=0
PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" timeout 300 \
  "$PY" "$ROOT/bench/gpu_check.py" --device "$device" --out "$OUT" || status=$?
echo "gpu_check: $device checks done after $((SECONDS - start)) s (exit $status); $OUT/gpu_check.json"
exit "$status"
