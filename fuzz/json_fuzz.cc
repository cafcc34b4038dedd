// Fuzzes the tolerant trace reader: ParseTraceJson (json.h) on arbitrary bytes.
//
// Properties checked, each an abort() that libFuzzer reports as a crash:
//  - it never crashes, and ASan/UBSan find nothing (the fuzz build instruments all our code);
//  - it fails only with InvalidArgument;
//  - when it accepts the input, TraceToJson of the record parses again, and writing that record
//    gives the same bytes: the writer's output is a fixed point of read-then-write.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/json.h"
#include "trace/record.h"

namespace {

// Reports a broken property with what shows it, then aborts (libFuzzer saves the input).
[[noreturn]] void Fail(const char* property, std::string_view detail) {
  std::fprintf(stderr, "json_fuzz: %s\n%.*s\n", property, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tracetorch::TraceRecord> record = tracetorch::ParseTraceJson(input);
  if (!record.ok()) {
    if (record.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail("an error other than InvalidArgument", record.status().ToString());
    }
    return 0;
  }
  for (const int indent : {2, 0}) {
    const std::string written = tracetorch::TraceToJson(*record, {indent});
    absl::StatusOr<tracetorch::TraceRecord> again = tracetorch::ParseTraceJson(written);
    if (!again.ok()) {
      Fail("what TraceToJson wrote does not parse",
           again.status().ToString() + "\nwritten:\n" + written);
    }
    const std::string rewritten = tracetorch::TraceToJson(*again, {indent});
    if (rewritten != written) {
      Fail("writing the re-read record gives other bytes",
           "first:\n" + written + "\nsecond:\n" + rewritten);
    }
  }
  return 0;
}
