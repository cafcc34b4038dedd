// The flight recorder's writer: owns one region (flight/layout.h) and writes the process's position
// and its latest spans into it from the tracing hooks.
//
// Example (the agent's Tracer does this under its own mutex):
//   absl::StatusOr<std::unique_ptr<Recorder>> r = Recorder::Create();
//   (*r)->AddName(0, "encoder.layers.0");                 // when a module is declared
//   (*r)->SetRecording(true, now_ns);
//   (*r)->BeginStep(step, now_ns);                        // the root call of a step
//   (*r)->Move(Phase::kForward, Event::kEnter, 0, step, now_ns);
//   (*r)->Span(SpanKind::kForward, 0, step, start_ns, end_ns - start_ns, /*flags=*/0);
//   int fd = (*r)->fd();                                   // for the daemon (SCM_RIGHTS)
//
// Cost: Move, BeginStep, Span and SetRecording are plain stores and sequence counters (see
// layout.h): no lock, no allocation, no syscall except one gettid() on a thread's first event.
// bench/flight_hook_bench measures their instructions (callgrind).
//
// Thread-safety: the writing methods (SetRecording, BeginStep, Move, Span, AddName) REQUIRE that
// their caller serialises them (one writer at a time, any thread; the Tracer's mutex). fd(),
// size() and data() are constant. Readers in other threads or processes use flight/reader.h.
//
// Fork: the region is shared with a forked child (MAP_SHARED); a child must not write (the agent's
// Tracer is inert there). The memfd is close-on-exec.
#ifndef TRACETORCH_FLIGHT_RECORDER_H_
#define TRACETORCH_FLIGHT_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "flight/layout.h"

namespace tracetorch::flight {

class Recorder {
 public:
  // Makes a region of kRegionBytes: a sealed memfd, or anonymous memory (fd() == -1: it cannot be
  // shared) when memfd_create or sealing is not available. ResourceExhausted when no memory can be
  // mapped at all.
  static absl::StatusOr<std::unique_ptr<Recorder>> Create();
  ~Recorder();  // Unmaps and closes the fd (a daemon's copy stays valid).
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  int fd() const { return fd_; }
  size_t size() const { return size_; }
  const void* data() const { return base_; }

  // Recording starts (the position becomes outside, step 0) or stops (idle: never a stall).
  void SetRecording(bool on, int64_t now_ns);
  // Step `step` begins at `now_ns` (its start time feeds the median step time).
  void BeginStep(uint64_t step, int64_t now_ns);
  // The position moves: `layer` -1 for none.
  void Move(Phase phase, Event event, int32_t layer, uint64_t step, int64_t now_ns);
  // One finished call: `layer`'s forward or backward at `step`.
  void Span(SpanKind kind, int32_t layer, uint64_t step, int64_t start_ns, int64_t duration_ns,
            uint32_t flags);
  // Adds `id`'s name to the table (once per id is the caller's business); counted in
  // names_dropped when the table is full or the name longer than 65535 bytes.
  void AddName(int32_t id, std::string_view name);

  // CLOCK_MONOTONIC in nanoseconds (what steady_clock gives on Linux).
  static int64_t MonotonicNs();

 private:
  Recorder(void* base, size_t size, int fd);

  Header* header() const { return static_cast<Header*>(base_); }
  Position* position() const;
  RingEntry* ring() const;

  void* const base_;
  const size_t size_;
  const int fd_;
};

}  // namespace tracetorch::flight

#endif  // TRACETORCH_FLIGHT_RECORDER_H_
