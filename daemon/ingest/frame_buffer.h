// One connection's read buffer: a small base allocation that grows with the bytes that actually
// arrive, never past the frame being read, and shrinks back when that frame is done.
//
// Growth beyond the base is reserved from the IngestMemoryBudget first (the whole frame's need at
// once: see ingest_budget.h for why) and released when the buffer returns to its base size.
// Memory is never zero-filled: a frame's pages become resident as read() fills them.
//
// Typical use (the ingest server's loop):
//   FrameBuffer buf(&budget, FrameBuffer::kDefaultBaseBytes);
//   if (buf.space_size() == 0 && !buf.GrowFor(frame_bytes)) close;  // May wait on the budget.
//   n = read(fd, buf.space(), buf.space_size()); buf.Commit(n);
//   ... buf.data() holds the unconsumed bytes; buf.Consume(frame_bytes) after a frame.
//
// Thread-compatible: owned by one connection thread.
#ifndef TRACETORCH_DAEMON_INGEST_FRAME_BUFFER_H_
#define TRACETORCH_DAEMON_INGEST_FRAME_BUFFER_H_

#include <cstddef>
#include <memory>
#include <string_view>

#include "daemon/ingest/ingest_budget.h"

namespace tracetorch::daemon {

class FrameBuffer {
 public:
  static constexpr size_t kDefaultBaseBytes = 64 << 10;

  // `budget` (not owned) must outlive the buffer.
  FrameBuffer(IngestMemoryBudget* budget, size_t base_bytes);
  ~FrameBuffer();  // Releases what it reserved.
  FrameBuffer(const FrameBuffer&) = delete;
  FrameBuffer& operator=(const FrameBuffer&) = delete;

  // The bytes received and not yet consumed.
  std::string_view data() const { return {buf_.get() + begin_, end_ - begin_}; }
  // Free space after data() to read into (compacted first when that gains room); 0 when the
  // buffer is full: call GrowFor() with the size of the frame being read.
  char* space();
  size_t space_size();
  void Commit(size_t n) { end_ += n; }
  // Drops `n` bytes from the front of data() (a finished frame). When what is left fits the base
  // size, a grown buffer goes back to its base size and its reservation to the budget.
  void Consume(size_t n);

  // Makes room for a frame of `frame_bytes` (header included) starting at data(): reserves from
  // the budget what the frame needs beyond the base (waiting for it if need be), then at least
  // doubles the capacity, never past `frame_bytes`. False when the budget refuses (closed, or the
  // frame is larger than the whole budget). Requires: data() starts with that frame and the buffer
  // is full (space_size() == 0).
  bool GrowFor(size_t frame_bytes);

  size_t capacity() const { return capacity_; }
  size_t reserved() const { return reserved_; }

 private:
  void Reallocate(size_t capacity);

  IngestMemoryBudget* const budget_;
  const size_t base_;
  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  size_t begin_ = 0;  // data() is buf_[begin_, end_).
  size_t end_ = 0;
  size_t reserved_ = 0;  // From the budget: the current frame's need beyond base_.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_INGEST_FRAME_BUFFER_H_
