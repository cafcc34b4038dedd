// The Diff and named-baseline calls of a real tracetorchd (in-process, temporary sockets), driven
// by the real agent client and the TraceService client. Sessions stream per-step latencies chosen
// so that the noise-aware rule and the plain mean rule disagree where they should.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "daemon/server/daemon.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "trace/diff.h"
#include "trace/json.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;
using test_util::WaitFor;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Step-to-step jitter of +-40% around 1 ms, mean exactly 1.0 over each 10 steps.
const std::vector<double> kJitter = {0.6, 1.4, 0.8, 1.2, 1.0, 0.7, 1.3, 0.9, 1.1, 1.0};
constexpr int kSteps = 40;

// Per-step forward latency of the layer "net.fc" (the other layer, "net.act", is constant).
using LatencyAt = std::function<double(int step)>;

double Noisy(int step) { return kJitter[static_cast<size_t>(step) % kJitter.size()]; }
// The same steps, but four of them stalled at 5 ms: the mean goes up 40%, the median 5%.
double NoisyWithStalls(int step) { return step % 10 == 4 ? 5.0 : Noisy(step); }
// Every step 60% slower: beyond the threshold and beyond the jitter.
double Slower(int step) { return 1.6 * Noisy(step); }

TensorInfo Tensor(double std) {
  return {{4, 8}, "torch.float32", "cpu", TensorStats{0.0, std, -1.0, 1.0, 0, 0}};
}

class DiffServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket_path = dir_.path() + "/d.sock";
    config_.data_dir = dir_.path() + "/data";
    config_.snapshot_interval = absl::Milliseconds(200);
    StartDaemon();
  }

  void StartDaemon() {
    auto d = Daemon::Start(config_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    auto s = service_client::TraceServiceClient::Create(daemon_->config().service_socket_path);
    ASSERT_TRUE(s.ok());
    service_ = *std::move(s);
  }

  void RestartDaemon() {
    service_.reset();
    daemon_->Shutdown();
    daemon_.reset();
    StartDaemon();
  }

  // Streams kSteps steps of a two-layer model and ends the session; returns its id.
  std::string StreamSession(const LatencyAt& fc_latency) {
    client::DaemonClientOptions o;
    o.address = absl::StrCat("unix://", config_.socket_path);
    o.identity = protocol::CurrentProcessIdentity();
    o.identity.model_name = "Net";
    o.flush_interval = absl::Milliseconds(5);
    o.initial_backoff = absl::Milliseconds(5);
    auto c = client::DaemonClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return "";
    (*c)->DeclareLayers(std::vector<protocol::LayerDecl>{{0, {"fc", "Linear", "net.fc", 2, 110}},
                                                         {1, {"act", "ReLU", "net.act", 2, 0}}});
    for (int step = 0; step < kSteps; ++step) {
      ForwardSample fc;
      fc.latency_ms = fc_latency(step);
      fc.inputs = {Tensor(1.0)};
      fc.outputs = {Tensor(0.5)};
      (*c)->EnqueueForward(protocol::ToForwardEvent(0, static_cast<uint64_t>(step), fc));
      ForwardSample act = fc;
      act.latency_ms = 0.2;
      (*c)->EnqueueForward(protocol::ToForwardEvent(1, static_cast<uint64_t>(step), act));
    }
    EXPECT_TRUE((*c)->Close(absl::Seconds(5)).ok());
    const std::string id = (*c)->session_id();
    EXPECT_TRUE(WaitFor([&] {
      auto snap = service_->GetSnapshot(id);
      return snap.ok() && snap->session().state() == v1::SESSION_STATE_FINISHED &&
             snap->session().events() == 2u * kSteps;
    }));
    return id;
  }

  TraceRecord RecordOf(const std::string& id) {
    auto snap = service_->GetSnapshot(id);
    EXPECT_TRUE(snap.ok()) << snap.status();
    return snap.ok() ? FromProto(snap->record()) : TraceRecord();
  }

  static v1::DiffOperand Session(const std::string& id) {
    v1::DiffOperand op;
    op.mutable_session()->set_session_id(id);
    return op;
  }
  static v1::DiffOperand Baseline(const std::string& name) {
    v1::DiffOperand op;
    op.set_baseline_name(name);
    return op;
  }
  static v1::DiffOperand Upload(const TraceRecord& record) {
    v1::DiffOperand op;
    ToProto(record, op.mutable_record());
    return op;
  }

  absl::StatusOr<v1::DiffResponse> Diff(const v1::DiffOperand& baseline,
                                        const v1::DiffOperand& current) {
    v1::DiffRequest request;
    *request.mutable_baseline() = baseline;
    *request.mutable_current() = current;
    return service_->Diff(request);
  }

  TempDir dir_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<service_client::TraceServiceClient> service_;
};

