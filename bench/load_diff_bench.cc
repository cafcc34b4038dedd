// Load + diff of two 10,000-layer traces: the path `tracetorch diff a.json b.json` takes.
//
// Generates two realistic traces (nested module paths, one input and one output tensor with
// statistics per layer, forward and backward aggregates, a few differences between the two), writes
// them with WriteTraceFile into a temporary directory, then times each phase, best of several runs:
// read+parse A, read+parse B, DiffRecords, and the whole sequence. Prints a table, the ratio of the
// total to the 150 ms target, and TraceToJson/ParseTraceJson timings for reference.
//
// Usage: load_diff_bench [layers] [runs]     (defaults: 10000 layers, 7 runs)
//        load_diff_bench --write DIR [layers]  writes the two traces as DIR/a.json and DIR/b.json
//                                              (bench/overhead_table.py times `tracetorch diff` on
//                                              them as a whole process)
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/atomic_file.h"
#include "trace/diff.h"
#include "trace/json.h"
#include "trace/record.h"

namespace tracetorch {
namespace {

constexpr double kTargetMs = 150.0;

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TensorInfo Tensor(std::vector<int64_t> shape, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> spread(0.05, 2.0);
  TensorInfo t;
  t.shape = std::move(shape);
  t.dtype = "torch.float32";
  t.device = "cpu";
  TensorStats s;
  s.mean = normal(rng) * 0.1;
  s.std = spread(rng);
  s.min = *s.mean - 4 * *s.std;
  s.max = *s.mean + 4 * *s.std;
  t.stats = s;
  return t;
}

LayerTrace Layer(const std::string& full_name, const std::string& type, int64_t params,
                 std::mt19937_64& rng) {
  std::uniform_real_distribution<double> latency(0.01, 2.0);
  std::uniform_real_distribution<double> grad(0.01, 1.0);
  LayerTrace l;
  l.full_name = full_name;
  l.name = full_name.substr(full_name.rfind('.') + 1);
  l.type = type;
  l.depth = static_cast<int32_t>(std::count(full_name.begin(), full_name.end(), '.') + 1);
  l.params = params;
  l.inputs.push_back(Tensor({32, 128, 768}, rng));
  l.outputs.push_back(Tensor({32, 128, 768}, rng));
  const double mean = latency(rng);
  l.latency_ms = mean * 1.02;
  l.latency_ms_min = mean * 0.8;
  l.latency_ms_max = mean * 3.1;
  l.latency_ms_mean = mean;
  l.forward_count = 100;
  l.grad_norm = grad(rng);
  l.grad_mean = grad(rng) * 1e-3;
  l.grad_in_norm = grad(rng);
  l.grad_in_mean = grad(rng) * -1e-3;
  const double bwd = latency(rng) * 2;
  l.bwd_latency_ms = bwd * 0.97;
  l.bwd_latency_ms_min = bwd * 0.7;
  l.bwd_latency_ms_max = bwd * 2.5;
  l.bwd_latency_ms_mean = bwd;
  l.backward_count = 100;
  return l;
}

// `layers` layers of a transformer-like model, children recorded before parents:
// model.stages.S.blocks.B.{attn.{q,k,v,out}_proj, attn, mlp.{fc1,act,fc2}, mlp} then the block.
TraceRecord MakeTrace(int layers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TraceRecord r;
  r.metadata.model_name = "BenchNet";
  r.metadata.pytorch_version = "2.1.0";
  r.metadata.python_version = "3.11.2";
  r.metadata.platform = "Linux-x86_64";
  r.metadata.total_time_ms = 123456.75;
  r.layers.reserve(layers);
  static const struct {
    const char* suffix;
    const char* type;
    int64_t params;
  } kBlock[] = {
      {"attn.q_proj", "Linear", 590592},
      {"attn.k_proj", "Linear", 590592},
      {"attn.v_proj", "Linear", 590592},
      {"attn.out_proj", "Linear", 590592},
      {"attn", "Attention", 0},
      {"mlp.fc1", "Linear", 2362368},
      {"mlp.act", "GELU", 0},
      {"mlp.fc2", "Linear", 2360064},
      {"mlp", "MLP", 0},
      {"", "Block", 0},
  };
  for (int i = 0; static_cast<int>(r.layers.size()) < layers; ++i) {
    const std::string block =
        "model.stages." + std::to_string(i / 100) + ".blocks." + std::to_string(i % 100);
    for (const auto& part : kBlock) {
      if (static_cast<int>(r.layers.size()) == layers) break;
      const std::string name = part.suffix[0] ? block + "." + part.suffix : block;
      r.layers.push_back(Layer(name, part.type, part.params, rng));
    }
  }
  Anomaly a;
  a.type = AnomalyType::kHighVariance;
  a.severity = AnomalySeverity::kInfo;
  a.layer = r.layers[std::min<size_t>(10, r.layers.size() - 1)].full_name;
  a.message = "High activation variance: std=26.53";
  a.details = {{"std", 26.52947425842285}};
  r.warnings.push_back(a);
  return r;
}

// B = A with a few changes: slower and faster layers, changed shapes and std, one layer removed,
// one added, one new anomaly.
TraceRecord Perturb(TraceRecord r) {
  for (size_t i = 17; i < r.layers.size(); i += 500) *r.layers[i].latency_ms_mean *= 1.5;
  for (size_t i = 251; i < r.layers.size(); i += 2000) *r.layers[i].latency_ms_mean *= 0.5;
  for (size_t i = 1003; i < r.layers.size(); i += 3000)
    r.layers[i].outputs[0].shape = {32, 128, 1024};
  for (size_t i = 777; i < r.layers.size(); i += 2500) *r.layers[i].outputs[0].stats->std *= 3;
  if (r.layers.size() > 4242) r.layers.erase(r.layers.begin() + 4242);
  LayerTrace added = r.layers.back();
  added.full_name = "model.head";
  added.name = "head";
  r.layers.push_back(added);
  Anomaly a;
  a.type = AnomalyType::kDeadLayer;
  a.severity = AnomalySeverity::kWarning;
  a.layer = r.layers[std::min<size_t>(5, r.layers.size() - 1)].full_name;
  a.message = "Dead layer: output mean=0.000000, std=0.000000";
  r.warnings.push_back(a);
  return r;
}

double ThreadCpuMs() {
  timespec t;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Best (minimum) wall and CPU times of `runs` calls of `fn`, in milliseconds. The CPU time of the
// calling thread tells how far the wall time was inflated by other work on a shared machine.
struct Timing {
  double wall_ms = 1e300;
  double cpu_ms = 1e300;
};
Timing BestOf(int runs, const std::function<void()>& fn) {
  Timing best;
  for (int i = 0; i < runs; ++i) {
    const double cpu_start = ThreadCpuMs();
    const Clock::time_point start = Clock::now();
    fn();
    best.wall_ms = std::min(best.wall_ms, MsSince(start));
    best.cpu_ms = std::min(best.cpu_ms, ThreadCpuMs() - cpu_start);
  }
  return best;
}

TraceRecord MustRead(const std::string& path) {
  absl::StatusOr<TraceRecord> r = ReadTraceFile(path);
  if (!r.ok()) {
    std::fprintf(stderr, "reading %s: %s\n", path.c_str(), r.status().ToString().c_str());
    std::exit(2);
  }
  return *std::move(r);
}

int Run(int layers, int runs) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "load_diff_bench.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const std::string dir = pattern;
  const std::string path_a = dir + "/a.json";
  const std::string path_b = dir + "/b.json";

  const TraceRecord a = MakeTrace(layers, 42);
  const TraceRecord b = Perturb(a);
  for (const auto& [path, record] : {std::pair{&path_a, &a}, std::pair{&path_b, &b}}) {
    if (absl::Status s = WriteTraceFile(*path, *record); !s.ok()) {
      std::fprintf(stderr, "writing %s: %s\n", path->c_str(), s.ToString().c_str());
      return 2;
    }
  }
  const uintmax_t size_a = std::filesystem::file_size(path_a);
  const uintmax_t size_b = std::filesystem::file_size(path_b);

  // Sanity: what is read back is what was written, and the diff sees the planted changes.
  if (MustRead(path_a) != a) {
    std::fprintf(stderr, "round trip of %s changed the record\n", path_a.c_str());
    return 2;
  }
  const TraceDiff check = DiffRecords(a, b);

  size_t entries = 0;
  const Timing read_a = BestOf(runs, [&] { entries += MustRead(path_a).layers.size(); });
  const Timing read_b = BestOf(runs, [&] { entries += MustRead(path_b).layers.size(); });
  const Timing diff = BestOf(runs, [&] { entries += DiffRecords(a, b).entries.size(); });
  const Timing total = BestOf(runs, [&] {
    const TraceRecord ra = MustRead(path_a);
    const TraceRecord rb = MustRead(path_b);
    entries += DiffRecords(ra, rb).entries.size();
  });

  std::string text_a;
  const Timing to_json = BestOf(runs, [&] { text_a = TraceToJson(a); });
  std::string compact_a;
  const Timing to_json_compact =
      BestOf(runs, [&] { compact_a = TraceToJson(a, JsonStyle{.indent = 0}); });
  const Timing parse_mem = BestOf(runs, [&] { entries += ParseTraceJson(text_a)->layers.size(); });
  const Timing write_file = BestOf(runs, [&] { (void)WriteTraceFile(dir + "/w.json", a); });

  std::printf("load+diff of two %d-layer traces, best of %d runs\n", layers, runs);
  std::printf("  A: %.1f MiB, B: %.1f MiB, %zu diff entries\n", size_a / 1048576.0,
              size_b / 1048576.0, check.entries.size());
  std::printf("  %-34s %10s %10s %10s\n", "phase", "wall ms", "cpu ms", "MB/s");
  const auto row = [](const char* name, const Timing& t, uintmax_t bytes) {
    std::printf("  %-34s %10.2f %10.2f", name, t.wall_ms, t.cpu_ms);
    if (bytes > 0) std::printf(" %10.0f", bytes / 1e6 / (t.wall_ms / 1e3));
    std::printf("\n");
  };
  row("read+parse A (ReadTraceFile)", read_a, size_a);
  row("read+parse B (ReadTraceFile)", read_b, size_b);
  row("DiffRecords(A, B)", diff, 0);
  row("total: read A + read B + diff", total, size_a + size_b);
  std::printf("  reference:\n");
  row("TraceToJson(A), indent 2", to_json, text_a.size());
  row("TraceToJson(A), indent 0", to_json_compact, compact_a.size());
  row("ParseTraceJson(A) from memory", parse_mem, text_a.size());
  row("WriteTraceFile(A) (fsync)", write_file, size_a);
  std::printf("target: total < %.0f ms -> %.1f ms wall = %.2fx of the target: %s\n", kTargetMs,
              total.wall_ms, total.wall_ms / kTargetMs,
              total.wall_ms < kTargetMs ? "MET" : "MISSED");
  if (total.wall_ms > 1.5 * total.cpu_ms) {
    std::printf(
        "note: wall time %.1fx the CPU time (%.1f ms): the machine is busy; rerun when idle\n",
        total.wall_ms / total.cpu_ms, total.cpu_ms);
  }
  if (entries == 0) std::printf("(no work measured)\n");

  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace tracetorch

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--write") == 0) {
    const int layers = argc > 3 ? std::atoi(argv[3]) : 10000;
    if (layers < 1) {
      std::fprintf(stderr, "usage: %s --write DIR [layers >= 1]\n", argv[0]);
      return 2;
    }
    const std::string dir = argv[2];
    const tracetorch::TraceRecord a = tracetorch::MakeTrace(layers, 42);
    const tracetorch::TraceRecord b = tracetorch::Perturb(a);
    for (const auto& [name, record] : {std::pair{"/a.json", &a}, std::pair{"/b.json", &b}}) {
      if (absl::Status s = tracetorch::WriteTraceFile(dir + name, *record); !s.ok()) {
        std::fprintf(stderr, "writing %s%s: %s\n", dir.c_str(), name, s.ToString().c_str());
        return 2;
      }
    }
    return 0;
  }
  const int layers = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 7;
  if (layers < 1 || runs < 1) {
    std::fprintf(stderr, "usage: %s [layers >= 1] [runs >= 1]\n", argv[0]);
    return 2;
  }
  return tracetorch::Run(layers, runs);
}
