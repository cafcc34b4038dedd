#include "cli/json_output.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protocol/record_proto.h"

namespace tracetorch::cli {

using ::tracetorch::view::LayerFilter;
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::SessionInfo Session(const std::string& id) {
  v1::SessionInfo s;
  s.set_session_id(id);
  s.set_state(v1::SESSION_STATE_LIVE);
  s.set_started_unix_ns(int64_t{1767225600} * 1000000000);
  s.set_events(12);
  s.set_dropped_events(1);
  s.mutable_identity()->set_pid(4242);
  s.mutable_identity()->set_host("box");
  s.mutable_identity()->set_model_name("TrainNet");
  return s;
}

v1::LayerTrace Layer(const std::string& full_name) {
  LayerTrace layer;
  layer.full_name = full_name;
  layer.name = full_name;
  layer.type = "Linear";
  layer.latency_ms = 0.5;
  v1::LayerTrace out;
  ToProto(layer, &out);
  return out;
}

v1::LayerHistory History(const std::string& full_name) {
  v1::LayerHistory h;
  h.set_full_name(full_name);
  h.add_steps(7);
  h.add_steps(8);
  h.add_latency_ms(20.0);
  h.add_latency_ms(1e-05);
  h.add_output_std(NAN);
  h.add_output_std(0.5);
  h.add_grad_norm(1.0);
  h.add_grad_norm(INFINITY);
  h.add_non_finite(false);
  h.add_non_finite(true);
  return h;
}

TEST(WatchStatusToJson, OneLineEscaped) {
  EXPECT_EQ(WatchStatusToJson("reconnecting", "gone \"away\"\n\x1b[2J"),
            R"({"type":"status","status":"reconnecting","message":"gone \"away\"\n\u001b[2J"})");
}

TEST(WatchUpdateToJson, SessionUpdateLayoutAndValues) {
  v1::WatchUpdate update;
  update.set_sequence(3);
  update.set_newest_event_unix_ns(99);
  v1::Snapshot* full = update.mutable_full();
  *full->mutable_session() = Session("s-1");
  full->mutable_session()->mutable_identity()->set_rank(2);
  full->mutable_record()->mutable_metadata()->set_model_name("TrainNet");
  *full->mutable_record()->add_layers() = Layer("enc");
  *full->mutable_record()->add_layers() = Layer("head");
  *full->add_history() = History("enc");
  *full->add_history() = History("head");
  protocol::WatchState state;
  ASSERT_TRUE(state.Apply(update).ok());

  LayerFilter filter;
  filter.name_glob = "enc";
  const std::string json = WatchUpdateToJson(update, state, filter);
  EXPECT_THAT(json,
              StartsWith(R"({"type":"update","kind":"full","sequence":3,"newest_event_unix_ns":99,)"
                         R"("ended":false,"session":{"session_id":"s-1","state":"live","pid":4242,)"
                         R"("host":"box","rank":2,"job_id":"","model":"TrainNet",)"
                         R"("started_unix_ns":1767225600000000000,"ended_unix_ns":0,"events":12,)"
                         R"("dropped_events":1,"rejected_events":0},"record":{"metadata":{)"));
  // History values as the writer writes doubles (Python's repr), non-finite as null; one line.
  EXPECT_THAT(json,
              HasSubstr(R"("history":[{"full_name":"enc","steps":[7,8],"latency_ms":[20.0,1e-05],)"
                        R"("output_std":[null,0.5],"grad_norm":[1.0,null],)"
                        R"("non_finite":[false,true]}]})"));
  EXPECT_EQ(json.find('\n'), std::string::npos);
  const nlohmann::json doc = nlohmann::json::parse(json);
  ASSERT_EQ(doc["record"]["layers"].size(), 1u);  // Filtered, and so is the history.
  EXPECT_EQ(doc["record"]["layers"][0]["full_name"], "enc");
  EXPECT_EQ(doc["history"].size(), 1u);
}

TEST(WatchUpdateToJson, NothingReceivedYetHasNullRecord) {
  v1::WatchUpdate update;
  update.set_sequence(1);
  update.mutable_shutdown();
  protocol::WatchState state;
  ASSERT_TRUE(state.Apply(update).ok());
  EXPECT_EQ(WatchUpdateToJson(update, state, LayerFilter{}),
            R"({"type":"update","kind":"shutdown","sequence":1,"newest_event_unix_ns":0,)"
            R"("ended":false,"session":null,"record":null,"history":[]})");
}

