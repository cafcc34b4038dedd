#include "view/command_io.h"

#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_replace.h"
#include "trace/json.h"
#include "view/render.h"

namespace tracetorch::view {
namespace {

// "tracetorch: PREFIXMESSAGE" on stderr, line breaks in MESSAGE made spaces.
void ErrorLine(const CliEnvironment& env, std::string_view prefix, std::string message) {
  absl::StrReplaceAll({{"\r\n", " "}, {"\n", " "}, {"\r", " "}}, &message);
  *env.err << "tracetorch: " << prefix << message << "\n";
  env.err->flush();
}

}  // namespace

Style ChooseStyle(std::string_view color, bool stdout_is_tty, bool no_color) {
  if (color == "always") return Style::Rich();
  if (color == "never") return Style::Plain();
  return stdout_is_tty && !no_color ? Style::Rich() : Style::Plain();
}

int Fail(const CliEnvironment& env, std::string message) {
  ErrorLine(env, "", std::move(message));
  return kExitUsage;
}

void PrintLine(std::string text, const CliEnvironment& env) {
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  *env.out << text;
  env.out->flush();
}

void Note(const CliEnvironment& env, std::string message) {
  ErrorLine(env, "note: ", std::move(message));
}

int ReportDiff(const TraceDiff& diff, bool json, const Style& style, const CliEnvironment& env) {
  if (json) {
    PrintLine(DiffToJson(diff), env);
  } else {
    *env.out << RenderDiff(diff, style);
    env.out->flush();
  }
  return diff.has_regressions() ? kExitRegressions : kExitOk;
}

}  // namespace tracetorch::view
