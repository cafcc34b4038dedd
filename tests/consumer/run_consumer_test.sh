#!/usr/bin/env bash
# The installed package, from the outside (CTest install_consumer):
#   1. installs tracetorch's "libtorch" component from BUILD_DIR into WORK_DIR/prefix;
#   2. configures and builds tests/consumer/ against it with Ninja (C++17, find_package), with one
#      translation unit per installed header, so that each compiles alone as C++17;
#   3. runs the consumer: it traces a small model, exports JSON, reads it back and checks it.
# Exit 0 only when every step succeeds. Each step has a time limit; the compiler launcher (ccache)
# of the tracetorch build is reused, so a rerun compiles little.
#
#   run_consumer_test.sh BUILD_DIR WORK_DIR CXX_COMPILER [COMPILER_LAUNCHER]
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 BUILD_DIR WORK_DIR CXX_COMPILER [COMPILER_LAUNCHER]" >&2
  exit 2
fi
build=$1
work=$2
cxx=$3
launcher=${4:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

step() {  # step SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2
  shift 2
  echo "== $what" >&2
  local status=0
  timeout --kill-after=10 "$seconds" "$@" || status=$?
  if [[ $status -ne 0 ]]; then
    [[ $status -eq 124 ]] && echo "install_consumer: $what: timed out after ${seconds}s" >&2
    echo "install_consumer: FAILED at: $what (exit $status)" >&2
    exit 1
  fi
}

rm -rf "$work"
mkdir -p "$work/headers"
prefix=$work/prefix

step 120 "install the libtorch component" \
  cmake --install "$build" --component libtorch --prefix "$prefix"

# One source per installed header. Headers live under include/ (tracetorch/trace_session.h) and
# include/tracetorch/ (trace/*.h): include each by the path a consumer writes.
sources=()
while IFS= read -r header; do
  rel=${header#"$prefix/include/"}
  if [[ $rel == tracetorch/trace/* ]]; then rel=${rel#tracetorch/}; fi
  src=$work/headers/$(echo "$rel" | tr '/.' '__').cc
  printf '#include "%s"  // Alone, first: the header is self-contained.\n' "$rel" > "$src"
  sources+=("$src")
done < <(find "$prefix/include" -name '*.h' | sort)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "install_consumer: FAILED: the install put no header under $prefix/include" >&2
  exit 1
fi
echo "== ${#sources[@]} installed headers, each compiled alone as C++17" >&2
header_list=$(IFS=';'; echo "${sources[*]}")

configure=(cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_CXX_COMPILER=$cxx" "-DCMAKE_PREFIX_PATH=$prefix"
  "-DTRACETORCH_CONSUMER_HEADER_SOURCES=$header_list")
if [[ -n $launcher ]]; then configure+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher"); fi
# ccache: paths relative to the work directory, so that reruns hit the cache.
export CCACHE_BASEDIR=$work
step 120 "configure tests/consumer against the installed package" "${configure[@]}"
step 900 "build tests/consumer" cmake --build "$work/build" -j2
step 120 "run the consumer" "$work/build/tracetorch_consumer" "$work/trace.json"
echo "install_consumer: OK" >&2
