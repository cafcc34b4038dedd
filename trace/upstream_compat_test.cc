// Agreement with the tracetorch-ml Python library on the traces it wrote (tests/fixtures/upstream):
// our anomaly detection must report what it reported, and our diff must list what its diff listed.
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "trace/anomaly.h"
#include "trace/diff.h"
#include "trace/json.h"
#include "trace/record.h"

namespace tracetorch {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/" + name;
}

TraceRecord Load(const std::string& name) {
  absl::StatusOr<TraceRecord> record = ReadTraceFile(Fixture(name));
  EXPECT_TRUE(record.ok()) << name << ": " << record.status();
  return record.value_or(TraceRecord{});
}

// Numbers compare with a relative tolerance (the fixtures were written by another program);
// everything else exactly.
bool NearlyEqual(double a, double b) {
  if (a == b) return true;
  return std::fabs(a - b) <= 1e-5 * std::max(std::fabs(a), std::fabs(b));
}

std::optional<double> AsNumber(const DetailValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

void ExpectDetailsNear(const Details& actual, const Details& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].first, expected[i].first) << what;
    const std::optional<double> a = AsNumber(actual[i].second);
    const std::optional<double> e = AsNumber(expected[i].second);
    if (a.has_value() && e.has_value()) {
      EXPECT_TRUE(NearlyEqual(*a, *e))
          << what << " details." << expected[i].first << ": " << *a << " vs " << *e;
    } else {
      EXPECT_TRUE(actual[i].second == expected[i].second)
          << what << " details." << expected[i].first;
    }
  }
}

void ExpectSameAnomalies(const std::string& fixture) {
  SCOPED_TRACE(fixture);
  const TraceRecord record = Load(fixture);
  absl::StatusOr<std::vector<Anomaly>> found = DetectAnomalies(record);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->size(), record.warnings.size());
  for (size_t i = 0; i < found->size(); ++i) {
    const Anomaly& a = (*found)[i];
    const Anomaly& e = record.warnings[i];
    EXPECT_EQ(a.type, e.type) << i;
    EXPECT_EQ(a.severity, e.severity) << i;
    EXPECT_EQ(a.layer, e.layer) << i;
    EXPECT_EQ(a.message, e.message) << i;
    ExpectDetailsNear(a.details, e.details, e.message);
  }
}

TEST(UpstreamCompat, AnomaliesOfTrainTrace) { ExpectSameAnomalies("train_trace.json"); }
TEST(UpstreamCompat, AnomaliesOfPerturbedTrace) {
  ExpectSameAnomalies("train_trace_perturbed.json");
}
TEST(UpstreamCompat, AnomaliesOfExampleTrace) { ExpectSameAnomalies("example_trace.json"); }

nlohmann::ordered_json LoadJson(const std::string& name) {
  std::ifstream in(Fixture(name));
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::ordered_json::parse(text.str());
}

using EntryKey = std::tuple<std::string, std::string, std::string, std::string>;

EntryKey Key(const DiffEntry& e) {
  return {std::string(ToString(e.severity)), std::string(ToString(e.kind)), e.layer, e.message};
}

TEST(UpstreamCompat, DiffOfTrainVersusPerturbed) {
  const TraceRecord base = Load("train_trace.json");
  const TraceRecord cur = Load("train_trace_perturbed.json");
  const nlohmann::ordered_json expected = LoadJson("diff_train_vs_perturbed.json");
  const TraceDiff diff = DiffRecords(base, cur);

  std::multiset<EntryKey> want;
  for (const nlohmann::ordered_json& e : expected.at("entries")) {
    want.insert({e.at("severity").get<std::string>(), e.at("kind").get<std::string>(),
                 e.at("layer").get<std::string>(), e.at("message").get<std::string>()});
  }
  std::multiset<EntryKey> got;
  for (const DiffEntry& e : diff.entries) got.insert(Key(e));
  EXPECT_EQ(got, want);

  EXPECT_EQ(diff.baseline_model, expected.at("baseline_model").get<std::string>());
  EXPECT_EQ(diff.current_model, expected.at("current_model").get<std::string>());
  EXPECT_EQ(diff.critical_count(), expected.at("critical_count").get<int>());
  EXPECT_EQ(diff.warning_count(), expected.at("warning_count").get<int>());
  EXPECT_EQ(diff.critical_count(), 0);
  EXPECT_EQ(diff.warning_count(), 26);
  EXPECT_EQ(diff.has_regressions(), expected.at("has_regressions").get<bool>());

  // Details: same keys in the same order, numbers within tolerance, strings equal.
  for (const nlohmann::ordered_json& e : expected.at("entries")) {
    const std::string what =
        e.at("kind").get<std::string>() + " " + e.at("layer").get<std::string>();
    const DiffEntry* match = nullptr;
    for (const DiffEntry& d : diff.entries) {
      if (ToString(d.kind) == e.at("kind").get<std::string>() &&
          d.layer == e.at("layer").get<std::string>() &&
          d.message == e.at("message").get<std::string>()) {
        match = &d;
      }
    }
    ASSERT_NE(match, nullptr) << what;
    const nlohmann::ordered_json& details = e.at("details");
    ASSERT_EQ(match->details.size(), details.size()) << what;
    size_t i = 0;
    for (auto it = details.begin(); it != details.end(); ++it, ++i) {
      const auto& [key, value] = match->details[i];
      EXPECT_EQ(key, it.key()) << what;
      if (it->is_number()) {
        const std::optional<double> got_number = AsNumber(value);
        ASSERT_TRUE(got_number.has_value()) << what << " " << key;
        EXPECT_TRUE(NearlyEqual(*got_number, it->get<double>())) << what << " " << key;
      } else {
        ASSERT_TRUE(std::holds_alternative<std::string>(value)) << what << " " << key;
        EXPECT_EQ(std::get<std::string>(value), it->get<std::string>()) << what << " " << key;
      }
    }
  }
}

TEST(UpstreamCompat, DiffWithOurOwnAnomaliesIsTheSame) {
  TraceRecord base = Load("train_trace.json");
  TraceRecord cur = Load("train_trace_perturbed.json");
  const TraceDiff from_files = DiffRecords(base, cur);
  base.warnings = DetectAnomalies(base).value();
  cur.warnings = DetectAnomalies(cur).value();
  const TraceDiff ours = DiffRecords(base, cur);
  ASSERT_EQ(ours.entries.size(), from_files.entries.size());
  for (size_t i = 0; i < ours.entries.size(); ++i) {
    EXPECT_EQ(Key(ours.entries[i]), Key(from_files.entries[i]));
  }
}

TEST(UpstreamCompat, DiffOfIdenticalTracesIsEmpty) {
  const TraceRecord base = Load("train_trace.json");
  const TraceDiff diff = DiffRecords(base, base);
  EXPECT_TRUE(diff.entries.empty());
  EXPECT_FALSE(diff.has_regressions());
}

}  // namespace
}  // namespace tracetorch
