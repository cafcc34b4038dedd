#include "trace/op_graph_json.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "simdjson.h"
#include "trace/atomic_file.h"
#include "trace/json_record_reader.h"
#include "trace/json_record_writer.h"
#include "trace/json_scanner.h"
#include "trace/json_writer.h"

namespace tracetorch {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// absl::StrCat takes absl::string_view, which is not std::string_view in this build.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kKindNames[] = {"op", "input", "param", "other"};

// ---- Writing ------------------------------------------------------------------------------------

void WriteSource(const OpSource& s, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey("kind");
  w.String(kKindNames[static_cast<int>(s.kind)]);
  w.PlainKey("index");
  w.Int(s.index);
  w.PlainKey("output");
  w.Int(s.output);
  w.EndObject();
}

void WriteSources(const std::vector<OpSource>& sources, JsonWriter& w) {
  w.BeginArray();
  for (const OpSource& s : sources) WriteSource(s, w);
  w.EndArray();
}

void WriteInts(const std::vector<int32_t>& v, JsonWriter& w) {
  w.BeginArray();
  for (int32_t i : v) w.Int(i);
  w.EndArray();
}

void WriteOp(const OpNode& op, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey("label");
  w.String(op.label);
  w.PlainKey("func_name");
  w.String(op.func_name);
  w.PlainKey("op_name");
  w.String(op.op_name);
  w.PlainKey("call_index");
  w.Int(op.call_index);
  w.PlainKey("index");
  w.Int(op.index);
  w.PlainKey("module_pass");
  w.Int(op.module_pass);
  w.PlainKey("inputs");
  w.BeginArray();
  for (const OpInput& in : op.inputs) {
    w.BeginObject();
    w.PlainKey("arg");
    w.String(in.arg);
    w.PlainKey("source");
    WriteSource(in.source, w);
    w.PlainKey("tensor");
    json_internal::WriteTensor(in.tensor, w);
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("args");
  w.BeginArray();
  for (const OpArg& a : op.args) {
    w.BeginObject();
    w.PlainKey("name");
    w.String(a.name);
    w.PlainKey("value");
    if (a.value.empty()) {
      w.Null();
    } else {
      w.RawValue(a.value);
    }
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("outputs");
  w.BeginArray();
  for (const TensorInfo& t : op.outputs) json_internal::WriteTensor(t, w);
  w.EndArray();
  w.PlainKey("parents");
  WriteInts(op.parents, w);
  w.PlainKey("children");
  WriteInts(op.children, w);
  w.PlainKey("output_of");
  WriteInts(op.output_of, w);
  w.PlainKey("params");
  w.Int(op.params);
  w.PlainKey("inplace");
  w.Bool(op.inplace);
  w.PlainKey("tensor_output");
  w.Bool(op.tensor_output);
  w.PlainKey("time_ms");
  w.OptDouble(op.time_ms);
  w.PlainKey("saved");
  w.Bool(op.saved);
  w.EndObject();
}

void WriteModule(const ModulePass& m, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey("path");
  w.String(m.path);
  w.PlainKey("type");
  w.String(m.type);
  w.PlainKey("pass");
  w.Int(m.pass);
  w.PlainKey("parent");
  w.Int(m.parent);
  w.PlainKey("first_op");
  w.Int(m.first_op);
  w.PlainKey("last_op");
  w.Int(m.last_op);
  w.PlainKey("params");
  w.Int(m.params);
  w.PlainKey("inputs");
  WriteSources(m.inputs, w);
  w.PlainKey("outputs");
  WriteSources(m.outputs, w);
  w.EndObject();
}

// ---- Reading ------------------------------------------------------------------------------------

absl::Status Shape(std::string_view where, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(where.empty() ? "document" : A(where), ": ", A(problem)));
}

std::string At(std::string_view base, std::string_view key) {
  return base.empty() ? std::string(key) : absl::StrCat(A(base), ".", A(key));
}
std::string At(std::string_view base, size_t index) {
  return absl::StrCat(A(base), "[", index, "]");
}

absl::Status GetString(element e, std::string_view where, std::string* out) {
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) return Shape(where, "expected a string");
  out->assign(s.data(), s.size());
  return absl::OkStatus();
}

template <typename Int>
absl::Status GetInt(element e, std::string_view where, Int* out) {
  int64_t v;
  if (e.get(v) != simdjson::SUCCESS || v < std::numeric_limits<Int>::min() ||
      v > std::numeric_limits<Int>::max()) {
    return Shape(where, "expected an integer");
  }
  *out = static_cast<Int>(v);
  return absl::OkStatus();
}

absl::Status GetBool(element e, std::string_view where, bool* out) {
  if (e.get(*out) != simdjson::SUCCESS) return Shape(where, "expected true or false");
  return absl::OkStatus();
}

absl::Status GetArray(element e, std::string_view where, array* out) {
  if (e.get(*out) != simdjson::SUCCESS) return Shape(where, "expected an array");
  return absl::OkStatus();
}

absl::Status GetObject(element e, std::string_view where, object* out) {
  if (e.get(*out) != simdjson::SUCCESS) return Shape(where, "expected an object");
  return absl::OkStatus();
}

absl::Status GetInts(element e, std::string_view where, std::vector<int32_t>* out) {
  array a;
  if (auto s = GetArray(e, where, &a); !s.ok()) return s;
  size_t i = 0;
  for (element v : a) {
    int32_t n;
    if (auto s = GetInt(v, At(where, i++), &n); !s.ok()) return s;
    out->push_back(n);
  }
  return absl::OkStatus();
}

// Calls `fn(element, where)` for each element of the array `e`.
template <typename Fn>
absl::Status ForEach(element e, std::string_view where, Fn&& fn) {
  array a;
  if (auto s = GetArray(e, where, &a); !s.ok()) return s;
  size_t i = 0;
  for (element v : a) {
    if (auto s = fn(v, At(where, i++)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadSource(element e, std::string_view where, OpSource* out) {
  object obj;
  if (auto s = GetObject(e, where, &obj); !s.ok()) return s;
  for (const auto field : obj) {
    const std::string sub = At(where, field.key);
    absl::Status s;
    if (field.key == "kind") {
      std::string kind;
      s = GetString(field.value, sub, &kind);
      if (!s.ok()) return s;
      bool found = false;
      for (int k = 0; k < 4; ++k) {
        if (kind == kKindNames[k]) {
          out->kind = static_cast<OpSource::Kind>(k);
          found = true;
        }
      }
      if (!found) return Shape(sub, "expected one of op, input, param, other");
    } else if (field.key == "index") {
      s = GetInt(field.value, sub, &out->index);
    } else if (field.key == "output") {
      s = GetInt(field.value, sub, &out->output);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadSources(element e, std::string_view where, std::vector<OpSource>* out) {
  return ForEach(e, where, [&](element v, const std::string& at) {
    out->emplace_back();
    return ReadSource(v, at, &out->back());
  });
}

absl::Status ReadTensor(element e, std::string_view where, TensorInfo* out) {
  return json_internal::ReadTensorElement(e, /*rewritten=*/false, where, out);
}

absl::Status ReadNamedTensor(element e, std::string_view where, std::string* name,
                             TensorInfo* tensor, bool* buffer) {
  object obj;
  if (auto s = GetObject(e, where, &obj); !s.ok()) return s;
  for (const auto field : obj) {
    const std::string sub = At(where, field.key);
    absl::Status s;
    if (field.key == "name") {
      s = GetString(field.value, sub, name);
    } else if (field.key == "tensor") {
      s = ReadTensor(field.value, sub, tensor);
    } else if (field.key == "buffer" && buffer != nullptr) {
      s = GetBool(field.value, sub, buffer);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadModule(element e, std::string_view where, ModulePass* m) {
  object obj;
  if (auto s = GetObject(e, where, &obj); !s.ok()) return s;
  for (const auto field : obj) {
    const std::string sub = At(where, field.key);
    const std::string_view k = field.key;
    absl::Status s;
    if (k == "path") {
      s = GetString(field.value, sub, &m->path);
    } else if (k == "type") {
      s = GetString(field.value, sub, &m->type);
    } else if (k == "pass") {
      s = GetInt(field.value, sub, &m->pass);
    } else if (k == "parent") {
      s = GetInt(field.value, sub, &m->parent);
    } else if (k == "first_op") {
      s = GetInt(field.value, sub, &m->first_op);
    } else if (k == "last_op") {
      s = GetInt(field.value, sub, &m->last_op);
    } else if (k == "params") {
      s = GetInt(field.value, sub, &m->params);
    } else if (k == "inputs") {
      s = ReadSources(field.value, sub, &m->inputs);
    } else if (k == "outputs") {
      s = ReadSources(field.value, sub, &m->outputs);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadInput(element e, std::string_view where, OpInput* in) {
  object obj;
  if (auto s = GetObject(e, where, &obj); !s.ok()) return s;
  for (const auto field : obj) {
    const std::string sub = At(where, field.key);
    absl::Status s;
    if (field.key == "arg") {
      s = GetString(field.value, sub, &in->arg);
    } else if (field.key == "source") {
      s = ReadSource(field.value, sub, &in->source);
    } else if (field.key == "tensor") {
      s = ReadTensor(field.value, sub, &in->tensor);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadArg(element e, std::string_view where, OpArg* arg) {
  object obj;
  if (auto s = GetObject(e, where, &obj); !s.ok()) return s;
  for (const auto field : obj) {
    if (field.key == "name") {
      if (auto s = GetString(field.value, At(where, "name"), &arg->name); !s.ok()) return s;
    } else if (field.key == "value") {
      arg->value = simdjson::minify(field.value);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadOp(element e, std::string_view where, OpNode* op) {
  object obj;
  if (auto s = GetObject(e, where, &obj); !s.ok()) return s;
  for (const auto field : obj) {
    const std::string sub = At(where, field.key);
    const std::string_view k = field.key;
    const element v = field.value;
    absl::Status s;
    if (k == "label") {
      s = GetString(v, sub, &op->label);
    } else if (k == "func_name") {
      s = GetString(v, sub, &op->func_name);
    } else if (k == "op_name") {
      s = GetString(v, sub, &op->op_name);
    } else if (k == "call_index") {
      s = GetInt(v, sub, &op->call_index);
    } else if (k == "index") {
      s = GetInt(v, sub, &op->index);
    } else if (k == "module_pass") {
      s = GetInt(v, sub, &op->module_pass);
    } else if (k == "inputs") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        op->inputs.emplace_back();
        return ReadInput(x, at, &op->inputs.back());
      });
    } else if (k == "args") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        op->args.emplace_back();
        return ReadArg(x, at, &op->args.back());
      });
    } else if (k == "outputs") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        op->outputs.emplace_back();
        return ReadTensor(x, at, &op->outputs.back());
      });
    } else if (k == "parents") {
      s = GetInts(v, sub, &op->parents);
    } else if (k == "children") {
      s = GetInts(v, sub, &op->children);
    } else if (k == "output_of") {
      s = GetInts(v, sub, &op->output_of);
    } else if (k == "params") {
      s = GetInt(v, sub, &op->params);
    } else if (k == "inplace") {
      s = GetBool(v, sub, &op->inplace);
    } else if (k == "tensor_output") {
      s = GetBool(v, sub, &op->tensor_output);
    } else if (k == "time_ms") {
      double d;
      if (v.is_null()) {
        op->time_ms.reset();
      } else if (v.get(d) == simdjson::SUCCESS) {
        op->time_ms = d;
      } else {
        s = Shape(sub, "expected a number or null");
      }
    } else if (k == "saved") {
      s = GetBool(v, sub, &op->saved);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckSource(const OpGraph& g, const OpSource& s, std::string_view where) {
  size_t n = 0;
  switch (s.kind) {
    case OpSource::Kind::kOp:
      n = g.ops.size();
      break;
    case OpSource::Kind::kInput:
      n = g.inputs.size();
      break;
    case OpSource::Kind::kParameter:
      n = g.params.size();
      break;
    case OpSource::Kind::kOther:
      return absl::OkStatus();
  }
  if (s.index < 0 || static_cast<size_t>(s.index) >= n) return Shape(where, "index out of range");
  return absl::OkStatus();
}

absl::Status CheckIndexes(const OpGraph& g) {
  const auto in_range = [](int32_t i, size_t n, bool allow_none) {
    return (allow_none && i == -1) || (i >= 0 && static_cast<size_t>(i) < n);
  };
  for (size_t i = 0; i < g.modules.size(); ++i) {
    const ModulePass& m = g.modules[i];
    const std::string at = At("modules", i);
    if (!in_range(m.parent, i, true)) return Shape(At(at, "parent"), "index out of range");
    for (const OpSource& s : m.inputs) {
      if (auto st = CheckSource(g, s, At(at, "inputs")); !st.ok()) return st;
    }
    for (const OpSource& s : m.outputs) {
      if (auto st = CheckSource(g, s, At(at, "outputs")); !st.ok()) return st;
    }
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpNode& op = g.ops[i];
    const std::string at = At("ops", i);
    if (!in_range(op.module_pass, g.modules.size(), true)) {
      return Shape(At(at, "module_pass"), "index out of range");
    }
    for (const OpInput& in : op.inputs) {
      if (auto st = CheckSource(g, in.source, At(at, "inputs")); !st.ok()) return st;
    }
    for (const std::vector<int32_t>* list : {&op.parents, &op.children}) {
      for (int32_t p : *list) {
        if (!in_range(p, g.ops.size(), false)) return Shape(at, "op index out of range");
      }
    }
    for (int32_t p : op.output_of) {
      if (!in_range(p, g.modules.size(), false)) {
        return Shape(At(at, "output_of"), "index out of range");
      }
    }
  }
  for (const OpSource& s : g.outputs) {
    if (auto st = CheckSource(g, s, "outputs"); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status ReadGraph(element root, OpGraph* g) {
  object obj;
  if (auto s = GetObject(root, "", &obj); !s.ok()) return s;
  std::string format;
  int64_t version = 0;
  for (const auto field : obj) {
    const std::string_view k = field.key;
    const element v = field.value;
    const std::string sub(k);
    absl::Status s;
    if (k == "format") {
      s = GetString(v, sub, &format);
    } else if (k == "version") {
      s = GetInt(v, sub, &version);
    } else if (k == "model_name") {
      s = GetString(v, sub, &g->model_name);
    } else if (k == "source") {
      s = GetString(v, sub, &g->source);
    } else if (k == "step") {
      int64_t step;
      if (!v.is_null()) {
        s = GetInt(v, sub, &step);
        if (s.ok()) g->step = step;
      }
    } else if (k == "nan_origin") {
      int32_t origin;
      if (!v.is_null()) {
        s = GetInt(v, sub, &origin);
        if (s.ok()) g->nan_origin = origin;
      }
    } else if (k == "inputs") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        g->inputs.emplace_back();
        return ReadNamedTensor(x, at, &g->inputs.back().name, &g->inputs.back().tensor, nullptr);
      });
    } else if (k == "params") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        g->params.emplace_back();
        OpGraphParam& p = g->params.back();
        return ReadNamedTensor(x, at, &p.name, &p.tensor, &p.buffer);
      });
    } else if (k == "modules") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        g->modules.emplace_back();
        return ReadModule(x, at, &g->modules.back());
      });
    } else if (k == "ops") {
      s = ForEach(v, sub, [&](element x, const std::string& at) {
        g->ops.emplace_back();
        return ReadOp(x, at, &g->ops.back());
      });
    } else if (k == "outputs") {
      s = ReadSources(v, sub, &g->outputs);
    }
    if (!s.ok()) return s;
  }
  if (format != kOpGraphFormat) {
    return Shape("format", absl::StrCat("expected \"", A(kOpGraphFormat), "\" (not an op graph)"));
  }
  if (version < 1 || version > kOpGraphVersion) {
    return Shape("version", absl::StrCat("unsupported version ", version,
                                         " (this reader knows 1 to ", kOpGraphVersion, ")"));
  }
  if (g->nan_origin &&
      (*g->nan_origin < 0 || static_cast<size_t>(*g->nan_origin) >= g->ops.size())) {
    return Shape("nan_origin", "index out of range");
  }
  return CheckIndexes(*g);
}

}  // namespace

void WriteOpNodeJson(const OpNode& op, JsonWriter& w) { WriteOp(op, w); }

std::string OpGraphToJson(const OpGraph& graph, int indent) {
  std::string out;
  JsonWriter w(indent, &out);
  w.Reserve(4096 + graph.ops.size() * 1024);
  w.BeginObject();
  w.PlainKey("format");
  w.String(kOpGraphFormat);
  w.PlainKey("version");
  w.Int(kOpGraphVersion);
  w.PlainKey("model_name");
  w.String(graph.model_name);
  w.PlainKey("source");
  w.String(graph.source);
  w.PlainKey("step");
  w.OptInt(graph.step);
  w.PlainKey("nan_origin");
  if (graph.nan_origin) {
    w.Int(*graph.nan_origin);
  } else {
    w.Null();
  }
  w.PlainKey("inputs");
  w.BeginArray();
  for (const OpGraphInput& in : graph.inputs) {
    w.BeginObject();
    w.PlainKey("name");
    w.String(in.name);
    w.PlainKey("tensor");
    json_internal::WriteTensor(in.tensor, w);
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("params");
  w.BeginArray();
  for (const OpGraphParam& p : graph.params) {
    w.BeginObject();
    w.PlainKey("name");
    w.String(p.name);
    w.PlainKey("buffer");
    w.Bool(p.buffer);
    w.PlainKey("tensor");
    json_internal::WriteTensor(p.tensor, w);
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("modules");
  w.BeginArray();
  for (const ModulePass& m : graph.modules) WriteModule(m, w);
  w.EndArray();
  w.PlainKey("ops");
  w.BeginArray();
  for (const OpNode& op : graph.ops) WriteOp(op, w);
  w.EndArray();
  w.PlainKey("outputs");
  WriteSources(graph.outputs, w);
  w.EndObject();
  w.Finish();
  return out;
}

namespace {

// The parsed document's root; errors as ParseOpGraphJson says.
absl::Status ParseRoot(std::string_view text, simdjson::dom::parser& parser, element* root) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return absl::InvalidArgumentError("file is empty");
  }
  const simdjson::error_code error = parser.parse(text.data(), text.size()).get(*root);
  if (error != simdjson::SUCCESS) {
    // The tolerant scanner says where the syntax is wrong. What it would rewrite (NaN, huge
    // integers) our writer never writes: such a document is not an op graph either.
    absl::StatusOr<std::vector<json_internal::JsonEdit>> edits = json_internal::ScanJson(text);
    if (!edits.ok()) return edits.status();
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse the op graph: ", simdjson::error_message(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpGraph> WithPath(const std::string& path, absl::StatusOr<OpGraph> graph) {
  if (!graph.ok()) {
    return absl::Status(graph.status().code(), absl::StrCat(path, ": ", graph.status().message()));
  }
  return graph;
}

}  // namespace

absl::StatusOr<OpGraph> ParseOpGraphJson(std::string_view text) {
  simdjson::dom::parser parser;
  element root;
  if (absl::Status s = ParseRoot(text, parser, &root); !s.ok()) return s;
  OpGraph graph;
  if (auto s = ReadGraph(root, &graph); !s.ok()) return s;
  return graph;
}

absl::StatusOr<OpGraph> ParseOpGraphOrMember(std::string_view text) {
  simdjson::dom::parser parser;
  element root;
  if (absl::Status s = ParseRoot(text, parser, &root); !s.ok()) return s;
  object obj;
  if (root.get(obj) == simdjson::SUCCESS) {
    std::string_view format;
    element member;
    const bool is_graph =
        obj["format"].get(format) == simdjson::SUCCESS && format == kOpGraphFormat;
    if (!is_graph && obj["op_graph"].get(member) == simdjson::SUCCESS && !member.is_null()) {
      OpGraph graph;
      if (absl::Status s = ReadGraph(member, &graph); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("op_graph: ", s.message()));
      }
      return graph;
    }
    element format_key;
    if (!is_graph && obj["format"].get(format_key) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(
          "neither an op graph (\"format\": \"tracetorch.ops\") nor a trace with an \"op_graph\"");
    }
  }
  OpGraph graph;
  if (auto s = ReadGraph(root, &graph); !s.ok()) return s;
  return graph;
}

absl::StatusOr<OpGraph> ReadOpGraphFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return WithPath(path, ParseOpGraphJson(*text));
}

absl::StatusOr<OpGraph> ReadOpGraphOrMemberFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return WithPath(path, ParseOpGraphOrMember(*text));
}

absl::Status WriteOpGraphFile(const std::string& path, const OpGraph& graph, int indent) {
  return WriteFileAtomic(path, OpGraphToJson(graph, indent));
}

}  // namespace tracetorch
