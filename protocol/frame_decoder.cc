#include "protocol/frame_decoder.h"

#include <utility>

#include "absl/status/status.h"
#include "protocol/codes.h"
#include "protocol/wire_format.h"
#include "trace/nonfinite.h"

namespace tracetorch::protocol::wire {
namespace {

using format::kFixed64;
using format::kLength;
using format::kVarint;
using format::Reader;

// Calls on_field(field, wire_type, reader) for each field of a message nested `depth` levels below
// what is left of the limit; unknown fields are on_field's to skip (returning reader.Skip(...)).
template <typename OnField>
bool Fields(std::string_view in, int depth, const OnField& on_field) {
  if (depth < 0) return false;
  Reader r(in);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.Tag(&field, &wire_type) || !on_field(field, wire_type, r)) return false;
  }
  return true;
}

// Reads a nested message's bytes.
bool Nested(Reader& r, std::string_view* out) { return r.LengthDelimited(out); }

// Raw tags (field << 3 | wire type) of the fields read below: a switch on them takes each field in
// one comparison; anything else (unknown fields, known ones of another wire type) goes to Skip.
constexpr uint32_t T(uint32_t field, uint32_t wire_type) { return field << 3 | wire_type; }

// The next raw tag; false at a malformed one or field number 0.
inline bool NextTag(Reader& r, uint32_t* tag) { return r.Varint32(tag) && (*tag >> 3) != 0; }

// A TensorStats into `s`: TensorStats, or StatsFlags below (the same members, some discarded).
template <typename Stats>
bool DecodeStats(std::string_view in, int depth, Stats* s) {
  if (depth < 0) return false;
  Reader r(in);
  uint32_t tag;
  uint64_t v;
  double d;
  while (!r.done()) {
    if (!NextTag(r, &tag)) return false;
    if (tag == T(1, kFixed64)) {
      if (!r.Double(&d)) return false;
      s->mean = d;
    } else if (tag == T(2, kFixed64)) {
      if (!r.Double(&d)) return false;
      s->std = d;
    } else if (tag == T(3, kFixed64)) {
      if (!r.Double(&d)) return false;
      s->min = d;
    } else if (tag == T(4, kFixed64)) {
      if (!r.Double(&d)) return false;
      s->max = d;
    } else if (tag == T(5, kVarint)) {
      if (!r.Varint(&v)) return false;
      s->nan_count = static_cast<int64_t>(v);
    } else if (tag == T(6, kVarint)) {
      if (!r.Varint(&v)) return false;
      s->inf_count = static_cast<int64_t>(v);
    } else if (tag == T(7, kVarint)) {
      if (!r.Varint(&v)) return false;
      s->neg_inf_count = static_cast<int64_t>(v);
    } else if (tag == T(8, kVarint)) {
      if (!r.Varint(&v)) return false;
      s->finite_all_zero = v != 0;
    } else if (!r.Skip(tag >> 3, tag & 7, depth - 1)) {
      return false;
    }
  }
  return true;
}

// What DecodeForward keeps of a tensor's stats: the std and the NaN/Inf counts (small to set up:
// this runs for every tensor of every event).
struct Discard {
  void operator=(double) {}
};
struct StatsFlags {
  Discard mean, min, max;
  std::optional<double> std;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t neg_inf_count = 0;
  bool finite_all_zero = false;
};

template <typename Stats>
struct TensorFlags {
  bool has_stats = false;
  Stats stats;
};

