// Internal to trace/ (not installed): the scalar layer of the JSON readers, over simdjson's DOM.
//
// Path says where a value sits in the document, for error messages ("layers[2].outputs[0].shape");
// ShapeError makes the InvalidArgument naming it. ElementReader reads one element as a string,
// number, integer, bool, array or object with that error on a mismatch, and, for a document that
// json_scanner.h rewrote from Python's non-standard tokens (`rewritten`), decodes the sentinel
// strings standing for NaN/Infinity/-Infinity.
//
// Thread-compatible: no shared state.
#ifndef TRACETORCH_TRACE_JSON_ELEMENT_READER_H_
#define TRACETORCH_TRACE_JSON_ELEMENT_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "simdjson.h"

namespace tracetorch {
namespace json_internal {

// Where a value sits in the document, for error messages. Built on the stack as the reader
// descends; rendered only when there is an error.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // Member name when index < 0.
  int64_t index = -1;    // Array index.
};

// InvalidArgument "<path>: <problem>" ("document: <problem>" at the root).
absl::Status ShapeError(const Path& path, std::string_view problem);

class ElementReader {
 public:
  using array = simdjson::dom::array;
  using element = simdjson::dom::element;
  using object = simdjson::dom::object;

  explicit ElementReader(bool rewritten) : rewritten_(rewritten) {}

  // The value of a sentinel string standing for NaN/Infinity/-Infinity, if `e` is one.
  bool Sentinel(element e, double* out) const;
  absl::Status ReadString(element e, const Path& path, std::string* out) const;
  // A number or a sentinel; null -> nullopt.
  absl::Status ReadOptDouble(element e, const Path& path, std::optional<double>* out) const;
  // An integer (20.0 is accepted for 20).
  absl::Status ReadInt(element e, const Path& path, int64_t* out) const;
  absl::Status ReadOptInt(element e, const Path& path, std::optional<int64_t>* out) const;
  absl::Status ReadInt32(element e, const Path& path, int32_t* out) const;
  absl::Status ReadBool(element e, const Path& path, bool* out) const;
  absl::Status GetArray(element e, const Path& path, array* out) const;
  absl::Status GetObject(element e, const Path& path, object* out) const;

  bool rewritten() const { return rewritten_; }

 private:
  // True when the document was rewritten from Python's non-standard tokens, so that the sentinel
  // strings stand for numbers.
  const bool rewritten_;
};

}  // namespace json_internal
}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_ELEMENT_READER_H_
