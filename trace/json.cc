// The public entry points of json.h. The work is done by internal units of trace/:
//   json_scanner.h        the tolerant scanner: syntax errors with line/column, and the rewrite of
//                         what Python writes that simdjson rejects (NaN, Infinity, big integers)
//   json_record_reader.h  the parsed document -> TraceRecord
//   json_element_reader.h its scalar layer: one element read, or an error naming its path
//   json_record_writer.h  TraceRecord / TraceDiff -> the document, through JsonWriter
//   json_fields.h         the key names both directions share
#include "trace/json.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"
#include "trace/atomic_file.h"
#include "trace/diff.h"
#include "trace/huge_pages.h"
#include "trace/json_fields.h"
#include "trace/json_layer_keys.h"
#include "trace/json_record_reader.h"
#include "trace/json_record_writer.h"
#include "trace/json_scanner.h"
#include "trace/json_writer.h"
#include "trace/record.h"

namespace tracetorch {
namespace {

constexpr size_t kMaxRetainedDocument = size_t{64} << 20;

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// Parses `text`. When `release` holds `text`, its memory is freed as soon as the document is
// parsed (the parsed document holds copies of its strings), so that a file's bytes and its record
// are not held at once.
absl::StatusOr<TraceRecord> ParseBuffer(std::string_view text, bool padded, std::string* release) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return absl::InvalidArgumentError("file is empty");
  }
  // A parser keeps its buffers (tape, strings) sized for the largest document it has parsed; a
  // fresh parser per call spends about as long faulting that memory in as parsing. Each thread
  // keeps one for documents up to kMaxRetainedDocument; larger ones get a parser freed after the
  // call.
  std::unique_ptr<simdjson::dom::parser> own_parser;
  if (text.size() > kMaxRetainedDocument) own_parser = std::make_unique<simdjson::dom::parser>();
  simdjson::dom::parser& parser = own_parser ? *own_parser : ThreadParser();
  if (!own_parser && (parser.capacity() < text.size() || parser.doc.capacity() < text.size())) {
    // With an eighth to spare, so that a slightly larger next document (the other side of a diff)
    // reuses these buffers rather than faulting in new ones: parse() would size both to the byte.
    // Pages of the spare that are never written cost nothing. (`doc` is the parser's document,
    // public in simdjson's DOM API though documented as internal.)
    const size_t capacity = text.size() + text.size() / 8;
    if (parser.allocate(capacity) != simdjson::SUCCESS ||
        parser.doc.allocate(capacity) != simdjson::SUCCESS) {
      return absl::ResourceExhaustedError("out of memory for the JSON parser");
    }
    // The tape (8 bytes a slot) and the strings (5/3 of the input) are written front to back as
    // the document is parsed: huge pages where the kernel allows (lower bounds of simdjson's own
    // sizes, so that only its buffers are advised). Not the structural indexes: a huge page is
    // resident whole, and with three buffers' last pages the peak of a diff passed 2x its input.
    const size_t size = text.size();
    trace_internal::AdviseHugePages(parser.doc.tape.get(), size * sizeof(uint64_t));
    trace_internal::AdviseHugePages(parser.doc.string_buf.get(), size / 3 * 5);
  }
  TraceRecord record;
  // Fast path: standard JSON, parsed in place when the buffer has simdjson's padding.
  simdjson::dom::element root;
  simdjson::error_code error = parser.parse(text.data(), text.size(), !padded).get(root);
  if (error == simdjson::SUCCESS) {
    if (release != nullptr) std::string().swap(*release);
    if (auto s = json_internal::ReadRecordDocument(root, /*rewritten=*/false, &record); !s.ok()) {
      return s;
    }
    return record;
  }

  // Slow path: find what is wrong, or rewrite what Python wrote that simdjson rejects.
  absl::StatusOr<std::vector<json_internal::JsonEdit>> edits = json_internal::ScanJson(text);
  if (!edits.ok()) return edits.status();
  if (!edits->empty()) {
    const std::string fixed = json_internal::ApplyEdits(text, *edits, simdjson::SIMDJSON_PADDING);
    error = parser.parse(fixed).get(root);
    if (error == simdjson::SUCCESS) {
      if (auto s = json_internal::ReadRecordDocument(root, /*rewritten=*/true, &record); !s.ok()) {
        return s;
      }
      return record;
    }
  }
  // The scanner accepted what simdjson rejected (e.g. a document over 4 GiB).
  return absl::InvalidArgumentError(
      absl::StrCat("line 1, column 1: cannot parse JSON: ", simdjson::error_message(error)));
}

}  // namespace

absl::StatusOr<TraceRecord> ParseTraceJson(std::string_view text) {
  return ParseBuffer(text, /*padded=*/false, /*owned=*/nullptr);
}

absl::StatusOr<TraceRecord> ReadTraceFile(const std::string& path) {
  std::vector<absl::StatusOr<TraceRecord>> records = ReadTraceFiles({path});
  return std::move(records.front());
}

std::vector<absl::StatusOr<TraceRecord>> ReadTraceFiles(absl::Span<const std::string> paths) {
  std::vector<absl::StatusOr<TraceRecord>> records;
  records.reserve(paths.size());
  std::string text;  // One buffer for every file: its pages are faulted in once.
  for (size_t i = 0; i < paths.size(); ++i) {
    if (absl::Status s = ReadFileInto(paths[i], &text); !s.ok()) {
      records.push_back(s);
      continue;
    }
    // ReadFileInto leaves room past the end: parse in place when it is enough for simdjson.
    const bool padded = text.capacity() - text.size() >= simdjson::SIMDJSON_PADDING;
    // The last file's bytes are freed once parsed, before its record is built.
    const bool last = i + 1 == paths.size();
    records.push_back(ParseBuffer(text, padded, last ? &text : nullptr));
  }
  return records;
}

std::string TraceToJson(const TraceRecord& record, JsonStyle style) {
  std::string out;
  JsonWriter w(style.indent, &out);
  // About what a layer with one input and one output takes; the writer grows as needed.
  w.Reserve(4096 + record.layers.size() * (style.indent > 0 ? 2048 : 1024));
  json_internal::WriteRecord(record, w);
  w.Finish();
  return out;
}

absl::Status WriteTraceFile(const std::string& path, const TraceRecord& record, JsonStyle style) {
  return WriteFileAtomic(path, TraceToJson(record, style));
}

std::string DiffToJson(const TraceDiff& diff, JsonStyle style) {
  std::string out;
  JsonWriter w(style.indent, &out);
  json_internal::WriteDiff(diff, w);
  w.Finish();
  return out;
}

void WriteAnomalyJson(const Anomaly& anomaly, JsonWriter& w) {
  json_internal::WriteAnomaly(anomaly, w);
}

absl::Span<const std::string_view> LayerJsonKeys() { return json_internal::kLayerFields; }

}  // namespace tracetorch
