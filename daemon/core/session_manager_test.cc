#include "daemon/core/session_manager.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/testing/test_util.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "trace/atomic_file.h"
#include "trace/json.h"
#include "tracetorch/v1/agent.pb.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;

protocol::Hello MakeHello(const std::string& host = "box", int pid = 10) {
  protocol::Hello h;
  h.protocol_version = 1;
  h.identity.pid = pid;
  h.identity.host = host;
  h.identity.job_id = "job-a";
  return h;
}

void Feed(Session& s, int events) {
  std::vector<protocol::LayerDecl> t(1);
  t[0].id = 0;
  t[0].info.full_name = "fc";
  t[0].info.type = "Linear";
  ASSERT_TRUE(s.DeclareLayers(t).ok());
  v1::EventBatch b;
  for (int i = 0; i < events; ++i) {
    v1::ForwardEvent* e = b.add_forward();
    e->set_layer_id(0);
    e->set_step(static_cast<uint64_t>(i));
    e->set_latency_ms(1.0 + i);
  }
  s.AddBatchBytes(b.SerializeAsString()).value();
}

TEST(MakeSessionId, IsAlwaysASafeFileName) {
  const std::string id = MakeSessionId(0, "../../etc/x", 42, 7);
  EXPECT_EQ(id, "19700101T000000Z-______etc_x-42-7");
  EXPECT_FALSE(absl::StrContains(id, "/"));
  EXPECT_FALSE(absl::StrContains(id, ".."));
  EXPECT_EQ(MakeSessionId(0, "", -1, 1), "19700101T000000Z-host-0-1");
  EXPECT_EQ(MakeSessionId(0, std::string(100, 'a'), 1, 1).size(),
            std::string("19700101T000000Z--1-1").size() + 32);
}

