// The `tracetorch` command. See cli/commands.h.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/remote_commands.h"

int main(int argc, char** argv) {
  const char* no_color = std::getenv("NO_COLOR");
  tracetorch::cli::CliEnvironment env{
      .out = &std::cout,
      .err = &std::cerr,
      .stdout_is_tty = ::isatty(STDOUT_FILENO) == 1,
      .no_color = no_color != nullptr && no_color[0] != '\0',
      .wait = {},
  };
  return tracetorch::cli::RunTracetorch(argc, argv, env);
}
