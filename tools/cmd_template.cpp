// gerbil template: render a model's chat template for a list of messages, as transformers'
// apply_chat_template(tokenize=False) would, and print it exactly (no newline added).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "command.h"
#include "generate/model_text.h"
#include "model/gguf_model.h"
#include "gerbil/error.h"
#include "json/json_file.h"
#include "model/weights.h"
#include "template/chat_template.h"

namespace gerbil::cli {
namespace {

struct TemplateOptions {
  std::string model;
  std::string messages;
  bool add_generation_prompt = false;
  std::vector<std::string> vars;
};

// `name=value`: the value is JSON when it is JSON (false, 3, "x", [...]; read as strictly as every JSON),
// else a plain string.
void add_variable(nlohmann::ordered_json& vars, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) fail("--var '{}' must have the form name=value", assignment);
  std::string name = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  vars[name] = nlohmann::json::accept(value)
                   ? parse_json_strict<nlohmann::ordered_json>(value, fmt::format("--var {}", name))
                   : nlohmann::ordered_json(value);
}

int run_template(const TemplateOptions& options) {
  if (!std::filesystem::is_regular_file(options.model)) check_model_folder(options.model);
  std::optional<ModelText> gguf;
  if (is_gguf_file(options.model)) gguf = load_model_text(options.model);
  ChatTemplate chat = gguf ? chat_template_of(*gguf, options.model) : ChatTemplate::from_tokenizer_config(options.model);
  auto messages = read_json_file<nlohmann::ordered_json>(options.messages);
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const auto& assignment : options.vars) add_variable(vars, assignment);
  std::string text = chat.render(messages, options.add_generation_prompt, vars);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

GERBIL_COMMAND("template", "Render a model's chat template for a list of messages", [](CLI::App& app) {
  auto options = std::make_shared<TemplateOptions>();
  app.add_option("--model", options->model, "Folder holding tokenizer_config.json (or the file itself), or a GGUF file")
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