TEST(SessionManager, OpenListSnapshotAndAbort) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  auto opened = (*m)->Open(MakeHello("../../etc/x"), {5, static_cast<int32_t>(getuid()), 0});
  ASSERT_TRUE(opened.ok());
  EXPECT_FALSE(opened->resumed);
  const std::string id = opened->session->id();
  EXPECT_TRUE(absl::StrContains(id, "______etc_x-10-"));
  Feed(*opened->session, 3);

  auto list = (*m)->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state, SessionState::kLive);
  EXPECT_EQ(list[0].events, 3u);
  EXPECT_EQ((*m)->List("other-job").size(), 0u);
  EXPECT_EQ((*m)->List("job-a").size(), 1u);

  auto snap = (*m)->GetSnapshot("latest");
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->session.session_id, id);
  ASSERT_EQ(snap->record.layers.size(), 1u);
  EXPECT_EQ(snap->record.layers[0].forward_count, 3);
  EXPECT_EQ((*m)->GetSnapshot("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*m)->GetSnapshot("../../etc/passwd").status().code(), absl::StatusCode::kNotFound);

  // The connection goes away without End: aborted, and its snapshot is on disk when Release
  // returns.
  (*m)->Release(opened->session, opened->attachment, /*ended=*/false);
  EXPECT_EQ(opened->session->state(), SessionState::kAborted);
  absl::StatusOr<TraceRecord> on_disk = ReadTraceFile((*m)->SnapshotPath(id));
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  ASSERT_EQ(on_disk->layers.size(), 1u);
  EXPECT_EQ(on_disk->layers[0].forward_count, 3);
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/index.json"));
  EXPECT_GE(counters.snapshots_written.load(), 1u);
}

TEST(SessionManager, RejectsUnknownProtocolVersion) {
  DaemonCounters counters;
  auto m = SessionManager::Create({}, &counters);
  ASSERT_TRUE(m.ok());
  protocol::Hello h = MakeHello();
  h.protocol_version = 7;
  EXPECT_EQ((*m)->Open(h, {}).status().code(), absl::StatusCode::kInvalidArgument);
  h.protocol_version = 0;  // PROTOCOL_VERSION_UNSPECIFIED
  EXPECT_EQ((*m)->Open(h, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SessionManager, LiveSessionLimit) {
  DaemonCounters counters;
  SessionManagerOptions o;
  o.max_live_sessions = 2;
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok());
  auto a = (*m)->Open(MakeHello(), {});
  auto b = (*m)->Open(MakeHello(), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->session->id(), b->session->id());
  auto c = (*m)->Open(MakeHello(), {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(counters.limit_hits.load(), 1u);
  a->session->Finish(protocol::End(), absl::Now());
  (*m)->Release(a->session, a->attachment, /*ended=*/true);
  EXPECT_TRUE((*m)->Open(MakeHello(), {}).ok());
}

TEST(SessionManager, EvictsEndedSessionsToDiskAndStillServesThem) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.max_sessions_in_memory = 1;
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok());
  auto a = (*m)->Open(MakeHello("a"), {});
  ASSERT_TRUE(a.ok());
  Feed(*a->session, 2);
  protocol::End end;
  a->session->Finish(end, absl::Now());
  (*m)->Release(a->session, a->attachment, /*ended=*/true);
  auto b = (*m)->Open(MakeHello("b"), {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(counters.sessions_evicted.load(), 1u);
  EXPECT_EQ((*m)->totals().in_memory, 1u);
  auto list = (*m)->List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].state, SessionState::kFinished);
  auto snap = (*m)->GetSnapshot(a->session->id());
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->record.layers[0].forward_count, 2);
  EXPECT_TRUE(snap->history.empty());  // History lives in memory only.
}

TEST(SessionManager, RestartListsPastSessionsAndResumesALiveOne) {
  TempDir dir{"tracetorchd_sm"};
  std::string id;
  {
    DaemonCounters counters;
    SessionManagerOptions o;
    o.data_dir = dir.path();
    auto m = SessionManager::Create(o, &counters);
    ASSERT_TRUE(m.ok());
    auto a = (*m)->Open(MakeHello(), {1, 1000, 1000});
    ASSERT_TRUE(a.ok());
    id = a->session->id();
    Feed(*a->session, 4);
    (*m)->Shutdown();  // Daemon stops while the agent is still running.
  }
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  auto list = (*m)->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].session_id, id);
  EXPECT_EQ(list[0].state, SessionState::kAborted);

  protocol::Hello resume = MakeHello();
  resume.resume_session_id = id;
  resume.sent_events = 10;  // 4 arrived before the restart; 6 were lost in flight.
  EXPECT_EQ((*m)->Open(resume, {1, 2000, 2000}).status().code(),
            absl::StatusCode::kPermissionDenied);  // Another uid.
  auto r = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->session->id(), id);
  Feed(*r->session, 2);
  const protocol::SessionInfo info = r->session->Info();
  EXPECT_EQ(info.state, SessionState::kLive);
  EXPECT_EQ(info.events, 6u);
  EXPECT_EQ(info.dropped_events, 6u);
  const TraceRecord rec = r->session->Record();
  ASSERT_EQ(rec.layers.size(), 1u);
  EXPECT_EQ(rec.layers[0].forward_count, 6);  // 4 from before the restart + 2.
  EXPECT_EQ(rec.layers[0].latency_ms_max, 4.0);
}

TEST(SessionManager, StaleAttachmentDoesNotAbortAResumedSession) {
  DaemonCounters counters;
  auto m = SessionManager::Create({}, &counters);
  ASSERT_TRUE(m.ok());
  auto a = (*m)->Open(MakeHello(), {});
  ASSERT_TRUE(a.ok());
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = a->session->id();
  auto b = (*m)->Open(resume, {});  // The agent reconnected before the old socket was noticed.
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->resumed);
  (*m)->Release(a->session, a->attachment, /*ended=*/false);
  EXPECT_EQ(b->session->state(), SessionState::kLive);
}