// A TensorEvent. `on_shape` gets each dimension; `dtype`/`device` are set when present.
template <typename Stats, typename OnShape>
bool DecodeTensor(std::string_view in, int depth, int32_t* dtype, int32_t* device,
                  TensorFlags<Stats>* flags, const OnShape& on_shape) {
  if (depth < 0) return false;
  Reader r(in);
  uint32_t tag;
  uint64_t v;
  std::string_view body;
  while (!r.done()) {
    if (!NextTag(r, &tag)) return false;
    switch (tag) {
      case T(1, kVarint):
        if (!r.Varint(&v)) return false;
        on_shape(static_cast<int64_t>(v));
        break;
      case T(1, kLength): {  // Packed.
        if (!r.LengthDelimited(&body)) return false;
        Reader p(body);
        while (!p.done()) {
          if (!p.Varint(&v)) return false;
          on_shape(static_cast<int64_t>(v));
        }
        break;
      }
      case T(2, kVarint):
        if (!r.Varint(&v)) return false;
        *dtype = static_cast<int32_t>(v);
        break;
      case T(3, kVarint):
        if (!r.Varint(&v)) return false;
        *device = format::ZigZagDecode32(static_cast<uint32_t>(v));
        break;
      case T(4, kLength):
        if (!r.LengthDelimited(&body)) return false;
        flags->has_stats = true;
        if (!DecodeStats(body, depth - 1, &flags->stats)) return false;
        break;
      default:
        if (!r.Skip(tag >> 3, tag & 7, depth - 1)) return false;
    }
  }
  return true;
}

bool DecodeForward(std::string_view in, int depth, ForwardFields* e) {
  if (depth < 0) return false;
  e->bytes = in;
  Reader r(in);
  uint32_t tag;
  uint64_t v;
  double d;
  std::string_view body;
  int32_t dtype, device;
  while (!r.done()) {
    if (!NextTag(r, &tag)) return false;
    switch (tag) {
      case T(1, kVarint):
        if (!r.Varint(&v)) return false;
        e->layer_id = static_cast<uint32_t>(v);
        break;
      case T(2, kVarint):
        if (!r.Varint(&v)) return false;
        e->step = v;
        break;
      case T(3, kFixed64):
        if (!r.Double(&d)) return false;
        e->latency_ms = d;
        break;
      case T(4, kLength):
      case T(5, kLength): {
        if (!r.LengthDelimited(&body)) return false;
        TensorFlags<StatsFlags> t;
        if (!DecodeTensor(body, depth - 1, &dtype, &device, &t, [](int64_t) {})) return false;
        if (tag == T(4, kLength)) {
          ++e->inputs;
          break;
        }
        if (e->outputs++ == 0 && t.has_stats) e->first_output_std = t.stats.std;
        if (t.has_stats) {
          const StatsFlags& st = t.stats;
          e->outputs_have_nan = e->outputs_have_nan || st.nan_count > 0;
          if (st.inf_count > 0) {
            // The rule of trace/nonfinite.h, on the same facts the agent's record holds.
            const bool mask =
                IsMaskCounts(st.nan_count, st.inf_count, st.neg_inf_count, st.finite_all_zero);
            e->outputs_inf_in_masks_only =
                (e->outputs_have_inf ? e->outputs_inf_in_masks_only : true) && mask;
            e->outputs_have_inf = true;
          }
        }
        break;
      }
      case T(6, kVarint):
        if (!r.Varint(&v)) return false;
        e->mem_alloc_delta = format::ZigZagDecode64(v);
        break;
      case T(7, kVarint):
        if (!r.Varint(&v)) return false;
        e->mem_reserved_delta = format::ZigZagDecode64(v);
        break;
      default:
        if (!r.Skip(tag >> 3, tag & 7, depth - 1)) return false;
    }
  }
  return true;
}

