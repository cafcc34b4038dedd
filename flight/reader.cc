#include "flight/reader.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::flight {
namespace {

constexpr int kPositionAttempts = 1000;

template <typename T>
T Load(const T& field, std::memory_order order = std::memory_order_relaxed) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(order);
}

// The header, when `base` holds a region of this layout version with its exact geometry.
absl::StatusOr<const Header*> CheckHeader(const void* base, size_t size) {
  if (base == nullptr || size < kRegionBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a flight recorder region needs ", kRegionBytes, " bytes; got ", size));
  }
  const auto* h = static_cast<const Header*>(base);
  if (Load(h->magic, std::memory_order_acquire) != kMagic) {
    return absl::InvalidArgumentError("not a flight recorder region (bad magic)");
  }
  if (h->layout_version != kLayoutVersion) {
    return absl::InvalidArgumentError(absl::StrCat("flight recorder layout version ",
                                                   h->layout_version, "; this reader knows ",
                                                   kLayoutVersion));
  }
  if (h->region_bytes != kRegionBytes || h->position_offset != kPositionOffset ||
      h->names_offset != kNamesOffset || h->ring_offset != kRingOffset ||
      h->names_capacity != kNameBytes || h->ring_capacity != kRingCapacity ||
      h->ring_entry_bytes != sizeof(RingEntry) || h->step_slots != kStepSlots) {
    return absl::InvalidArgumentError("flight recorder region with an unexpected geometry");
  }
  return h;
}

const Position& PositionOf(const void* base) {
  return *reinterpret_cast<const Position*>(static_cast<const char*>(base) + kPositionOffset);
}

const RingEntry* RingOf(const void* base) {
  return reinterpret_cast<const RingEntry*>(static_cast<const char*>(base) + kRingOffset);
}

absl::StatusOr<PositionView> ReadPositionAt(const Header& h, const void* base) {
  const Position& p = PositionOf(base);
  Position copy;
  bool consistent = false;
  for (int attempt = 0; attempt < kPositionAttempts && !consistent; ++attempt) {
    const uint64_t s1 = Load(p.seq, std::memory_order_acquire);
    if (s1 % 2 == 1) continue;
    copy.step = Load(p.step);
    copy.since_ns = Load(p.since_ns);
    copy.events = Load(p.events);
    copy.layer = Load(p.layer);
    copy.phase = Load(p.phase);
    copy.event = Load(p.event);
    copy.tid = Load(p.tid);
    for (uint32_t i = 0; i < kStepSlots; ++i) copy.step_start_ns[i] = Load(p.step_start_ns[i]);
    std::atomic_thread_fence(std::memory_order_acquire);
    consistent = Load(p.seq) == s1;
  }
  if (!consistent) {
    return absl::UnavailableError("the flight recorder's position kept changing while read");
  }
  PositionView v;
  v.pid = h.pid;
  v.recording = Load(h.recording) != 0;
  v.step = copy.step;
  v.since_ns = copy.since_ns;
  v.events = copy.events;
  v.layer = copy.layer;
  v.phase = copy.phase <= static_cast<uint32_t>(Phase::kOutside) ? static_cast<Phase>(copy.phase)
                                                                 : Phase::kIdle;
  v.event = copy.event <= static_cast<uint32_t>(Event::kExit) ? static_cast<Event>(copy.event)
                                                              : Event::kMark;
  v.tid = copy.tid;
  v.created_unix_ns = h.created_unix_ns;
  v.created_monotonic_ns = h.created_monotonic_ns;
  // The latest steps whose slots were written: step - k for k < kStepSlots, as far as step 0.
  const uint64_t first = copy.step >= kStepSlots - 1 ? copy.step - (kStepSlots - 1) : 0;
  for (uint64_t s = first; s <= copy.step; ++s) {
    const int64_t t = copy.step_start_ns[s % kStepSlots];
    if (t == 0) continue;
    v.steps.push_back(s);
    v.step_starts_ns.push_back(t);
  }
  return v;
}

absl::flat_hash_map<int32_t, std::string> NamesAt(const Header& h, const void* base) {
  absl::flat_hash_map<int32_t, std::string> out;
  const uint64_t end = std::min<uint64_t>(Load(h.names_end, std::memory_order_acquire), kNameBytes);
  const char* names = static_cast<const char*>(base) + kNamesOffset;
  for (uint64_t at = 0; at + kNameRecordHeader <= end;) {
    int32_t id;
    uint16_t length;
    std::memcpy(&id, names + at, sizeof(id));
    std::memcpy(&length, names + at + sizeof(id), sizeof(length));
    if (at + kNameRecordHeader + length > end) break;  // A torn or hostile record.
    out[id] = std::string(names + at + kNameRecordHeader, length);
    at += kNameRecordHeader + length;
  }
  return out;
}

}  // namespace

