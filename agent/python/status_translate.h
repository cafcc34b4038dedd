// The one absl::Status -> Python exception mapping of the `tracetorch._C` extension: every binding
// that fails with a Status raises through ThrowStatus, so the same C++ error is the same Python
// exception wherever it surfaces.
//
//   InvalidArgument, OutOfRange -> ValueError         bad input: a value, a document, a field
//   NotFound                    -> FileNotFoundError  errno ENOENT, .filename = path
//   AlreadyExists               -> FileExistsError    errno EEXIST, .filename = path
//   PermissionDenied            -> PermissionError    errno EACCES, .filename = path
//   ResourceExhausted           -> OSError            disk full, quota, descriptors
//   FailedPrecondition          -> RuntimeError       the call is well formed but the object's
//                                                     state forbids it (a session already active,
//                                                     a forked child): ValueError would blame the
//                                                     arguments, and Python raises RuntimeError for
//                                                     such state errors
//   Unavailable                 -> ConnectionError    tracetorchd cannot be reached (try later)
//   DeadlineExceeded            -> TimeoutError       a bounded wait ran out
//   Unimplemented               -> NotImplementedError
//   anything else               -> RuntimeError       "INTERNAL: message" (the code is named,
//                                                     since the type does not say it)
//
// The message is the Status message. With a `path`, the three with an errno carry it as .filename
// (str(e) shows it: "[Errno 2] message: 'path'"); the others are prefixed "path: ".
//
// REQUIRES: the GIL is held.
#ifndef TRACETORCH_AGENT_PYTHON_STATUS_TRANSLATE_H_
#define TRACETORCH_AGENT_PYTHON_STATUS_TRANSLATE_H_

#include <pybind11/pybind11.h>

#include <string_view>

#include "absl/status/status.h"

namespace tracetorch::python {

// The exception object for a non-OK `status` (see above). REQUIRES: !status.ok().
pybind11::object StatusToException(const absl::Status& status, std::string_view path = {});

// Raises StatusToException(status, path) (as pybind11::error_already_set).
// REQUIRES: !status.ok().
[[noreturn]] void ThrowStatus(const absl::Status& status, std::string_view path = {});

// Registers `_status_to_exception(code: str, message: str, path: str | None = None)`, which returns
// (does not raise) the exception for the code named as absl spells it ("NOT_FOUND"): the mapping
// above, for tests and for Python code that speaks the C++ codes.
void BindStatusTranslate(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_STATUS_TRANSLATE_H_
