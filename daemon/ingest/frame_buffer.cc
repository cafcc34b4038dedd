#include "daemon/ingest/frame_buffer.h"

#include <algorithm>
#include <cstring>

namespace tracetorch::daemon {

FrameBuffer::FrameBuffer(IngestMemoryBudget* budget, size_t base_bytes)
    : budget_(budget), base_(std::max<size_t>(base_bytes, 16)) {
  Reallocate(base_);
}

FrameBuffer::~FrameBuffer() { budget_->Release(reserved_); }

void FrameBuffer::Reallocate(size_t capacity) {
  // new char[] without "()" leaves the bytes uninitialised: untouched pages stay non-resident.
  std::unique_ptr<char[]> fresh(new char[capacity]);
  const size_t n = end_ - begin_;
  if (n > 0) std::memcpy(fresh.get(), buf_.get() + begin_, n);
  buf_ = std::move(fresh);
  capacity_ = capacity;
  begin_ = 0;
  end_ = n;
}

char* FrameBuffer::space() {
  if (end_ == capacity_ && begin_ > 0) {
    const size_t n = end_ - begin_;
    std::memmove(buf_.get(), buf_.get() + begin_, n);
    begin_ = 0;
    end_ = n;
  }
  return buf_.get() + end_;
}

size_t FrameBuffer::space_size() {
  space();  // Compacts when full.
  return capacity_ - end_;
}

void FrameBuffer::Consume(size_t n) {
  begin_ += std::min(n, end_ - begin_);
  if (begin_ == end_) begin_ = end_ = 0;
  if (capacity_ > base_ && end_ - begin_ <= base_) {
    Reallocate(base_);
    budget_->Release(reserved_);
    reserved_ = 0;
  }
}

bool FrameBuffer::GrowFor(size_t frame_bytes) {
  if (frame_bytes <= capacity_) return true;  // Nothing to grow (the caller's frame fits).
  const size_t need = frame_bytes - base_;
  if (need > reserved_) {
    if (!budget_->Reserve(need - reserved_)) return false;
    reserved_ = need;
  }
  // Double, but never past the frame: what the buffer holds follows what has arrived.
  Reallocate(std::min(frame_bytes, std::max(capacity_ * 2, base_)));
  return true;
}

}  // namespace tracetorch::daemon