bool DecodeBackward(std::string_view in, int depth, BackwardEvent* e) {
  if (depth < 0) return false;
  BackwardSample& b = e->sample;
  Reader r(in);
  uint32_t tag;
  uint64_t v;
  double d;
  while (!r.done()) {
    if (!NextTag(r, &tag)) return false;
    switch (tag) {
      case T(1, kVarint):
        if (!r.Varint(&v)) return false;
        e->layer_id = static_cast<uint32_t>(v);
        break;
      case T(2, kVarint):
        if (!r.Varint(&v)) return false;
        e->step = v;
        break;
      case T(3, kFixed64):
        if (!r.Double(&d)) return false;
        b.latency_ms = d;
        break;
      case T(4, kFixed64):
        if (!r.Double(&d)) return false;
        b.grad_norm = d;
        break;
      case T(5, kFixed64):
        if (!r.Double(&d)) return false;
        b.grad_mean = d;
        break;
      case T(6, kVarint):
        if (!r.Varint(&v)) return false;
        b.grad_has_nan = v != 0;
        break;
      case T(7, kVarint):
        if (!r.Varint(&v)) return false;
        b.grad_all_zero = v != 0;
        break;
      case T(8, kFixed64):
        if (!r.Double(&d)) return false;
        b.grad_in_norm = d;
        break;
      case T(9, kFixed64):
        if (!r.Double(&d)) return false;
        b.grad_in_mean = d;
        break;
      case T(10, kVarint):
        if (!r.Varint(&v)) return false;
        b.grad_in_has_nan = v != 0;
        break;
      case T(11, kVarint):
        if (!r.Varint(&v)) return false;
        b.mem_alloc_delta = format::ZigZagDecode64(v);
        break;
      case T(12, kVarint):
        if (!r.Varint(&v)) return false;
        b.mem_reserved_delta = format::ZigZagDecode64(v);
        break;
      default:
        if (!r.Skip(tag >> 3, tag & 7, depth - 1)) return false;
    }
  }
  return true;
}

bool DecodeNanOrigin(std::string_view in, int depth, NanOrigin* o) {
  return Fields(in, depth, [&](uint32_t f, uint32_t wt, Reader& r) {
    uint64_t v;
    if (f == 1 && wt == kLength) {
      std::string_view s;
      if (!r.LengthDelimited(&s) || !format::IsValidUtf8(s)) return false;
      o->layer = std::string(s);
      return true;
    }
    if ((f == 2 || f == 3 || f == 7) && wt == kVarint) {
      if (!r.Varint(&v)) return false;
      if (f == 2) o->step = static_cast<int64_t>(v);
      if (f == 3) o->is_nan = v != 0;
      if (f == 7) o->backward = v != 0;
      return true;
    }
    if (f >= 4 && f <= 6 && wt == kLength) {  // op, op_func, op_module.
      std::string_view s;
      if (!r.LengthDelimited(&s) || !format::IsValidUtf8(s)) return false;
      (f == 4 ? o->op : f == 5 ? o->op_func : o->op_module) = std::string(s);
      return true;
    }
    return r.Skip(f, wt, depth - 1);
  });
}

}  // namespace

namespace format {

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    unsigned char lo = 0x80, hi = 0xBF;  // The allowed range of the second byte.
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;  // No overlong forms.
      if (c == 0xED) hi = 0x9F;  // No surrogates.
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // Nothing above U+10FFFF.
    } else {
      return false;
    }
    if (end - p <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i <= n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += n + 1;
  }
  return true;
}

}  // namespace format

absl::StatusOr<EventBatchSummary> DecodeEventBatch(std::string_view batch,
                                                   EventBatchVisitor* visitor) {
  EventBatchSummary summary;
  const int depth = format::kMaxDepth;
  const bool ok = Fields(batch, depth, [&](uint32_t f, uint32_t wt, Reader& r) {
    uint64_t v;
    switch (f) {
      case 1:
      case 4:
        if (wt != kVarint) break;
        if (!r.Varint(&v)) return false;
        (f == 1 ? summary.sequence : summary.dropped_events) = v;
        return true;
      case 2: {
        if (wt != kLength) break;
        std::string_view body;
        ForwardFields e;
        if (!Nested(r, &body) || !DecodeForward(body, depth - 1, &e)) return false;
        ++summary.forward_events;
        if (visitor != nullptr) visitor->OnForward(e);
        return true;
      }
      case 3: {
        if (wt != kLength) break;
        std::string_view body;
        BackwardEvent e;
        if (!Nested(r, &body) || !DecodeBackward(body, depth - 1, &e)) return false;
        ++summary.backward_events;
        if (visitor != nullptr) visitor->OnBackward(e);
        return true;
      }
      case 5: {
        if (wt != kLength) break;
        std::string_view body;
        if (!Nested(r, &body)) return false;
        if (!summary.nan_origin.has_value()) {
          summary.nan_origin.emplace();
          summary.nan_origin->is_nan = false;  // proto3's default, unlike the struct's.
        }
        return DecodeNanOrigin(body, depth - 1, &*summary.nan_origin);
      }
      case 6:  // bytes: any content (its reader checks it).
        if (wt != kLength) break;
        return r.LengthDelimited(&summary.op_graph_json);
      case 7:
        if (wt != kVarint) break;
        if (!r.Varint(&v)) return false;
        summary.first_event = v;
        return true;
      default:
        break;
    }
    return r.Skip(f, wt, depth - 1);
  });
  if (!ok) return absl::InvalidArgumentError("malformed tracetorch.v1.EventBatch");
  return summary;
}

