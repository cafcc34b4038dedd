// The `tracetorch` command. See cli/commands.h.
//
// Built without the daemon client (TRACETORCH_WITHOUT_DAEMON_CLIENT: an agent-only build, which has
// CLI11 but not gRPC), the subcommands that talk to tracetorchd fail with one line saying so.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#ifdef TRACETORCH_WITHOUT_DAEMON_CLIENT
#include "cli/commands.h"
#else
#include "cli/remote_commands.h"
#endif
#include "view/command_io.h"

int main(int argc, char** argv) {
  const char* no_color = std::getenv("NO_COLOR");
  tracetorch::view::CliEnvironment env{
      .out = &std::cout,
      .err = &std::cerr,
      .stdout_is_tty = ::isatty(STDOUT_FILENO) == 1,
      .no_color = no_color != nullptr && no_color[0] != '\0',
      .wait = {},
  };
#ifdef TRACETORCH_WITHOUT_DAEMON_CLIENT
  const int code = tracetorch::cli::RunTracetorchCommand(argc, argv, env, nullptr);
  if (code != tracetorch::cli::kNeedsDaemonClient) return code;
  return tracetorch::view::Fail(env,
                                "this tracetorch was built without the daemon client (gRPC): the "
                                "subcommands that talk to tracetorchd are not available");
#else
  return tracetorch::cli::RunTracetorch(argc, argv, env);
#endif
}
