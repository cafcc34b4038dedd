// DiffService over a real SessionManager (a temporary data directory) and a real BaselineStore:
// every operand kind, the noise-aware rule where both sides have history, every error code with
// the side it names, thresholds validation, and a daemon without a data directory.
#include "daemon/core/diff_service.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/counters.h"
#include "daemon/core/file_baseline_store.h"
#include "daemon/core/session_manager.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/record_proto.h"
#include "protocol/session_info_proto.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// Step-to-step jitter of +-40% around 1 ms, mean exactly 1.0 over each 10 steps.
const std::vector<double> kJitter = {0.6, 1.4, 0.8, 1.2, 1.0, 0.7, 1.3, 0.9, 1.1, 1.0};
constexpr int kSteps = 40;

double Noisy(int step) { return kJitter[static_cast<size_t>(step) % kJitter.size()]; }
// Four steps in forty stalled at 5 ms: the mean goes up 40%, the median hardly moves.
double NoisyWithStalls(int step) { return step % 10 == 4 ? 5.0 : Noisy(step); }
// Every step 60% slower: beyond the threshold and beyond the jitter.
double Slower(int step) { return 1.6 * Noisy(step); }

protocol::Hello MakeHello() {
  protocol::Hello h;
  h.protocol_version = 1;
  h.identity.pid = 42;
  h.identity.host = "box";
  h.identity.model_name = "Net";
  return h;
}

v1::DiffOperand SessionOperand(const std::string& ref) {
  v1::DiffOperand op;
  op.mutable_session()->set_session_id(ref);
  return op;
}

v1::DiffOperand BaselineOperand(const std::string& name) {
  v1::DiffOperand op;
  op.set_baseline_name(name);
  return op;
}

v1::DiffRequest Request(v1::DiffOperand baseline, v1::DiffOperand current) {
  v1::DiffRequest r;
  *r.mutable_baseline() = std::move(baseline);
  *r.mutable_current() = std::move(current);
  return r;
}

// The kinds of the entries about `layer`.
std::vector<v1::DiffKind> KindsFor(const v1::DiffResponse& response, const std::string& layer) {
  std::vector<v1::DiffKind> out;
  for (const v1::DiffEntry& e : response.diff().entries()) {
    if (e.layer() == layer) out.push_back(e.kind());
  }
  return out;
}

class DiffServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SessionManagerOptions o;
    o.data_dir = dir_.path() + "/data";
    auto m = SessionManager::Create(o, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
    baselines_ = std::make_unique<FileBaselineStore>(
        o.data_dir, [] { return absl::FromUnixSeconds(1'700'000'000); });
    service_ = std::make_unique<DiffService>(manager_.get(), baselines_.get());
  }

  // A finished session of a two-layer model over kSteps steps: "net.fc" at `fc_latency(step)`
  // ms, "net.act" at a constant 0.2 ms. Returns its id.
  std::string AddSession(double (*fc_latency)(int)) {
    auto opened = manager_->Open(MakeHello(), {});
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return "";
    Session& s = *opened->session;
    std::vector<protocol::LayerDecl> table;
    struct Decl {
      uint32_t id;
      const char* name;
      const char* type;
    };
    for (const Decl& decl : {Decl{0, "fc", "Linear"}, Decl{1, "act", "ReLU"}}) {
      protocol::LayerDecl& d = table.emplace_back();
      d.id = decl.id;
      d.info.name = decl.name;
      d.info.type = decl.type;
      d.info.full_name = absl::StrCat("net.", decl.name);
      d.info.depth = 2;
    }
    EXPECT_TRUE(s.DeclareLayers(table).ok());
    v1::EventBatch batch;
    for (int step = 0; step < kSteps; ++step) {
      for (uint32_t layer : {0u, 1u}) {
        v1::ForwardEvent* f = batch.add_forward();
        f->set_layer_id(layer);
        f->set_step(static_cast<uint64_t>(step));
        f->set_latency_ms(layer == 0 ? fc_latency(step) : 0.2);
        v1::TensorEvent* out = f->add_outputs();
        out->add_shape(4);
        out->add_shape(8);
        out->mutable_stats()->set_std(0.5);
      }
    }
    EXPECT_EQ(s.AddBatchBytes(batch.SerializeAsString()).value().rejected, 0u);
    s.Finish(protocol::End(), absl::Now());
    manager_->Release(opened->session, opened->attachment, /*ended=*/true);
    return s.id();
  }

  // The session's record as an upload (no history), or its whole snapshot.
  v1::DiffOperand RecordOperand(const std::string& id) {
    auto snap = manager_->GetSnapshot(id);
    EXPECT_TRUE(snap.ok()) << snap.status();
    v1::DiffOperand op;
    ToProto(snap->record, op.mutable_record());
    return op;
  }
  v1::DiffOperand SnapshotOperand(const std::string& id) {
    auto snap = manager_->GetSnapshot(id);
    EXPECT_TRUE(snap.ok()) << snap.status();
    v1::DiffOperand op;
    protocol::ToProto(*snap, op.mutable_snapshot());
    return op;
  }

  v1::BaselineInfo SetBaseline(const std::string& name, v1::DiffOperand source) {
    v1::SetBaselineRequest r;
    r.set_name(name);
    *r.mutable_source() = std::move(source);
    absl::StatusOr<v1::BaselineInfo> info = service_->SetBaseline(r);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : v1::BaselineInfo();
  }

  // The status of a Diff expected to fail.
  absl::Status DiffError(const v1::DiffRequest& request) {
    absl::StatusOr<v1::DiffResponse> r = service_->Diff(request);
    EXPECT_FALSE(r.ok());
    return r.status();
  }

  TempDir dir_{"ttdiff"};
  DaemonCounters counters_;
  std::unique_ptr<SessionManager> manager_;
  std::unique_ptr<BaselineStore> baselines_;
  std::unique_ptr<DiffService> service_;
};

TEST_F(DiffServiceTest, TwoSessionsAreComparedWithTheirHistory) {
  const std::string base = AddSession(Noisy);
  const std::string stalled = AddSession(NoisyWithStalls);
  const std::string slower = AddSession(Slower);

  // Stalls move the mean by 40% but not the medians: within step noise, no entry.
  absl::StatusOr<v1::DiffResponse> r =
      service_->Diff(Request(SessionOperand(base), SessionOperand(stalled)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(KindsFor(*r, "net.fc"), IsEmpty());
  EXPECT_EQ(r->baseline_description(), "session " + base);
  EXPECT_EQ(r->current_description(), "session " + stalled);
  EXPECT_EQ(r->diff().baseline_model(), "Net");

  // Every step slower: a regression by the noise-aware rule (its details say so).
  r = service_->Diff(Request(SessionOperand(base), SessionOperand(slower)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(KindsFor(*r, "net.fc"), ElementsAre(v1::DIFF_KIND_LATENCY_REGRESSION));
  EXPECT_THAT(r->diff().entries(0).message(), HasSubstr("beyond step noise"));
  EXPECT_TRUE(r->diff().has_regressions());
  EXPECT_THAT(KindsFor(*r, "net.act"), IsEmpty());
}

TEST_F(DiffServiceTest, LatestIsTheNewestSession) {
  const std::string base = AddSession(Noisy);
  const std::string newest = AddSession(Slower);
  absl::StatusOr<v1::DiffResponse> r =
      service_->Diff(Request(SessionOperand(base), SessionOperand("latest")));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->current_description(), "session " + newest);
  EXPECT_THAT(KindsFor(*r, "net.fc"), ElementsAre(v1::DIFF_KIND_LATENCY_REGRESSION));
}

TEST_F(DiffServiceTest, AnUploadedRecordHasNoHistoryAnUploadedSnapshotHas) {
  const std::string base = AddSession(Noisy);
  const std::string stalled = AddSession(NoisyWithStalls);

  // A record on one side: the mean rule, which the stalls trip.
  absl::StatusOr<v1::DiffResponse> r =
      service_->Diff(Request(SessionOperand(base), RecordOperand(stalled)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->current_description(), "uploaded record");
  EXPECT_THAT(KindsFor(*r, "net.fc"), ElementsAre(v1::DIFF_KIND_LATENCY_REGRESSION));

  // A snapshot carries its history: the noise-aware rule again.
  r = service_->Diff(Request(SnapshotOperand(base), SnapshotOperand(stalled)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->baseline_description(), "uploaded snapshot");
  EXPECT_EQ(r->current_description(), "uploaded snapshot");
  EXPECT_THAT(KindsFor(*r, "net.fc"), IsEmpty());
}

TEST_F(DiffServiceTest, NamedBaselinesKeepTheirSourceAndHistory) {
  const std::string base = AddSession(Noisy);
  const std::string stalled = AddSession(NoisyWithStalls);

  const v1::BaselineInfo from_session = SetBaseline("main", SessionOperand(base));
  EXPECT_EQ(from_session.name(), "main");
  EXPECT_EQ(from_session.source(), "session " + base);
  EXPECT_TRUE(from_session.has_history());
  EXPECT_EQ(from_session.layers(), 2u);
  EXPECT_EQ(from_session.created_unix_ns(), 1'700'000'000ll * 1'000'000'000ll);
  EXPECT_EQ(SetBaseline("rec", RecordOperand(base)).source(), "upload");
  EXPECT_FALSE(SetBaseline("rec", RecordOperand(base)).has_history());
  const v1::BaselineInfo from_snapshot = SetBaseline("snap", SnapshotOperand(base));
  EXPECT_EQ(from_snapshot.source(), "upload");
  EXPECT_TRUE(from_snapshot.has_history());
  EXPECT_EQ(SetBaseline("copy", BaselineOperand("main")).source(), "baseline main");

  absl::StatusOr<std::vector<v1::BaselineInfo>> list = service_->ListBaselines();
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> names;
  for (const v1::BaselineInfo& b : *list) names.push_back(b.name());
  EXPECT_THAT(names, ElementsAre("copy", "main", "rec", "snap"));

  // A baseline made from a session keeps its history: the noise-aware rule.
  absl::StatusOr<v1::DiffResponse> r =
      service_->Diff(Request(BaselineOperand("main"), SessionOperand(stalled)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->baseline_description(), "baseline main");
  EXPECT_THAT(KindsFor(*r, "net.fc"), IsEmpty());
  // One made from a record has none: the mean rule.
  r = service_->Diff(Request(BaselineOperand("rec"), SessionOperand(stalled)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(KindsFor(*r, "net.fc"), ElementsAre(v1::DIFF_KIND_LATENCY_REGRESSION));

  ASSERT_TRUE(service_->RemoveBaseline("rec").ok());
  EXPECT_EQ(service_->RemoveBaseline("rec").code(), absl::StatusCode::kNotFound);
  const absl::Status gone = DiffError(Request(BaselineOperand("rec"), SessionOperand(stalled)));
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gone.message()), StartsWith("baseline: "));
  EXPECT_THAT(gone.message(), HasSubstr("no baseline named 'rec'"));
}

TEST_F(DiffServiceTest, IncludeOperandsReturnsBothSidesAsTheDiffSawThem) {
  const std::string base = AddSession(Noisy);
  const std::string slower = AddSession(Slower);
  SetBaseline("main", SessionOperand(base));
  v1::DiffRequest request = Request(BaselineOperand("main"), SessionOperand(slower));
  absl::StatusOr<v1::DiffResponse> r = service_->Diff(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_baseline());  // Not asked for: not sent.
  EXPECT_FALSE(r->has_current());

  request.set_include_operands(true);
  r = service_->Diff(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->baseline().record().layers_size(), 2);
  EXPECT_EQ(r->baseline().record().layers(0).full_name(), "net.fc");
  ASSERT_EQ(r->baseline().history_size(), 2);  // The baseline kept the session's history.
  ASSERT_EQ(r->current().history_size(), 2);
  const v1::LayerHistory& fc = r->current().history(0);
  EXPECT_EQ(fc.full_name(), "net.fc");
  ASSERT_EQ(fc.latency_ms_size(), kSteps);
  EXPECT_EQ(fc.latency_ms(7), Slower(7));
  // An uploaded record has no history.
  *request.mutable_current() = RecordOperand(slower);
  r = service_->Diff(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->current().record().layers_size(), 2);
  EXPECT_EQ(r->current().history_size(), 0);
}

TEST_F(DiffServiceTest, ThresholdsAreValidatedAndApplied) {
  const std::string base = AddSession(Noisy);
  const std::string slower = AddSession(Slower);
  v1::DiffRequest request = Request(SessionOperand(base), SessionOperand(slower));
  request.set_latency_threshold(1.0);  // +60% is within a 100% threshold.
  absl::StatusOr<v1::DiffResponse> r = service_->Diff(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(KindsFor(*r, "net.fc"), IsEmpty());

  const double bad[] = {-0.1, std::nan(""), std::numeric_limits<double>::infinity()};
  for (double value : bad) {
    for (int field = 0; field < 3; ++field) {
      v1::DiffRequest b = Request(SessionOperand(base), SessionOperand(slower));
      if (field == 0) b.set_latency_threshold(value);
      if (field == 1) b.set_grad_norm_threshold(value);
      if (field == 2) b.set_std_threshold(value);
      EXPECT_EQ(DiffError(b).code(), absl::StatusCode::kInvalidArgument)
          << "field " << field << " = " << value;
    }
  }
  // Checked before either side is resolved: no side is named.
  v1::DiffRequest both_bad = Request(v1::DiffOperand(), v1::DiffOperand());
  both_bad.set_std_threshold(-1);
  const absl::Status s = DiffError(both_bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), Not(HasSubstr("baseline:")));
}

TEST_F(DiffServiceTest, ErrorsNameTheSideAndCarryTheRightCode) {
  const std::string base = AddSession(Noisy);
  struct Case {
    v1::DiffOperand baseline;
    v1::DiffOperand current;
    absl::StatusCode code;
    std::string prefix;
    std::string says;
  };
  const std::vector<Case> cases = {
      {v1::DiffOperand(), SessionOperand(base), absl::StatusCode::kInvalidArgument,
       "baseline: ", "no session, baseline name, record or snapshot"},
      {SessionOperand(base), v1::DiffOperand(), absl::StatusCode::kInvalidArgument,
       "current: ", "no session, baseline name, record or snapshot"},
      {SessionOperand(""), SessionOperand(base), absl::StatusCode::kInvalidArgument,
       "baseline: ", "a session id or \"latest\" is needed"},
      {SessionOperand(base), SessionOperand("no-such-session"), absl::StatusCode::kNotFound,
       "current: ", "unknown session 'no-such-session'"},
      {BaselineOperand("missing"), SessionOperand(base), absl::StatusCode::kNotFound,
       "baseline: ", "no baseline named 'missing'"},
      {SessionOperand(base), BaselineOperand("a/b"), absl::StatusCode::kInvalidArgument,
       "current: ", "letters, digits"},
      // The baseline side is resolved first: its error is the one reported.
      {SessionOperand("nope"), SessionOperand("nope-too"), absl::StatusCode::kNotFound,
       "baseline: ", "unknown session 'nope'"},
  };
  for (const Case& c : cases) {
    const absl::Status s = DiffError(Request(c.baseline, c.current));
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(std::string(s.message()), StartsWith(c.prefix)) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.says)) << s;
  }
}

TEST_F(DiffServiceTest, LatestWithoutSessionsIsNotFoundForThatSide) {
  v1::DiffOperand record;
  record.mutable_record()->mutable_metadata()->set_model_name("Net");
  const absl::Status s = DiffError(Request(record, SessionOperand("latest")));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), StartsWith("current: "));
  EXPECT_THAT(s.message(), HasSubstr("no sessions"));
}

TEST_F(DiffServiceTest, SetBaselineErrors) {
  const std::string base = AddSession(Noisy);
  v1::SetBaselineRequest r;
  r.set_name("../x");
  *r.mutable_source() = SessionOperand(base);
  EXPECT_EQ(service_->SetBaseline(r).status().code(), absl::StatusCode::kInvalidArgument);
  r.set_name("");
  EXPECT_EQ(service_->SetBaseline(r).status().code(), absl::StatusCode::kInvalidArgument);

  r.set_name("main");
  r.clear_source();
  absl::Status s = service_->SetBaseline(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("source: "));

  *r.mutable_source() = SessionOperand("no-such-session");
  s = service_->SetBaseline(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), StartsWith("source: "));

  *r.mutable_source() = BaselineOperand("missing");
  s = service_->SetBaseline(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), StartsWith("source: "));

  EXPECT_EQ(service_->RemoveBaseline("a/b").code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<v1::BaselineInfo>> list = service_->ListBaselines();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(*list, IsEmpty());  // Nothing was stored by the failed calls.
}

// A daemon without a data directory: no store at all, or a store without a directory (what
// tracetorchd makes). Baseline calls are FailedPrecondition; diffs of sessions and uploads work.
TEST_F(DiffServiceTest, WithoutADataDirectoryBaselineCallsAreFailedPrecondition) {
  SessionManagerOptions o;  // Memory only.
  auto m = SessionManager::Create(o, &counters_);
  ASSERT_TRUE(m.ok()) << m.status();
  manager_ = *std::move(m);
  const std::string base = AddSession(Noisy);
  FileBaselineStore no_dir("");
  for (BaselineStore* store :
       {static_cast<BaselineStore*>(nullptr), static_cast<BaselineStore*>(&no_dir)}) {
    SCOPED_TRACE(store == nullptr ? "no store" : "a store without a directory");
    DiffService service(manager_.get(), store);
    v1::SetBaselineRequest set;
    set.set_name("main");
    *set.mutable_source() = SessionOperand(base);
    EXPECT_EQ(service.SetBaseline(set).status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(service.SetBaseline(set).status().message(), HasSubstr("--data-dir"));
    EXPECT_EQ(service.ListBaselines().status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(service.RemoveBaseline("main").code(), absl::StatusCode::kFailedPrecondition);
    absl::StatusOr<v1::DiffResponse> d =
        service.Diff(Request(BaselineOperand("main"), SessionOperand(base)));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(d.status().message()), StartsWith("baseline: "));
    d = service.Diff(Request(SessionOperand(base), RecordOperand(base)));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_THAT(KindsFor(*d, "net.fc"), IsEmpty());  // The same trace.
  }
}

}  // namespace
}  // namespace tracetorch::daemon
