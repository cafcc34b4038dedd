// Internal to trace/ (not installed): transparent huge pages for large, short-lived buffers.
//
// A buffer of tens of MiB that is written once (a file read whole, a JSON parser's tape) costs a
// page fault per 4 KiB page on first touch: for `tracetorch diff` of two 17 MiB traces that was
// half of the process's time. Where the kernel's transparent huge pages are in "madvise" mode (most
// distributions' default) or "always", AdviseHugePages lets it back the buffer with 2 MiB pages,
// 512 times fewer faults. It is a hint: with huge pages off, or too small a range, nothing changes.
// The price is that a 2 MiB page is resident whole once any byte of it is touched, so call it only
// for ranges that will be mostly written.
//
// Thread-safe (a system call on the caller's own memory).
#ifndef TRACETORCH_TRACE_HUGE_PAGES_H_
#define TRACETORCH_TRACE_HUGE_PAGES_H_

#include <cstddef>

namespace tracetorch::trace_internal {

// Ranges smaller than this are left alone: no whole huge page fits.
inline constexpr size_t kHugePageSize = size_t{2} << 20;

// Advises the kernel to back the whole pages within [data, data + size) with huge pages. Must be
// called before those pages are first written to have an effect on their faults.
void AdviseHugePages(const void* data, size_t size);

}  // namespace tracetorch::trace_internal

#endif  // TRACETORCH_TRACE_HUGE_PAGES_H_
