// The ingest wire format's two hot paths on the ingest benchmark's batches (bench/agent_driver.h:
// 50 layers, a forward with two [32, 256] tensors and stats plus a backward per layer and step),
// in CPU nanoseconds per event of this thread (wall time would count other processes' turns on a
// shared machine):
//   the agent's encoder (protocol/wire.h), two ways: AppendEventBatchFrame over vectors of events,
//   and the client library's way, each event encoded into a queue as it comes
//   (Append*EventField) and the queue wrapped in a frame (AppendEncodedEventBatchFrame);
//   the daemon's EventBatch decoder (protocol/frame_decoder.h) against the generated parser:
//   ParseFromArray into a reused message, DecodeEventBatch's check alone, and SkimEventBatch plus
//   a decoding pass (what Session::AddBatchBytes does), and the ratio, measured in one run.
//
// Usage: wire_bench [batches, default 2000]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/agent_driver.h"
#include "protocol/frame_decoder.h"
#include "protocol/wire.h"
#include "tracetorch/v1/agent.pb.h"

namespace {

namespace wire = tracetorch::protocol::wire;

class Count : public wire::EventBatchVisitor {
 public:
  void OnForward(const wire::ForwardFields& e) override { sum_ += e.layer_id + e.step; }
  void OnBackward(const tracetorch::protocol::BackwardEvent& e) override { sum_ += e.layer_id; }
  uint64_t sum_ = 0;
};

// This thread's CPU time: on a shared machine, wall time would count other processes' turns.
double ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e9 * static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec);
}

template <typename F>
double NsPerEvent(int batches, uint64_t events_per_batch, const F& f) {
  const double t0 = ThreadCpuNs();
  for (int i = 0; i < batches; ++i) f();
  return (ThreadCpuNs() - t0) /
         static_cast<double>(static_cast<uint64_t>(batches) * events_per_batch);
}

}  // namespace

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::vector<tracetorch::protocol::ForwardEvent> fwd;
  std::vector<tracetorch::protocol::BackwardEvent> bwd;
  for (int step = 0; step < 80; ++step) {
    for (uint32_t l = 0; l < 50; ++l) fwd.push_back(tracetorch::bench::MakeForward(l, step));
    for (uint32_t l = 0; l < 50; ++l) bwd.push_back(tracetorch::bench::MakeBackward(l, step));
  }
  std::string frame;
  const uint64_t events = fwd.size() + bwd.size();
  const double encode = NsPerEvent(batches, events, [&] {
    frame.clear();
    wire::AppendEventBatchFrame({.sequence = 1}, fwd, bwd, 16u << 20, &frame);
  });
  std::string queue;
  const double queued = NsPerEvent(batches, events, [&] {
    queue.clear();
    for (const auto& e : fwd) wire::AppendForwardEventField(e, &queue);
    for (const auto& e : bwd) wire::AppendBackwardEventField(e, &queue);
    frame.clear();
    wire::AppendEncodedEventBatchFrame({.sequence = 1}, queue, &frame);
  });
  // Frame header, AgentMessage tag and length, then the EventBatch.
  tracetorch::v1::AgentMessage m;
  if (!m.ParseFromArray(frame.data() + 4, static_cast<int>(frame.size() - 4))) return 1;
  const std::string batch = m.events().SerializeAsString();

  tracetorch::v1::EventBatch parsed;
  const double generated = NsPerEvent(batches, events, [&] {
    if (!parsed.ParseFromArray(batch.data(), static_cast<int>(batch.size()))) std::exit(1);
  });
  const double check = NsPerEvent(batches, events, [&] {
    if (!wire::DecodeEventBatch(batch, nullptr).ok()) std::exit(1);
  });
  Count count;
  const double both = NsPerEvent(batches, events, [&] {
    if (!wire::SkimEventBatch(batch).ok()) std::exit(1);
    if (!wire::DecodeEventBatch(batch, &count).ok()) std::exit(1);
  });
  std::printf(
      "encode (AppendEventBatchFrame): %.1f ns/event; one at a time into a queue, then framed "
      "(Append*EventField + AppendEncodedEventBatchFrame): %.1f ns/event\n",
      encode, queued);
  std::printf(
      "EventBatch of %llu events (%zu bytes), %d times: ParseFromArray %.1f ns/event, "
      "DecodeEventBatch check %.1f ns/event, skim + decode %.1f ns/event (%.2f of "
      "ParseFromArray) [%llu]\n",
      static_cast<unsigned long long>(events), batch.size(), batches, generated, check, both,
      both / generated, static_cast<unsigned long long>(count.sum_ % 10));
  return 0;
}