TEST(SessionManager, FinishedSessionIsNotResumed) {
  DaemonCounters counters;
  auto m = SessionManager::Create({}, &counters);
  ASSERT_TRUE(m.ok());
  auto a = (*m)->Open(MakeHello(), {});
  a->session->Finish(protocol::End(), absl::Now());
  (*m)->Release(a->session, a->attachment, true);
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = a->session->id();
  auto b = (*m)->Open(resume, {});
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->resumed);
  EXPECT_NE(b->session->id(), a->session->id());
}

TEST(SessionManager, BadIndexIsAClearError) {
  TempDir dir{"tracetorchd_sm"};
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/index.json", "{not json").ok());
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(m.status().message(), "index.json"));
}

// The session ids DATA_DIR/index.json lists, or {"missing"} when there is none.
std::vector<std::string> IndexIds(const std::string& data_dir) {
  absl::StatusOr<std::string> text = ReadFileToString(data_dir + "/index.json");
  if (!text.ok()) return {"missing"};
  v1::SessionIndex index;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(*text, &index).ok());
  std::vector<std::string> ids;
  for (const auto& e : index.sessions()) ids.push_back(e.info().session_id());
  return ids;
}

size_t SnapshotFiles(const std::string& data_dir) {
  size_t n = 0;
  for (const auto& f : std::filesystem::directory_iterator(data_dir + "/sessions")) {
    n += f.path().extension() == ".json" ? 1 : 0;
  }
  return n;
}

// A session opened, fed `events` events (none: a Hello alone) and ended.
std::string OpenFeedEnd(SessionManager& m, int events, absl::Time now, int32_t uid = -1) {
  auto s = m.Open(MakeHello(), {1, uid, uid});
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return "";
  if (events > 0) Feed(*s->session, events);
  s->session->Finish(protocol::End(), now);
  m.Release(s->session, s->attachment, /*ended=*/true);
  return s->session->id();
}

// Hello floods leave no history: no snapshot file, no index entry, and such sessions are the
// first evicted from memory, entirely (a real session stays listed).
TEST(SessionManager, SessionsWithoutEventsAreNotHistory) {
  TempDir dir{"tracetorchd_sm"};
  std::string real;
  {
    DaemonCounters counters;
    SessionManagerOptions o;
    o.data_dir = dir.path();
    o.max_sessions_in_memory = 2;
    auto m = SessionManager::Create(o, &counters);
    ASSERT_TRUE(m.ok()) << m.status();
    real = OpenFeedEnd(**m, 3, absl::Now());
    for (int i = 0; i < 5; ++i) OpenFeedEnd(**m, 0, absl::Now());
    auto aborted = (*m)->Open(MakeHello(), {});  // A Hello, then the connection drops.
    ASSERT_TRUE(aborted.ok());
    (*m)->Release(aborted->session, aborted->attachment, /*ended=*/false);
    const auto list = (*m)->List();
    ASSERT_LE(list.size(), 2u);
    EXPECT_EQ(list[0].session_id, real);
    EXPECT_EQ(counters.sessions_evicted.load(), 0u);  // The real one was never pushed out.
    (*m)->Shutdown();
    EXPECT_EQ(IndexIds(dir.path()), std::vector<std::string>{real});
    EXPECT_EQ(SnapshotFiles(dir.path()), 1u);
  }
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->List().size(), 1u);
  EXPECT_EQ((*m)->List()[0].session_id, real);
}

