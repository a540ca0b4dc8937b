// A sandboxed interpreter for the subset of Jinja2 that chat templates use, rendering exactly as jinja2
// does with transformers' settings (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols). No I/O: the only globals are range, namespace, dict, raise_exception and strftime_now.
//
//   jinja::Template t("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
//   std::string text = t.render(nlohmann::ordered_json{{"messages", messages}});
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "template/runtime.h"
#include "template/value.h"

namespace gerbil::jinja {

struct Node;

class Template {
 public:
  // Parses the source; a syntax error throws gerbil::Error naming the line.
  explicit Template(std::string_view source, Limits limits = {});

  // Renders with the given variables (a JSON object, or a Dict of Values). Runtime errors, exceeded
  // limits and raise_exception() throw gerbil::Error naming the template line.
  std::string render(const Dict& variables) const;
  std::string render(const nlohmann::ordered_json& variables) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
  Limits limits_;
};

}  // namespace gerbil::jinja
