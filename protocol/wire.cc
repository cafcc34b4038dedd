#include "protocol/wire.h"

#include <bit>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "protocol/wire_format.h"

namespace tracetorch::protocol::wire {
namespace {

using format::kFixed64;
using format::kLength;
using format::kVarint;

// The per-event encoders are forced inline into the function that owns the Writer: a Writer whose
// address never escapes keeps its position in a register, where one passed by reference is
// reloaded and stored around every byte written (a char store may alias it). About half of the
// encoding time, measured with bench/wire_bench.
#define TRACETORCH_WIRE_INLINE [[gnu::always_inline]] inline

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

// Two sinks with the same interface: one counts bytes, one writes them into a pre-sized buffer.
// Every encoder below is written once, as a template over the sink.
class Counter {
 public:
  void Varint(uint64_t v) { n_ += VarintSize(v); }
  void Fixed64(uint64_t) { n_ += 8; }
  void Bytes(std::string_view s) { n_ += s.size(); }
  void Advance(size_t n) { n_ += n; }
  size_t size() const { return n_; }

 private:
  size_t n_ = 0;
};

class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  TRACETORCH_WIRE_INLINE void Varint(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<char>(v);
  }
  TRACETORCH_WIRE_INLINE void Fixed64(uint64_t v) {
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(p_, &v, sizeof(v));
      p_ += sizeof(v);
    } else {
      for (int i = 0; i < 8; ++i) *p_++ = static_cast<char>((v >> (8 * i)) & 0xff);
    }
  }
  void Bytes(std::string_view s) {
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  char* position() const { return p_; }

 private:
  char* p_;
};

template <typename S>
TRACETORCH_WIRE_INLINE void Tag(S& s, uint32_t field, uint32_t wire_type) {
  s.Varint((static_cast<uint64_t>(field) << 3) | wire_type);
}

// proto3 implicit-presence scalars: omitted when zero.
template <typename S>
TRACETORCH_WIRE_INLINE void UintField(S& s, uint32_t field, uint64_t v) {
  if (v == 0) return;
  Tag(s, field, kVarint);
  s.Varint(v);
}
template <typename S>
TRACETORCH_WIRE_INLINE void IntField(S& s, uint32_t field,
                                     int64_t v) {  // int32/int64: negative values take 10 bytes.
  UintField(s, field, static_cast<uint64_t>(v));
}
template <typename S>
TRACETORCH_WIRE_INLINE void SintField(S& s, uint32_t field, int64_t v) {
  UintField(s, field, ZigZag(v));
}
template <typename S>
TRACETORCH_WIRE_INLINE void BoolField(S& s, uint32_t field, bool v) {
  UintField(s, field, v ? 1 : 0);
}
template <typename S>
TRACETORCH_WIRE_INLINE void StringField(S& s, uint32_t field, std::string_view v) {
  if (v.empty()) return;
  Tag(s, field, kLength);
  s.Varint(v.size());
  s.Bytes(v);
}
template <typename S>
TRACETORCH_WIRE_INLINE void DoubleField(S& s, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  Tag(s, field, kFixed64);
  s.Fixed64(bits);
}

// proto3 `optional` fields: present when set, even when zero.
template <typename S>
TRACETORCH_WIRE_INLINE void OptDouble(S& s, uint32_t field, const std::optional<double>& v) {
  if (v.has_value()) DoubleField(s, field, *v);
}
template <typename S>
TRACETORCH_WIRE_INLINE void OptInt(S& s, uint32_t field, const std::optional<int32_t>& v) {
  if (!v.has_value()) return;
  Tag(s, field, kVarint);
  s.Varint(static_cast<uint64_t>(static_cast<int64_t>(*v)));
}
template <typename S>
TRACETORCH_WIRE_INLINE void OptUint(S& s, uint32_t field, const std::optional<uint64_t>& v) {
  if (!v.has_value()) return;
  Tag(s, field, kVarint);
  s.Varint(*v);
}
template <typename S>
TRACETORCH_WIRE_INLINE void OptSint(S& s, uint32_t field, const std::optional<int64_t>& v) {
  if (!v.has_value()) return;
  Tag(s, field, kVarint);
  s.Varint(ZigZag(*v));
}

// A nested message field: its size first (counted with the same encoder), then its bytes. Counting
// runs the body once; writing runs it twice (count, write). The per-event messages below have
// closed-form sizes instead, so that encoding a batch never counts a level twice.
template <typename S, typename Body>
void MessageField(S& s, uint32_t field, const Body& body) {
  Counter c;
  body(c);
  Tag(s, field, kLength);
  s.Varint(c.size());
  if constexpr (std::is_same_v<S, Counter>) {
    s.Advance(c.size());
  } else {
    body(s);
  }
}

// ---- Messages ---------------------------------------------------------------------------------

// The per-event messages: closed-form sizes, then one writing pass that uses them for the length
// prefixes (no sub-message is counted twice).
size_t UintFieldSize(uint32_t field, uint64_t v) {  // Fields 1..15: a one-byte tag.
  return v == 0 ? 0 : 1 + VarintSize(v);
}

size_t StatsSize(const TensorStats& st) {
  return (st.mean ? 9 : 0) + (st.std ? 9 : 0) + (st.min ? 9 : 0) + (st.max ? 9 : 0) +
         UintFieldSize(5, static_cast<uint64_t>(st.nan_count)) +
         UintFieldSize(6, static_cast<uint64_t>(st.inf_count)) +
         UintFieldSize(7, static_cast<uint64_t>(st.neg_inf_count)) + (st.finite_all_zero ? 2 : 0);
}

size_t ShapeBytes(const WireTensor& t) {
  size_t bytes = 0;
  for (int64_t d : t.shape) bytes += VarintSize(static_cast<uint64_t>(d));
  return bytes;
}

size_t LengthFieldSize(size_t body) { return 1 + VarintSize(body) + body; }

// A tensor's sizes, computed once per event and used for its length prefixes and the event's size.
struct TensorSizes {
  size_t shape = 0;  // The packed dimensions.
  size_t stats = 0;  // The TensorStats body.
  size_t body = 0;   // The TensorEvent body.
};
// Inline room for the common event (one input, one output): no allocation.
using EventTensorSizes = absl::InlinedVector<TensorSizes, 4>;

TensorSizes SizesOf(const WireTensor& t) {
  TensorSizes s;
  s.shape = ShapeBytes(t);
  size_t n = t.shape.empty() ? 0 : LengthFieldSize(s.shape);
  n += UintFieldSize(2, static_cast<uint64_t>(static_cast<int64_t>(t.dtype)));
  n += UintFieldSize(3, ZigZag(t.device));
  if (t.stats.has_value()) {
    s.stats = StatsSize(*t.stats);
    n += LengthFieldSize(s.stats);
  }
  s.body = n;
  return s;
}

// The event's body size; `sizes` gets its tensors' (inputs, then outputs).
size_t ForwardSize(const ForwardEvent& e, EventTensorSizes* sizes) {
  size_t n = UintFieldSize(1, e.layer_id) + UintFieldSize(2, e.step) + (e.latency_ms ? 9 : 0);
  sizes->clear();
  for (const WireTensor& t : e.inputs) {
    sizes->push_back(SizesOf(t));
    n += LengthFieldSize(sizes->back().body);
  }
  for (const WireTensor& t : e.outputs) {
    sizes->push_back(SizesOf(t));
    n += LengthFieldSize(sizes->back().body);
  }
  if (e.mem_alloc_delta) n += 1 + VarintSize(ZigZag(*e.mem_alloc_delta));
  if (e.mem_reserved_delta) n += 1 + VarintSize(ZigZag(*e.mem_reserved_delta));
  return n;
}

size_t BackwardSize(const BackwardEvent& e) {
  const BackwardSample& b = e.sample;
  size_t n = UintFieldSize(1, e.layer_id) + UintFieldSize(2, e.step);
  for (const std::optional<double>* d :
       {&b.latency_ms, &b.grad_norm, &b.grad_mean, &b.grad_in_norm, &b.grad_in_mean}) {
    if (d->has_value()) n += 9;
  }
  n += (b.grad_has_nan ? 2 : 0) + (b.grad_all_zero ? 2 : 0) + (b.grad_in_has_nan ? 2 : 0);
  if (b.mem_alloc_delta) n += 1 + VarintSize(ZigZag(*b.mem_alloc_delta));
  if (b.mem_reserved_delta) n += 1 + VarintSize(ZigZag(*b.mem_reserved_delta));
  return n;
}

TRACETORCH_WIRE_INLINE void EncodeStats(Writer& s, const TensorStats& st) {
  OptDouble(s, 1, st.mean);
  OptDouble(s, 2, st.std);
  OptDouble(s, 3, st.min);
  OptDouble(s, 4, st.max);
  IntField(s, 5, st.nan_count);
  IntField(s, 6, st.inf_count);
  IntField(s, 7, st.neg_inf_count);
  BoolField(s, 8, st.finite_all_zero);
}

TRACETORCH_WIRE_INLINE void EncodeTensor(Writer& s, const WireTensor& t, const TensorSizes& sizes) {
  if (!t.shape.empty()) {  // Packed repeated int64.
    Tag(s, 1, kLength);
    s.Varint(sizes.shape);
    for (int64_t d : t.shape) s.Varint(static_cast<uint64_t>(d));
  }
  IntField(s, 2, t.dtype);
  SintField(s, 3, t.device);
  if (t.stats.has_value()) {
    Tag(s, 4, kLength);
    s.Varint(sizes.stats);
    EncodeStats(s, *t.stats);
  }
}

// `sizes`: ForwardSize's for this event.
TRACETORCH_WIRE_INLINE void EncodeForward(Writer& s, const ForwardEvent& e,
                                          const EventTensorSizes& sizes) {
  UintField(s, 1, e.layer_id);
  UintField(s, 2, e.step);
  OptDouble(s, 3, e.latency_ms);
  size_t i = 0;
  for (const WireTensor& t : e.inputs) {
    Tag(s, 4, kLength);
    s.Varint(sizes[i].body);
    EncodeTensor(s, t, sizes[i++]);
  }
  for (const WireTensor& t : e.outputs) {
    Tag(s, 5, kLength);
    s.Varint(sizes[i].body);
    EncodeTensor(s, t, sizes[i++]);
  }
  OptSint(s, 6, e.mem_alloc_delta);
  OptSint(s, 7, e.mem_reserved_delta);
}

TRACETORCH_WIRE_INLINE void EncodeBackward(Writer& s, const BackwardEvent& e) {
  const BackwardSample& b = e.sample;
  UintField(s, 1, e.layer_id);
  UintField(s, 2, e.step);
  OptDouble(s, 3, b.latency_ms);
  OptDouble(s, 4, b.grad_norm);
  OptDouble(s, 5, b.grad_mean);
  BoolField(s, 6, b.grad_has_nan);
  BoolField(s, 7, b.grad_all_zero);
  OptDouble(s, 8, b.grad_in_norm);
  OptDouble(s, 9, b.grad_in_mean);
  BoolField(s, 10, b.grad_in_has_nan);
  OptSint(s, 11, b.mem_alloc_delta);
  OptSint(s, 12, b.mem_reserved_delta);
}

template <typename S>
void EncodeIdentity(S& s, const ProcessIdentity& id) {
  IntField(s, 1, id.pid);
  StringField(s, 2, id.host);
  IntField(s, 3, id.start_time_unix_ns);
  OptInt(s, 4, id.rank);
  OptInt(s, 5, id.local_rank);
  OptInt(s, 6, id.world_size);
  StringField(s, 7, id.job_id);
  StringField(s, 8, id.model_name);
  StringField(s, 9, id.torch_version);
  StringField(s, 10, id.python_version);
  StringField(s, 11, id.platform);
  BoolField(s, 12, id.cuda_available);
  StringField(s, 13, id.cuda_version);
  StringField(s, 14, id.active_device);
}

template <typename S>
void EncodeNanOrigin(S& s, const NanOrigin& o) {
  StringField(s, 1, o.layer);
  IntField(s, 2, o.step);
  BoolField(s, 3, o.is_nan);
  StringField(s, 4, o.op);
  StringField(s, 5, o.op_func);
  StringField(s, 6, o.op_module);
  BoolField(s, 7, o.backward);
}

// An EventBatch's own fields: the sequence (written first) and the tail (after the events).
template <typename S>
void WriteBatchTail(S& s, const BatchFields& batch) {
  UintField(s, 4, batch.dropped_events);
  if (batch.nan_origin != nullptr) {
    MessageField(s, 5, [&](auto& n) { EncodeNanOrigin(n, *batch.nan_origin); });
  }
  StringField(s, 6, batch.op_graph_json);
  OptUint(s, 7, batch.first_event);
}

size_t BatchFixedBytes(const BatchFields& batch) {
  Counter c;
  UintField(c, 1, batch.sequence);
  WriteBatchTail(c, batch);
  return c.size();
}

// The AgentMessage payload of an EventBatch of `batch_size` bytes: its tag, length and body.
size_t BatchPayloadBytes(size_t batch_size) { return 1 + VarintSize(batch_size) + batch_size; }

// Appends an EventBatch frame of `batch_size` bytes up to its events: the frame header, the
// EventBatch's tag and length, and its sequence. The caller writes the events, then
// WriteBatchTail, through the returned Writer.
Writer BeginBatchFrame(const BatchFields& batch, size_t batch_size, std::string* out) {
  const size_t payload = BatchPayloadBytes(batch_size);
  const size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + payload);
  char* p = out->data() + start;
  PutFrameHeader(static_cast<uint32_t>(payload), p);
  Writer w(p + kFrameHeaderBytes);
  Tag(w, 3, kLength);
  w.Varint(batch_size);
  UintField(w, 1, batch.sequence);
  return w;
}

