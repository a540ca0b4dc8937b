// Executes a parsed template: statements write to an output string, expressions evaluate to Values.
// Scoping follows jinja2: each loop iteration and each macro call has its own frame (so `set` inside a
// loop does not leak out, which is why templates use namespace()), while `if` bodies share their
// enclosing frame.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "template/ast.h"
#include "template/runtime.h"

namespace gerbil::jinja {

class Interpreter {
 public:
  explicit Interpreter(Runtime& runtime) : runtime_(runtime) {}
  // Renders `body` with `variables` (over the global functions) and returns the output.
  std::string render(const Body& body, const Dict& variables);

 private:
  struct Frame {
    std::unordered_map<std::string, Value> variables;
    std::shared_ptr<Frame> parent;
  };
  using FramePtr = std::shared_ptr<Frame>;
  enum class Flow { Normal, Break, Continue };

  Runtime& runtime_;
  std::string* out_ = nullptr;  // where output goes; macros and block sets capture into their own

  static FramePtr child(const FramePtr& parent);
  Value lookup(const FramePtr& frame, const std::string& name) const;
  void assign(const Target& target, const Value& value, const FramePtr& frame, int line);
  void write(std::string_view text);
  std::string capture(const Body& body, const FramePtr& frame);

  Flow exec_body(const Body& body, const FramePtr& frame);
  Flow exec(const Node& node, const FramePtr& frame);
  Flow exec_for(const Node& node, const FramePtr& frame);
  Value define_macro(const Node& node, const FramePtr& frame);
  Value call_macro(const Node& node, const FramePtr& closure, const Args& args);

  Value eval(const Expr& expr, const FramePtr& frame);
  Value eval_unchecked(const Expr& expr, const FramePtr& frame);
  Args eval_args(const Expr& expr, size_t first, const FramePtr& frame);
  Value eval_filter(const Expr& expr, const Value* block_input, const FramePtr& frame);
  Value call_function(const Value& callee, const Args& args);
  bool compare(const std::string& op, const Value& left, const Value& right);
};

}  // namespace gerbil::jinja
