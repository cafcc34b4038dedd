#!/usr/bin/env bash
# Instructions per hook that the flight recorder adds (callgrind; the machine's load does not move
# instruction counts): agent/flight_hook_bench.cc under valgrind --tool=callgrind, counting only inside
# RunSteps (the Tracer's hook path, 18 hooks per step) and RunRaw (the recorder's writes alone).
#
#   bench/flight_hook_cost.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build=${1:-build}
steps=${2:-2000}
bin="$build/agent/tracetorch_flight_hook_bench"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {  # MODE FUNCTION -> total Ir inside FUNCTION
  valgrind --tool=callgrind --callgrind-out-file="$tmp/$1.out" --toggle-collect="$2" \
    "$bin" --mode="$1" --calls "$steps" >/dev/null 2>&1
  callgrind_annotate "$tmp/$1.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
plain=$(count plain '*RunSteps*')
traced=$(count recorder '*RunSteps*')
raw=$(count raw '*RunRaw*')
hooks=$((steps * 18))
awk -v p="$plain" -v t="$traced" -v r="$raw" -v h="$hooks" -v s="$steps" 'BEGIN {
  printf "Tracer hook path, statistics off, no tensors: %.1f instructions/hook without the flight recorder, %.1f with it: +%.1f (x%.3f)\n", p / h, t / h, (t - p) / h, t / p
  printf "The recorder'"'"'s writes alone (Move at begin; Span + Move at end): %.1f instructions per call (%.1f per hook)\n", r / s, r / s / 2
}'
