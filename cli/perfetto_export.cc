#include "cli/perfetto_export.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trace/json_writer.h"

namespace tracetorch::cli {
namespace {

struct Placed {
  const v1::ForensicSpan* span;
  int64_t end_ns;
  int lane;  // 0: the thread's own track; k: its k-th overflow track.
};

// Puts each span of one thread on the first lane where it nests (inside the lane's open span, or
// after it ended). `spans` sorted by start, longer first.
void AssignLanes(std::vector<Placed>& spans) {
  std::vector<std::vector<int64_t>> open;  // Per lane: the ends of its open spans.
  for (Placed& p : spans) {
    const int64_t start = p.span->start_unix_ns();
    int lane = 0;
    for (;; ++lane) {
      if (static_cast<size_t>(lane) == open.size()) open.emplace_back();
      std::vector<int64_t>& stack = open[static_cast<size_t>(lane)];
      while (!stack.empty() && stack.back() <= start) stack.pop_back();
      if (stack.empty() || p.end_ns <= stack.back()) {
        stack.push_back(p.end_ns);
        break;
      }
    }
    p.lane = lane;
  }
}

double Micros(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

std::string PerfettoTrace(const std::vector<PerfettoProcess>& processes) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const PerfettoProcess& p : processes) {
    for (const v1::ForensicSpan& s : p.bundle->spans())
      origin = std::min(origin, s.start_unix_ns());
    const int64_t since = p.bundle->snapshot().session().flight().since_unix_ns();
    if (since > 0) origin = std::min(origin, since);
  }
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;

  std::string out;
  JsonWriter w(0, &out);
  w.BeginObject();
  w.PlainKey("displayTimeUnit");
  w.String("ms");
  w.PlainKey("otherData");
  w.BeginObject();
  w.PlainKey("origin_unix_ns");
  w.Int(origin);
  w.PlainKey("tool");
  w.String("tracetorch forensics");
  w.EndObject();
  w.PlainKey("traceEvents");
  w.BeginArray();
  auto meta = [&](const char* name, int64_t pid, std::optional<int64_t> tid,
                  const std::string& value) {
    w.BeginObject();
    w.PlainKey("name");
    w.String(name);
    w.PlainKey("ph");
    w.String("M");
    w.PlainKey("pid");
    w.Int(pid);
    if (tid) {
      w.PlainKey("tid");
      w.Int(*tid);
    }
    w.PlainKey("args");
    w.BeginObject();
    w.PlainKey("name");
    w.String(value);
    w.EndObject();
    w.EndObject();
  };
  for (const PerfettoProcess& p : processes) {
    meta("process_name", p.pid, std::nullopt, p.name);
    std::map<uint32_t, std::vector<Placed>> by_thread;
    for (const v1::ForensicSpan& s : p.bundle->spans()) {
      by_thread[s.thread()].push_back({&s, s.start_unix_ns() + s.duration_ns(), 0});
    }
    for (auto& [thread, spans] : by_thread) {
      std::sort(spans.begin(), spans.end(), [](const Placed& a, const Placed& b) {
        if (a.span->start_unix_ns() != b.span->start_unix_ns()) {
          return a.span->start_unix_ns() < b.span->start_unix_ns();
        }
        return a.end_ns > b.end_ns;
      });
      AssignLanes(spans);
      int lanes = 0;
      for (const Placed& placed : spans) lanes = std::max(lanes, placed.lane + 1);
      // Overflow lanes get track ids above every kernel thread id (which fit in 22 bits).
      const auto tid = thread;  // A structured binding cannot be captured (C++17; clang 14).
      auto track = [tid](int lane) -> int64_t {
        return lane == 0 ? static_cast<int64_t>(tid) : (static_cast<int64_t>(lane) << 32) | tid;
      };
      for (int lane = 0; lane < lanes; ++lane) {
        meta("thread_name", p.pid, track(lane),
             lane == 0 ? absl::StrCat("thread ", thread)
                       : absl::StrCat("thread ", thread, " (overlap ", lane, ")"));
      }
      for (const Placed& placed : spans) {
        const v1::ForensicSpan& s = *placed.span;
        w.BeginObject();
        w.PlainKey("name");
        w.String(s.layer());
        w.PlainKey("cat");
        w.String(s.backward() ? "backward" : "forward");
        w.PlainKey("ph");
        w.String("X");
        w.PlainKey("ts");
        w.Double(Micros(s.start_unix_ns() - origin));
        w.PlainKey("dur");
        w.Double(Micros(s.duration_ns()));
        w.PlainKey("pid");
        w.Int(p.pid);
        w.PlainKey("tid");
        w.Int(track(placed.lane));
        w.PlainKey("args");
        w.BeginObject();
        w.PlainKey("step");
        w.UInt(s.step());
        w.PlainKey("duration_ns");
        w.Int(s.duration_ns());
        if (s.non_finite()) {
          w.PlainKey("non_finite");
          w.Bool(true);
        }
        w.EndObject();
        w.EndObject();
      }
    }
    const v1::FlightStatus& f = p.bundle->snapshot().session().flight();
    if (f.since_unix_ns() > 0 && !f.position().empty()) {
      w.BeginObject();
      w.PlainKey("name");
      w.String(absl::StrCat(p.bundle->reason(), ": ", f.position()));
      w.PlainKey("ph");
      w.String("i");
      w.PlainKey("s");
      w.String("p");
      w.PlainKey("ts");
      w.Double(Micros(f.since_unix_ns() - origin));
      w.PlainKey("pid");
      w.Int(p.pid);
      w.PlainKey("tid");
      w.Int(0);
      w.EndObject();
    }
  }
  w.EndArray();
  w.EndObject();
  w.Finish();
  out.push_back('\n');
  return out;
}

}  // namespace tracetorch::cli
