#include "trace/op_select.h"

#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tracetorch {

struct OpSelector::Node {
  enum class Kind { kAll, kNone, kFunc, kModule, kInModule, kLabel, kOr, kAnd, kNot };
  Kind kind = Kind::kAll;
  std::string text;  // kFunc: the name; kModule/kInModule: the path; kLabel: the label.
  int32_t pass = 0;  // kModule/kInModule: 0 = any pass.
  std::shared_ptr<const Node> a;
  std::shared_ptr<const Node> b;
};

namespace {

using Node = OpSelector::Node;
using Kind = Node::Kind;

std::string_view StripNamespace(std::string_view name) {
  const size_t colons = name.rfind("::");
  return colons == std::string_view::npos ? name : name.substr(colons + 2);
}

bool FuncMatches(std::string_view want, std::string_view have) {
  want = StripNamespace(want);
  have = StripNamespace(have);
  if (have == want) return true;
  // "relu" matches the in-place "relu_" (but "relu_" only itself).
  return have.size() == want.size() + 1 && have.back() == '_' &&
         have.substr(0, want.size()) == want;
}

// "layer3:2" -> ("layer3", 2); "layer3" -> ("layer3", 0). A suffix that is not a positive integer
// stays part of the path.
std::pair<std::string, int32_t> SplitAddress(std::string_view address) {
  if (address == "<root>") return {"", 0};
  if (const size_t colon = address.rfind(':'); colon != std::string_view::npos) {
    int32_t pass = 0;
    if (absl::SimpleAtoi(absl::string_view(address.data() + colon + 1, address.size() - colon - 1),
                         &pass) &&
        pass >= 1) {
      return {std::string(address.substr(0, colon)), pass};
    }
  }
  return {std::string(address), 0};
}

bool AnyModule(const std::vector<SiteModule>& modules, const Node& n) {
  for (const SiteModule& m : modules) {
    if (m.path == n.text && (n.pass == 0 || m.pass == n.pass)) return true;
  }
  return false;
}

bool Eval(const Node& n, const OpSite& site) {
  switch (n.kind) {
    case Kind::kAll:
      return true;
    case Kind::kNone:
      return false;
    case Kind::kFunc:
      return FuncMatches(n.text, site.func_name);
    case Kind::kModule:
      return AnyModule(site.output_of, n);
    case Kind::kInModule:
      return AnyModule(site.enclosing, n);
    case Kind::kLabel:
      return site.label == n.text;
    case Kind::kOr:
      return Eval(*n.a, site) || Eval(*n.b, site);
    case Kind::kAnd:
      return Eval(*n.a, site) && Eval(*n.b, site);
    case Kind::kNot:
      return !Eval(*n.a, site);
  }
  return false;
}

bool NeedsOutputs(const Node& n) {
  switch (n.kind) {
    case Kind::kModule:
      return true;
    case Kind::kOr:
    case Kind::kAnd:
      return NeedsOutputs(*n.a) || NeedsOutputs(*n.b);
    case Kind::kNot:
      return NeedsOutputs(*n.a);
    default:
      return false;
  }
}

std::string Quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

// Precedence: | 1, & 2, ~ 3, atoms 4.
std::string Print(const Node& n, int context) {
  auto wrap = [&](int mine, std::string s) {
    return mine < context ? absl::StrCat("(", s, ")") : s;
  };
  switch (n.kind) {
    case Kind::kAll:
      return "all";
    case Kind::kNone:
      return "none";
    case Kind::kFunc:
      return absl::StrCat("func(", Quoted(n.text), ")");
    case Kind::kModule:
    case Kind::kInModule: {
      std::string address = n.text.empty() && n.pass == 0 ? "<root>" : n.text;
      if (n.pass > 0) absl::StrAppend(&address, ":", n.pass);
      return absl::StrCat(n.kind == Kind::kModule ? "module(" : "in_module(", Quoted(address), ")");
    }
    case Kind::kLabel:
      return absl::StrCat("label(", Quoted(n.text), ")");
    case Kind::kOr:
      return wrap(1, absl::StrCat(Print(*n.a, 1), " | ", Print(*n.b, 2)));
    case Kind::kAnd:
      return wrap(2, absl::StrCat(Print(*n.a, 2), " & ", Print(*n.b, 3)));
    case Kind::kNot:
      return wrap(3, absl::StrCat("~", Print(*n.a, 3)));
  }
  return "";
}

std::shared_ptr<const Node> Leaf(Kind kind, std::string text = "", int32_t pass = 0) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->text = std::move(text);
  n->pass = pass;
  return n;
}

std::shared_ptr<const Node> Combine(Kind kind, std::shared_ptr<const Node> a,
                                    std::shared_ptr<const Node> b) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->a = std::move(a);
  n->b = std::move(b);
  return n;
}

