#include "daemon/metrics/metrics_server.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/testing/http_get.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"

namespace tracetorch::daemon {
namespace {

using test_util::HttpGet;
using ::testing::HasSubstr;

// A collectable with one gauge whose value the test sets.
class FakeCollectable : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily f;
    f.name = "fake_gauge";
    f.help = "A test gauge.";
    f.type = prometheus::MetricType::Gauge;
    f.metric.emplace_back();
    f.metric.back().gauge.value = 12;
    return {f};
  }
};

TEST(MetricsListenAddress, DefaultsToLoopbackAndChecksThePort) {
  EXPECT_EQ(*MetricsListenAddress("9464"), "127.0.0.1:9464");
  EXPECT_EQ(*MetricsListenAddress("0.0.0.0:9464"), "0.0.0.0:9464");
  EXPECT_EQ(*MetricsListenAddress("[::1]:9464"), "[::1]:9464");
  for (const char* bad : {"", "x", "127.0.0.1:", ":9464", "127.0.0.1:70000", "::1:9464"}) {
    EXPECT_EQ(MetricsListenAddress(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MetricsServer, ServesTheCollectableOnAPickedPort) {
  auto server = MetricsServer::Start("127.0.0.1:0", std::make_shared<FakeCollectable>());
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->address(), "127.0.0.1:" + std::to_string((*server)->port()));
  const std::string response = HttpGet((*server)->port(), "/metrics");
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, HasSubstr("# TYPE fake_gauge gauge\nfake_gauge 12\n"));
}

TEST(MetricsServer, APortInUseIsUnavailableAndNamesTheAddress) {
  auto first = MetricsServer::Start("127.0.0.1:0", std::make_shared<FakeCollectable>());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsServer::Start((*first)->address(), std::make_shared<FakeCollectable>());
  ASSERT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr((*first)->address()));
}

}  // namespace
}  // namespace tracetorch::daemon
