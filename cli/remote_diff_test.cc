// `tracetorch diff --remote` and `tracetorch baseline` against a real tracetorchd (in-process, on
// temporary sockets): the remote diff prints what the local diff prints, with the same exit codes,
// and named baselines round-trip through the daemon's data directory and a restart.
#include "cli/remote_diff.h"

#include <stdlib.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/daemon_test_util.h"
#include "cli/test_util.h"
#include "client/daemon_client.h"
#include "daemon/server/daemon.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "service_client/service_client.h"
#include "trace/json.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitOk;
using ::tracetorch::view::kExitRegressions;
using ::tracetorch::view::kExitUsage;
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using daemon::test_util::TempDir;
using test_util::CliResult;
using test_util::ExpectOneLineError;
using test_util::Fixture;
using test_util::RunCli;

class RemoteDiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("TRACETORCH_DAEMON_RPC");
    unsetenv("TRACETORCH_TOKEN");
    unsetenv("TRACETORCH_TLS_CA");
    config_.socket_path = dir_.path() + "/d.sock";
    config_.data_dir = dir_.path() + "/data";
    config_.snapshot_interval = absl::Milliseconds(200);
    StartDaemon();
  }
  void TearDown() override { unsetenv("TRACETORCH_DAEMON_RPC"); }

  void StartDaemon() {
    auto d = daemon::Daemon::Start(config_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    address_ = daemon_->config().service_socket_path;
  }

  // Streams `steps` steps of a one-layer model whose latency is `latency_ms`; returns the id.
  std::string StreamSession(double latency_ms, int steps = 10, std::string model = "Net") {
    protocol::ProcessIdentity identity = protocol::CurrentProcessIdentity();
    identity.model_name = std::move(model);
    return test_util::StreamFinishedSession(config_.socket_path, address_, std::move(identity),
                                            steps, latency_ms);
  }

  TempDir dir_{"ttrdiff"};
  daemon::DaemonConfig config_;
  std::unique_ptr<daemon::Daemon> daemon_;
  std::string address_;
};

TEST_F(RemoteDiffTest, RemoteDiffPrintsWhatTheLocalDiffPrints) {
  const std::string a = Fixture("train_trace.json");
  const std::string b = Fixture("train_trace_perturbed.json");
  for (const std::vector<std::string>& pair :
       std::vector<std::vector<std::string>>{{a, b}, {b, a}, {a, a}}) {
    for (const bool json : {true, false}) {
      std::vector<std::string> local = {"diff", pair[0], pair[1]};
      std::vector<std::string> remote = {"diff", "--remote", address_, pair[0], pair[1]};
      if (json) {
        local.push_back("--json");
        remote.push_back("--json");
      }
      const CliResult want = RunCli(local);
      const CliResult got = RunCli(remote);
      EXPECT_EQ(got.out, want.out) << pair[0] << " " << pair[1] << " json=" << json;
      EXPECT_EQ(got.code, want.code);
      EXPECT_EQ(got.err, "");
    }
  }
  // The exit codes themselves: 1 with regressions, 0 without.
  EXPECT_EQ(RunCli({"diff", "--remote", address_, a, b}).code, kExitRegressions);
  EXPECT_EQ(RunCli({"diff", "--remote", address_, a, a}).code, kExitOk);
  // Thresholds travel to the daemon: the same as locally.
  const CliResult loose_local = RunCli({"diff", a, b, "--json", "--latency-threshold", "5",
                                        "--grad-norm-threshold", "5", "--std-threshold", "5"});
  const CliResult loose =
      RunCli({"diff", "--remote", address_, a, b, "--json", "--latency-threshold", "5",
              "--grad-norm-threshold", "5", "--std-threshold", "5"});
  EXPECT_EQ(loose.out, loose_local.out);
  EXPECT_EQ(loose.code, loose_local.code);
  EXPECT_NE(loose.out, RunCli({"diff", "--remote", address_, a, b, "--json"}).out);
}