// Recursive descent over the printed form.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<std::shared_ptr<const Node>> Run() {
    absl::StatusOr<std::shared_ptr<const Node>> n = Or();
    if (!n.ok()) return n;
    Skip();
    if (pos_ != text_.size()) return Error("unexpected text");
    return n;
  }

 private:
  absl::StatusOr<std::shared_ptr<const Node>> Or() {
    absl::StatusOr<std::shared_ptr<const Node>> left = And();
    while (left.ok() && Eat('|')) {
      absl::StatusOr<std::shared_ptr<const Node>> right = And();
      if (!right.ok()) return right;
      left = Combine(Kind::kOr, *std::move(left), *std::move(right));
    }
    return left;
  }
  absl::StatusOr<std::shared_ptr<const Node>> And() {
    absl::StatusOr<std::shared_ptr<const Node>> left = Unary();
    while (left.ok() && Eat('&')) {
      absl::StatusOr<std::shared_ptr<const Node>> right = Unary();
      if (!right.ok()) return right;
      left = Combine(Kind::kAnd, *std::move(left), *std::move(right));
    }
    return left;
  }
  absl::StatusOr<std::shared_ptr<const Node>> Unary() {
    if (Eat('~')) {
      absl::StatusOr<std::shared_ptr<const Node>> inner = Unary();
      if (!inner.ok()) return inner;
      return Combine(Kind::kNot, *std::move(inner), nullptr);
    }
    if (Eat('(')) {
      absl::StatusOr<std::shared_ptr<const Node>> inner = Or();
      if (!inner.ok()) return inner;
      if (!Eat(')')) return Error("expected ')'");
      return inner;
    }
    return Atom();
  }
  absl::StatusOr<std::shared_ptr<const Node>> Atom() {
    Skip();
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      ++pos_;
    }
    const std::string_view word = text_.substr(start, pos_ - start);
    if (word == "all") return Leaf(Kind::kAll);
    if (word == "none") return Leaf(Kind::kNone);
    Kind kind;
    if (word == "func") {
      kind = Kind::kFunc;
    } else if (word == "module") {
      kind = Kind::kModule;
    } else if (word == "in_module") {
      kind = Kind::kInModule;
    } else if (word == "label") {
      kind = Kind::kLabel;
    } else {
      pos_ = start;
      return Error("expected func(...), module(...), in_module(...), label(...), all or none");
    }
    if (!Eat('(')) return Error("expected '('");
    absl::StatusOr<std::string> arg = String();
    if (!arg.ok()) return arg.status();
    if (!Eat(')')) return Error("expected ')'");
    if (kind == Kind::kModule || kind == Kind::kInModule) {
      auto [path, pass] = SplitAddress(*arg);
      return Leaf(kind, std::move(path), pass);
    }
    return Leaf(kind, *std::move(arg));
  }
  absl::StatusOr<std::string> String() {
    Skip();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    const char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out.push_back(text_[pos_++]);
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    ++pos_;
    return out;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("selector \"", absl::string_view(text_.data(), text_.size()), "\", at offset ",
                     pos_, ": ", absl::string_view(what.data(), what.size())));
  }

  const std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

OpSite SiteOf(const OpGraph& graph, int32_t op) {
  OpSite site;
  if (op < 0 || static_cast<size_t>(op) >= graph.ops.size()) return site;
  const OpNode& node = graph.ops[op];
  site.func_name = node.func_name;
  site.label = node.label;
  for (int32_t p = node.module_pass; p >= 0 && static_cast<size_t>(p) < graph.modules.size();
       p = graph.modules[p].parent) {
    site.enclosing.insert(site.enclosing.begin(),
                          SiteModule{graph.modules[p].path, graph.modules[p].pass});
  }
  for (int32_t p : node.output_of) {
    if (p >= 0 && static_cast<size_t>(p) < graph.modules.size()) {
      site.output_of.push_back(SiteModule{graph.modules[p].path, graph.modules[p].pass});
    }
  }
  return site;
}

OpSelector OpSelector::All() { return OpSelector(Leaf(Kind::kAll)); }
OpSelector OpSelector::None() { return OpSelector(Leaf(Kind::kNone)); }
OpSelector OpSelector::Func(std::string_view name) {
  return OpSelector(Leaf(Kind::kFunc, std::string(name)));
}
OpSelector OpSelector::Module(std::string_view address) {
  auto [path, pass] = SplitAddress(address);
  return OpSelector(Leaf(Kind::kModule, std::move(path), pass));
}
OpSelector OpSelector::InModule(std::string_view address) {
  auto [path, pass] = SplitAddress(address);
  return OpSelector(Leaf(Kind::kInModule, std::move(path), pass));
}
OpSelector OpSelector::Label(std::string_view label) {
  return OpSelector(Leaf(Kind::kLabel, std::string(label)));
}

absl::StatusOr<OpSelector> OpSelector::Parse(std::string_view text) {
  absl::StatusOr<std::shared_ptr<const Node>> node = Parser(text).Run();
  if (!node.ok()) return node.status();
  return OpSelector(*std::move(node));
}

OpSelector operator|(const OpSelector& a, const OpSelector& b) {
  return OpSelector(Combine(Kind::kOr, a.node_, b.node_));
}
OpSelector operator&(const OpSelector& a, const OpSelector& b) {
  return OpSelector(Combine(Kind::kAnd, a.node_, b.node_));
}
OpSelector operator~(const OpSelector& a) {
  return OpSelector(Combine(Kind::kNot, a.node_, nullptr));
}

bool OpSelector::Matches(const OpSite& site) const { return Eval(*node_, site); }
bool OpSelector::NeedsModuleOutputs() const { return NeedsOutputs(*node_); }
std::string OpSelector::ToString() const { return Print(*node_, 0); }

}  // namespace tracetorch
