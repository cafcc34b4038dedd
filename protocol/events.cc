#include "protocol/events.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "protocol/codes.h"

namespace tracetorch::protocol {
namespace {

std::optional<int32_t> EnvInt(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  std::string_view text(value);
  int32_t out = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return out;
}

// Process start time from /proc/self/stat (field 22, clock ticks since boot) and the boot time from
// /proc/stat; nullopt where /proc is unavailable.
std::optional<int64_t> ProcessStartUnixNs() {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces; fields after it start after the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::vector<std::string> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so field 22 is fields[19].
  if (fields.size() < 20) return std::nullopt;
  int64_t ticks = 0;
  std::string_view t = fields[19];
  if (std::from_chars(t.data(), t.data() + t.size(), ticks).ec != std::errc()) return std::nullopt;

  std::ifstream proc_stat("/proc/stat");
  std::string line;
  int64_t btime = -1;
  while (std::getline(proc_stat, line)) {
    if (line.rfind("btime ", 0) == 0) {
      std::string_view v = std::string_view(line).substr(6);
      if (std::from_chars(v.data(), v.data() + v.size(), btime).ec != std::errc()) btime = -1;
      break;
    }
  }
  const long hz = sysconf(_SC_CLK_TCK);
  if (btime < 0 || hz <= 0) return std::nullopt;
  return btime * 1'000'000'000 + ticks * (1'000'000'000 / hz);
}

}  // namespace

ProcessIdentity IdentityFor(const TraceMetadata& m) {
  ProcessIdentity id = CurrentProcessIdentity();
  id.model_name = m.model_name;
  id.torch_version = m.pytorch_version;
  id.python_version = m.python_version;
  id.platform = m.platform;
  id.cuda_available = m.cuda_available;
  id.cuda_version = m.cuda_version;
  id.active_device = m.active_device;
  return id;
}

ProcessIdentity CurrentProcessIdentity() {
  ProcessIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) id.host = host;
  id.start_time_unix_ns = ProcessStartUnixNs().value_or(absl::GetCurrentTimeNanos());
  id.rank = EnvInt("RANK");
  id.local_rank = EnvInt("LOCAL_RANK");
  id.world_size = EnvInt("WORLD_SIZE");
  if (const char* job = std::getenv("TRACETORCH_JOB"); job != nullptr && *job != '\0') {
    id.job_id = job;
  } else if (const char* run = std::getenv("TORCHELASTIC_RUN_ID"); run != nullptr) {
    id.job_id = run;
  }
  return id;
}

WireTensor ToWireTensor(const TensorInfo& tensor) {
  WireTensor out;
  out.shape.assign(tensor.shape.begin(), tensor.shape.end());
  out.dtype = DtypeCode(tensor.dtype);
  out.device = DeviceCode(tensor.device);
  out.stats = tensor.stats;
  if (!out.stats && tensor.nonfinite) {
    // The wire has one place for counts: statistics without moments (the daemon's records keep
    // them so).
    out.stats.emplace();
    out.stats->nan_count = tensor.nonfinite->nan_count;
    out.stats->inf_count = tensor.nonfinite->inf_count;
    out.stats->neg_inf_count = tensor.nonfinite->neg_inf_count;
    out.stats->finite_all_zero = tensor.nonfinite->finite_all_zero;
  }
  return out;
}

ForwardEvent ToForwardEvent(uint32_t layer_id, uint64_t step, const ForwardSample& sample) {
  ForwardEvent out;
  out.layer_id = layer_id;
  out.step = step;
  out.latency_ms = sample.latency_ms;
  for (const TensorInfo& t : sample.inputs) out.inputs.push_back(ToWireTensor(t));
  for (const TensorInfo& t : sample.outputs) out.outputs.push_back(ToWireTensor(t));
  out.mem_alloc_delta = sample.mem_alloc_delta;
  out.mem_reserved_delta = sample.mem_reserved_delta;
  return out;
}

}  // namespace tracetorch::protocol
