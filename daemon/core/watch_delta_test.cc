// BuildWatchDelta as a pure function: hand-made views whose versions say exactly what a viewer at a
// base holds, then a real Session's views, where applying the delta to the old state must give
// the new one.
#include "daemon/core/watch_delta.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/testing/messages.h"
#include "gtest/gtest.h"
#include "protocol/session_info_proto.h"
#include "protocol/watch_state.h"

namespace tracetorch::daemon {
namespace {

using test_util::SameProto;

// A view's versions with its snapshot in wire form, as SessionFeed holds them.
struct TestView : Session::WatchView {
  v1::Snapshot full;
};

std::optional<v1::Snapshot> Delta(const TestView& v, uint64_t base) {
  return BuildWatchDelta(v, v.full, base);
}

// A view of `layers` layers "l0".."l<n-1>", each with a history of `steps` points (steps 0..),
// every version 1 (born, changed, every point) and never thinned.
TestView MakeView(int layers, int steps) {
  TestView v;
  v.version = 1;
  v.full.mutable_session()->set_session_id("s");
  v.full.mutable_record()->mutable_metadata()->set_model_name("Net");
  v.full.mutable_record()->add_warnings()->set_layer("l0");
  for (int i = 0; i < layers; ++i) {
    v.full.mutable_record()->add_layers()->set_full_name(absl::StrCat("l", i));
    v1::LayerHistory* h = v.full.add_history();
    h->set_full_name(absl::StrCat("l", i));
    for (int s = 0; s < steps; ++s) {
      h->add_steps(static_cast<uint64_t>(s));
      h->add_latency_ms(s);
      h->add_output_std(1.0);
      h->add_grad_norm(2.0);
      h->add_non_finite(false);
    }
    v.layer_changed.push_back(1);
    v.layer_born.push_back(1);
    v.history_changed.push_back(1);
    v.history_born.push_back(1);
    v.history_thinned.push_back(0);
    v.history_thinned_before.push_back(0);
    v.history_thin_boundary.push_back(0);
    v.history_point_changed.emplace_back(static_cast<size_t>(steps), 1);
  }
  return v;
}

std::vector<uint64_t> Steps(const v1::LayerHistory& h) {
  return {h.steps().begin(), h.steps().end()};
}

TEST(BuildWatchDelta, OnlyLayersChangedAfterTheBaseAndAlwaysTheSessionAndAnomalies) {
  TestView v = MakeView(3, 4);
  v.version = 9;
  v.layer_changed = {3, 7, 5};
  std::optional<v1::Snapshot> d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->record().layers_size(), 1);
  EXPECT_EQ(d->record().layers(0).full_name(), "l1");
  EXPECT_EQ(d->session().session_id(), "s");
  EXPECT_EQ(d->record().metadata().model_name(), "Net");
  EXPECT_EQ(d->record().warnings_size(), 1);
  EXPECT_EQ(d->history_size(), 0);  // No history entry changed after 5.
  // A viewer at the current version lacks nothing but the always-complete parts.
  d = Delta(v, 9);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->record().layers_size(), 0);
}

TEST(BuildWatchDelta, NewEntriesAfterOldOnesAreAppendedBeforeThemAFullIsNeeded) {
  TestView v = MakeView(3, 2);
  v.layer_born = {1, 1, 6};
  v.layer_changed = {1, 1, 6};
  v.history_born = {1, 1, 6};
  v.history_changed = {1, 1, 6};
  std::optional<v1::Snapshot> d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->record().layers_size(), 1);
  EXPECT_EQ(d->record().layers(0).full_name(), "l2");
  ASSERT_EQ(d->history_size(), 1);
  EXPECT_FALSE(d->history(0).append());  // New to the viewer: whole.
  EXPECT_EQ(d->history(0).steps_size(), 2);

  // A layer new since the base before one the viewer holds: merging by name would misorder it.
  v.layer_born = {1, 6, 1};
  EXPECT_FALSE(Delta(v, 5).has_value());
  v.layer_born = {1, 1, 6};
  v.history_born = {6, 1, 1};
  EXPECT_FALSE(Delta(v, 5).has_value());
}

TEST(BuildWatchDelta, AHistoryAppendCarriesThePointsChangedAfterTheBaseAndThoseAfterThem) {
  TestView v = MakeView(2, 5);
  v.history_changed = {7, 1};
  v.history_point_changed[0] = {1, 2, 6, 3, 7};  // Step 2 changed at 6; 3 was not, 4 is new.
  std::optional<v1::Snapshot> d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->history_size(), 1);
  const v1::LayerHistory& h = d->history(0);
  EXPECT_EQ(h.full_name(), "l0");
  EXPECT_TRUE(h.append());
  EXPECT_EQ(h.thin_before_step(), 0u);
  EXPECT_EQ(Steps(h), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(h.latency_ms_size(), 3);
  EXPECT_EQ(h.output_std_size(), 3);
  EXPECT_EQ(h.grad_norm_size(), 3);
  EXPECT_EQ(h.non_finite_size(), 3);
  EXPECT_DOUBLE_EQ(h.latency_ms(0), 2.0);
}