// Appends header + AgentMessage{field: body} to `out`.
template <typename Body>
void AppendAgentFrame(uint32_t field, const Body& body, std::string* out) {
  Counter c;
  MessageField(c, field, body);
  const size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + c.size());
  char* p = out->data() + start;
  PutFrameHeader(static_cast<uint32_t>(c.size()), p);
  Writer w(p + kFrameHeaderBytes);
  MessageField(w, field, body);
}

// ---- Decoding -----------------------------------------------------------------------------------

using format::Reader;

// Calls on_field(field, wire_type, reader) for every field; returns false on malformed input.
template <typename OnField>
bool ForEachField(std::string_view in, const OnField& on_field) {
  Reader r(in);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.Tag(&field, &wire_type) || !on_field(field, wire_type, r)) return false;
  }
  return true;
}

bool ReadLength(Reader& r, std::string_view* out) { return r.LengthDelimited(out); }

}  // namespace

void AppendHelloFrame(const HelloFields& hello, std::string* out) {
  AppendAgentFrame(
      1,
      [&](auto& s) {
        IntField(s, 1, hello.protocol_version);
        if (hello.identity != nullptr) {
          MessageField(s, 2, [&](auto& n) { EncodeIdentity(n, *hello.identity); });
        }
        StringField(s, 3, hello.resume_session_id);
        UintField(s, 4, hello.dropped_events);
        UintField(s, 5, hello.sent_events);
        OptUint(s, 6, hello.replay_first_event);
        if (hello.flight_layout_version != 0) {
          MessageField(s, 7, [&](auto& n) {
            UintField(n, 1, hello.flight_layout_version);
            UintField(n, 2, hello.flight_region_bytes);
          });
        }
      },
      out);
}

