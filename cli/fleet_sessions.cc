#include "cli/fleet_sessions.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/daemon_connect.h"

namespace tracetorch::cli {

std::vector<DaemonListing> ListSessionsOnDaemons(const std::vector<std::string>& addresses,
                                                 absl::Duration deadline,
                                                 const DaemonConnector& connect) {
  std::vector<DaemonListing> out(addresses.size());
  std::vector<std::thread> askers;
  askers.reserve(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    out[i].address = addresses[i];
    // Each thread writes only its own entry.
    askers.emplace_back([&, i] {
      DaemonListing& listing = out[i];
      auto rpc = connect(listing.address, deadline);
      if (!rpc.ok()) {
        listing.sessions = absl::Status(rpc.status().code(), rpc.status().message());
        return;
      }
      absl::StatusOr<v1::ListSessionsResponse> list = (*rpc)->ListSessions();
      if (list.ok()) {
        listing.sessions = *std::move(list);
      } else {
        listing.sessions =
            absl::Status(list.status().code(), DescribeRemoteError(list.status(), listing.address));
      }
    });
  }
  for (std::thread& t : askers) t.join();
  return out;
}

MergedListing MergeListings(const std::vector<DaemonListing>& listings) {
  MergedListing merged;
  for (const DaemonListing& listing : listings) {
    if (!listing.sessions.ok()) {
      merged.errors.emplace_back(listing.sessions.status().message());
      continue;
    }
    for (const v1::SessionInfo& s : listing.sessions->sessions()) {
      *merged.sessions.add_sessions() = s;
      merged.daemons.push_back(listing.address);
    }
  }
  return merged;
}

absl::StatusOr<SessionLocation> FindSessionOnDaemons(const std::vector<DaemonListing>& listings,
                                                     std::string_view ref) {
  const bool latest = ref == "latest";
  std::vector<SessionLocation> found;
  int64_t latest_start = INT64_MIN;
  std::vector<std::string> asked;
  std::vector<std::string> silent;
  for (const DaemonListing& listing : listings) {
    if (!listing.sessions.ok()) {
      silent.emplace_back(listing.sessions.status().message());
      continue;
    }
    asked.push_back(listing.address);
    for (const v1::SessionInfo& s : listing.sessions->sessions()) {
      if (latest) {
        if (found.empty() || s.started_unix_ns() > latest_start) {
          found.assign(1, SessionLocation{listing.address, s.session_id()});
          latest_start = s.started_unix_ns();
        }
      } else if (s.session_id() == ref) {
        found.push_back(SessionLocation{listing.address, s.session_id()});
      }
    }
  }
  if (found.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("session '", std::string(ref), "' is on two daemons, ", found[0].address,
                     " and ", found[1].address, ": ask one of them (--remote ADDR)"));
  }
  if (found.size() == 1) return found[0];
  std::string message =
      latest ? std::string("no daemon has sessions yet")
             : absl::StrCat("unknown session '", std::string(ref), "' (see 'tracetorch sessions')");
  if (!asked.empty()) absl::StrAppend(&message, " on ", absl::StrJoin(asked, ", "));
  if (!silent.empty()) {
    absl::StrAppend(&message, "; ", silent.size() == 1 ? "a daemon" : "daemons",
                    " did not answer: ", absl::StrJoin(silent, "; "));
  }
  return absl::NotFoundError(message);
}

}  // namespace tracetorch::cli
