// A blocking HTTP/1.0 GET on 127.0.0.1 for the tests of /metrics (not part of tracetorchd).
#ifndef TRACETORCH_DAEMON_TESTING_HTTP_GET_H_
#define TRACETORCH_DAEMON_TESTING_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tracetorch::daemon::test_util {

// The whole response (status line, headers, body) to GET `path` on 127.0.0.1:`port`, or ""
// when the connection fails.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) {
        response.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return response;
}

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_TESTING_HTTP_GET_H_
