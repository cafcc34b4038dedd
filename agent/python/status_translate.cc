#include "agent/python/status_translate.h"

#include <pybind11/stl.h>

#include <cerrno>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace tracetorch::python {
namespace {

namespace py = pybind11;

// An OSError subclass with a known errno: OSError(errno, strerror, filename) fills .errno,
// .strerror and .filename (str(e) shows them).
py::object OsErrorWithErrno(PyObject* type, int err, const std::string& message,
                            std::string_view path) {
  py::handle cls(type);
  if (path.empty()) return cls(err, message);
  return cls(err, message, std::string(path));
}

// Any other exception type (an OSError subclass without an errno too: its str() would read
// "[Errno None] ..." with a .filename): the path, if any, prefixes the message.
py::object Plain(PyObject* type, const std::string& message, std::string_view path) {
  return py::handle(type)(path.empty() ? message : absl::StrCat(std::string(path), ": ", message));
}

std::optional<absl::StatusCode> CodeNamed(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(absl::StatusCode::kUnauthenticated); ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    if (absl::StatusCodeToString(code) == name) return code;
  }
  return std::nullopt;
}

}  // namespace

py::object StatusToException(const absl::Status& status, std::string_view path) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return Plain(PyExc_ValueError, message, path);
    case absl::StatusCode::kNotFound:
      return OsErrorWithErrno(PyExc_FileNotFoundError, ENOENT, message, path);
    case absl::StatusCode::kAlreadyExists:
      return OsErrorWithErrno(PyExc_FileExistsError, EEXIST, message, path);
    case absl::StatusCode::kPermissionDenied:
      return OsErrorWithErrno(PyExc_PermissionError, EACCES, message, path);
    case absl::StatusCode::kResourceExhausted:
      return Plain(PyExc_OSError, message, path);
    case absl::StatusCode::kUnavailable:
      return Plain(PyExc_ConnectionError, message, path);
    case absl::StatusCode::kDeadlineExceeded:
      return Plain(PyExc_TimeoutError, message, path);
    case absl::StatusCode::kFailedPrecondition:
      return Plain(PyExc_RuntimeError, message, path);
    case absl::StatusCode::kUnimplemented:
      return Plain(PyExc_NotImplementedError, message, path);
    default:
      return Plain(PyExc_RuntimeError,
                   absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message), path);
  }
}

void ThrowStatus(const absl::Status& status, std::string_view path) {
  py::object exc = StatusToException(status, path);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

void BindStatusTranslate(py::module_& m) {
  m.def(
      "_status_to_exception",
      [](std::string_view code, const std::string& message, std::optional<std::string> path) {
        const std::optional<absl::StatusCode> c = CodeNamed(code);
        if (!c || *c == absl::StatusCode::kOk) {
          throw py::value_error(absl::StrCat("not an error code: '", std::string(code), "'"));
        }
        return StatusToException(absl::Status(*c, message), path.value_or(""));
      },
      py::arg("code"), py::arg("message"), py::arg("path") = py::none(), R"doc(
The exception (returned, not raised) that the extension raises for an absl::Status with this code
("NOT_FOUND", "FAILED_PRECONDITION", ...), message and optional path.
)doc");
}

}  // namespace tracetorch::python
