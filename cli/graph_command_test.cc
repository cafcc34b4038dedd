#include "cli/graph_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "cli/test_util.h"
#include "draw/testing/net_graph.h"
#include "trace/atomic_file.h"
#include "trace/op_graph_json.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitOk;
namespace {

using test_util::ExpectOneLineError;
using test_util::RunCli;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string WriteNet() {
  const draw::testing_net::NetBuilder net;
  const std::string path = ::testing::TempDir() + "/graph_command_test.json";
  EXPECT_TRUE(WriteOpGraphFile(path, net.g).ok());
  return path;
}

TEST(GraphCommand, WritesTheFormatTheExtensionAsksFor) {
  const std::string svg = ::testing::TempDir() + "/graph_command_test.svg";
  test_util::CliResult r = RunCli({"graph", WriteNet(), "-o", svg});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  absl::StatusOr<std::string> text = ReadFileToString(svg);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("<svg"));
  EXPECT_THAT(*text, HasSubstr("add_1_5"));

  // Each format's magic bytes, as `file` reads them; --format wins over the extension.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-o", ::testing::TempDir() + "/graph_command_test.svg"}, "<?xml"},
      {{"-o", ::testing::TempDir() + "/graph_command_test.png"}, "\x89PNG\r\n\x1a\n"},
      {{"-o", ::testing::TempDir() + "/graph_command_test.pdf"}, "%PDF-"},
      {{"-o", ::testing::TempDir() + "/graph_command_test.dot"}, "digraph "},
      {{"-o", ::testing::TempDir() + "/graph_command_test.gv"}, "digraph "},
      {{"-o", ::testing::TempDir() + "/graph_command_svg.png", "--format", "svg"}, "<?xml"},
  };
  for (const auto& [args, magic] : cases) {
    std::vector<std::string> argv = {"graph", WriteNet(), "--collapse", "max", "--direction", "LR"};
    argv.insert(argv.end(), args.begin(), args.end());
    r = RunCli(argv);
    ASSERT_EQ(r.code, kExitOk) << r.err;
    text = ReadFileToString(args[1]);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_THAT(*text, StartsWith(magic)) << args[1];
  }
}

TEST(GraphCommand, PrintsDotWithTheOptionsApplied) {
  test_util::CliResult r = RunCli({"graph", WriteNet(), "--format", "dot"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, StartsWith("digraph G {"));
  EXPECT_THAT(r.out, HasSubstr("subgraph cluster_"));
  r = RunCli({"graph", WriteNet(), "--format", "dot", "--collapse", "max"});
  EXPECT_THAT(r.out, Not(HasSubstr("subgraph cluster_")));
  r = RunCli({"graph", WriteNet(), "--format", "dot", "--module", "layer1.1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("conv2d_4_6"));
  EXPECT_THAT(r.out, Not(HasSubstr("conv2d_2_2")));
}

TEST(GraphCommand, DrawsTheOpGraphMemberOfATrainingTrace) {
  const draw::testing_net::NetBuilder net;
  const std::string path = ::testing::TempDir() + "/graph_command_trace.json";
  ASSERT_TRUE(WriteFileAtomic(path, "{\"model_name\": \"Net\", \"layers\": [], \"op_graph\": " +
                                        OpGraphToJson(net.g, 0) + "}")
                  .ok());
  const test_util::CliResult r = RunCli({"graph", path, "--format", "dot"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("add_2_9"));
}

TEST(GraphCommand, BadInputIsOneLineExit2) {
  const std::string missing = ::testing::TempDir() + "/no_such_graph.json";
  const test_util::CliResult none = RunCli({"graph", missing});
  ExpectOneLineError(none);
  EXPECT_EQ(none.err, "tracetorch: " + missing + ": file not found\n");
  test_util::CliResult r = RunCli({"graph", WriteNet(), "--collapse", "all"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("none, max, auto"));
  r = RunCli({"graph", WriteNet(), "--format", "png"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("-o"));
  r = RunCli({"graph", WriteNet(), "--module", "layer9"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("layer9"));
  r = RunCli({"graph", WriteNet(), "-o", ::testing::TempDir() + "/graph_without_extension"});
  ExpectOneLineError(r);
  // A training trace without an op graph.
  r = RunCli({"graph", std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/train_trace.json"});
  ExpectOneLineError(r);
  EXPECT_THAT(r.err, HasSubstr("without an op graph"));
}

}  // namespace
}  // namespace tracetorch::cli
