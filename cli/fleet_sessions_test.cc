// `tracetorch sessions` and `tracetorch snapshot` over several daemons (--remote A,B,...) against
// two real tracetorchd (in-process, temporary sockets) and one address where nothing listens.
#include "cli/fleet_sessions.h"

#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/daemon_test_util.h"
#include "cli/test_util.h"
#include "daemon/server/daemon.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "trace/json.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitOk;
using ::tracetorch::view::kExitUsage;
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using daemon::test_util::TempDir;
using test_util::CliResult;
using test_util::RunCli;

// One daemon (a node of the fleet) with a finished session of `steps` steps of the model `model`,
// streamed as a process of host `name` (session ids name the host, so each node's ids are its own).
struct Node {
  Node(std::string_view name, const std::string& model, int steps) : dir(name) {
    daemon::DaemonConfig config;
    config.socket_path = dir.path() + "/d.sock";
    config.data_dir = dir.path() + "/data";
    auto d = daemon::Daemon::Start(config);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return;
    daemon = *std::move(d);
    address = daemon->config().service_socket_path;
    protocol::ProcessIdentity identity = protocol::CurrentProcessIdentity();
    identity.host = std::string(name);
    identity.model_name = model;
    session = test_util::StreamFinishedSession(config.socket_path, address, std::move(identity),
                                               steps, /*latency_ms=*/1.0);
  }

  TempDir dir;
  std::unique_ptr<daemon::Daemon> daemon;  // Declared after dir: stopped before it is removed.
  std::string address;
  std::string session;
};

std::string Missing() {
  return ::testing::TempDir() + "/no-such-dir-tracetorch/tracetorchd-rpc.sock";
}

class FleetSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("TRACETORCH_DAEMON_RPC");
    unsetenv("TRACETORCH_TOKEN");
    unsetenv("TRACETORCH_TLS_CA");
    a_ = std::make_unique<Node>("ttfleeta", "NetA", 3);
    b_ = std::make_unique<Node>("ttfleetb", "NetB", 5);  // Started after a_'s: the latest.
    ASSERT_FALSE(a_->session.empty());
    ASSERT_FALSE(b_->session.empty());
  }

  std::unique_ptr<Node> a_;
  std::unique_ptr<Node> b_;
};

TEST_F(FleetSessionsTest, SessionsListsEveryDaemonWithItsAddress) {
  const std::string both = absl::StrCat(a_->address, ",", b_->address);
  const CliResult text = RunCli({"sessions", "--remote", both});
  ASSERT_EQ(text.code, kExitOk) << text.err;
  const std::vector<std::string> lines = absl::StrSplit(text.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << text.out;
  EXPECT_THAT(lines[0], StartsWith("DAEMON "));
  EXPECT_THAT(lines[1], StartsWith(a_->address));
  EXPECT_THAT(lines[1], HasSubstr(a_->session));
  EXPECT_THAT(lines[1], HasSubstr("NetA"));
  EXPECT_THAT(lines[2], StartsWith(b_->address));
  EXPECT_THAT(lines[2], HasSubstr(b_->session));

  const CliResult json = RunCli({"sessions", "--json", "--remote", both});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr(absl::StrCat("\"daemon\": \"", a_->address,
                                               "\",\n    "
                                               "\"session_id\": \"",
                                               a_->session, "\"")));
  EXPECT_THAT(json.out, HasSubstr(absl::StrCat("\"daemon\": \"", b_->address,
                                               "\",\n    "
                                               "\"session_id\": \"",
                                               b_->session, "\"")));
  // One daemon: the listing is what it was (no DAEMON column, no "daemon" key).
  const CliResult one = RunCli({"sessions", "--json", "--remote", a_->address});
  ASSERT_EQ(one.code, kExitOk) << one.err;
  EXPECT_THAT(one.out, Not(HasSubstr("\"daemon\"")));
}

TEST_F(FleetSessionsTest, ADaemonThatDoesNotAnswerIsNamedAndTheRestIsListed) {
  const CliResult r =
      RunCli({"sessions", "--remote", absl::StrCat(a_->address, ",", Missing(), ",", b_->address)});
  EXPECT_EQ(r.code, kExitUsage);  // The listing is incomplete.
  EXPECT_THAT(r.out, HasSubstr(a_->session));
  EXPECT_THAT(r.out, HasSubstr(b_->session));
  EXPECT_THAT(r.err,
              StartsWith(absl::StrCat("tracetorch: cannot reach tracetorchd at ", Missing())));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;

  const CliResult none = RunCli({"sessions", "--remote", absl::StrCat(Missing(), ",", Missing())});
  EXPECT_EQ(none.code, kExitUsage);
  EXPECT_EQ(none.out, "");  // Not "no sessions": nobody was asked successfully.
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 2) << none.err;
}

TEST_F(FleetSessionsTest, SnapshotAsksTheDaemonThatHasTheSession) {
  const std::string all = absl::StrCat(Missing(), ",", a_->address, ",", b_->address);
  for (const auto& [ref, model] : std::vector<std::pair<std::string, std::string>>{
           {a_->session, "NetA"}, {b_->session, "NetB"}, {"latest", "NetB"}}) {
    const CliResult r = RunCli({"snapshot", ref, "--remote", all});
    ASSERT_EQ(r.code, kExitOk) << ref << ": " << r.err;
    absl::StatusOr<TraceRecord> record = ParseTraceJson(r.out);
    ASSERT_TRUE(record.ok()) << record.status();
    EXPECT_EQ(record->metadata.model_name, model) << ref;
  }
  const CliResult unknown = RunCli({"snapshot", "nope", "--remote", all});
  EXPECT_EQ(unknown.code, kExitUsage);
  EXPECT_THAT(unknown.err, HasSubstr(absl::StrCat("unknown session 'nope' (see 'tracetorch "
                                                  "sessions') on ",
                                                  a_->address, ", ", b_->address,
                                                  "; a daemon did not answer: cannot reach")));
}

TEST(FindSessionOnDaemons, AnIdOnTwoDaemonsIsAnErrorNamingBoth) {
  v1::ListSessionsResponse list;
  list.add_sessions()->set_session_id("s-1");
  const std::vector<DaemonListing> listings = {{"A", list}, {"B", list}};
  absl::StatusOr<SessionLocation> found = FindSessionOnDaemons(listings, "s-1");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(found.status().message(), HasSubstr("on two daemons, A and B"));
  const std::vector<DaemonListing> none = {{"A", absl::UnavailableError("A is away")}};
  EXPECT_EQ(FindSessionOnDaemons(none, "latest").status().message(),
            "no daemon has sessions yet; a daemon did not answer: A is away");
}

}  // namespace
}  // namespace tracetorch::cli
