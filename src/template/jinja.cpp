#include "template/jinja.h"

#include "template/interpreter.h"
#include "template/parser.h"

namespace gerbil::jinja {

Template::Template(std::string_view source, Limits limits)
    : body_(std::make_shared<const Body>(parse(tokenize(source)))), limits_(limits) {}

std::string Template::render(const Dict& variables) const {
  Runtime runtime{limits_};
  return Interpreter(runtime).render(*body_, variables);
}

std::string Template::render(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) fail("template variables must be a JSON object, not {}", variables.type_name());
  Value value = Value::from_json(variables);
  return render(value.as_dict());
}

}  // namespace gerbil::jinja
