// The daemon's names for what it knows of a session's process beyond its event stream — where the
// flight recorder says it is, whether it is stalled, how it ended — and of the session's state.
// The types are protocol/session_info.h's plain values: the FlightMonitor
// (daemon/core/flight_monitor.h) fills a FlightStatus, a Session carries the latest
// (Session::SetFlight) and reports it in its SessionInfo.
#ifndef TRACETORCH_DAEMON_CORE_FLIGHT_STATUS_H_
#define TRACETORCH_DAEMON_CORE_FLIGHT_STATUS_H_

#include "protocol/session_info.h"

namespace tracetorch::daemon {

using protocol::FlightStatus;
using protocol::ProcessExit;
using protocol::SessionState;

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FLIGHT_STATUS_H_
