#include "template/parser.h"

#include <algorithm>

#include "template/builtins.h"
#include "template/errors.h"

namespace gerbil::jinja {
namespace {

constexpr int kMaxNesting = 200;  // deeper expressions or blocks would only exhaust the stack

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::Text:
      return "text";
    case TokenType::VarBegin:
      return "'{{'";
    case TokenType::VarEnd:
      return "end of print statement";
    case TokenType::BlockBegin:
      return "'{%'";
    case TokenType::BlockEnd:
      return "end of statement block";
    case TokenType::String:
      return "string";
    case TokenType::Integer:
    case TokenType::Float:
      return "number " + token.text;
    case TokenType::End:
      return "end of template";
    default:
      return "'" + token.text + "'";
  }
}

ExprPtr make(Expr::Kind kind, int line) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

std::unique_ptr<Node> make_node(Node::Kind kind, int line) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->line = line;
  return node;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, "", 0, end);
    return body;
  }

 private:
  const std::vector<Token>& tokens_;
  size_t at_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  int varargs_uses_ = 0;
  int kwargs_uses_ = 0;

  // --- token helpers ---------------------------------------------------------------------------
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(at_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& token = peek();
    if (at_ < tokens_.size() - 1) ++at_;
    return token;
  }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::Operator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::Name && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void unexpected(std::string_view expected) const {
    syntax_error(peek().line, fmt::format("expected {}, got {}", expected, describe(peek())));
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) unexpected(fmt::format("'{}'", op));
  }
  void expect(TokenType type) {
    if (peek().type != type) unexpected(describe(Token{type, "", 0}));
    next();
  }
  std::string expect_name() {
    if (peek().type != TokenType::Name) unexpected("a name");
    return next().text;
  }

  struct NestingGuard {
    Parser& parser;
    explicit NestingGuard(Parser& p) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) syntax_error(p.peek().line, "template nests too deeply");
    }
    ~NestingGuard() { --parser.nesting_; }
  };

  // --- statements ------------------------------------------------------------------------------

  // Parses until a `{% tag %}` whose tag is in `end_tags` (consuming `{%` and the tag name, and leaving
  // the rest of that tag to the caller), or the end of the template when `end_tags` is empty.
  Body parse_body(std::initializer_list<std::string_view> end_tags, std::string_view opener, int opener_line,
                  std::string& which_end) {
    Body body;
    while (true) {
      const Token& token = peek();
      if (token.type == TokenType::End) {
        if (end_tags.size() == 0) return body;
        syntax_error(token.line, fmt::format("unexpected end of template: the '{}' block from line {} needs "
                                             "{{% end{} %}}",
                                             opener, opener_line, opener));
      }
      if (token.type == TokenType::Text) {
        auto node = make_node(Node::Kind::Text, token.line);
        node->text = next().text;
        body.push_back(std::move(node));
      } else if (token.type == TokenType::VarBegin) {
        auto node = make_node(Node::Kind::Output, next().line);
        node->expr = parse_tuple(true, {});
        expect(TokenType::VarEnd);
        body.push_back(std::move(node));
      } else {
        next();  // {%
        const Token& tag = peek();
        if (tag.type == TokenType::Name &&
            std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end()) {
          which_end = next().text;
          return body;
        }
        body.push_back(parse_statement(end_tags));
      }
    }
  }

  std::unique_ptr<Node> parse_statement(std::initializer_list<std::string_view> end_tags) {
    NestingGuard guard(*this);
    const Token& tag = peek();
    if (tag.type != TokenType::Name) unexpected("a statement name");
    std::string name = tag.text;
    int line = tag.line;
    if (name == "if") return parse_if();
    if (name == "for") return parse_for();
    if (name == "set") return parse_set();
    if (name == "macro") return parse_macro();
    if (name == "filter") return parse_filter_block();
    if (name == "with") return parse_with();
    if (name == "generation") return parse_scope("endgeneration");
    if (name == "call") return parse_call_block();
    if (name == "print") {
      next();
      auto node = make_node(Node::Kind::Output, line);
      node->expr = parse_tuple(true, {});
      expect(TokenType::BlockEnd);
      return node;
    }
    if (name == "break" || name == "continue") {
      next();
      if (loop_depth_ == 0) syntax_error(line, fmt::format("'{}' outside of a loop", name));
      expect(TokenType::BlockEnd);
      return make_node(name == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    static const std::string_view unsupported[] = {"block", "extends",    "include", "import",
                                                   "from",  "autoescape", "do"};
    if (std::find(std::begin(unsupported), std::end(unsupported), name) != std::end(unsupported))
      syntax_error(line, fmt::format("the '{}' tag is not supported in chat templates", name));
    std::string expected;
    for (auto end : end_tags) expected += (expected.empty() ? "" : " or ") + fmt::format("'{}'", end);
    syntax_error(line, expected.empty() ? fmt::format("unknown tag '{}'", name)
                                        : fmt::format("unknown tag '{}' (expected {})", name, expected));
  }

  std::unique_ptr<Node> parse_if() {
    auto node = make_node(Node::Kind::If, next().line);
    ExprPtr condition = parse_tuple(false, {});
    while (true) {
      expect(TokenType::BlockEnd);
      std::string end;
      Body body = parse_body({"elif", "else", "endif"}, "if", node->line, end);
      node->branches.emplace_back(std::move(condition), std::move(body));
      if (end == "elif") {
        condition = parse_tuple(false, {});
        continue;
      }
      if (end == "else") {
        expect(TokenType::BlockEnd);
        Body else_body = parse_body({"endif"}, "if", node->line, end);
        node->branches.emplace_back(nullptr, std::move(else_body));
      }
      expect(TokenType::BlockEnd);
      return node;
    }
  }

  std::unique_ptr<Node> parse_for() {
    auto node = make_node(Node::Kind::For, next().line);
    node->target = parse_target(false, "in");
    if (!skip_name("in")) unexpected("'in'");
    node->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) node->condition = parse_expression(true);
    if (at_name("recursive")) syntax_error(peek().line, "recursive loops are not supported");
    expect(TokenType::BlockEnd);
    std::string end;
    ++loop_depth_;
    node->body = parse_body({"endfor", "else"}, "for", node->line, end);
    --loop_depth_;
    if (end == "else") {
      expect(TokenType::BlockEnd);
      node->else_body = parse_body({"endfor"}, "for", node->line, end);
    }
    expect(TokenType::BlockEnd);
    return node;
  }

  std::unique_ptr<Node> parse_set() {
    int line = next().line;
    Target target = parse_target(true, "");
    if (skip_op("=")) {
      auto node = make_node(Node::Kind::Set, line);
      node->target = std::move(target);
      node->expr = parse_tuple(true, {});
      expect(TokenType::BlockEnd);
      return node;
    }
    auto node = make_node(Node::Kind::SetBlock, line);
    node->target = std::move(target);
    if (at_op("|")) node->expr = parse_filter_chain(nullptr);
    expect(TokenType::BlockEnd);
    std::string end;
    node->body = parse_body({"endset"}, "set", line, end);
    expect(TokenType::BlockEnd);
    return node;
  }

  // `(a, b=default, ...)` of a macro or a call block's caller.
  void parse_signature(Node& node) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!node.params.empty()) expect_op(",");
      if (skip_op(")")) break;
      MacroParam param{expect_name(), nullptr};
      if (skip_op("="))
        param.default_value = parse_expression(true);
      else if (!node.params.empty() && node.params.back().default_value)
        syntax_error(node.line, "non-default macro argument follows default argument");
      node.params.push_back(std::move(param));
    }
  }

  // The body of a macro or call block, noting whether it reads `varargs` / `kwargs`.
  void parse_macro_body(Node& node, std::string_view opener) {
    int varargs_before = varargs_uses_, kwargs_before = kwargs_uses_;
    int loop_depth = loop_depth_;
    loop_depth_ = 0;  // a macro body is not inside the caller's loop
    std::string end;
    node.body = parse_body({"end" + std::string(opener)}, opener, node.line, end);
    loop_depth_ = loop_depth;
    node.uses_varargs = varargs_uses_ > varargs_before;
    node.uses_kwargs = kwargs_uses_ > kwargs_before;
    expect(TokenType::BlockEnd);
  }

  std::unique_ptr<Node> parse_macro() {
    auto node = make_node(Node::Kind::Macro, next().line);
    node->name = expect_name();
    parse_signature(*node);
    expect(TokenType::BlockEnd);
    parse_macro_body(*node, "macro");
    return node;
  }

  std::unique_ptr<Node> parse_call_block() {
    auto node = make_node(Node::Kind::CallBlock, next().line);
    node->name = "caller";
    if (at_op("(")) parse_signature(*node);
    node->expr = parse_expression(true);
    if (node->expr->kind != Expr::Kind::Call) syntax_error(node->line, "expected a call after {% call %}");
    expect(TokenType::BlockEnd);
    parse_macro_body(*node, "call");
    return node;
  }

  std::unique_ptr<Node> parse_filter_block() {
    auto node = make_node(Node::Kind::FilterBlock, next().line);
    node->expr = parse_filter_chain(nullptr, /*first_bar=*/false);
    expect(TokenType::BlockEnd);
    std::string end;
    node->body = parse_body({"endfilter"}, "filter", node->line, end);
    expect(TokenType::BlockEnd);
    return node;
  }

  std::unique_ptr<Node> parse_with() {
    auto node = make_node(Node::Kind::With, next().line);
    while (peek().type != TokenType::BlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      Target target = parse_target(false, "");
      expect_op("=");
      node->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    expect(TokenType::BlockEnd);
    std::string end;
    node->body = parse_body({"endwith"}, "with", node->line, end);
    expect(TokenType::BlockEnd);
    return node;
  }

  std::unique_ptr<Node> parse_scope(std::string_view end_tag) {
    auto node = make_node(Node::Kind::Scope, peek().line);
    std::string opener = next().text;
    expect(TokenType::BlockEnd);
    std::string end;
    node->body = parse_body({end_tag}, opener, node->line, end);
    expect(TokenType::BlockEnd);
    return node;
  }

  // `name`, `a, b`, `(a, b)`, or with `allow_attribute` `ns.attr`.
  Target parse_target(bool allow_attribute, std::string_view end_name) {
    Target target;
    bool parens = skip_op("(");
    target.names.push_back(expect_name());
    if (allow_attribute && !parens && skip_op(".")) {
      target.attribute = expect_name();
      return target;
    }
    while (skip_op(",")) {
      target.tuple = true;
      if (at_op(")") || at_op("=") || (!end_name.empty() && at_name(end_name))) break;
      target.names.push_back(expect_name());
    }
    if (parens) {
      expect_op(")");
      target.tuple = true;
    }
    for (const auto& name : target.names)
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None")
        syntax_error(peek().line, fmt::format("cannot assign to '{}'", name));
    return target;
  }

  // --- expressions -----------------------------------------------------------------------------

  bool at_tuple_end(std::initializer_list<std::string_view> extra_end_names) const {
    TokenType type = peek().type;
    if (type == TokenType::VarEnd || type == TokenType::BlockEnd || at_op(")")) return true;
    return std::any_of(extra_end_names.begin(), extra_end_names.end(), [&](auto n) { return at_name(n); });
  }

  // Comma-separated expressions; more than one (or a trailing comma) makes a tuple.
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end_names,
                      bool explicit_parentheses = false) {
    int line = peek().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_tuple_end(extra_end_names)) break;
      items.push_back(parse_expression(with_condexpr));
      if (!at_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parentheses) unexpected("an expression");
    auto tuple = make(Expr::Kind::Tuple, line);
    tuple->operands = std::move(items);
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    NestingGuard guard(*this);
    ExprPtr value = parse_or();
    while (at_name("if")) {
      auto cond = make(Expr::Kind::Cond, next().line);
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      cond->operands.push_back(std::move(value));
      cond->operands.push_back(std::move(test));
      cond->operands.push_back(std::move(otherwise));
      value = std::move(cond);
    }
    return value;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto node = make(Expr::Kind::Binary, line);
    node->name = std::move(op);
    node->operands.push_back(std::move(left));
    node->operands.push_back(std::move(right));
    return node;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    NestingGuard guard(*this);
    auto node = make(Expr::Kind::Unary, next().line);
    node->name = "not";
    node->operands.push_back(parse_not());
    return node;
  }

  ExprPtr parse_compare() {
    int line = peek().line;
    ExprPtr first = parse_math1();
    auto node = make(Expr::Kind::Compare, line);
    node->operands.push_back(std::move(first));
    while (true) {
      const Token& token = peek();
      static const std::string_view comparisons[] = {"==", "!=", "<", "<=", ">", ">="};
      if (token.type == TokenType::Operator &&
          std::find(std::begin(comparisons), std::end(comparisons), token.text) != std::end(comparisons)) {
        node->ops.push_back(next().text);
      } else if (at_name("in")) {
        next();
        node->ops.push_back("in");
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        node->ops.push_back("notin");
      } else {
        break;
      }
      node->operands.push_back(parse_math1());
    }
    if (node->ops.empty()) return std::move(node->operands[0]);
    return node;
  }

  template <typename Next>
  ExprPtr parse_left_assoc(std::initializer_list<std::string_view> ops, Next parse_operand) {
    ExprPtr left = (this->*parse_operand)();
    while (peek().type == TokenType::Operator &&
           std::find(ops.begin(), ops.end(), peek().text) != ops.end()) {
      const Token& op = next();
      left = binary(op.text, std::move(left), (this->*parse_operand)(), op.line);
    }
    return left;
  }

  ExprPtr parse_math1() { return parse_left_assoc({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return parse_left_assoc({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return parse_left_assoc({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_left_assoc({"**"}, &Parser::parse_unary_with_filters); }
  ExprPtr parse_unary_with_filters() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    NestingGuard guard(*this);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      node = make(Expr::Kind::Unary, peek().line);
      node->name = next().text;
      node->operands.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr literal(Value value, int line) {
    auto node = make(Expr::Kind::Literal, line);
    node->value = std::move(value);
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = peek();
    int line = token.line;
    switch (token.type) {
      case TokenType::Name: {
        std::string name = next().text;
        if (name == "true" || name == "True") return literal(true, line);
        if (name == "false" || name == "False") return literal(false, line);
        if (name == "none" || name == "None") return literal(Value::none(), line);
        varargs_uses_ += name == "varargs";
        kwargs_uses_ += name == "kwargs";
        auto node = make(Expr::Kind::Name, line);
        node->name = std::move(name);
        return node;
      }
      case TokenType::String: {
        std::string value;
        while (peek().type == TokenType::String) value += next().text;  // adjacent literals concatenate
        return literal(std::move(value), line);
      }
      case TokenType::Integer:
        return literal(next().int_value, line);
      case TokenType::Float:
        return literal(next().float_value, line);
      default:
        break;
    }
    if (skip_op("(")) {
      ExprPtr inner = parse_tuple(true, {}, true);
      expect_op(")");
      return inner;
    }
    if (skip_op("[")) {
      auto list = make(Expr::Kind::List, line);
      while (!skip_op("]")) {
        if (!list->operands.empty()) expect_op(",");
        if (skip_op("]")) break;
        list->operands.push_back(parse_expression(true));
      }
      return list;
    }
    if (skip_op("{")) {
      auto dict = make(Expr::Kind::Dict, line);
      while (!skip_op("}")) {
        if (!dict->operands.empty()) expect_op(",");
        if (skip_op("}")) break;
        dict->operands.push_back(parse_expression(true));
        expect_op(":");
        dict->operands.push_back(parse_expression(true));
      }
      return dict;
    }
    syntax_error(line, fmt::format("unexpected {}", describe(token)));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_op(".") || at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (at_op("|")) {
        node = parse_filter_chain(std::move(node));
      } else if (at_name("is")) {
        node = parse_test(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    const Token& token = next();
    int line = token.line;
    if (token.text == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::Name) {
        auto node = make(Expr::Kind::Attr, line);
        node->name = attr.text;
        node->operands.push_back(std::move(target));
        return node;
      }
      if (attr.type != TokenType::Integer) syntax_error(line, "expected a name or number after '.'");
      auto node = make(Expr::Kind::Item, line);
      node->operands.push_back(std::move(target));
      node->operands.push_back(literal(attr.int_value, line));
      return node;
    }
    // `[`: an index or a slice
    ExprPtr start;
    if (!at_op(":")) {
      start = parse_expression(true);
      if (skip_op("]")) {
        auto node = make(Expr::Kind::Item, line);
        node->operands.push_back(std::move(target));
        node->operands.push_back(std::move(start));
        return node;
      }
    }
    expect_op(":");
    auto slice = make(Expr::Kind::Slice, line);
    slice->operands.push_back(std::move(target));
    slice->operands.push_back(std::move(start));
    slice->operands.push_back(at_op("]") || at_op(":") ? nullptr : parse_expression(true));
    ExprPtr step;
    if (skip_op(":") && !at_op("]")) step = parse_expression(true);
    slice->operands.push_back(std::move(step));
    expect_op("]");
    return slice;
  }

  // Parses `(args)` into node's operands (after those already there) and keywords.
  void parse_call_args(Expr& node) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (at_op("*") || at_op("**"))
        syntax_error(peek().line, "*args and **kwargs in calls are not supported");
      if (peek().type == TokenType::Name && at_op("=", 1)) {
        std::string key = next().text;
        next();
        node.keywords.emplace_back(std::move(key), parse_expression(true));
        continue;
      }
      if (!node.keywords.empty()) syntax_error(peek().line, "positional argument follows keyword argument");
      node.operands.push_back(parse_expression(true));
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto node = make(Expr::Kind::Call, peek().line);
    node->operands.push_back(std::move(callee));
    parse_call_args(*node);
    return node;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (at_op(".") && peek(1).type == TokenType::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  // `| f(args) | g ...`; `input` is null for filter blocks and `{% set x | f %}`.
  ExprPtr parse_filter_chain(ExprPtr input, bool first_bar = true) {
    do {
      if (first_bar) expect_op("|");
      first_bar = true;
      int line = peek().line;
      auto node = make(Expr::Kind::Filter, line);
      node->name = parse_dotted_name();
      if (!is_filter(node->name)) syntax_error(line, fmt::format("no filter named '{}'", node->name));
      node->operands.push_back(std::move(input));
      if (at_op("(")) parse_call_args(*node);
      input = std::move(node);
    } while (at_op("|"));
    return input;
  }

  ExprPtr parse_test(ExprPtr input) {
    int line = next().line;  // is
    auto node = make(Expr::Kind::Test, line);
    node->negated = skip_name("not");
    node->name = parse_dotted_name();
    if (!is_test(node->name)) syntax_error(line, fmt::format("no test named '{}'", node->name));
    node->operands.push_back(std::move(input));
    TokenType type = peek().type;
    bool starts_argument = type == TokenType::Name || type == TokenType::String ||
                           type == TokenType::Integer || type == TokenType::Float || at_op("[") || at_op("{");
    if (at_op("(")) {
      parse_call_args(*node);
    } else if (starts_argument && !at_name("else") && !at_name("or") && !at_name("and")) {
      if (at_name("is")) syntax_error(peek().line, "you cannot chain multiple tests with 'is'");
      node->operands.push_back(parse_postfix(parse_primary()));
    }
    return node;
  }
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace gerbil::jinja
