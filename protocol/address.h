// Where tracetorchd listens, as agents and tools name it. One daemon has two sockets side by side:
// the agents' ingest socket (tracetorchd.sock by default) and the gRPC service socket
// (tracetorchd-rpc.sock) in the same directory. The agents' socket also serves tools (the daemon
// hands a gRPC client's connection to its service), so one address names a daemon whatever its
// socket is called: agents and tools both default to DefaultDaemonAddress().
//
// Thread-safe: pure functions (the Default* ones read the environment).
#ifndef TRACETORCH_PROTOCOL_ADDRESS_H_
#define TRACETORCH_PROTOCOL_ADDRESS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tracetorch::protocol {

inline constexpr char kIngestSocketName[] = "tracetorchd.sock";
inline constexpr char kServiceSocketName[] = "tracetorchd-rpc.sock";

// The socket path for an ingest `address`: a plain path, or "unix://PATH" (also "unix:PATH").
// InvalidArgument for an empty address, another scheme (e.g. "tcp://"), an empty path after
// "unix://", or a path too long for a Unix socket (107 bytes).
absl::StatusOr<std::string> ParseDaemonAddress(std::string_view address);

// $TRACETORCH_DAEMON when set; else $XDG_RUNTIME_DIR/tracetorch/tracetorchd.sock when
// XDG_RUNTIME_DIR is set; else /run/tracetorch/tracetorchd.sock (the system service's socket).
std::string DefaultDaemonAddress();

// The service socket beside an ingest socket path: "<dir of ingest_path>/tracetorchd-rpc.sock"
// ("./tracetorchd-rpc.sock" for a bare file name).
std::string ServiceSocketBeside(std::string_view ingest_path);

// The daemon a tool calls without --remote: $TRACETORCH_DAEMON_RPC when set (a service address
// of any form), else DefaultDaemonAddress().
std::string DefaultServiceAddress();

// Where DefaultServiceAddress() came from, for messages: "$TRACETORCH_DAEMON_RPC",
// "$TRACETORCH_DAEMON", "$XDG_RUNTIME_DIR" (the user's default) or "" (the system default).
std::string DefaultServiceAddressSource();

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_ADDRESS_H_