// Sessions ending in a burst rewrite the index once per interval, not once each.
TEST(SessionManager, TheIndexIsWrittenAtMostOncePerInterval) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  absl::Time now = absl::FromUnixSeconds(1700000000);
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.index_interval = absl::Seconds(10);
  auto m = SessionManager::Create(o, &counters, [&now] { return now; });
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string a = OpenFeedEnd(**m, 1, now);
  EXPECT_EQ(IndexIds(dir.path()), std::vector<std::string>{a});  // The first write is due.
  now += absl::Seconds(1);
  const std::string b = OpenFeedEnd(**m, 1, now);
  const std::string c = OpenFeedEnd(**m, 1, now);
  (*m)->FlushIndexIfDue();
  EXPECT_EQ(IndexIds(dir.path()), std::vector<std::string>{a});  // Not due yet.
  now += absl::Seconds(9);
  (*m)->FlushIndexIfDue();
  EXPECT_EQ(IndexIds(dir.path()), (std::vector<std::string>{a, b, c}));
  EXPECT_EQ(SnapshotFiles(dir.path()), 3u);  // Snapshots are not delayed.
}

TEST(SessionManager, RetentionKeepsTheNewestEndedSessions) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.retain_sessions = 2;
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string first = OpenFeedEnd(**m, 1, absl::Now());
  auto live = (*m)->Open(MakeHello(), {});  // Live sessions are never pruned.
  ASSERT_TRUE(live.ok());
  Feed(*live->session, 1);
  const std::string second = OpenFeedEnd(**m, 1, absl::Now());
  const std::string third = OpenFeedEnd(**m, 1, absl::Now());
  std::vector<std::string> ids;
  for (const auto& s : (*m)->List()) ids.push_back(s.session_id);
  EXPECT_EQ(ids, (std::vector<std::string>{live->session->id(), second, third}));
  EXPECT_FALSE(std::filesystem::exists((*m)->SnapshotPath(first)));
  EXPECT_TRUE(std::filesystem::exists((*m)->SnapshotPath(second)));
  EXPECT_EQ((*m)->GetSnapshot(first).status().code(), absl::StatusCode::kNotFound);
}

TEST(SessionManager, RetentionForgetsSessionsEndedLongerAgoThanItsAge) {
  TempDir dir{"tracetorchd_sm"};
  absl::Time now = absl::FromUnixSeconds(1700000000);
  std::string old_one;
  std::string young;
  {
    DaemonCounters counters;
    SessionManagerOptions o;
    o.data_dir = dir.path();
    o.retain_for = absl::Hours(24);
    auto m = SessionManager::Create(o, &counters, [&now] { return now; });
    ASSERT_TRUE(m.ok()) << m.status();
    old_one = OpenFeedEnd(**m, 1, now);
    now += absl::Hours(20);
    young = OpenFeedEnd(**m, 1, now);
    now += absl::Hours(5);  // old_one ended 25 h ago, young 5 h ago.
    (*m)->FlushIndexIfDue();
    ASSERT_EQ((*m)->List().size(), 1u);
    EXPECT_EQ((*m)->List()[0].session_id, young);
    EXPECT_FALSE(std::filesystem::exists((*m)->SnapshotPath(old_one)));
    (*m)->Shutdown();
  }
  // At startup too: a daemon that was down for two days forgets young as it loads the index.
  now += absl::Hours(48);
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.retain_for = absl::Hours(24);
  auto m = SessionManager::Create(o, &counters, [&now] { return now; });
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->List().empty());
  EXPECT_EQ(SnapshotFiles(dir.path()), 0u);
}

// The daemon died before it indexed a session: the agent's resume continues it under its id, and
// what the agent had sent to the dead daemon counts as dropped, so events + dropped == sent.
// The id of a session opened (and never persisted: no events) by `uid` on a manager of `dir` that
// then goes away, as a daemon killed before its first snapshot.
std::string UnpersistedId(const std::string& dir, int32_t uid, int pid = 10) {
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir;
  auto m = SessionManager::Create(o, &counters);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  auto s = (*m)->Open(MakeHello("box", pid), {1, uid, uid});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->session->id() : "";
}