std::vector<DiffKind> Kinds(const TraceDiff& diff) {
  std::vector<DiffKind> kinds;
  for (const DiffEntry& e : diff.entries) kinds.push_back(e.kind);
  return kinds;
}

TEST_F(DiffServiceTest, UploadedRecordsGiveTheCoreDiff) {
  const std::string a = StreamSession(Noisy);
  const std::string b = StreamSession(Slower);
  TraceRecord base = RecordOf(a);
  TraceRecord cur = RecordOf(b);
  cur.layers[1].outputs[0].shape = {4, 9};  // A shape change too.
  cur.metadata.model_name = "Net2";
  auto resp = Diff(Upload(base), Upload(cur));
  ASSERT_TRUE(resp.ok()) << resp.status();
  const TraceDiff want = DiffRecords(base, cur);
  ASSERT_FALSE(want.entries.empty());
  const TraceDiff got = FromProto(resp->diff());
  EXPECT_EQ(got.entries, want.entries);
  EXPECT_EQ(DiffToJson(got), DiffToJson(want));
  EXPECT_EQ(resp->diff().current_model(), "Net2");
  EXPECT_TRUE(resp->diff().has_regressions());
  EXPECT_EQ(resp->diff().critical_count(), 1);
  EXPECT_EQ(resp->baseline_description(), "uploaded record");
  EXPECT_EQ(resp->current_description(), "uploaded record");

  // Thresholds travel: a huge latency threshold leaves only the shape change.
  v1::DiffRequest request;
  *request.mutable_baseline() = Upload(base);
  *request.mutable_current() = Upload(cur);
  request.set_latency_threshold(100);
  auto loose = service_->Diff(request);
  ASSERT_TRUE(loose.ok()) << loose.status();
  EXPECT_THAT(Kinds(FromProto(loose->diff())), ElementsAre(DiffKind::kShapeChange));
}

TEST_F(DiffServiceTest, UploadsLargerThanGrpcsDefaultLimitAreAccepted) {
  // Two records of ~3 MiB each: one request of ~6 MiB, over gRPC's default 4 MiB.
  TraceRecord big;
  big.metadata.model_name = "Big";
  for (int i = 0; i < 8000; ++i) {
    LayerTrace l;
    l.full_name = absl::StrCat(std::string(180, 'x'), ".", i);
    l.name = l.full_name;
    l.type = "Linear";
    l.latency_ms = l.latency_ms_mean = 1.0;
    l.forward_count = 1;
    big.layers.push_back(std::move(l));
  }
  TraceRecord slower = big;
  slower.layers[7].latency_ms_mean = 2.0;
  ASSERT_GT(Upload(big).ByteSizeLong(), 3u << 20);
  auto resp = Diff(Upload(big), Upload(slower));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_THAT(Kinds(FromProto(resp->diff())), ElementsAre(DiffKind::kLatencyRegression));
}

