// Where tracetorchd listens, as agents and tools name it. One daemon has two sockets side by side:
// the agents' ingest socket (tracetorchd.sock) and the viewers' gRPC service socket
// (tracetorchd-rpc.sock) in the same directory. Every program derives one from the other here.
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

// $TRACETORCH_DAEMON_RPC when set; else the service socket beside DefaultDaemonAddress().
std::string DefaultServiceAddress();

// The TraceService address a tool given `address` (--remote) calls: for the agents' socket (a
// path, or unix:PATH, whose file name is kIngestSocketName) the service socket beside it, so that
// one address names a daemon; any other address as given.
//   ServiceAddressFor("/run/tracetorch/tracetorchd.sock") == "/run/tracetorch/tracetorchd-rpc.sock"
//   ServiceAddressFor("host:7171") == "host:7171"
std::string ServiceAddressFor(std::string_view address);

// How messages name what ServiceAddressFor(address) called: the address, and for the agents'
// socket both sockets:
//   "/d/tracetorchd-rpc.sock (the service socket beside the agents' socket /d/tracetorchd.sock)"
std::string DescribeServiceAddress(std::string_view address);

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_ADDRESS_H_