TEST(SessionManager, AResumeOfAnUnknownSessionKeepsItsIdAndCountsTheGap) {
  TempDir dir{"tracetorchd_sm"};
  const std::string id = UnpersistedId(dir.path(), 1000);
  const std::string other_id = UnpersistedId(dir.path(), 1000, /*pid=*/11);
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->List().empty());
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = id;
  resume.sent_events = 7;
  auto r = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->session->id(), id);
  Feed(*r->session, 3);
  const protocol::SessionInfo info = r->session->Info();
  EXPECT_EQ(info.events, 3u);
  EXPECT_EQ(info.dropped_events, 7u);  // 10 sent in all: 3 received + 7 lost with the daemon.

  // Not for an id that is no session id, nor over a snapshot already on disk.
  resume.resume_session_id = "../../etc/passwd";
  auto bad = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->resumed);
  EXPECT_NE(bad->session->id(), "../../etc/passwd");
  ASSERT_TRUE(WriteFileAtomic((*m)->SnapshotPath(other_id), "{}").ok());
  resume.resume_session_id = other_id;
  auto taken = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(taken->resumed);
  EXPECT_NE(taken->session->id(), other_id);
}

// A session id the daemon never persisted is continued only by the uid it was made for: another
// uid's resume (or one with an id no daemon of this data directory made) starts a fresh session,
// and the owner still continues its own afterwards.
TEST(SessionManager, AnUnpersistedSessionIdIsNotTakenOverByAnotherUid) {
  TempDir dir{"tracetorchd_sm"};
  const std::string id = UnpersistedId(dir.path(), 1000);
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = id;
  resume.sent_events = 5;
  auto thief = (*m)->Open(resume, {2, 2000, 2000});
  ASSERT_TRUE(thief.ok()) << thief.status();
  EXPECT_FALSE(thief->resumed);
  EXPECT_NE(thief->session->id(), id);
  EXPECT_EQ(thief->session->peer_uid(), 2000);
  EXPECT_EQ(thief->session->Info().dropped_events, 0u);  // The owner's counts are not its.
  // An id without a valid tag (forged, or an older daemon's) is nobody's to continue.
  protocol::Hello forged = resume;
  forged.resume_session_id = "20260101T000000Z-box-10-3";
  auto f = (*m)->Open(forged, {1, 1000, 1000});
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->resumed);
  EXPECT_NE(f->session->id(), "20260101T000000Z-box-10-3");
  // The owner continues its session under its id.
  auto owner = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_TRUE(owner->resumed);
  EXPECT_EQ(owner->session->id(), id);
  // Now known: another uid is refused outright.
  EXPECT_EQ((*m)->Open(resume, {2, 2000, 2000}).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(SessionManager, LiveSessionsPerUidAreCapped) {
  DaemonCounters counters;
  SessionManagerOptions o;
  o.max_live_sessions_per_uid = 2;
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok());
  auto a = (*m)->Open(MakeHello(), {1, 1000, 1000});
  auto b = (*m)->Open(MakeHello(), {1, 1000, 1000});
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<SessionManager::Opened> c = (*m)->Open(MakeHello(), {1, 1000, 1000});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "--max-sessions-per-uid")) << c.status();
  EXPECT_EQ(counters.limit_hits.load(), 1u);
  EXPECT_TRUE((*m)->Open(MakeHello(), {2, 2000, 2000}).ok());  // Another uid is not held back.
  // A resume is not a new session; an ended session frees its slot.
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = a->session->id();
  EXPECT_TRUE((*m)->Open(resume, {1, 1000, 1000}).ok());
  b->session->Finish(protocol::End(), absl::Now());
  (*m)->Release(b->session, b->attachment, /*ended=*/true);
  EXPECT_TRUE((*m)->Open(MakeHello(), {1, 1000, 1000}).ok());

  o.max_live_sessions_per_uid = 0;  // No limit but max_live_sessions.
  auto unlimited = SessionManager::Create(o, &counters);
  ASSERT_TRUE(unlimited.ok());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE((*unlimited)->Open(MakeHello(), {1, 1000, 1000}).ok());
}

