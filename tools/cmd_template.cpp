// gerbil template: render a model's chat template for a list of messages, as transformers'
// apply_chat_template(tokenize=False) would, and print it exactly (no newline added).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "command.h"
#include "gerbil/error.h"
#include "template/chat_template.h"

namespace gerbil::cli {
namespace {

struct TemplateOptions {
  std::string model;
  std::string messages;
  bool add_generation_prompt = false;
  std::vector<std::string> vars;
};

nlohmann::ordered_json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::ordered_json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
}

// `name=value`: the value is JSON when it parses as JSON (false, 3, "x", [...]), else a plain string.
void add_variable(nlohmann::ordered_json& vars, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) fail("--var '{}' must have the form name=value", assignment);
  std::string name = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  auto parsed = nlohmann::ordered_json::parse(value, nullptr, /*allow_exceptions=*/false);
  vars[name] = parsed.is_discarded() ? nlohmann::ordered_json(value) : parsed;
}

int run_template(const TemplateOptions& options) {
  ChatTemplate chat = ChatTemplate::from_tokenizer_config(options.model);
  nlohmann::ordered_json messages = read_json_file(options.messages);
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const auto& assignment : options.vars) add_variable(vars, assignment);
  std::string text = chat.render(messages, options.add_generation_prompt, vars);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

GERBIL_COMMAND("template", "Render a model's chat template for a list of messages", [](CLI::App& app) {
  auto options = std::make_shared<TemplateOptions>();
  app.add_option("--model", options->model, "Folder holding tokenizer_config.json (or the file itself)")
      ->required();
  app.add_option("--messages", options->messages,
                 "JSON file with the messages: [{\"role\": \"user\", \"content\": \"...\"}, ...]")
      ->required();
  app.add_flag("--add-generation-prompt", options->add_generation_prompt,
               "End with the header that starts the assistant's reply");
  app.add_option("--var", options->vars,
                 "Extra template variable name=value, repeatable; value is JSON if it parses (false, 3, "
                 "\"x\", [...]) else a string, e.g. --var enable_thinking=false --var tools=[...]");
  app.footer(
      "Prints the rendered text exactly, with no newline added. The template sees messages,\n"
      "add_generation_prompt, bos_token, eos_token, tools and documents (none unless given) and the --var\n"
      "variables, as with transformers' apply_chat_template.");
  return [options] { return run_template(*options); };
});

}  // namespace
}  // namespace gerbil::cli
