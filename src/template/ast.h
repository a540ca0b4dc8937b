// The parsed form of a template: expressions and statements, each with its template line.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace gerbil::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    List,     // operands: the items
    Tuple,    // operands: the items
    Dict,     // operands: key, value, key, value, ...
    Attr,     // operands[0].name
    Item,     // operands[0][operands[1]]
    Slice,    // operands[0][operands[1]:operands[2]:operands[3]], absent bounds are null
    Call,     // operands[0](operands[1:], keywords)
    Filter,   // operands[0] | name(operands[1:], keywords); operands[0] is null in a filter block
    Test,     // operands[0] is [not] name(operands[1:], keywords)
    Unary,    // name ("-", "+", "not") operands[0]
    Binary,   // operands[0] name operands[1]: + - * / // % ** ~ and or
    Compare,  // operands[0] ops[0] operands[1] ops[1] operands[2] ...: == != < <= > >= in notin
    Cond,     // operands[0] if operands[1] else operands[2] (null when there is no else)
  };
  Kind kind;
  int line;
  Value value;
  std::string name;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;
  bool negated = false;
};

// Where `set`, `for` and `with` store values: one name, a tuple of names, or a namespace attribute.
struct Target {
  std::vector<std::string> names;  // more than one, or `tuple`, means unpacking
  bool tuple = false;
  std::string attribute;  // set on `{% set ns.attribute = ... %}` (names holds the namespace)
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Node {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches: (condition, body); a final else has a null condition
    For,          // for target in expr [if condition]: body [else else_body]
    Set,          // set target = expr
    SetBlock,     // set target [| filter]: body captured (filter in expr, null if none)
    Macro,        // macro name(params): body
    FilterBlock,  // filter expr: body (expr is a Filter chain with a null innermost input)
    With,         // with assignments: body
    Break,
    Continue,
    Scope,      // body rendered as is ({% generation %} of transformers' AssistantTracker)
    CallBlock,  // call(params) expr: body is the `caller` macro passed to the call in expr
  };
  Kind kind;
  int line;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  Target target;
  Body body;
  Body else_body;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<Target, ExprPtr>> assignments;
  std::string name;
  std::vector<MacroParam> params;
  bool uses_varargs =
      false;  // the macro (or caller) body reads `varargs` / `kwargs`: it accepts extra arguments
  bool uses_kwargs = false;
};

}  // namespace gerbil::jinja