// A daemon killed after a snapshot and a later index write: the index counts more events than
// the snapshot holds. The resume continues from the snapshot's own accounting, so what the trace
// holds and what it counts agree, and the rest of what the agent sent is counted as lost.
TEST(SessionManager, AResumeTakesItsCountsFromTheSnapshotNotTheIndex) {
  TempDir dir{"tracetorchd_sm"};
  std::string id;
  {
    DaemonCounters counters;
    SessionManagerOptions o;
    o.data_dir = dir.path();
    o.index_interval = absl::ZeroDuration();
    auto m = SessionManager::Create(o, &counters);
    ASSERT_TRUE(m.ok());
    auto a = (*m)->Open(MakeHello(), {1, 1000, 1000});
    ASSERT_TRUE(a.ok());
    id = a->session->id();
    Feed(*a->session, 10);
    (*m)->WriteDueSnapshots();  // Snapshot: 10 events.
    Feed(*a->session, 5);
    (*m)->Release(a->session, a->attachment, /*ended=*/false);  // Snapshot and index: 15.
  }
  // Put the 10-event snapshot back under the 15-event index: what a kill between the two leaves.
  {
    Session s(id, MakeHello(), {1, 1000, 1000}, absl::Now(), {}, {});
    Feed(s, 10);
    ASSERT_TRUE(s.WriteSnapshot(dir.path() + "/sessions/" + id + ".json", true).ok());
  }
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->List().size(), 1u);
  EXPECT_EQ((*m)->List()[0].events, 15u);  // The index's figure, until resumed.
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = id;
  resume.sent_events = 20;
  auto r = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->resumed);
  const protocol::SessionInfo info = r->session->Info();
  EXPECT_EQ(info.events, 10u);
  EXPECT_EQ(info.dropped_events, 10u);
  const TraceRecord rec = r->session->Record();
  ASSERT_EQ(rec.layers.size(), 1u);
  EXPECT_EQ(rec.layers[0].forward_count, 10);
  EXPECT_EQ(rec.metadata.FindExtra(kSnapshotAccountingKey), nullptr);  // Not part of the trace.
}

// Killed after the first snapshot, before any index write: the snapshot alone identifies the
// session, which continues under its id from the snapshot's counts (not as a new session).
TEST(SessionManager, ASessionOnDiskButNotInTheIndexIsResumedFromItsSnapshot) {
  TempDir dir{"tracetorchd_sm"};
  std::string id;
  {
    DaemonCounters counters;
    SessionManagerOptions o;
    o.data_dir = dir.path();
    auto m = SessionManager::Create(o, &counters);
    ASSERT_TRUE(m.ok());
    auto a = (*m)->Open(MakeHello(), {1, 1000, 1000});
    ASSERT_TRUE(a.ok());
    id = a->session->id();
    Feed(*a->session, 4);
    (*m)->WriteDueSnapshots();
  }
  std::filesystem::remove(dir.path() + "/index.json");
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->List().empty());
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = id;
  resume.sent_events = 9;
  EXPECT_EQ((*m)->Open(resume, {1, 2000, 2000}).status().code(),
            absl::StatusCode::kPermissionDenied);  // Another uid.
  auto r = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->session->id(), id);
  Feed(*r->session, 1);
  EXPECT_EQ(r->session->Info().events, 5u);
  EXPECT_EQ(r->session->Info().dropped_events, 5u);  // 9 sent, 4 durable.
  EXPECT_EQ(r->session->Record().layers[0].forward_count, 5);
}

