#include "template/interpreter.h"

#include "template/builtins.h"
#include "template/errors.h"
#include "template/operations.h"

namespace gerbil::jinja {

// Gives errors from builtins and operations the template line they happened on; errors that already
// have one pass through unchanged.
template <typename F>
static auto at_line(int line, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const TemplateError&) {
    throw;
  } catch (const RaisedException& e) {
    throw TemplateError(fmt::format("template raised an exception at line {}: {}", line, e.what()), line);
  } catch (const Error& e) {
    runtime_error(line, e.what());
  }
}

std::string Interpreter::render(const Body& body, const Dict& variables) {
  auto globals = std::make_shared<Frame>();
  Dict functions = global_functions();
  for (const auto& [name, value] : functions.entries()) globals->variables[name] = value;
  auto context = child(globals);
  for (const auto& [name, value] : variables.entries()) context->variables[name] = value;
  std::string out;
  out_ = &out;
  exec_body(body, context);
  return out;
}

Interpreter::FramePtr Interpreter::child(const FramePtr& parent) {
  auto frame = std::make_shared<Frame>();
  frame->parent = parent;
  return frame;
}

Value Interpreter::lookup(const FramePtr& frame, const std::string& name) const {
  for (const Frame* f = frame.get(); f; f = f->parent.get()) {
    auto it = f->variables.find(name);
    if (it != f->variables.end()) return it->second;
  }
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

void Interpreter::assign(const Target& target, const Value& value, const FramePtr& frame, int line) {
  at_line(line, [&] {
    if (!target.attribute.empty()) {
      Value ns = lookup(frame, target.names[0]);
      if (!ns.is_namespace())
        fail("cannot assign attribute '{}' on non-namespace object '{}'", target.attribute, target.names[0]);
      ns.as_namespace().attributes.set(target.attribute, value);
    } else if (!target.tuple && target.names.size() == 1) {
      frame->variables[target.names[0]] = value;
    } else {
      std::vector<Value> items = iterate(value);
      if (items.size() != target.names.size())
        fail("{} values to unpack (expected {}, got {})",
             items.size() > target.names.size() ? "too many" : "not enough", target.names.size(),
             items.size());
      for (size_t i = 0; i < items.size(); ++i) frame->variables[target.names[i]] = items[i];
    }
  });
}

void Interpreter::write(std::string_view text) {
  out_->append(text);
  runtime_.check_size(out_->size());
}

std::string Interpreter::capture(const Body& body, const FramePtr& frame) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

// --- statements ---------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const Body& body, const FramePtr& frame) {
  for (const auto& node : body) {
    Flow flow = exec(*node, frame);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Node& node, const FramePtr& frame) {
  switch (node.kind) {
    case Node::Kind::Text:
      at_line(node.line, [&] { write(node.text); });
      break;
    case Node::Kind::Output: {
      Value value = eval(*node.expr, frame);
      at_line(node.line, [&] { write(value.str()); });
      break;
    }
    case Node::Kind::If:
      for (const auto& [condition, body] : node.branches)
        if (!condition || eval(*condition, frame).truthy()) return exec_body(body, frame);
      break;
    case Node::Kind::For:
      return exec_for(node, frame);
    case Node::Kind::Set:
      assign(node.target, eval(*node.expr, frame), frame, node.line);
      break;
    case Node::Kind::SetBlock: {
      Value captured(capture(node.body, child(frame)));
      if (node.expr) captured = eval_filter(*node.expr, &captured, frame);
      assign(node.target, captured, frame, node.line);
      break;
    }
    case Node::Kind::Macro:
      frame->variables[node.name] = define_macro(node, frame);
      break;
    case Node::Kind::FilterBlock: {
      Value captured(capture(node.body, child(frame)));
      Value filtered = eval_filter(*node.expr, &captured, frame);
      at_line(node.line, [&] { write(filtered.str()); });
      break;
    }
    case Node::Kind::With: {
      FramePtr scope = child(frame);
      for (const auto& [target, expr] : node.assignments)
        assign(target, eval(*expr, frame), scope, node.line);
      return exec_body(node.body, scope);
    }
    case Node::Kind::Break:
      return Flow::Break;
    case Node::Kind::Continue:
      return Flow::Continue;
    case Node::Kind::Scope:
      return exec_body(node.body, frame);
    case Node::Kind::CallBlock: {
      const Expr& call = *node.expr;
      Value callee = eval(*call.operands[0], frame);
      Args args = eval_args(call, 1, frame);
      args.keyword.emplace_back("caller", define_macro(node, frame));
      Value result = at_line(call.line, [&] { return call_function(callee, args); });
      at_line(node.line, [&] { write(result.str()); });
      break;
    }
  }
  return Flow::Normal;
}

// The `loop` object of one iteration.
static Value loop_info(const std::vector<Value>& items, size_t i) {
  int64_t n = static_cast<int64_t>(items.size()), index = static_cast<int64_t>(i);
  Dict loop;
  loop.set("index", index + 1);
  loop.set("index0", index);
  loop.set("revindex", n - index);
  loop.set("revindex0", n - index - 1);
  loop.set("first", i == 0);
  loop.set("last", index == n - 1);
  loop.set("length", n);
  loop.set("depth", 1);
  loop.set("depth0", 0);
  loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  loop.set("nextitem", index + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  loop.set("cycle", make_function("loop.cycle", [i](Runtime&, const Args& args) {
             if (args.positional.empty()) fail("no items for cycling given");
             return args.positional[i % args.positional.size()];
           }));
  return Value(std::move(loop));
}

Interpreter::Flow Interpreter::exec_for(const Node& node, const FramePtr& frame) {
  Value iterable = eval(*node.expr, frame);
  std::vector<Value> items = at_line(node.expr->line, [&] {
    std::vector<Value> all = iterate(iterable);
    runtime_.count_work(all.size() * sizeof(Value));
    return all;
  });
  if (node.condition) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      at_line(node.line, [&] { runtime_.count_iterations(1); });
      FramePtr scope = child(frame);
      assign(node.target, item, scope, node.line);
      if (eval(*node.condition, scope).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(node.else_body, child(frame));
  for (size_t i = 0; i < items.size(); ++i) {
    at_line(node.line, [&] { runtime_.count_iterations(1); });
    FramePtr scope = child(frame);
    assign(node.target, items[i], scope, node.line);
    scope->variables["loop"] = loop_info(items, i);
    if (exec_body(node.body, scope) == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interpreter::define_macro(const Node& node, const FramePtr& frame) {
  // The closure refers to the defining frame without owning it (the frame owns the macro, so owning it
  // back would leak the cycle); the node lives as long as the parsed template.
  std::weak_ptr<Frame> closure = frame;
  return make_function(node.name, [this, &node, closure](Runtime&, const Args& args) {
    FramePtr scope = closure.lock();
    if (!scope) fail("macro '{}' was called after the block that defined it ended", node.name);
    return call_macro(node, scope, args);
  });
}

Value Interpreter::call_macro(const Node& node, const FramePtr& closure, const Args& args) {
  if (++runtime_.call_depth > runtime_.limits.max_call_depth) {
    --runtime_.call_depth;
    fail("macro calls nest deeper than the sandbox limit of {}", runtime_.limits.max_call_depth);
  }
  struct DepthGuard {
    Runtime& runtime;
    ~DepthGuard() { --runtime.call_depth; }
  } guard{runtime_};
  const auto& params = node.params;
  if (args.positional.size() > params.size() && !node.uses_varargs)
    fail("macro '{}' takes not more than {} argument(s)", node.name, params.size());
  FramePtr scope = child(closure);
  std::vector<bool> given(params.size(), false);
  for (size_t i = 0; i < args.positional.size() && i < params.size(); ++i) {
    scope->variables[params[i].name] = args.positional[i];
    given[i] = true;
  }
  Dict extra_keywords;
  for (const auto& [name, value] : args.keyword) {
    // Captured as [&key = name]: clang before 16 cannot capture a structured binding (fuzz builds use clang 14).
    auto it = std::find_if(params.begin(), params.end(),
                           [&key = name](const MacroParam& p) { return p.name == key; });
    if (it == params.end() && name == "caller") {
      scope->variables[name] = value;  // the body of a {% call %} block
      continue;
    }
    if (it == params.end()) {
      if (!node.uses_kwargs) fail("macro '{}' takes no keyword argument '{}'", node.name, name);
      extra_keywords.set(name, value);
      continue;
    }
    size_t i = it - params.begin();
    if (given[i]) fail("macro '{}' got multiple values for argument '{}'", node.name, name);
    scope->variables[name] = value;
    given[i] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i]) continue;
    scope->variables[params[i].name] =
        params[i].default_value
            ? eval(*params[i].default_value, scope)
            : Value::undefined(fmt::format("parameter '{}' was not provided", params[i].name));
  }
  std::vector<Value> varargs;
  if (args.positional.size() > params.size())
    varargs.assign(args.positional.begin() + params.size(), args.positional.end());
  scope->variables["varargs"] = Value(std::move(varargs), true);
  scope->variables["kwargs"] = Value(std::move(extra_keywords));
  return Value(capture(node.body, scope));
}

// --- expressions --------------------------------------------------------------------------------

// The bytes a newly built value holds (its strings share storage with the values it came from).
static size_t built_bytes(const Value& value) {
  if (value.is_string()) return value.as_string().size();
  if (value.is_list()) return value.as_list().size() * sizeof(Value);
  if (value.is_dict()) return value.as_dict().size() * sizeof(Value);
  return 0;
}

Value Interpreter::eval(const Expr& expr, const FramePtr& frame) {
  return at_line(expr.line, [&] {
    Value value = eval_unchecked(expr, frame);
    // Expressions that build new strings and lists count as work; names and lookups share what exists.
    switch (expr.kind) {
      case Expr::Kind::List:
      case Expr::Kind::Tuple:
      case Expr::Kind::Dict:
      case Expr::Kind::Slice:
      case Expr::Kind::Call:
      case Expr::Kind::Filter:
      case Expr::Kind::Binary:
        runtime_.count_work(built_bytes(value));
        break;
      default:
        break;
    }
    return value;
  });
}

Args Interpreter::eval_args(const Expr& expr, size_t first, const FramePtr& frame) {
  Args args;
  for (size_t i = first; i < expr.operands.size(); ++i)
    args.positional.push_back(eval(*expr.operands[i], frame));
  for (const auto& [name, value] : expr.keywords) args.keyword.emplace_back(name, eval(*value, frame));
  return args;
}

// A filter chain; `block_input` replaces the innermost (null) input of filter blocks and `set` blocks.
Value Interpreter::eval_filter(const Expr& expr, const Value* block_input, const FramePtr& frame) {
  const Expr* inner = expr.operands[0].get();
  Value input = !inner                                             ? *block_input
                : inner->kind == Expr::Kind::Filter && block_input ? eval_filter(*inner, block_input, frame)
                                                                   : eval(*inner, frame);
  Args args = eval_args(expr, 1, frame);
  return at_line(expr.line, [&] { return apply_filter(runtime_, expr.name, input, args); });
}

Value Interpreter::call_function(const Value& callee, const Args& args) {
  require_defined(callee);
  if (!callee.is_function()) fail("'{}' object is not callable", callee.type_name());
  return callee.as_function().call(runtime_, args);
}

bool Interpreter::compare(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return equal(left, right);
  if (op == "!=") return !equal(left, right);
  if (op == "<") return less(left, right);
  if (op == ">") return less(right, left);
  if (op == "<=") return less(left, right) || equal(left, right);
  if (op == ">=") return less(right, left) || equal(left, right);
  if (op == "in") return contains(right, left);
  return !contains(right, left);  // notin
}

Value Interpreter::eval_unchecked(const Expr& expr, const FramePtr& frame) {
  const auto& operands = expr.operands;
  auto operand = [&](size_t i) { return eval(*operands[i], frame); };
  switch (expr.kind) {
    case Expr::Kind::Literal:
      return expr.value;
    case Expr::Kind::Name:
      return lookup(frame, expr.name);
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      for (size_t i = 0; i < operands.size(); ++i) items.push_back(operand(i));
      return Value(std::move(items), expr.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      Dict dict;
      for (size_t i = 0; i < operands.size(); i += 2) {
        Value key = operand(i);
        if (!key.is_string()) fail("dict keys must be strings in templates, not {}", key.type_name());
        dict.set(key.as_string(), operand(i + 1));
      }
      return Value(std::move(dict));
    }
    case Expr::Kind::Attr:
      return get_attribute(operand(0), expr.name);
    case Expr::Kind::Item:
      return get_item(operand(0), operand(1));
    case Expr::Kind::Slice: {
      Value object = operand(0);
      auto bound = [&](size_t i) { return operands[i] ? operand(i) : Value::none(); };
      return get_slice(object, bound(1), bound(2), bound(3));
    }
    case Expr::Kind::Call: {
      Value callee = operand(0);
      return call_function(callee, eval_args(expr, 1, frame));
    }
    case Expr::Kind::Filter:
      return eval_filter(expr, nullptr, frame);
    case Expr::Kind::Test: {
      Value subject = operand(0);
      Args args = eval_args(expr, 1, frame);
      return Value(apply_test(runtime_, expr.name, subject, args) != expr.negated);
    }
    case Expr::Kind::Unary:
      if (expr.name == "not") return Value(!operand(0).truthy());
      return negate(operand(0), expr.name == "-");
    case Expr::Kind::Binary: {
      Value left = operand(0);
      if (expr.name == "and") return left.truthy() ? operand(1) : left;
      if (expr.name == "or") return left.truthy() ? left : operand(1);
      Value right = operand(1);
      if (expr.name == "~") {
        std::string joined = left.str() + right.str();
        runtime_.check_size(joined.size());
        return Value(std::move(joined));
      }
      return arithmetic(expr.name, left, right, runtime_);
    }
    case Expr::Kind::Compare: {
      Value left = operand(0);
      for (size_t i = 0; i < expr.ops.size(); ++i) {
        Value right = operand(i + 1);
        if (!compare(expr.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::Cond:
      if (operand(1).truthy()) return operand(0);
      if (operands[2]) return operand(2);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          expr.line));
  }
  return Value();
}

}  // namespace gerbil::jinja