void AppendLayerTableFrame(absl::Span<const LayerDecl> layers, std::string* out) {
  AppendAgentFrame(
      2,
      [&](auto& s) {
        for (const LayerDecl& l : layers) {
          MessageField(s, 1, [&](auto& n) {
            UintField(n, 1, l.id);
            StringField(n, 2, l.info.name);
            StringField(n, 3, l.info.type);
            StringField(n, 4, l.info.full_name);
            IntField(n, 5, l.info.depth);
            IntField(n, 6, l.info.params);
          });
        }
      },
      out);
}

void AppendHeartbeatFrame(int64_t unix_ns, uint64_t dropped_events, std::string* out) {
  AppendAgentFrame(
      4,
      [&](auto& s) {
        IntField(s, 1, unix_ns);
        UintField(s, 2, dropped_events);
      },
      out);
}

void AppendEndFrame(std::optional<double> total_time_ms, uint64_t dropped_events,
                    uint64_t hook_errors, std::string* out) {
  AppendAgentFrame(
      5,
      [&](auto& s) {
        OptDouble(s, 1, total_time_ms);
        UintField(s, 2, dropped_events);
        UintField(s, 3, hook_errors);
      },
      out);
}

size_t AppendForwardEventField(const ForwardEvent& event, std::string* out) {
  EventTensorSizes sizes;
  const size_t size = ForwardSize(event, &sizes);
  const size_t n = 1 + VarintSize(size) + size;
  const size_t start = out->size();
  out->resize(start + n);
  Writer w(out->data() + start);
  Tag(w, 2, kLength);
  w.Varint(size);
  EncodeForward(w, event, sizes);
  return n;
}

