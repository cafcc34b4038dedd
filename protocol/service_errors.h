// How a TraceService error says that the daemon itself answered it (the daemon is reachable; its
// answer is the error), as opposed to a call that never reached it: every error the daemon
// returns carries this trailing metadata entry. A client can then tell "tracetorchd: PostgreSQL
// store ... unavailable" (UNAVAILABLE, from the daemon) from a socket nobody listens on
// (UNAVAILABLE, from gRPC), and not send the user looking for a daemon that is running.
#ifndef TRACETORCH_PROTOCOL_SERVICE_ERRORS_H_
#define TRACETORCH_PROTOCOL_SERVICE_ERRORS_H_

namespace tracetorch::protocol {

// Trailing metadata key (gRPC keys are lower case) and its value.
inline constexpr char kDaemonErrorTrailer[] = "tracetorchd-error";
inline constexpr char kDaemonErrorTrailerValue[] = "1";

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_SERVICE_ERRORS_H_
