// Fuzzes the TraceService's handlers as the daemon's core runs them, without gRPC: the first byte
// picks the method, the rest is its request message as a client would send it:
//   0 ListSessions  1 GetSnapshot  2 Watch  3 Diff  4 SetBaseline  5 ListBaselines
//   6 RemoveBaseline
// over one SessionManager (a data directory on tmpfs when there is one, a fixed session key and a
// fixed clock, so that session ids are the same in every run and the corpus can name them: a live
// session, a finished one evicted to its snapshot file, and a job of two ranks), a
// FileBaselineStore holding the baseline "base", a DiffService and a WatchHub driven by hand (a
// fake clock, Poll()). fuzz/service_corpus.py writes the seed corpus (it reads the ids from this
// binary: SERVICE_FUZZ_IDS=1); SERVICE_FUZZ_VERBOSE=1 prints what each input reaches.
//
// Properties checked, each an abort() that libFuzzer reports as a crash:
//  - it never crashes, and ASan/UBSan find nothing (the fuzz build instruments all our code);
//  - every error has a code the method's contract names (daemon/core/diff_service.h,
//    session_manager.h, watch_hub.h): never Internal or Unknown for anything a client can send;
//  - a snapshot answers for the session asked for; every Watch update's wire form (WatchWrite)
//    parses back to the update; a Watch ends when cancelled;
//  - a call leaves the state as it found it (the fuzzer undoes a SetBaseline or RemoveBaseline),
//    so that every input runs against the same daemon.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/core/counters.h"
#include "daemon/core/diff_service.h"
#include "daemon/core/file_baseline_store.h"
#include "daemon/core/session_manager.h"
#include "daemon/core/watch_hub.h"
#include "daemon/testing/agent_messages.h"
#include "trace/atomic_file.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {
namespace {

[[noreturn]] void Fail(std::string_view property, std::string_view detail) {
  std::fprintf(stderr, "service_fuzz: %.*s\n%.*s\n", static_cast<int>(property.size()),
               property.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// SERVICE_FUZZ_VERBOSE set: one line per call with its outcome (to check what a corpus reaches).
bool Verbose() {
  static const bool verbose = std::getenv("SERVICE_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

void ExpectCode(std::string_view method, const absl::Status& status,
                std::initializer_list<absl::StatusCode> allowed) {
  if (Verbose()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(method.size()), method.data(),
                 status.ToString().c_str());
  }
  if (status.ok()) return;
  for (absl::StatusCode c : allowed) {
    if (status.code() == c) return;
  }
  Fail(std::string(method) + " answered a code its contract does not name", status.ToString());
}

absl::Time now = absl::FromUnixSeconds(1767225600);  // 2026-01-01: fixed ids.

// A sink that completes each write at once and checks its wire form.
class CheckingSink : public WatchSink {
 public:
  explicit CheckingSink(WatchHub* hub) : hub_(hub) {}
  void SendUpdate(WatchWrite write) override {
    std::string wire = write.shared != nullptr ? *write.shared : std::string();
    wire += write.own;
    v1::WatchUpdate parsed;
    if (!parsed.ParseFromString(wire) ||
        parsed.SerializeAsString() != write.update->SerializeAsString()) {
      Fail("a Watch update's wire form does not parse back to it", write.update->DebugString());
    }
    ++updates;
    hub_->WriteDone(id, /*ok=*/true);
  }
  void Close(const absl::Status& status) override {
    ExpectCode("Watch (close)", status, {absl::StatusCode::kCancelled});
    closed = true;
  }
  WatchHub* const hub_;
  uint64_t id = 0;
  int updates = 0;
  bool closed = false;
};

struct Daemon {
  DaemonCounters counters;
  std::unique_ptr<SessionManager> manager;
  std::unique_ptr<FileBaselineStore> baselines;
  std::unique_ptr<DiffService> diff;
  std::unique_ptr<WatchHub> hub;
  v1::BaselineInfo base;  // The baseline "base" as set up.
  size_t sessions = 0;
};

std::string TempDataDir() {
  const char* shm = "/dev/shm";
  const std::string parent =
      std::filesystem::is_directory(shm) && access(shm, W_OK) == 0 ? shm : "/tmp";
  std::string dir = absl::StrCat(parent, "/tracetorch-service-fuzz-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) Fail("cannot make a temporary directory", dir);
  return dir;
}

Daemon& Setup() {
  static Daemon* d = [] {
    auto* d = new Daemon;
    const std::string dir = TempDataDir();
    // Removed at exit; a crash leaves it behind in /dev/shm or /tmp, small.
    static const std::string remove = dir;
    std::atexit([] { std::filesystem::remove_all(remove); });
    // A fixed key: the session ids are the same in every run.
    if (!WriteFileAtomic(dir + "/session_key", std::string(16, 'k'), 0600).ok()) {
      Fail("cannot write the session key", dir);
    }
    SessionManagerOptions o;
    o.data_dir = dir;
    o.max_sessions_in_memory = 3;
    auto m = SessionManager::Create(o, &d->counters, [] { return now; });
    if (!m.ok()) Fail("cannot create the session manager", m.status().ToString());
    d->manager = *std::move(m);
    const PeerCredentials peer{1, 1000, 1000};
    // A finished session, evicted to its file by the three after it.
    auto ended = d->manager->Open(test_util::MakeHello(), peer);
    if (!ended.ok()) Fail("open", ended.status().ToString());
    (void)ended->session->DeclareLayers(test_util::Table(3));
    ended->session->AddBatchBytes(test_util::Batch({0, 1, 2}, 0, 8).SerializeAsString()).value();
    ended->session->Finish(protocol::End(), now);
    d->manager->Release(ended->session, ended->attachment, /*ended=*/true);
    // A live session, and a job of two live ranks (rank 1 a step behind).
    for (auto [job, rank, steps] :
         {std::tuple{"", 0, 8}, std::tuple{"job", 0, 8}, std::tuple{"job", 1, 7}}) {
      auto s = d->manager->Open(test_util::MakeHello(job, rank), peer);
      if (!s.ok()) Fail("open", s.status().ToString());
      (void)s->session->DeclareLayers(test_util::Table(3));
      s->session->AddBatchBytes(test_util::Batch({0, 1, 2}, 0, steps).SerializeAsString()).value();
    }
    d->manager->WriteDueSnapshots();
    d->sessions = d->manager->List().size();
    d->baselines = std::make_unique<FileBaselineStore>(dir, [] { return now; });
    d->diff = std::make_unique<DiffService>(d->manager.get(), d->baselines.get());
    v1::SetBaselineRequest set;
    set.set_name("base");
    set.mutable_source()->mutable_session()->set_session_id(d->manager->List()[1].session_id);
    absl::StatusOr<v1::BaselineInfo> base = d->diff->SetBaseline(set);
    if (!base.ok()) Fail("cannot set the baseline", base.status().ToString());
    d->base = *base;
    WatchHubOptions w;
    w.start_thread = false;
    w.clock = [] { return now; };
    w.prepare = [](std::function<void()> task) { task(); };
    w.shutdown_grace = absl::ZeroDuration();
    d->hub = std::make_unique<WatchHub>(d->manager.get(), std::move(w));
    if (std::getenv("SERVICE_FUZZ_IDS") != nullptr) {
      for (const protocol::SessionInfo& s : d->manager->List()) {
        std::fprintf(stderr, "%s %s\n", s.session_id.c_str(),
                     std::string(ToString(s.state)).c_str());
      }
    }
    return d;
  }();
  return *d;
}

// Puts "base" back as it was set up, and removes any other baseline a call made.
void RestoreBaselines(Daemon& d, std::string_view touched) {
  if (touched != "base") {
    (void)d.baselines->Remove(std::string(touched));
    return;
  }
  v1::SetBaselineRequest set;
  set.set_name("base");
  set.mutable_source()->mutable_session()->set_session_id(d.manager->List()[1].session_id);
  if (!d.diff->SetBaseline(set).ok()) Fail("cannot restore the baseline", "");
}

void Watch(Daemon& d, const v1::WatchRequest& request) {
  CheckingSink sink(d.hub.get());
  absl::StatusOr<uint64_t> id = d.hub->Subscribe(request, &sink);
  ExpectCode("Watch", id.status(),
             {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound});
  if (!id.ok()) return;
  sink.id = *id;
  for (int i = 0; i < 3; ++i) {
    const absl::Time next = d.hub->Poll();
    if (next != absl::InfiniteFuture() && next > now) now = next;
  }
  if (sink.updates == 0 && !sink.closed) Fail("a Watch sent nothing in three ticks", "");
  if (Verbose()) std::fprintf(stderr, "Watch: %d updates\n", sink.updates);
  d.hub->Cancel(*id);
  for (int i = 0; i < 3 && !sink.closed; ++i) d.hub->Poll();
  if (!sink.closed) Fail("a cancelled Watch did not end", "");
  d.hub->Remove(*id);
}

template <typename M>
bool Parse(std::string_view bytes, M* m) {
  return m->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace
}  // namespace tracetorch::daemon

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tracetorch::daemon;  // NOLINT: a fuzz entry point.
  namespace v1 = tracetorch::v1;
  using absl::StatusCode;
  Daemon& d = Setup();
  if (size == 0) return 0;
  const std::string_view request(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 7) {
    case 0: {
      v1::ListSessionsRequest r;
      if (!Parse(request, &r)) return 0;
      ExpectCode("ListSessions", absl::OkStatus(), {});
      for (const tracetorch::protocol::SessionInfo& s : d.manager->List(r.job_id())) {
        if (!r.job_id().empty() && s.identity.job_id != r.job_id()) {
          Fail("ListSessions answered another job's session", s.session_id);
        }
      }
      break;
    }
    case 1: {
      v1::GetSnapshotRequest r;
      if (!Parse(request, &r)) return 0;
      const std::string& ref = r.session().session_id();
      if (ref.empty()) return 0;  // The adapter answers InvalidArgument before the core.
      absl::StatusOr<tracetorch::protocol::Snapshot> snap = d.manager->GetSnapshot(ref);
      ExpectCode("GetSnapshot", snap.status(), {StatusCode::kNotFound});
      if (snap.ok() && ref != "latest" && snap->session.session_id != ref) {
        Fail("GetSnapshot answered another session", ref);
      }
      break;
    }
    case 2: {
      v1::WatchRequest r;
      if (!Parse(request, &r)) return 0;
      Watch(d, r);
      break;
    }
    case 3: {
      v1::DiffRequest r;
      if (!Parse(request, &r)) return 0;
      absl::StatusOr<v1::DiffResponse> diff = d.diff->Diff(r);
      ExpectCode(
          "Diff", diff.status(),
          {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kFailedPrecondition});
      break;
    }
    case 4: {
      v1::SetBaselineRequest r;
      if (!Parse(request, &r)) return 0;
      absl::StatusOr<v1::BaselineInfo> info = d.diff->SetBaseline(r);
      ExpectCode(
          "SetBaseline", info.status(),
          {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kFailedPrecondition});
      if (info.ok()) RestoreBaselines(d, r.name());
      break;
    }
    case 5: {
      absl::StatusOr<std::vector<v1::BaselineInfo>> list = d.diff->ListBaselines();
      ExpectCode("ListBaselines", list.status(), {});
      break;
    }
    case 6: {
      v1::RemoveBaselineRequest r;
      if (!Parse(request, &r)) return 0;
      const absl::Status s = d.diff->RemoveBaseline(r.name());
      ExpectCode("RemoveBaseline", s, {StatusCode::kInvalidArgument, StatusCode::kNotFound});
      if (s.ok()) RestoreBaselines(d, r.name());
      break;
    }
  }
  // Every call leaves the daemon as it found it.
  absl::StatusOr<std::vector<v1::BaselineInfo>> list = d.diff->ListBaselines();
  if (!list.ok() || list->size() != 1 || (*list)[0].name() != "base") {
    Fail("a call left the baselines changed", list.ok() ? "" : list.status().ToString());
  }
  if (d.manager->List().size() != d.sessions) Fail("a call changed the sessions", "");
  return 0;
}