TEST_F(DiffServiceTest, SessionsWithHistoryUseTheNoiseAwareRule) {
  const std::string base = StreamSession(Noisy);
  const std::string stalls = StreamSession(NoisyWithStalls);
  const std::string slower = StreamSession(Slower);

  // The plain mean rule on the same records calls the stalls a +40% regression...
  const TraceDiff mean_rule = DiffRecords(RecordOf(base), RecordOf(stalls));
  ASSERT_THAT(Kinds(mean_rule), ElementsAre(DiffKind::kLatencyRegression));
  // ...the service, with both sessions' per-step history, sees the same steps.
  auto noise = Diff(Session(base), Session(stalls));
  ASSERT_TRUE(noise.ok()) << noise.status();
  EXPECT_THAT(noise->diff().entries(), IsEmpty());
  EXPECT_FALSE(noise->diff().has_regressions());
  EXPECT_EQ(noise->baseline_description(), absl::StrCat("session ", base));
  EXPECT_EQ(noise->current_description(), absl::StrCat("session ", stalls));

  // A real shift is a regression, and the entry says how it was decided.
  auto real = Diff(Session(base), Session("latest"));
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->current_description(), absl::StrCat("session ", slower));
  const TraceDiff diff = FromProto(real->diff());
  ASSERT_THAT(Kinds(diff), ElementsAre(DiffKind::kLatencyRegression));
  const DiffEntry& e = diff.entries[0];
  EXPECT_EQ(e.layer, "net.fc");
  EXPECT_THAT(e.message, HasSubstr("medians of 40 vs 40 steps, beyond step noise"));
  EXPECT_EQ(*FindDetail(e.details, "rule"), DetailValue(std::string("median+iqr")));
  EXPECT_EQ(*FindDetail(e.details, "baseline_samples"), DetailValue(int64_t{40}));
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(e.details, "baseline_ms")), 1.0);
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(e.details, "current_ms")), 1.6);

  // The same records uploaded without history fall back to the mean rule.
  auto plain = Diff(Upload(RecordOf(base)), Upload(RecordOf(stalls)));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(FromProto(plain->diff()).entries, mean_rule.entries);

  // An uploaded snapshot carries its history.
  auto snap_base = service_->GetSnapshot(base);
  auto snap_stalls = service_->GetSnapshot(stalls);
  ASSERT_TRUE(snap_base.ok() && snap_stalls.ok());
  v1::DiffOperand up_base, up_stalls;
  *up_base.mutable_snapshot() = *snap_base;
  *up_stalls.mutable_snapshot() = *snap_stalls;
  auto uploaded = Diff(up_base, up_stalls);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  EXPECT_THAT(uploaded->diff().entries(), IsEmpty());
  EXPECT_EQ(uploaded->baseline_description(), "uploaded snapshot");
}

