// Native faults for the flight recorder's fault tests (test_flight_faults.py), loaded with ctypes
// by fault_train.py: a segmentation fault and an allocation failure inside a "custom op", and a
// process-wide mutex to deadlock a forward against the GIL. Not part of tracetorch.
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <new>

namespace {
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
volatile int* g_null = nullptr;
}  // namespace

extern "C" {

// Writes through a null pointer: SIGSEGV.
__attribute__((visibility("default"))) void tt_segv() { *g_null = 1; }

// An allocation that cannot succeed, in a function that may not throw: std::bad_alloc reaches a
// noexcept boundary, std::terminate runs, and the process aborts (SIGABRT).
__attribute__((visibility("default"))) int tt_alloc_abort() noexcept {
  // Through a volatile pointer: the compiler may not elide the allocation.
  void* (*volatile allocate)(size_t) = &::operator new;
  volatile size_t huge = static_cast<size_t>(1) << 62;
  char* p = static_cast<char*>(allocate(huge));
  return p[0];
}

__attribute__((visibility("default"))) void tt_mutex_lock() { pthread_mutex_lock(&g_mutex); }
__attribute__((visibility("default"))) void tt_mutex_unlock() { pthread_mutex_unlock(&g_mutex); }

}  // extern "C"