// Listed in the index but no snapshot file (the index was written first): nothing the index counts
// is in a file, so all the agent had sent is lost, none of it counted as events.
TEST(SessionManager, ASessionIndexedWithoutASnapshotResumesFromZero) {
  TempDir dir{"tracetorchd_sm"};
  std::string id;
  {
    DaemonCounters counters;
    SessionManagerOptions o;
    o.data_dir = dir.path();
    auto m = SessionManager::Create(o, &counters);
    ASSERT_TRUE(m.ok());
    auto a = (*m)->Open(MakeHello(), {1, 1000, 1000});
    ASSERT_TRUE(a.ok());
    id = a->session->id();
    Feed(*a->session, 4);
    (*m)->Shutdown();
  }
  std::filesystem::remove(dir.path() + "/sessions/" + id + ".json");
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  protocol::Hello resume = MakeHello();
  resume.resume_session_id = id;
  resume.sent_events = 6;
  auto r = (*m)->Open(resume, {1, 1000, 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->session->Info().events, 0u);
  EXPECT_EQ(r->session->Info().dropped_events, 6u);
}

// One uid ending session after session evicts and prunes its own, never another uid's few.
TEST(SessionManager, OneUidCannotEvictOrPruneAnothersSessions) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.max_sessions_in_memory = 6;
  o.retain_sessions = 12;
  o.max_index_entries = 10;
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> quiet;
  for (int i = 0; i < 3; ++i) quiet.push_back(OpenFeedEnd(**m, 1, absl::Now(), /*uid=*/1000));
  for (int i = 0; i < 40; ++i) OpenFeedEnd(**m, 1, absl::Now(), /*uid=*/2000);
  for (const std::string& id : quiet) {
    auto found = (*m)->Find(id);
    ASSERT_TRUE(found.ok()) << id;
    EXPECT_NE(found->session, nullptr) << id << " was evicted from memory";
    EXPECT_TRUE(std::filesystem::exists((*m)->SnapshotPath(id))) << id;
  }
  size_t flooder = 0;
  for (const auto& s : (*m)->List()) flooder += s.peer_uid == 2000 ? 1 : 0;
  EXPECT_EQ(flooder, 7u);  // The index holds 10: the quiet uid's 3 and the flooder's newest 7.
  EXPECT_GE(counters.sessions_evicted.load(), 1u);

  // Alone, a uid is limited oldest-first as before.
  TempDir dir2{"tracetorchd_sm"};
  o.data_dir = dir2.path();
  auto alone = SessionManager::Create(o, &counters);
  ASSERT_TRUE(alone.ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(OpenFeedEnd(**alone, 1, absl::Now(), 1000));
  std::vector<std::string> listed;
  for (const auto& s : (*alone)->List()) listed.push_back(s.session_id);
  EXPECT_EQ(listed, std::vector<std::string>(ids.begin() + 2, ids.end()));
}

TEST(SessionManager, InvalidOptions) {
  DaemonCounters counters;
  SessionManagerOptions o;
  o.thresholds.variance_spike_ratio = 0.5;
  EXPECT_EQ(SessionManager::Create(o, &counters).status().code(),
            absl::StatusCode::kInvalidArgument);
  SessionManagerOptions p;
  p.session_limits.history_steps = 1;
  EXPECT_EQ(SessionManager::Create(p, &counters).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::daemon

namespace tracetorch::daemon {
namespace {

// The sessions folder replaced by a file: every snapshot write fails (NotADirectory, then the
// folder cannot be made), whoever runs the test.
void BreakSessionsFolder(const std::string& data_dir) {
  std::filesystem::remove_all(data_dir + "/sessions");
  ASSERT_TRUE(WriteFileAtomic(data_dir + "/sessions", "not a folder").ok());
}

// Snapshot writes that fail: the sessions stay in memory whatever the limit, readable, never
// acknowledged durable; every failure is counted; retries wait out a back-off and stop at the
// first failure; once the folder is writable again one retry catches everything up.
TEST(SessionManagerDisk, SessionsThatCannotBeWrittenStayInMemoryUntilARetryWorks) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.max_sessions_in_memory = 1;
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  auto m = SessionManager::Create(o, &counters, [&now] { return now; });
  ASSERT_TRUE(m.ok()) << m.status();
  BreakSessionsFolder(dir.path());
  std::vector<std::shared_ptr<Session>> ended;
  for (const char* host : {"a", "b"}) {
    auto s = (*m)->Open(MakeHello(host), {});
    ASSERT_TRUE(s.ok());
    Feed(*s->session, 3);
    s->session->Finish(protocol::End(), now);
    (*m)->Release(s->session, s->attachment, /*ended=*/true);  // Written at once: fails.
    ended.push_back(s->session);
  }
  EXPECT_EQ(counters.snapshot_errors.load(), 2u);
  EXPECT_EQ((*m)->totals().not_durable, 2u);
  EXPECT_EQ((*m)->totals().in_memory, 2u);  // Over the limit of 1: nothing else holds them.
  EXPECT_EQ(counters.sessions_evicted.load(), 0u);
  for (const auto& s : ended) {
    EXPECT_EQ(s->durable(), Session::Durable{}) << "acknowledged what is not on disk";
    auto snap = (*m)->GetSnapshot(s->id());
    ASSERT_TRUE(snap.ok()) << snap.status();
    EXPECT_EQ(snap->session.events, 3u);
  }

  // The back-off: nothing is tried before it passes, then one failure stops the pass.
  EXPECT_FALSE((*m)->RetryDue());
  (*m)->WriteDueSnapshots();
  EXPECT_EQ(counters.snapshot_errors.load(), 2u);
  now += absl::Seconds(1);
  EXPECT_TRUE((*m)->RetryDue());
  (*m)->WriteDueSnapshots();
  EXPECT_EQ(counters.snapshot_errors.load(), 3u);
  EXPECT_FALSE((*m)->RetryDue());

  // Writable again: one retry after the back-off catches both up, and the memory limit holds.
  ASSERT_TRUE(std::filesystem::remove(dir.path() + "/sessions"));
  now += absl::Seconds(2);
  ASSERT_TRUE((*m)->RetryDue());
  (*m)->WriteDueSnapshots();
  EXPECT_EQ(counters.snapshot_errors.load(), 3u);
  EXPECT_EQ((*m)->totals().not_durable, 0u);
  EXPECT_FALSE((*m)->RetryDue());
  for (const auto& s : ended) {
    EXPECT_EQ(s->durable().events, 3u);
    EXPECT_TRUE(ReadTraceFile((*m)->SnapshotPath(s->id())).ok());
  }
  EXPECT_EQ((*m)->totals().in_memory, 1u);
  EXPECT_EQ(counters.sessions_evicted.load(), 1u);
}

// A snapshot file, and the index, removed while the session is in memory and unchanged: written
// again by the next pass.
TEST(SessionManagerDisk, FilesRemovedUnderTheManagerAreWrittenAgain) {
  TempDir dir{"tracetorchd_sm"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.data_dir = dir.path();
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  auto m = SessionManager::Create(o, &counters, [&now] { return now; });
  ASSERT_TRUE(m.ok()) << m.status();
  auto s = (*m)->Open(MakeHello(), {});
  ASSERT_TRUE(s.ok());
  Feed(*s->session, 3);
  (*m)->WriteDueSnapshots();
  const std::string path = (*m)->SnapshotPath(s->session->id());
  ASSERT_TRUE(std::filesystem::exists(path));
  ASSERT_TRUE(std::filesystem::exists(dir.path() + "/index.json"));
  std::filesystem::remove_all(dir.path() + "/sessions");
  std::filesystem::remove(dir.path() + "/index.json");
  now += absl::Seconds(5);
  (*m)->WriteDueSnapshots();
  EXPECT_TRUE(ReadTraceFile(path).ok());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/index.json"));
  EXPECT_EQ(counters.snapshot_errors.load(), 0u);
}

}  // namespace
}  // namespace tracetorch::daemon