TEST_F(DiffServiceTest, NamedBaselinesRoundTripAndSurviveARestart) {
  const std::string base = StreamSession(Noisy);
  const std::string stalls = StreamSession(NoisyWithStalls);
  const std::string slower = StreamSession(Slower);

  auto from_session = service_->SetBaseline("main", Session(base));
  ASSERT_TRUE(from_session.ok()) << from_session.status();
  EXPECT_EQ(from_session->name(), "main");
  EXPECT_EQ(from_session->source(), absl::StrCat("session ", base));
  EXPECT_EQ(from_session->model_name(), "Net");
  EXPECT_EQ(from_session->layers(), 2u);
  EXPECT_TRUE(from_session->has_history());
  EXPECT_GT(from_session->created_unix_ns(), 0);

  auto from_upload = service_->SetBaseline("release-1.0", Upload(RecordOf(slower)));
  ASSERT_TRUE(from_upload.ok()) << from_upload.status();
  EXPECT_EQ(from_upload->source(), "upload");
  EXPECT_FALSE(from_upload->has_history());
  auto copy = service_->SetBaseline("copy", Baseline("main"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->source(), "baseline main");
  EXPECT_TRUE(copy->has_history());

  // The file is a plain trace file.
  auto file = ReadTraceFile(config_.data_dir + "/baselines/main.json");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file, RecordOf(base));

  auto names = [&] {
    std::vector<std::string> out;
    auto list = service_->ListBaselines();
    EXPECT_TRUE(list.ok()) << list.status();
    if (list.ok()) {
      for (const auto& b : list->baselines()) out.push_back(b.name());
    }
    return out;
  };
  EXPECT_THAT(names(), ElementsAre("copy", "main", "release-1.0"));

  // Diffs against the baseline use its stored history: the stalls are noise, the shift is not.
  auto noise = Diff(Baseline("main"), Session(stalls));
  ASSERT_TRUE(noise.ok()) << noise.status();
  EXPECT_THAT(noise->diff().entries(), IsEmpty());
  EXPECT_EQ(noise->baseline_description(), "baseline main");
  auto real = Diff(Baseline("main"), Session(slower));
  ASSERT_TRUE(real.ok());
  EXPECT_THAT(Kinds(FromProto(real->diff())), ElementsAre(DiffKind::kLatencyRegression));

  ASSERT_TRUE(service_->RemoveBaseline("copy").ok());
  EXPECT_EQ(service_->RemoveBaseline("copy").code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(names(), ElementsAre("main", "release-1.0"));
  ASSERT_TRUE(service_->SetBaseline("stalls", Session(stalls)).ok());

  RestartDaemon();
  EXPECT_THAT(names(), ElementsAre("main", "release-1.0", "stalls"));
  // A session read back from disk has no history (mean rule: the stalls count)...
  auto from_disk = Diff(Baseline("main"), Session(stalls));
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_THAT(Kinds(FromProto(from_disk->diff())), ElementsAre(DiffKind::kLatencyRegression));
  // ...but both baselines kept theirs.
  auto after = Diff(Baseline("main"), Baseline("stalls"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(after->diff().entries(), IsEmpty());
  auto release = Diff(Baseline("release-1.0"), Session(base));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_THAT(Kinds(FromProto(release->diff())), ElementsAre(DiffKind::kLatencyImprovement));
}

TEST_F(DiffServiceTest, ErrorsNameTheSideAndUseTheRightCode) {
  const std::string id = StreamSession(Noisy);
  auto unknown = Diff(Session(id), Session("no-such-session"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("current: unknown session 'no-such-session'"));

  auto no_baseline = Diff(Baseline("nope"), Session(id));
  EXPECT_EQ(no_baseline.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_baseline.status().message(), HasSubstr("baseline: no baseline named 'nope'"));

  EXPECT_EQ(Diff(v1::DiffOperand(), Session(id)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Diff(Session(""), Session(id)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Diff(Baseline("../etc/passwd"), Session(id)).status().code(),
            absl::StatusCode::kInvalidArgument);

  v1::DiffRequest bad;
  *bad.mutable_baseline() = Session(id);
  *bad.mutable_current() = Session(id);
  bad.set_grad_norm_threshold(-1);
  auto bad_threshold = service_->Diff(bad);
  EXPECT_EQ(bad_threshold.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_threshold.status().message(), HasSubstr("grad_norm"));

  for (const char* name : {"../x", "a/b", "", ".hidden"}) {
    EXPECT_EQ(service_->SetBaseline(name, Session(id)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  EXPECT_EQ(service_->SetBaseline("main", Session("no-such")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(service_->SetBaseline("main", v1::DiffOperand()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(config_.data_dir + "/baselines/main.json"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/x.json"));
}

TEST(DiffServiceNoDataDir, BaselinesAreFailedPreconditionDiffsStillWork) {
  TempDir dir{"ttdiff"};
  DaemonConfig config;
  config.socket_path = dir.path() + "/d.sock";
  auto d = Daemon::Start(config);
  ASSERT_TRUE(d.ok()) << d.status();
  auto service = service_client::TraceServiceClient::Create((*d)->config().service_socket_path);
  ASSERT_TRUE(service.ok());
  TraceRecord r;
  r.metadata.model_name = "Net";
  v1::DiffOperand op;
  ToProto(r, op.mutable_record());
  auto set = (*service)->SetBaseline("main", op);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(set.status().message(), HasSubstr("--data-dir"));
  EXPECT_EQ((*service)->ListBaselines().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*service)->RemoveBaseline("main").code(), absl::StatusCode::kFailedPrecondition);
  v1::DiffRequest request;
  *request.mutable_baseline() = op;
  *request.mutable_current() = op;
  auto diff = (*service)->Diff(request);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_FALSE(diff->diff().has_regressions());
  request.mutable_current()->set_baseline_name("main");
  EXPECT_EQ((*service)->Diff(request).status().code(), absl::StatusCode::kFailedPrecondition);
  // "latest" with no session at all says so.
  request.mutable_current()->mutable_session()->set_session_id("latest");
  auto latest = (*service)->Diff(request);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(latest.status().message(), HasSubstr("current: tracetorchd has no sessions yet"));
}

}  // namespace
}  // namespace tracetorch::daemon
