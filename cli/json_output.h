// The JSON documents `tracetorch` prints about a daemon (records and diffs are trace/json.h's), all
// written with the one JSON writer (trace/json_writer.h).
//
//  - `watch --remote --json` and `watch --job --json`: one document per line (indent 0, no spaces),
//    the schema in cli/remote_watch.h's file comment:
//      {"type":"update","kind":"full","sequence":3,"newest_event_unix_ns":...,"ended":false,
//       "session":{...},"record":{...},"history":[...]}
//  - `sessions --json` and `baseline list --json`: an array, Python json.dump(indent=2) layout:
//      [
//        {
//          "session_id": "20260101T000000Z-box-17-1",
//          "state": "live",
//          ...
//        }
//      ]
//    A session: session_id, state, pid, host, rank, local_rank, world_size (null when unknown),
//    job_id, model, started (FormatUnixTime), started_unix_ns, ended_unix_ns, events,
//    dropped_events, rejected_events. A baseline: name, model, layers, has_history, source,
//    created (FormatUnixTime), created_unix_ns.
//
// Strings are escaped to ASCII, so a crafted name cannot reach the terminal raw. Non-finite values
// in a history are null. No trailing newline.
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_CLI_JSON_OUTPUT_H_
#define TRACETORCH_CLI_JSON_OUTPUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/watch_state.h"
#include "tracetorch/v1/service.pb.h"
#include "view/filter.h"

namespace tracetorch::cli {

// The "update" (a session) or "job" document for `update`, showing `state` as it is after the
// update was applied; the record and the history are cut to the layers `filter` selects.
std::string WatchUpdateToJson(const v1::WatchUpdate& update, const protocol::WatchState& state,
                              const view::LayerFilter& filter);

// One daemon of a job watched over several daemons (cli/multi_job_watch.h).
struct DaemonLinkJson {
  std::string address;
  std::string status;      // "connecting", "connected", "no_ranks", "away", "ended", "failed".
  std::string message;     // Why it is away or failed; "" otherwise.
  std::vector<int> ranks;  // The ranks its latest job state holds.
};

// `watch --job JOB --remote A,B,... --json`: the job merged over several daemons, one line:
//   {"type":"job","kind":"merged","sequence":N,"ended":BOOL,"job_id":"...",
//    "daemons":[{"address","status","message","ranks":[N...]}],
//    "ranks":[{"daemon":ADDR,"session":SESSION,"record":RECORD,"history":[...]}],
//    "divergences":[ANOMALY...],"flagged_ranks":[N...]}
// `rank_daemons[i]` is the address rank i of `job` came from; flagged_ranks are the ranks the
// divergences name, ascending.
std::string MergedJobToJson(const v1::JobSnapshot& job,
                            const std::vector<std::string>& rank_daemons,
                            const std::vector<DaemonLinkJson>& daemons, uint64_t sequence,
                            bool ended, const view::LayerFilter& filter);

// {"type":"status","status":STATUS,"message":MESSAGE}: "connected", "reconnecting",
// "interrupted".
std::string WatchStatusToJson(std::string_view status, std::string_view message);

// `sessions --json`: an array of session objects. With `daemons` (several daemons, --remote A,B):
// session i's object starts with "daemon": daemons[i], the address it was listed by.
std::string SessionsToJson(const v1::ListSessionsResponse& list,
                           const std::vector<std::string>& daemons = {});

// `baseline list --json`.
std::string BaselinesToJson(const v1::ListBaselinesResponse& list);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_JSON_OUTPUT_H_
