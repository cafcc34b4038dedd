#include "cli/audit_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/test_util.h"
#include "draw/testing/net_graph.h"
#include "trace/op_graph_json.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitOk;
namespace {

using test_util::ExpectOneLineError;
using test_util::RunCli;
using ::testing::HasSubstr;

std::string WriteNet(bool sick) {
  draw::testing_net::NetBuilder net;
  if (sick) {
    net.g.ops[2].outputs[0].stats = TensorStats{0.0, 0.0, 0.0, 0.0, 0, 0};  // relu_1_3
    net.g.ops[5].outputs[0].stats->nan_count = 2;                           // conv2d_4_6
    net.g.nan_origin = 5;
  }
  const std::string path = ::testing::TempDir() + (sick ? "/audit_sick.json" : "/audit_ok.json");
  EXPECT_TRUE(WriteOpGraphFile(path, net.g).ok());
  return path;
}

TEST(AuditCommand, ReportsTheOriginAndTheDeadReluAndSaysWhatNeedsTensors) {
  test_util::CliResult r = RunCli({"audit", WriteNet(true)});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("non-finite origin  conv2d_4_6 in layer1.1.conv1"));
  EXPECT_THAT(r.out, HasSubstr("relu_1_3 in layer1.0.relu"));
  EXPECT_THAT(r.out, HasSubstr("trace.audit(model)"));
  r = RunCli({"audit", WriteNet(true), "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"label\": \"conv2d_4_6\""));
  r = RunCli({"audit", WriteNet(false)});
  EXPECT_THAT(r.out, HasSubstr("non-finite origin  none"));
  EXPECT_THAT(r.out, HasSubstr("dead outputs       none"));
}

TEST(AuditCommand, AMissingFileIsOneLineExit2) {
  const std::string missing = ::testing::TempDir() + "/no_such_audit.json";
  const test_util::CliResult r = RunCli({"audit", missing});
  ExpectOneLineError(r);
  EXPECT_EQ(r.err, "tracetorch: " + missing + ": file not found\n");
}

}  // namespace
}  // namespace tracetorch::cli