size_t AppendBackwardEventField(const BackwardEvent& event, std::string* out) {
  const size_t size = BackwardSize(event);
  const size_t n = 1 + VarintSize(size) + size;
  const size_t start = out->size();
  out->resize(start + n);
  Writer w(out->data() + start);
  Tag(w, 3, kLength);
  w.Varint(size);
  EncodeBackward(w, event);
  return n;
}

size_t EventFieldLength(std::string_view events) {
  format::Reader r(events);
  uint32_t field, wire_type;
  std::string_view body;
  if (!r.Tag(&field, &wire_type) || wire_type != kLength || !r.LengthDelimited(&body)) return 0;
  return static_cast<size_t>(r.position() - events.data());
}

size_t EncodedEventBatchPayloadBytes(const BatchFields& batch, size_t event_bytes) {
  return BatchPayloadBytes(BatchFixedBytes(batch) + event_bytes);
}

void AppendEncodedEventBatchFrame(const BatchFields& batch, std::string_view events,
                                  std::string* out) {
  Writer w = BeginBatchFrame(batch, BatchFixedBytes(batch) + events.size(), out);
  w.Bytes(events);
  WriteBatchTail(w, batch);
}

BatchResult AppendEventBatchFrame(const BatchFields& batch, absl::Span<const ForwardEvent> forward,
                                  absl::Span<const BackwardEvent> backward,
                                  uint32_t max_frame_bytes, std::string* out) {
  BatchResult result;
  // Each event's body size is computed once, here, and reused for its length prefix and for the
  // enclosing messages' sizes (nested MessageField would recount every level).
  thread_local std::vector<uint32_t> f_sizes;
  EventTensorSizes tensor_sizes;
  thread_local std::vector<uint32_t> b_sizes;
  f_sizes.clear();
  b_sizes.clear();
  const size_t fixed = BatchFixedBytes(batch);
  // The AgentMessage wrapper: tag + up to 5 bytes of length.
  const size_t base = fixed + 1 + 5;
  size_t used = base;

  size_t f_begin = 0;
  size_t f_end = 0;
  for (; f_end < forward.size(); ++f_end) {
    const size_t size = ForwardSize(forward[f_end], &tensor_sizes);
    const size_t field = LengthFieldSize(size);
    if (used + field > max_frame_bytes) {
      if (f_end == f_begin && used == base) {  // Alone it does not fit: skip it.
        ++f_begin;
        ++result.forward_oversized;
        continue;
      }
      break;
    }
    used += field;
    f_sizes.push_back(static_cast<uint32_t>(size));
  }
  size_t b_end = 0;
  if (f_end == forward.size()) {
    for (; b_end < backward.size(); ++b_end) {
      const size_t size = BackwardSize(backward[b_end]);
      const size_t field = LengthFieldSize(size);
      if (used + field > max_frame_bytes) break;
      used += field;
      b_sizes.push_back(static_cast<uint32_t>(size));
    }
  }
  result.forward_used = f_end;
  result.backward_used = b_end;
  if (f_end == f_begin && b_end == 0 && batch.nan_origin == nullptr &&
      batch.op_graph_json.empty()) {
    return result;
  }

  Writer w = BeginBatchFrame(batch, /*batch_size=*/used - base + fixed, out);
  for (size_t i = f_begin; i < f_end; ++i) {
    Tag(w, 2, kLength);
    w.Varint(f_sizes[i - f_begin]);
    ForwardSize(forward[i], &tensor_sizes);  // The tensors' sizes again (cheaper than keeping).
    EncodeForward(w, forward[i], tensor_sizes);
  }
  for (size_t i = 0; i < b_end; ++i) {
    Tag(w, 3, kLength);
    w.Varint(b_sizes[i]);
    EncodeBackward(w, backward[i]);
  }
  WriteBatchTail(w, batch);
  return result;
}