absl::flat_hash_map<int32_t, std::string> ReadNames(const void* base, size_t size) {
  absl::StatusOr<const Header*> h = CheckHeader(base, size);
  if (!h.ok()) return {};
  return NamesAt(**h, base);
}

absl::StatusOr<PositionView> ReadPosition(const void* base, size_t size) {
  absl::StatusOr<const Header*> h = CheckHeader(base, size);
  if (!h.ok()) return h.status();
  return ReadPositionAt(**h, base);
}

absl::StatusOr<RegionView> ReadRegion(const void* base, size_t size) {
  absl::StatusOr<const Header*> h = CheckHeader(base, size);
  if (!h.ok()) return h.status();
  RegionView view;
  absl::StatusOr<PositionView> position = ReadPositionAt(**h, base);
  if (!position.ok()) return position.status();
  view.position = *std::move(position);

  const uint64_t head = Load((*h)->ring_head, std::memory_order_acquire);
  view.spans_written = head;
  const uint64_t first = head > kRingCapacity ? head - kRingCapacity : 0;
  const RingEntry* ring = RingOf(base);
  view.spans.reserve(head - first);
  for (uint64_t i = first; i < head; ++i) {
    const RingEntry& e = ring[i & (kRingCapacity - 1)];
    const uint64_t s1 = Load(e.seq, std::memory_order_acquire);
    SpanView s;
    s.step = Load(e.step);
    s.start_ns = Load(e.start_ns);
    s.duration_ns = Load(e.duration_ns);
    s.layer = Load(e.layer);
    s.tid = Load(e.tid);
    const uint32_t kind = Load(e.kind);
    s.flags = Load(e.flags);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t s2 = Load(e.seq);
    if (s1 != 2 * i + 2 || s2 != s1 ||
        (kind != static_cast<uint32_t>(SpanKind::kForward) &&
         kind != static_cast<uint32_t>(SpanKind::kBackward))) {
      ++view.torn_spans;
      continue;
    }
    s.kind = static_cast<SpanKind>(kind);
    view.spans.push_back(s);
  }

  view.names = NamesAt(**h, base);
  view.names_dropped = Load((*h)->names_dropped);
  return view;
}

std::optional<absl::Duration> MedianStepTime(const PositionView& position) {
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < position.steps.size(); ++i) {
    if (position.steps[i] != position.steps[i - 1] + 1) continue;
    const int64_t gap = position.step_starts_ns[i] - position.step_starts_ns[i - 1];
    if (gap >= 0) gaps.push_back(gap);
  }
  if (gaps.empty()) return std::nullopt;
  const size_t mid = gaps.size() / 2;
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<ptrdiff_t>(mid), gaps.end());
  int64_t median = gaps[mid];
  if (gaps.size() % 2 == 0) {
    const int64_t below =
        *std::max_element(gaps.begin(), gaps.begin() + static_cast<ptrdiff_t>(mid));
    median = below + (median - below) / 2;
  }
  return absl::Nanoseconds(median);
}

std::string Describe(const PositionView& position,
                     const absl::flat_hash_map<int32_t, std::string>& names) {
  std::string out = absl::StrCat("step ", position.step, ", ", PhaseName(position.phase));
  if (position.phase == Phase::kIdle) return out;
  std::string layer;
  if (position.layer >= 0) {
    auto it = names.find(position.layer);
    layer = it != names.end() ? it->second : absl::StrCat("layer ", position.layer);
  }
  switch (position.event) {
    case Event::kEnter:
      absl::StrAppend(&out, ", in ", layer.empty() ? "the model's own code" : layer);
      break;
    case Event::kExit:
      absl::StrAppend(&out, ", after ", layer.empty() ? "the model's own code" : layer);
      break;
    case Event::kMark:
      break;
  }
  return out;
}

absl::Duration StallThreshold(const StallRule& rule, std::optional<absl::Duration> median_step) {
  if (!median_step.has_value()) return rule.floor;
  return std::max(rule.floor, *median_step * rule.factor);
}

}  // namespace tracetorch::flight
