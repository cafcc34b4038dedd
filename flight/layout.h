// The flight recorder's shared-memory region: where a traced process is (step, phase, module, since
// when) and a ring of its latest per-call timings, in a memory region the agent writes and the
// daemon maps too, so that the daemon can read it at any moment: while the process runs, when it is
// stopped or deadlocked, and after it died.
//
// Design (layout version 1)
// -------------------------
// The region is a memfd (memfd_create, sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL once
// sized, so that a reader's mapping can never be cut short under it: no SIGBUS). The agent maps it
// read-write and hands the fd to tracetorchd over its ingest socket with SCM_RIGHTS, attached to
// every Hello (Hello.flight_recorder says it is there: agent.proto). The daemon checks the seals
// and the size, maps it read-only and keeps the mapping: the memory lives as long as either side
// holds it, so the daemon reads the last position and ring after the process died. An agent
// without a daemon keeps the region for itself (its watch file reports the position).
//
//   offset        size                      what
//   0             256 B                     Header: magic, version, geometry, pid, clocks; the
//                                           ring head and the name table's end
//   256           560 B                     Position, under a sequence counter: step, phase,
//                                           innermost module, event (enter/exit), thread, since
//                                           when, events so far, and the start times of the
//                                           latest kStepSlots (64) steps
//   4096          kNameBytes (128 KiB)      names: append-only records {i32 id, u16 length,
//                                           bytes}, published by Header.names_end
//   135168        kRingCapacity x 48 B      ring: the latest kRingCapacity (16384) spans, each
//                 (768 KiB)                 {seq, step, start, duration, layer, thread, kind,
//                                           flags} under its own sequence number
//   total         kRegionBytes = 921600 B (900 KiB)
//
// A step of a model with L traced layers writes 2L spans (forward and backward), so the ring holds
// the last 16384 / 2L steps: 136 for resnet18 (60 layers), 8 for a model of 1000 layers.
//
// Writing (flight/recorder.h) is plain stores and sequence counters: no syscall (but one gettid()
// on a thread's first event, cached), no lock, no allocation. Writers are serialised by their
// caller (the agent's Tracer writes under the mutex its hooks already hold): one writer at a time,
// any thread. Every field is accessed through std::atomic_ref with relaxed order (plain moves on
// x86-64); the sequence counters give the order:
//   Position: seq odd while a write is in progress; writer: seq+1, release fence, fields,
//             seq+1 (release). Reader: s1 = seq (acquire), odd: retry; copy; acquire fence;
//             s2 = seq; s1 != s2: retry (a torn read).
//   Ring:     span i goes to slot i % kRingCapacity; its seq is 2i+1 while written and 2i+2 once
//             complete, then Header.ring_head = i+1 (release). A reader takes ring_head, copies
//             each slot and keeps it only when its seq read before and after the copy is 2i+2:
//             a span overwritten while it was copied is dropped (counted), never mixed.
//   Names:    written once per module when it is declared (not on the hook path), then
//             names_end is published (release): a reader parses [0, names_end).
// The reader treats the region as hostile input (another user's process may have written it):
// every offset and length is checked against the mapping's size, and garbage yields an error,
// never an out-of-bounds read.
//
// Times are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock on Linux), the clock every
// process of the host shares; created_unix_ns / created_monotonic_ns convert them to wall time.
//
// Thread-safety: this header only describes memory; see recorder.h and reader.h.
#ifndef TRACETORCH_FLIGHT_LAYOUT_H_
#define TRACETORCH_FLIGHT_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tracetorch::flight {

inline constexpr uint64_t kMagic = 0x544847494c465454ull;  // "TTFLIGHT", little-endian.
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kStepSlots = 64;
inline constexpr uint32_t kRingCapacity = 16384;  // A power of two.
inline constexpr uint32_t kNameBytes = 128u << 10;

// Where a process is in its training step.
enum class Phase : uint32_t {
  kIdle = 0,       // Not recording (before Start, after Stop): never a stall.
  kForward = 1,    // Inside the model's forward.
  kBackward = 2,   // In (or after) the backward of `step`.
  kOptimizer = 3,  // In the optimizer's step (where the front door can tell).
  kOutside = 4,    // After the forward, before the backward; or between steps.
};
// What the position's last event was.
enum class Event : uint32_t {
  kMark = 0,   // A phase change with no module (start, the end of the root forward, ...).
  kEnter = 1,  // Entered `layer` (its forward or its backward): "in layer".
  kExit = 2,   // Left `layer`'s backward: "after layer". (A forward's exit moves the position
               // to the enclosing module, entered.)
};
enum class SpanKind : uint32_t { kForward = 1, kBackward = 2 };
inline constexpr uint32_t kSpanNonFinite = 1u;  // Flags: a non-finite output (or gradient).

const char* PhaseName(Phase phase);       // "idle", "forward", "backward", "optimizer", "outside"
const char* SpanKindName(SpanKind kind);  // "forward", "backward"

struct Header {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t pid;
  uint64_t region_bytes;
  uint64_t position_offset;
  uint64_t names_offset;
  uint64_t ring_offset;
  uint32_t names_capacity;
  uint32_t ring_capacity;
  uint32_t ring_entry_bytes;
  uint32_t step_slots;
  int64_t created_unix_ns;       // CLOCK_REALTIME when the region was made...
  int64_t created_monotonic_ns;  // ...and CLOCK_MONOTONIC at the same moment.
  // Written while recording:
  uint32_t recording;  // 1 between the Tracer's Start and Stop.
  uint32_t reserved0;
  uint64_t ring_head;      // Spans written so far (release-published).
  uint64_t names_end;      // Bytes of the name table in use (release-published).
  uint64_t names_dropped;  // Names that did not fit.
};

struct Position {
  uint64_t seq;
  uint64_t step;     // The step (root call index) the position belongs to.
  int64_t since_ns;  // When the position's event happened (CLOCK_MONOTONIC).
  uint64_t events;   // Events so far: it moves iff the process made progress.
  int32_t layer;     // The module (a declared layer id), -1 for none (the model's own code).
  uint32_t phase;    // Phase
  uint32_t event;    // Event
  uint32_t tid;      // The thread of the event.
  int64_t step_start_ns[kStepSlots];  // Step s began at step_start_ns[s % kStepSlots].
};

struct RingEntry {
  uint64_t seq;  // 2i+1 while span i is being written, 2i+2 once complete.
  uint64_t step;
  int64_t start_ns;
  int64_t duration_ns;
  int32_t layer;
  uint32_t tid;
  uint32_t kind;   // SpanKind
  uint32_t flags;  // kSpanNonFinite
};

inline constexpr size_t kPositionOffset = 256;
inline constexpr size_t kNamesOffset = 4096;
inline constexpr size_t kRingOffset = kNamesOffset + kNameBytes;
inline constexpr size_t kRegionBytes = kRingOffset + size_t{kRingCapacity} * sizeof(RingEntry);
// A name record: i32 id, u16 length, then the bytes.
inline constexpr size_t kNameRecordHeader = 6;

static_assert(std::is_trivially_copyable_v<Header> && std::is_standard_layout_v<Header>);
static_assert(sizeof(Header) <= kPositionOffset);
static_assert(sizeof(Position) <= kNamesOffset - kPositionOffset);
static_assert(sizeof(RingEntry) == 48);
static_assert(kRegionBytes == 921600);
static_assert((kRingCapacity & (kRingCapacity - 1)) == 0);

}  // namespace tracetorch::flight

#endif  // TRACETORCH_FLIGHT_LAYOUT_H_