absl::StatusOr<DaemonReply> ParseDaemonReply(std::string_view payload) {
  DaemonReply reply;
  const bool ok = ForEachField(payload, [&](uint32_t field, uint32_t wt, Reader& r) {
    if (field < 1 || field > 3 || wt != kLength) return r.Skip(field, wt, format::kMaxDepth);
    std::string_view body;
    if (!ReadLength(r, &body)) return false;
    if (field == 1) {
      reply.kind = DaemonReply::Kind::kWelcome;
      return ForEachField(body, [&](uint32_t f, uint32_t w, Reader& rr) {
        uint64_t v;
        std::string_view sv;
        if (f == 1 && w == kLength) {
          if (!ReadLength(rr, &sv)) return false;
          reply.session_id = std::string(sv);
          return true;
        }
        if (f >= 2 && f <= 4 && w == kVarint) {
          if (!rr.Varint(&v)) return false;
          if (f == 2) reply.resumed = v != 0;
          if (f == 3) reply.durable_sequence = v;
          if (f == 4) reply.durable_events = v;
          return true;
        }
        return rr.Skip(f, w, format::kMaxDepth);
      });
    }
    if (field == 3) {
      reply.kind = DaemonReply::Kind::kDurable;
      reply.durable_sequence = 0;
      return ForEachField(body, [&](uint32_t f, uint32_t w, Reader& rr) {
        uint64_t v;
        if ((f == 1 || f == 2) && w == kVarint) {
          if (!rr.Varint(&v)) return false;
          (f == 1 ? *reply.durable_sequence : reply.durable_events) = v;
          return true;
        }
        return rr.Skip(f, w, format::kMaxDepth);
      });
    }
    reply.kind = DaemonReply::Kind::kError;
    return ForEachField(body, [&](uint32_t f, uint32_t w, Reader& rr) {
      uint64_t v;
      std::string_view sv;
      if (f == 1 && w == kLength) {
        if (!ReadLength(rr, &sv)) return false;
        reply.message = std::string(sv);
        return true;
      }
      if ((f == 2 || f == 3) && w == kVarint) {
        if (!rr.Varint(&v)) return false;
        if (f == 2) reply.code = static_cast<int32_t>(v);
        if (f == 3) reply.fatal = v != 0;
        return true;
      }
      return rr.Skip(f, w, format::kMaxDepth);
    });
  });
  if (!ok) return absl::InvalidArgumentError("malformed DaemonMessage from tracetorchd");
  return reply;
}

}  // namespace tracetorch::protocol::wire
