#include "flight/recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::flight {
namespace {

template <typename T>
void Put(T& field, T value) {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

template <typename T>
T Get(T& field) {
  return std::atomic_ref<T>(field).load(std::memory_order_relaxed);
}

// The calling thread's kernel id, read once per thread.
uint32_t CurrentTid() {
  thread_local uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

int64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A sealed memfd of `size` bytes, or -1.
int MakeMemfd(size_t size) {
  const int fd = static_cast<int>(
      syscall(SYS_memfd_create, "tracetorch-flight", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int64_t Recorder::MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }

absl::StatusOr<std::unique_ptr<Recorder>> Recorder::Create() {
  const size_t size = kRegionBytes;
  int fd = MakeMemfd(size);
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      close(fd);
      fd = -1;
    }
  }
  if (base == MAP_FAILED) {
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map the flight recorder (", size, " bytes): ", std::strerror(errno)));
  }
  // Fresh pages are zero: only the constant header needs writing.
  auto* h = static_cast<Header*>(base);
  h->layout_version = kLayoutVersion;
  h->pid = static_cast<uint32_t>(getpid());
  h->region_bytes = size;
  h->position_offset = kPositionOffset;
  h->names_offset = kNamesOffset;
  h->ring_offset = kRingOffset;
  h->names_capacity = kNameBytes;
  h->ring_capacity = kRingCapacity;
  h->ring_entry_bytes = sizeof(RingEntry);
  h->step_slots = kStepSlots;
  h->created_unix_ns = ClockNs(CLOCK_REALTIME);
  h->created_monotonic_ns = ClockNs(CLOCK_MONOTONIC);
  auto* p = reinterpret_cast<Position*>(static_cast<char*>(base) + kPositionOffset);
  p->layer = -1;
  // The magic last: a reader that sees it sees a complete header.
  std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
  return std::unique_ptr<Recorder>(new Recorder(base, size, fd));
}

Recorder::Recorder(void* base, size_t size, int fd) : base_(base), size_(size), fd_(fd) {}

Recorder::~Recorder() {
  munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

Position* Recorder::position() const {
  return reinterpret_cast<Position*>(static_cast<char*>(base_) + kPositionOffset);
}

RingEntry* Recorder::ring() const {
  return reinterpret_cast<RingEntry*>(static_cast<char*>(base_) + kRingOffset);
}

void Recorder::SetRecording(bool on, int64_t now_ns) {
  Put(header()->recording, on ? 1u : 0u);
  Move(on ? Phase::kOutside : Phase::kIdle, Event::kMark, -1, on ? 0 : Get(position()->step),
       now_ns);
}

void Recorder::BeginStep(uint64_t step, int64_t now_ns) {
  Position& p = *position();
  const uint64_t seq = Get(p.seq);
  Put(p.seq, seq + 1);
  std::atomic_thread_fence(std::memory_order_release);
  Put(p.step_start_ns[step % kStepSlots], now_ns);
  Put(p.step, step);
  std::atomic_ref<uint64_t>(p.seq).store(seq + 2, std::memory_order_release);
}

void Recorder::Move(Phase phase, Event event, int32_t layer, uint64_t step, int64_t now_ns) {
  Position& p = *position();
  const uint64_t seq = Get(p.seq);
  Put(p.seq, seq + 1);
  std::atomic_thread_fence(std::memory_order_release);
  Put(p.step, step);
  Put(p.since_ns, now_ns);
  Put(p.events, Get(p.events) + 1);
  Put(p.layer, layer);
  Put(p.phase, static_cast<uint32_t>(phase));
  Put(p.event, static_cast<uint32_t>(event));
  Put(p.tid, CurrentTid());
  std::atomic_ref<uint64_t>(p.seq).store(seq + 2, std::memory_order_release);
}

void Recorder::Span(SpanKind kind, int32_t layer, uint64_t step, int64_t start_ns,
                    int64_t duration_ns, uint32_t flags) {
  Header& h = *header();
  const uint64_t i = Get(h.ring_head);
  RingEntry& e = ring()[i & (kRingCapacity - 1)];
  Put(e.seq, 2 * i + 1);
  std::atomic_thread_fence(std::memory_order_release);
  Put(e.step, step);
  Put(e.start_ns, start_ns);
  Put(e.duration_ns, duration_ns);
  Put(e.layer, layer);
  Put(e.tid, CurrentTid());
  Put(e.kind, static_cast<uint32_t>(kind));
  Put(e.flags, flags);
  std::atomic_ref<uint64_t>(e.seq).store(2 * i + 2, std::memory_order_release);
  std::atomic_ref<uint64_t>(h.ring_head).store(i + 1, std::memory_order_release);
}

void Recorder::AddName(int32_t id, std::string_view name) {
  Header& h = *header();
  const uint64_t end = Get(h.names_end);
  if (name.size() > 0xffff || end + kNameRecordHeader + name.size() > kNameBytes) {
    Put(h.names_dropped, Get(h.names_dropped) + 1);
    return;
  }
  char* at = static_cast<char*>(base_) + kNamesOffset + end;
  const uint16_t length = static_cast<uint16_t>(name.size());
  std::memcpy(at, &id, sizeof(id));
  std::memcpy(at + sizeof(id), &length, sizeof(length));
  std::memcpy(at + kNameRecordHeader, name.data(), name.size());
  std::atomic_ref<uint64_t>(h.names_end)
      .store(end + kNameRecordHeader + name.size(), std::memory_order_release);
}

}  // namespace tracetorch::flight