absl::StatusOr<EventBatchSummary> SkimEventBatch(std::string_view batch) {
  EventBatchSummary summary;
  const int depth = format::kMaxDepth;
  Reader r(batch);
  uint32_t tag;
  std::string_view body;
  bool ok = true;
  while (ok && !r.done()) {
    if (!NextTag(r, &tag)) {
      ok = false;
      break;
    }
    switch (tag) {
      case T(1, kVarint):
        ok = r.Varint(&summary.sequence);
        break;
      case T(4, kVarint):
        ok = r.Varint(&summary.dropped_events);
        break;
      case T(2, kLength):
      case T(3, kLength):
        ok = r.LengthDelimited(&body);
        ++(tag == T(2, kLength) ? summary.forward_events : summary.backward_events);
        break;
      case T(5, kLength):
        ok = r.LengthDelimited(&body);
        if (!ok) break;
        if (!summary.nan_origin.has_value()) {
          summary.nan_origin.emplace();
          summary.nan_origin->is_nan = false;
        }
        ok = DecodeNanOrigin(body, depth - 1, &*summary.nan_origin);
        break;
      case T(6, kLength):
        ok = r.LengthDelimited(&summary.op_graph_json);
        break;
      case T(7, kVarint): {
        uint64_t v;
        ok = r.Varint(&v);
        if (ok) summary.first_event = v;
        break;
      }
      default:
        ok = r.Skip(tag >> 3, tag & 7, depth - 1);
    }
  }
  if (!ok) return absl::InvalidArgumentError("malformed tracetorch.v1.EventBatch");
  return summary;
}

void DecodeForwardTensors(std::string_view forward, std::vector<TensorInfo>* inputs,
                          std::vector<TensorInfo>* outputs) {
  const int depth = format::kMaxDepth - 1;
  std::vector<TensorInfo>* const into[2] = {inputs, outputs};
  size_t used[2] = {0, 0};
  Fields(forward, depth, [&](uint32_t f, uint32_t wt, Reader& r) {
    if ((f != 4 && f != 5) || wt != kLength) return r.Skip(f, wt, depth - 1);
    std::string_view body;
    if (!Nested(r, &body)) return false;
    const int k = f == 4 ? 0 : 1;
    std::vector<TensorInfo>& v = *into[k];
    if (used[k] == v.size()) v.emplace_back();
    TensorInfo& out = v[used[k]++];  // An element already there keeps its storage.
    out.shape.clear();
    out.stats.reset();
    out.nonfinite.reset();
    int32_t dtype = 0, device = 0;
    TensorFlags<TensorStats> t;
    DecodeTensor(body, depth - 1, &dtype, &device, &t, [&](int64_t d) { out.shape.push_back(d); });
    out.dtype.assign(DtypeName(dtype));
    out.device = DeviceName(device);
    if (t.has_stats) out.stats = t.stats;
    return true;
  });
  inputs->resize(used[0]);
  outputs->resize(used[1]);
}

std::optional<std::string_view> EventBatchOfMessage(std::string_view payload) {
  if (payload.size() < 2 || static_cast<uint8_t>(payload[0]) != T(3, kLength)) return std::nullopt;
  uint64_t len = 0;
  size_t i = 1;
  for (int shift = 0; i < payload.size() && shift < 35; shift += 7, ++i) {
    const uint8_t b = static_cast<uint8_t>(payload[i]);
    len |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      ++i;
      if (len != payload.size() - i) return std::nullopt;
      return payload.substr(i);
    }
  }
  return std::nullopt;
}

}  // namespace tracetorch::protocol::wire
