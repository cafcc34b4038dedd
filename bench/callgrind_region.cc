// Marks of a counted region for valgrind --tool=callgrind, callable from Python through ctypes
// (bench/counted.py). Outside valgrind each call is a few instructions that do nothing.
//
// Run the process with `--instr-atstart=no`: nothing is instrumented (so importing torch costs
// little) until tt_cg_start(); tt_cg_zero() and tt_cg_dump(name) then delimit one region each, and
// each dump is a file of its own whose "totals:" line is the region's instruction count.
#include <valgrind/callgrind.h>

extern "C" {

void tt_cg_start() { CALLGRIND_START_INSTRUMENTATION; }
void tt_cg_stop() { CALLGRIND_STOP_INSTRUMENTATION; }
void tt_cg_zero() { CALLGRIND_ZERO_STATS; }
void tt_cg_dump(const char* name) { CALLGRIND_DUMP_STATS_AT(name); }
int tt_cg_running() { return RUNNING_ON_VALGRIND ? 1 : 0; }

}  // extern "C"