TEST(BuildWatchDelta, ALayerChangedWithoutAHistoryPointSendsNoHistory) {
  TestView v = MakeView(1, 3);
  v.layer_changed = {8};
  v.history_changed = {8};  // An event for a step out of the history's reach.
  std::optional<v1::Snapshot> d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->record().layers_size(), 1);
  EXPECT_EQ(d->history_size(), 0);
}

TEST(BuildWatchDelta, OneThinningSinceTheBaseIsReplayedMoreSendTheWholeHistory) {
  TestView v = MakeView(1, 4);
  v.history_changed = {8};
  v.history_point_changed[0] = {1, 1, 1, 8};
  v.history_thinned = {6};
  v.history_thinned_before = {3};
  v.history_thin_boundary = {2};
  // Thinned once after 5 (at 6; the one before, at 3, the viewer has seen): replayed.
  std::optional<v1::Snapshot> d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->history_size(), 1);
  EXPECT_TRUE(d->history(0).append());
  EXPECT_EQ(d->history(0).thin_before_step(), 2u);
  EXPECT_EQ(Steps(d->history(0)), (std::vector<uint64_t>{3}));

  // Even with no point changed, the thinning itself must reach the viewer.
  v.history_point_changed[0] = {1, 1, 1, 1};
  d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->history_size(), 1);
  EXPECT_TRUE(d->history(0).append());
  EXPECT_EQ(d->history(0).thin_before_step(), 2u);
  EXPECT_EQ(d->history(0).steps_size(), 0);

  // Thinned twice since the base (at 3 and 6, the viewer at 2): its copy cannot be continued.
  d = Delta(v, 2);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->history_size(), 1);
  EXPECT_FALSE(d->history(0).append());
  EXPECT_EQ(d->history(0).thin_before_step(), 0u);
  EXPECT_EQ(d->history(0).steps_size(), 4);
}

TEST(BuildWatchDelta, AnEntryWithoutItsVersionsIsSentWhole) {
  TestView v = MakeView(2, 3);
  v.history_changed = {8, 8};
  v.history_thinned.resize(1);  // Entry 1 has no thinning version: assume the worst.
  v.history_point_changed.resize(1);
  std::optional<v1::Snapshot> d = Delta(v, 5);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->history_size(), 1);  // Entry 0: changed, but no point after 5.
  EXPECT_EQ(d->history(0).full_name(), "l1");
  EXPECT_FALSE(d->history(0).append());
}

// With a real Session: whatever happened between two views, the older state plus the delta is
// the newer state.
TEST(BuildWatchDelta, AppliedToTheOldStateGivesTheNewOne) {
  SessionLimits limits;
  limits.history_steps = 8;  // Thinned along the way.
  protocol::Hello hello;
  hello.protocol_version = 1;
  hello.identity.model_name = "Net";
  Session s("s-1", hello, {}, absl::FromUnixSeconds(1), limits, {});
  std::vector<protocol::LayerDecl> table;
  for (int i = 0; i < 3; ++i) {
    protocol::LayerDecl& d = table.emplace_back();
    d.id = static_cast<uint32_t>(i);
    d.info.name = absl::StrCat("l", i);
    d.info.type = "Linear";
    d.info.full_name = absl::StrCat("net.l", i);
  }
  ASSERT_TRUE(s.DeclareLayers(table).ok());
  auto step = [&](uint32_t layer, uint64_t at) {
    v1::EventBatch b;
    v1::ForwardEvent* f = b.add_forward();
    f->set_layer_id(layer);
    f->set_step(at);
    f->set_latency_ms(0.1 * (layer + 1) + 0.001 * static_cast<double>(at));
    ASSERT_EQ(s.AddBatchBytes(b.SerializeAsString()).value().rejected, 0u);
  };
  for (uint64_t at = 0; at < 3; ++at) step(0, at);

  protocol::WatchState viewer;
  v1::WatchUpdate first;
  Session::WatchView before = s.GetWatchView();
  protocol::ToProto(before.snapshot, first.mutable_full());
  ASSERT_TRUE(viewer.Apply(first).ok());
  uint64_t at = 3;
  for (int round = 0; round < 12; ++round) {
    // Layer 0 streams 1..3 steps a round (thinned now and then), layer 1 every third round,
    // layer 2 first appears in round 4.
    for (int i = 0; i <= round % 3; ++i) step(0, at++);
    if (round % 3 == 0) step(1, at);
    if (round >= 4) step(2, at);
    const Session::WatchView after = s.GetWatchView();
    v1::Snapshot after_full;
    protocol::ToProto(after.snapshot, &after_full);
    std::optional<v1::Snapshot> d = BuildWatchDelta(after, after_full, before.version);
    ASSERT_TRUE(d.has_value()) << "round " << round;
    v1::WatchUpdate u;
    *u.mutable_delta() = *std::move(d);
    ASSERT_TRUE(viewer.Apply(u).ok()) << "round " << round;
    ASSERT_TRUE(SameProto(viewer.snapshot(), after_full)) << "round " << round;
    before = after;
  }
}

}  // namespace
}  // namespace tracetorch::daemon
