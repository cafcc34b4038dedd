// The flight recorder's cost on the hook path (flight/layout.h), in one process:
//
//   tracetorch_flight_hook_bench [--mode=both|plain|recorder|raw] [--calls N] [--rounds R]
//
// drives an agent::Tracer (statistics off, no tensors: only the hook path's bookkeeping) through
// N steps of a root call with 8 nested layer calls (18 hooks per step: BeginCall and EndCall of
// each call), with and without a flight recorder, and prints the nanoseconds per hook of each
// (median of R interleaved rounds) and their difference. `raw` times the recorder's writes alone
// (one Move at a call's begin, one Span and one Move at its end).
//
// The instruction count, which the machine's load does not move, comes from callgrind:
//   bench/flight_hook_cost.sh build     # runs this under valgrind --tool=callgrind, both modes
// counting only inside RunSteps / RunRaw (--toggle-collect), and prints instructions per hook.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agent/tracer.h"
#include "flight/recorder.h"

namespace {

using tracetorch::agent::Tracer;
constexpr int kLayers = 8;
constexpr int kHooksPerStep = 2 * (kLayers + 1);

// Not inlined: callgrind counts only inside it (--toggle-collect).
__attribute__((noinline)) void RunSteps(Tracer& tracer, int steps) {
  for (int s = 0; s < steps; ++s) {
    const Tracer::CallId root = tracer.BeginCall(Tracer::kNoLayer, /*is_root=*/true, {});
    for (int l = 0; l < kLayers; ++l) {
      const Tracer::CallId call = tracer.BeginCall(l, /*is_root=*/false, {});
      tracer.EndCall(call, {});
    }
    tracer.EndCall(root, {});
  }
}

// What the Tracer writes per layer call, without the Tracer: Move at begin, Span + Move at end.
__attribute__((noinline)) void RunRaw(tracetorch::flight::Recorder& r, int calls) {
  using tracetorch::flight::Event;
  using tracetorch::flight::Phase;
  using tracetorch::flight::SpanKind;
  for (int i = 0; i < calls; ++i) {
    const int64_t t = i;
    r.Move(Phase::kForward, Event::kEnter, i & 7, static_cast<uint64_t>(i), t);
    r.Span(SpanKind::kForward, i & 7, static_cast<uint64_t>(i), t, 10, 0);
    r.Move(Phase::kForward, Event::kEnter, -1, static_cast<uint64_t>(i), t + 10);
  }
}

std::shared_ptr<Tracer> MakeTracer(std::shared_ptr<tracetorch::flight::Recorder> recorder) {
  tracetorch::agent::TracerOptions options;
  options.capture_stats = false;
  std::shared_ptr<Tracer> t = *Tracer::Create(options, tracetorch::TraceMetadata{});
  for (int l = 0; l < kLayers; ++l) {
    const std::string name = "layer" + std::to_string(l);
    (void)t->DeclareLayer(tracetorch::LayerInfo{name, "Linear", "net." + name, 1, 10});
  }
  t->SetFlightRecorder(std::move(recorder));
  (void)t->Start();
  return t;
}

double NsPerHook(Tracer& tracer, int steps) {
  const auto start = std::chrono::steady_clock::now();
  RunSteps(tracer, steps);
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(end - start).count() /
         (static_cast<double>(steps) * kHooksPerStep);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "both";
  int steps = 20000;
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mode=", 7) == 0) {
      mode = argv[i] + 7;
    } else if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--mode=both|plain|recorder|raw] [--calls N] [--rounds R]\n",
                   argv[0]);
      return 2;
    }
  }
  std::shared_ptr<tracetorch::flight::Recorder> recorder = *tracetorch::flight::Recorder::Create();
  if (mode == "raw") {
    RunRaw(*recorder, steps);
    std::printf("raw: %d recorder call triples\n", steps);
    return 0;
  }
  if (mode == "plain" || mode == "recorder") {
    std::shared_ptr<Tracer> t = MakeTracer(mode == "recorder" ? recorder : nullptr);
    RunSteps(*t, steps);
    std::printf("%s: %d steps, %d hooks\n", mode.c_str(), steps, steps * kHooksPerStep);
    return 0;
  }
  std::shared_ptr<Tracer> plain = MakeTracer(nullptr);
  std::shared_ptr<Tracer> traced = MakeTracer(recorder);
  RunSteps(*plain, steps / 10);  // Warm up.
  RunSteps(*traced, steps / 10);
  std::vector<double> p, r;
  for (int i = 0; i < rounds; ++i) {
    p.push_back(NsPerHook(*plain, steps));
    r.push_back(NsPerHook(*traced, steps));
  }
  const double mp = Median(p), mr = Median(r);
  std::printf("hook path, statistics off, no tensors (%d steps x %d hooks, median of %d rounds)\n",
              steps, kHooksPerStep, rounds);
  std::printf("  without flight recorder: %.1f ns/hook\n", mp);
  std::printf("  with flight recorder:    %.1f ns/hook (+%.1f ns, x%.3f)\n", mr, mr - mp, mr / mp);
  return 0;
}
