#include "trace/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace tracetorch::trace_internal {

void AdviseHugePages(const void* data, size_t size) {
#ifdef MADV_HUGEPAGE
  if (size < kHugePageSize) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) & ~(page - 1);
  if (end <= begin) return;
  // EINVAL where the kernel has no transparent huge pages: the hint is dropped, as intended.
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)size;
#endif
}

}  // namespace tracetorch::trace_internal
