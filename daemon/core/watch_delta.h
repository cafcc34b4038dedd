// What a live viewer lacks: given the session's state as a Session::WatchView (its versions) with
// its snapshot in wire form, and the version of the viewer's copy (its base), the WatchUpdate delta
// that brings the copy to the view (service.proto WatchUpdate.delta, daemon/core/watch_hub.h). Pure
// functions of their arguments: no session, no locks, no clock.
//
// A delta holds:
//  - session info, record metadata and warnings (anomalies), always complete;
//  - the record's layers changed (or first seen) after `base`;
//  - the history entries changed after `base`: for a layer the viewer holds and whose history was
//    thinned at most once since `base`, only the points changed after `base` and those after them
//    (LayerHistory.append = true), after thin_before_step when it was thinned once (the viewer
//    replays that thinning first); for a layer new to the viewer, or one thinned twice or more
//    since (its copy can no longer be continued), the whole history (append = false); nothing for
//    a layer whose change reached no history point (an event for a step out of reach), unless a
//    thinning must still reach the viewer.
//
// Thread-compatible (no state).
#ifndef TRACETORCH_DAEMON_CORE_WATCH_DELTA_H_
#define TRACETORCH_DAEMON_CORE_WATCH_DELTA_H_

#include <cstdint>
#include <optional>

#include "daemon/core/session.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// The delta from `base` to `view` (see above), or nullopt when no delta can express the change:
// an entry new since `base` comes before an older one (a viewer merging by name appends new
// entries, so only a full snapshot gives it the right order). The caller decides whether the
// delta is worth sending over the full (WatchHub sends the smaller). `full` is view.snapshot as
// protocol::ToProto (protocol/session_info_proto.h) makes it: its layers and history entries are
// parallel to the view's versions.
std::optional<v1::Snapshot> BuildWatchDelta(const Session::WatchView& view,
                                            const v1::Snapshot& full, uint64_t base);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WATCH_DELTA_H_
