// `tracetorch sessions` and `tracetorch snapshot` over several daemons (`--remote A,B,...`, one
// per node): every daemon is asked at once, and what they answer is shown as one listing.
//
//  - ListSessionsOnDaemons asks each daemon for its sessions, concurrently (one thread per daemon),
//    each call within `deadline`; a daemon that does not answer keeps its error, and the others'
//    answers are kept all the same.
//  - MergeListings puts the sessions that were listed into one ListSessionsResponse, daemon by
//    daemon in the order given (each daemon's own order within), and says which daemon each came
//    from.
//  - FindSessionOnDaemons says which daemon holds a session: an id is looked up on every daemon
//    that answered (ids are unique per daemon; the same id on two daemons is an error that names
//    both); "latest" is the most recently started session over all of them.
//
// Thread-compatible (ListSessionsOnDaemons owns the threads it starts and joins them).
#ifndef TRACETORCH_CLI_FLEET_SESSIONS_H_
#define TRACETORCH_CLI_FLEET_SESSIONS_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service_client/service_client.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::cli {

// What one daemon answered to ListSessions, or why it did not (one line for the user, naming the
// daemon: DescribeRemoteError).
struct DaemonListing {
  std::string address;
  absl::StatusOr<v1::ListSessionsResponse> sessions;
};

// Makes the client of one daemon (ConnectToDaemon in the program; tests inject their own).
using DaemonConnector =
    std::function<absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>>(
        const std::string& address, absl::Duration deadline)>;

// One entry per address, in the order given.
std::vector<DaemonListing> ListSessionsOnDaemons(const std::vector<std::string>& addresses,
                                                 absl::Duration deadline,
                                                 const DaemonConnector& connect);

struct MergedListing {
  v1::ListSessionsResponse sessions;
  std::vector<std::string> daemons;  // daemons[i]: the address sessions(i) was listed by.
  std::vector<std::string> errors;   // One line per daemon that did not answer.
};
MergedListing MergeListings(const std::vector<DaemonListing>& listings);

struct SessionLocation {
  std::string address;
  std::string session_id;
};

// The daemon holding `ref` (an id, or "latest") among those that answered. NotFound when none of
// them has it (the message names the daemons asked and those that did not answer);
// FailedPrecondition when two daemons both list the id.
absl::StatusOr<SessionLocation> FindSessionOnDaemons(const std::vector<DaemonListing>& listings,
                                                     std::string_view ref);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_FLEET_SESSIONS_H_
