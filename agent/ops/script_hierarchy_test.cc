#include "agent/ops/script_hierarchy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tracetorch::ops {
namespace {

TEST(ParseModuleHierarchyTest, KeepsSubmoduleFramesOnly) {
  const std::vector<std::string> h = {"TOP(ResNet)::forward",
                                      "layer1(Sequential)::forward",
                                      "0(BasicBlock)::forward",
                                      "SELF(BasicBlock)::helper",
                                      "::relu",
                                      "CALL_FUNCTION::f()::f",
                                      "conv1(Conv2d)::forward"};
  const std::vector<ScriptFrame> frames = ParseModuleHierarchy(h);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].instance, "layer1");
  EXPECT_EQ(frames[0].type, "Sequential");
  EXPECT_EQ(frames[1].instance, "0");
  EXPECT_EQ(frames[2].instance, "conv1");
  EXPECT_EQ(frames[2].type, "Conv2d");
}

TEST(ParseModuleHierarchyTest, AnUnknownInstanceEndsThePath) {
  const std::vector<ScriptFrame> frames = ParseModuleHierarchy(
      {"TOP(Net)::forward", "a(A)::forward", "INSTANCE_NAME_UNKNOWN(B)::forward", "c(C)::forward"});
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].instance, "a");
  EXPECT_TRUE(ParseModuleHierarchy({}).empty());
  EXPECT_TRUE(ParseModuleHierarchy({"TOP(Net)::forward"}).empty());
}

}  // namespace
}  // namespace tracetorch::ops