TEST(WatchUpdateToJson, JobWithDivergences) {
  v1::WatchUpdate update;
  update.set_sequence(5);
  v1::JobSnapshot* job = update.mutable_job();
  job->set_job_id("job-1");
  for (int r = 0; r < 2; ++r) {
    v1::Snapshot* rank = job->add_ranks();
    *rank->mutable_session() = Session("s" + std::to_string(r));
    rank->mutable_session()->mutable_identity()->set_rank(r);
    *rank->mutable_record()->add_layers() = Layer("enc");
  }
  Anomaly d;
  d.type = AnomalyType::kRankDivergence;
  d.severity = AnomalySeverity::kWarning;
  d.layer = "enc";
  d.message = "rank 1 is slow";
  d.details = {{"rank", int64_t{1}},
               {"metric", std::string("latency_ms")},
               {"ratio", 2.5},
               {"flagged", true},
               {"ranks", std::vector<std::string>{"0", "1"}},
               {"none", std::monostate{}}};
  ToProto(d, job->add_divergences());
  protocol::WatchState state;
  ASSERT_TRUE(state.Apply(update).ok());

  const std::string json = WatchUpdateToJson(update, state, LayerFilter{});
  EXPECT_THAT(json, StartsWith(R"({"type":"job","kind":"job","sequence":5,)"));
  EXPECT_THAT(json, HasSubstr(R"("divergences":[{"type":"rank_divergence","severity":"warning",)"
                              R"("layer":"enc","message":"rank 1 is slow","details":{"rank":1,)"
                              R"("metric":"latency_ms","ratio":2.5,"flagged":true,)"
                              R"("ranks":["0","1"],"none":null}}]})"));
  const nlohmann::json doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["job_id"], "job-1");
  ASSERT_EQ(doc["ranks"].size(), 2u);
  EXPECT_EQ(doc["ranks"][1]["session"]["rank"], 1);
  EXPECT_EQ(doc["ranks"][1]["record"]["layers"][0]["full_name"], "enc");
  EXPECT_TRUE(doc["ranks"][1]["history"].empty());
}

TEST(SessionsToJson, PythonIndentedLayout) {
  v1::ListSessionsResponse list;
  EXPECT_EQ(SessionsToJson(list), "[]");
  v1::SessionInfo s = Session("s-1");
  s.mutable_identity()->set_world_size(4);
  s.mutable_identity()->set_host(
      "a\x1b"
      "b");
  *list.add_sessions() = s;
  EXPECT_EQ(SessionsToJson(list),
            "[\n"
            "  {\n"
            "    \"session_id\": \"s-1\",\n"
            "    \"state\": \"live\",\n"
            "    \"pid\": 4242,\n"
            "    \"host\": \"a\\u001bb\",\n"
            "    \"rank\": null,\n"
            "    \"local_rank\": null,\n"
            "    \"world_size\": 4,\n"
            "    \"job_id\": \"\",\n"
            "    \"model\": \"TrainNet\",\n"
            "    \"started\": \"2026-01-01T00:00:00Z\",\n"
            "    \"started_unix_ns\": 1767225600000000000,\n"
            "    \"ended_unix_ns\": 0,\n"
            "    \"events\": 12,\n"
            "    \"dropped_events\": 1,\n"
            "    \"rejected_events\": 0\n"
            "  }\n"
            "]");
  *list.add_sessions() = Session("s-2");
  const nlohmann::json doc = nlohmann::json::parse(SessionsToJson(list));
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[1]["session_id"], "s-2");
}

TEST(BaselinesToJson, PythonIndentedLayout) {
  v1::ListBaselinesResponse list;
  EXPECT_EQ(BaselinesToJson(list), "[]");
  v1::BaselineInfo* b = list.add_baselines();
  b->set_name("main");
  b->set_model_name("Net");
  b->set_layers(3);
  b->set_has_history(true);
  b->set_source("session s-1");
  EXPECT_EQ(BaselinesToJson(list),
            "[\n"
            "  {\n"
            "    \"name\": \"main\",\n"
            "    \"model\": \"Net\",\n"
            "    \"layers\": 3,\n"
            "    \"has_history\": true,\n"
            "    \"source\": \"session s-1\",\n"
            "    \"created\": \"-\",\n"
            "    \"created_unix_ns\": 0\n"
            "  }\n"
            "]");
}

}  // namespace
}  // namespace tracetorch::cli