TEST_F(RemoteDiffTest, AddressIsOptionalAndOperandOrderIsKept) {
  const std::string a = Fixture("train_trace.json");
  const std::string b = Fixture("train_trace_perturbed.json");
  const CliResult want = RunCli({"diff", a, b, "--json"});
  ASSERT_EQ(want.code, kExitRegressions);
  setenv("TRACETORCH_DAEMON_RPC", address_.c_str(), 1);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"diff", "--remote", a, b, "--json"},
           {"diff", a, "--remote", b, "--json"},
           {"diff", a, b, "--remote", "--json"},
           {"diff", a, b, "--json", "--remote"},
           {"diff", a, b, "--remote", address_, "--json"},
           {"diff", "--remote=" + address_, a, b, "--json"},
       }) {
    const CliResult got = RunCli(args);
    EXPECT_EQ(got.out, want.out) << args[1] << " " << args[2];
    EXPECT_EQ(got.code, kExitRegressions) << got.err;
  }
  ExpectOneLineError(RunCli({"diff", "--remote", a}));
  ExpectOneLineError(RunCli({"diff", a}));  // The local diff still wants two.
}

TEST_F(RemoteDiffTest, SessionsAndBaselinesRoundTripAndSurviveARestart) {
  const std::string fast = StreamSession(1.0);
  const std::string slow = StreamSession(2.0);
  const std::string file = dir_.path() + "/fast.json";
  {
    const CliResult snap = RunCli({"snapshot", fast, "--remote", address_, "-o", file});
    ASSERT_EQ(snap.code, kExitOk) << snap.err;
  }

  CliResult r = RunCli({"baseline", "set", "main", "session:" + fast, "--remote", address_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("baseline 'main' set from session ", fast,
                                ": Net, 1 layer, with per-step history\n"));
  r = RunCli({"baseline", "set", "from-file", file, "--remote", address_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "baseline 'from-file' set from upload: Net, 1 layer, no history\n");
  r = RunCli({"baseline", "set", "bare", fast, "--remote", address_});  // A bare session id.
  ASSERT_EQ(r.code, kExitOk) << r.err;
  r = RunCli({"baseline", "set", "newest", "latest", "--remote", address_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr(slow));

  r = RunCli({"baseline", "list", "--remote", address_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, StartsWith("NAME"));
  EXPECT_THAT(r.out, HasSubstr("from-file"));
  r = RunCli({"baseline", "list", "--json", "--remote", address_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"bare\""));
  const size_t bare = r.out.find("\"bare\"");
  const size_t from_file = r.out.find("\"from-file\"");
  const size_t main = r.out.find("\"main\"");
  const size_t newest = r.out.find("\"newest\"");
  EXPECT_TRUE(bare < from_file && from_file < main && main < newest) << r.out;  // By name.
  EXPECT_THAT(r.out, HasSubstr("\"has_history\": true"));

  // The stored file is what `inspect` reads.
  EXPECT_EQ(RunCli({"inspect", config_.data_dir + "/baselines/main.json"}).code, kExitOk);

  // Diffs against the baseline: same record -> 0; a slower session -> 1.
  r = RunCli({"diff", "--remote", address_, "baseline:main", "session:" + fast});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  r = RunCli({"diff", "--remote", address_, "baseline:main", "latest", "--json"});
  EXPECT_EQ(r.code, kExitRegressions) << r.err;
  EXPECT_THAT(r.out, HasSubstr("medians of 10 vs 10 steps"));
  r = RunCli({"diff", "--remote", address_, "baseline:from-file", slow, "--json"});
  EXPECT_EQ(r.code, kExitRegressions) << r.err;
  EXPECT_THAT(r.out, HasSubstr("latency_regression"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("medians")));  // No history on one side.

  r = RunCli({"baseline", "rm", "bare", "--remote", address_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "removed baseline 'bare'\n");
  r = RunCli({"baseline", "rm", "bare", "--remote", address_});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("no baseline named 'bare'"));

  daemon_->Shutdown();
  daemon_.reset();
  StartDaemon();
  r = RunCli({"baseline", "list", "--json", "--remote", address_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"main\""));
  EXPECT_THAT(r.out, HasSubstr("\"from-file\""));
  EXPECT_THAT(r.out, HasSubstr("\"newest\""));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("\"bare\"")));
  r = RunCli({"diff", "--remote", address_, "baseline:main", "baseline:newest"});
  EXPECT_EQ(r.code, kExitRegressions) << r.err;
}

TEST_F(RemoteDiffTest, ErrorsAreOneLineAndExit2) {
  const std::string a = Fixture("train_trace.json");
  CliResult r = RunCli({"diff", "--remote", address_, a, "latest"});  // No session streamed yet.
  ExpectOneLineError(r);
  EXPECT_EQ(r.err, "tracetorch: tracetorchd has no sessions yet\n");

  r = RunCli({"diff", "--remote", address_, "session:no-such", a});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("unknown session 'no-such'"));
  EXPECT_THAT(r.err, HasSubstr("tracetorch sessions"));

  r = RunCli({"diff", "--remote", address_, a, "typo-not-a-file"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err,
              HasSubstr("'typo-not-a-file' is neither a trace file nor a session tracetorchd "
                        "knows"));

  r = RunCli({"diff", "--remote", address_, "baseline:nope", a});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("no baseline named 'nope'"));
  EXPECT_THAT(r.err, HasSubstr("tracetorch baseline list"));

  r = RunCli({"diff", "--remote", address_, a, dir_.path() + "/missing.json"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("missing.json: file not found"));

  r = RunCli({"diff", "--remote", address_, a, a, "--latency-threshold", "-1"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("invalid diff thresholds"));

  r = RunCli({"diff", "--remote", address_, "session:", a});
  ExpectOneLineError(r);

  r = RunCli({"diff", "--remote", dir_.path() + "/nowhere/rpc.sock", a, a});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("cannot reach tracetorchd at "));

  r = RunCli({"baseline", "set", "../x", a, "--remote", address_});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("baseline name"));
  r = RunCli({"baseline", "set", "main", "session:no-such", "--remote", address_});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("unknown session 'no-such'"));
  r = RunCli({"baseline", "list", "--remote", dir_.path() + "/nowhere/rpc.sock"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("cannot reach tracetorchd"));
  ExpectOneLineError(RunCli({"baseline"}));
  ExpectOneLineError(RunCli({"baseline", "set", "main"}));
}

// The listing prints what agents sent: a crafted model name must not reach the terminal raw.
TEST_F(RemoteDiffTest, SessionsListingSanitizesNames) {
  const std::string id = StreamSession(1.0, 2, "Evil\x1b[2J\rNet");
  const CliResult text = RunCli({"sessions", "--remote", address_});
  ASSERT_EQ(text.code, kExitOk) << text.err;
  EXPECT_THAT(text.out, HasSubstr(id));
  EXPECT_THAT(text.out, HasSubstr("Evil?[2J?Net"));
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
  const CliResult json = RunCli({"sessions", "--json", "--remote", address_});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr(R"("model": "Evil\u001b[2J\rNet")"));
}

TEST(RemoteOperand, Syntax) {
  auto session = ParseRemoteOperand("session:abc");
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session->session().session_id(), "abc");
  auto latest = ParseRemoteOperand("latest");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->session().session_id(), "latest");
  auto baseline = ParseRemoteOperand("baseline:main");
  ASSERT_TRUE(baseline.ok());
  EXPECT_EQ(baseline->baseline_name(), "main");
  auto bare = ParseRemoteOperand("20261129T101010Z-host-42-1");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->session().session_id(), "20261129T101010Z-host-42-1");
  auto file = ParseRemoteOperand(Fixture("train_trace.json"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(file->has_record());
  EXPECT_GT(file->record().layers_size(), 0);
  EXPECT_EQ(ParseRemoteOperand("baseline:").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRemoteOperand("session:").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRemoteOperand("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRemoteOperand("nope.json").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseRemoteOperand("./latest").status().code(), absl::StatusCode::kNotFound);
}

// One address per daemon: a tool given the agents' socket, whatever it is called, is served there
// (the daemon hands the connection to its gRPC service); when nothing answers, the error names it.
TEST(OneAddressPerDaemon, TheAgentsSocketServesToolsWhateverItsName) {
  unsetenv("TRACETORCH_DAEMON_RPC");
  TempDir dir{"ttone"};
  daemon::DaemonConfig config;
  config.socket_path = dir.path() + "/agents-of-x.sock";
  config.service_socket_path = dir.path() + "/elsewhere-rpc.sock";
  config.data_dir = dir.path() + "/data";
  auto d = daemon::Daemon::Start(config);
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string agents = config.socket_path;
  const CliResult listed = RunCli({"sessions", "--remote", agents, "--json"});
  EXPECT_EQ(listed.code, kExitOk) << listed.err;
  EXPECT_EQ(listed.out, "[]\n");
  const std::string trace = Fixture("train_trace.json");
  EXPECT_EQ(RunCli({"diff", "--remote", agents, trace, trace}).code, kExitOk);

  (*d)->Shutdown();
  const CliResult gone = RunCli({"sessions", "--remote", agents});
  EXPECT_EQ(gone.code, kExitUsage);
  EXPECT_THAT(gone.err, HasSubstr(absl::StrCat("cannot reach tracetorchd at ", agents, ": ")));
}

}  // namespace
}  // namespace tracetorch::cli
