// The JSON-schema constraint: the byte automaton against hand-written JSON, and the token masks of real
// vocabularies (Qwen3's byte-level BPE, Llama 2's SentencePiece with byte fallback) by random walks whose
// outputs must parse and validate, with every allowed id checked to continue the text and the refused ones
// checked not to.
#include <arpa/inet.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "generate/json_constraint.h"
#include "support/paths.h"

namespace gerbil {
namespace {

using nlohmann::json;

// ---- an independent validator of the schema subset ------------------------------------------------

bool validate(const json& value, const json& schema, const json& root);

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  // nlohmann parses an integer past 64 bits as a double.
  if (type == "integer")
    return value.is_number_integer() || (value.is_number_float() && std::abs(value.get<double>()) >= 0x1p64);
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

// A < B for JSON numbers: exact for 64-bit integers of either signedness, else as doubles.
bool less(const json& a, const json& b) {
  if (!a.is_number_integer() || !b.is_number_integer()) return a.get<double>() < b.get<double>();
  bool a_negative = !a.is_number_unsigned() && a.get<int64_t>() < 0;
  bool b_negative = !b.is_number_unsigned() && b.get<int64_t>() < 0;
  if (a_negative != b_negative) return a_negative;
  return a_negative ? a.get<int64_t>() < b.get<int64_t>() : a.get<uint64_t>() < b.get<uint64_t>();
}

bool within_bounds(const json& value, const json& schema) {
  return !(schema.contains("minimum") && less(value, schema["minimum"])) &&
         !(schema.contains("exclusiveMinimum") && !less(schema["exclusiveMinimum"], value)) &&
         !(schema.contains("maximum") && less(schema["maximum"], value)) &&
         !(schema.contains("exclusiveMaximum") && !less(value, schema["exclusiveMaximum"]));
}

size_t characters(const std::string& utf8) {
  return static_cast<size_t>(std::count_if(utf8.begin(), utf8.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// UTF-8 as code points (std::wregex's wchar_t is 32 bits here: one per character, as the "u" flag reads them).
std::wstring wide(const std::string& utf8) {
  std::wstring text;
  for (size_t i = 0; i < utf8.size();) {
    auto lead = static_cast<uint8_t>(utf8[i]);
    int length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    uint32_t code_point = length == 1 ? lead : lead & (0x3F >> (length - 1));
    for (int k = 1; k < length; ++k) code_point = code_point << 6 | (static_cast<uint8_t>(utf8[i + k]) & 0x3F);
    text.push_back(static_cast<wchar_t>(code_point));
    i += static_cast<size_t>(length);
  }
  return text;
}

// The oracle of "pattern": std::regex's ECMAScript grammar searching the decoded string (unanchored, as JSON Schema
// means it). Its \s and \w follow the C locale, which agrees with ECMA-262 on ASCII and on the other characters
// these tests use.
bool pattern_matches(const std::string& pattern, const std::string& text) {
  static std::map<std::string, std::wregex> compiled;
  auto it = compiled.find(pattern);
  if (it == compiled.end()) it = compiled.emplace(pattern, std::wregex(wide(pattern), std::regex::ECMAScript)).first;
  return std::regex_search(wide(text), it->second);
}

// ---- the formats, checked by code (not by the patterns the constraint uses), in the common form it enforces:
// capital "T" and "Z", no leap second, a dot-atom email address whose domain ends in letters.

bool all_of_set(const std::string& text, size_t at, size_t count, std::string_view set) {
  return at + count <= text.size() && text.substr(at, count).find_first_not_of(set) == std::string::npos;
}
constexpr std::string_view kDecimal = "0123456789", kHex = "0123456789abcdefABCDEF";

bool valid_date(const std::string& text) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-' || !all_of_set(text, 0, 4, kDecimal) ||
      !all_of_set(text, 5, 2, kDecimal) || !all_of_set(text, 8, 2, kDecimal))
    return false;
  std::chrono::year_month_day date{std::chrono::year{std::stoi(text.substr(0, 4))},
                                   std::chrono::month{static_cast<unsigned>(std::stoi(text.substr(5, 2)))},
                                   std::chrono::day{static_cast<unsigned>(std::stoi(text.substr(8, 2)))}};
  return date.ok();
}

bool two_digits_below(const std::string& text, size_t at, int limit) {
  return all_of_set(text, at, 2, kDecimal) && std::stoi(text.substr(at, 2)) < limit;
}

bool valid_time(const std::string& text) {
  if (text.size() < 9 || !two_digits_below(text, 0, 24) || text[2] != ':' || !two_digits_below(text, 3, 60) ||
      text[5] != ':' || !two_digits_below(text, 6, 60))
    return false;
  size_t at = 8;
  if (text[at] == '.') {
    size_t end = text.find_first_not_of(kDecimal, at + 1);
    if (end == at + 1 || end == std::string::npos) return false;
    at = end;
  }
  std::string offset = text.substr(at);
  return offset == "Z" || (offset.size() == 6 && (offset[0] == '+' || offset[0] == '-') &&
                           two_digits_below(offset, 1, 24) && offset[3] == ':' && two_digits_below(offset, 4, 60));
}

bool valid_label(const std::string& label) {
  constexpr std::string_view kAlphanumeric = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  return !label.empty() && label.size() <= 63 && kAlphanumeric.find(label.front()) != std::string::npos &&
         kAlphanumeric.find(label.back()) != std::string::npos &&
         label.find_first_not_of(std::string(kAlphanumeric) + "-") == std::string::npos;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == separator)
      parts.emplace_back();
    else
      parts.back().push_back(c);
  }
  return parts;
}

bool valid_hostname(const std::string& text) {
  std::vector<std::string> labels = split(text, '.');
  return text.size() <= 253 && std::all_of(labels.begin(), labels.end(), valid_label);
}

bool valid_email(const std::string& text) {
  size_t at = text.find('@');
  if (at == std::string::npos) return false;
  std::vector<std::string> atoms = split(text.substr(0, at), '.'), labels = split(text.substr(at + 1), '.');
  bool local = std::all_of(atoms.begin(), atoms.end(), [](const std::string& atom) {
    return !atom.empty() && atom.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                   "!#$%&'*+/=?^_`{|}~-") == std::string::npos;
  });
  const std::string& top = labels.back();
  return local && labels.size() >= 2 && std::all_of(labels.begin(), labels.end(), valid_label) && top.size() >= 2 &&
         std::all_of(top.begin(), top.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
}

bool valid_format(const std::string& format, const std::string& text) {
  if (format == "date") return valid_date(text);
  if (format == "time") return valid_time(text);
  if (format == "date-time") return text.size() > 11 && text[10] == 'T' && valid_date(text.substr(0, 10)) &&
                                    valid_time(text.substr(11));
  if (format == "uuid")
    return text.size() == 36 && all_of_set(text, 0, 8, kHex) && text[8] == '-' && all_of_set(text, 9, 4, kHex) &&
           text[13] == '-' && all_of_set(text, 14, 4, kHex) && text[18] == '-' && all_of_set(text, 19, 4, kHex) &&
           text[23] == '-' && all_of_set(text, 24, 12, kHex);
  if (format == "ipv4") {
    in_addr address;
    return inet_pton(AF_INET, text.c_str(), &address) == 1;  // dotted decimal, no leading zeros
  }
  if (format == "email") return valid_email(text);
  if (format == "hostname") return valid_hostname(text);
  return true;  // an annotation
}

bool validate(const json& value, const json& schema, const json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref"))
    return validate(value, root.at(json::json_pointer(schema["$ref"].get<std::string>().substr(1))), root);
  if (schema.contains("const") && value != schema["const"]) return false;
  if (schema.contains("enum") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end())
    return false;
  // A choice's branches, each with the keywords beside the choice (properties and required names together): an
  // object that declares properties is closed to others, so the branch and its siblings describe one object.
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (!schema.contains(keyword)) continue;
    json siblings = schema;
    for (const char* left_out : {"anyOf", "oneOf", "$defs", "discriminator", "title", "description"}) siblings.erase(left_out);
    auto valid = std::count_if(schema[keyword].begin(), schema[keyword].end(), [&](const json& branch) {
      if (siblings.empty()) return validate(value, branch, root);
      json merged = siblings;
      const json& own = branch.contains("$ref")
                            ? root.at(json::json_pointer(branch["$ref"].get<std::string>().substr(1)))
                            : branch;
      for (const auto& [name, part] : own.items()) {
        if (name == "properties") merged["properties"].update(part);
        else if (name == "required") for (const json& n : part) merged["required"].push_back(n);
        else merged[name] = part;
      }
      return validate(value, merged, root);
    });
    return std::string_view(keyword) == "anyOf" ? valid > 0 : valid == 1;
  }
  if (schema.contains("type")) {
    const json& type = schema["type"];
    bool any = type.is_string() ? has_type(value, type.get<std::string>())
                                : std::any_of(type.begin(), type.end(),
                                              [&](const json& t) { return has_type(value, t.get<std::string>()); });
    if (!any) return false;
  }
  if (value.is_object()) {
    const json properties = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array()))
      if (!value.contains(name.get<std::string>())) return false;
    for (auto& [name, item] : value.items()) {
      if (properties.contains(name)) {
        if (!validate(item, properties[name], root)) return false;
      } else if (!properties.empty() || schema.value("additionalProperties", json(true)) == json(false)) {
        return false;  // additionalProperties false by default beside properties
      } else if (schema.contains("additionalProperties") && !validate(item, schema["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (value.is_number() && !within_bounds(value, schema)) return false;
  if (value.is_string()) {
    size_t length = characters(value.get<std::string>());
    if (length < schema.value("minLength", size_t{0}) || length > schema.value("maxLength", SIZE_MAX)) return false;
    if (schema.contains("pattern") && !pattern_matches(schema["pattern"], value.get<std::string>())) return false;
    if (schema.contains("format") && !valid_format(schema["format"], value.get<std::string>())) return false;
  }
  if (value.is_array()) {
    if (value.size() < schema.value("minItems", size_t{0}) || value.size() > schema.value("maxItems", SIZE_MAX))
      return false;
    const json prefix = schema.value("prefixItems", json::array());
    for (size_t i = 0; i < value.size(); ++i) {
      const json& item_schema = i < prefix.size() ? prefix[i] : schema.value("items", json(true));
      if (!validate(value[i], item_schema, root)) return false;
    }
  }
  return true;
}

TEST(JsonSchemaValidator, RejectsWhatTheSchemaForbids) {  // the validator the walks rely on can fail
  json schema = json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  EXPECT_TRUE(validate(json::parse(R"({"a":1})"), schema, schema));
  EXPECT_FALSE(validate(json::parse(R"({"a":1.5})"), schema, schema));
  EXPECT_FALSE(validate(json::parse(R"({})"), schema, schema));
  EXPECT_FALSE(validate(json::parse(R"({"a":1,"b":2})"), schema, schema));
  json narrow = json::parse(R"({"type":"object","properties":{"n":{"type":"integer","exclusiveMinimum":-3,
    "maximum":9007199254740993},"s":{"type":"string","minLength":2,"maxLength":3}}})");
  EXPECT_TRUE(validate(json::parse(R"({"n":9007199254740993,"s":"\u00e9\n"})"), narrow, narrow));
  EXPECT_TRUE(validate(json::parse(R"({"n":-2,"s":"abc"})"), narrow, narrow));
  EXPECT_FALSE(validate(json::parse(R"({"n":9007199254740994})"), narrow, narrow));
  EXPECT_FALSE(validate(json::parse(R"({"n":-3})"), narrow, narrow));
  EXPECT_FALSE(validate(json::parse(R"({"s":"\u00e9"})"), narrow, narrow));
  EXPECT_FALSE(validate(json::parse(R"({"s":"abcd"})"), narrow, narrow));
}

// ---- the automaton over bytes -------------------------------------------------------------------------

// The error compiling SCHEMA gives, its schema path starting at PATH ("no error" when it compiles).
std::string schema_error(const char* schema, const std::string& path = "schema");

bool matches(const json& schema, std::string_view text) {
  JsonMatcher matcher(JsonGrammar::from_schema(schema, "schema"));
  return matcher.feed(text) && matcher.complete();
}
bool prefix_ok(const json& schema, std::string_view text) {
  JsonMatcher matcher(JsonGrammar::from_schema(schema, "schema"));
  return matcher.feed(text);
}

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "member": {"type": "boolean"},
    "nickname": {"type": ["string", "null"]},
    "role": {"enum": ["admin", "user", 3]},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    "kind": {"const": "person"}
  },
  "required": ["name", "age"]
})");

TEST(JsonMatcher, AcceptsValidDocuments) {
  for (const char* text : {
           R"({"name":"Ann","age":31})",
           R"({"age":-0,"name":""})",
           R"( { "name" : "A\"\\\/\b\f\n\r\t\u00e9\uFFFF" , "age" : 7 } )",
           "{\"name\":\"\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x8A\",\"age\":1}",
           R"({"name":"x","age":1,"height":-1.5e+10,"member":false,"nickname":null,"role":3})",
           R"({"name":"x","age":1,"nickname":"nick","role":"admin","tags":["a","b","c"],"kind":"person"})",
           R"({"name":"x","age":120000000000000,"height":0.25E-3})",
       })
    EXPECT_TRUE(matches(kPerson, text)) << text;
}

TEST(JsonMatcher, RejectsInvalidDocuments) {
  for (const char* text : {
           R"({"name":"Ann"})",                           // a required property missing
           R"({"name":"Ann","age":31,"extra":1})",        // additionalProperties false
           R"({"name":"Ann","age":31.5})",                // not an integer
           R"({"name":"Ann","age":031})",                 // a leading zero
           R"({"name":"Ann","age":1,"age":2})",           // a repeated key
           R"({"name":"Ann","age":1,})",                  // a trailing comma
           R"({"name":"A\x","age":1})",                   // a bad escape
           R"({"name":"\uD83D\uDE00","age":1})",          // surrogate escapes
           "{\"name\":\"\xC3\",\"age\":1}",               // a cut character
           "{\"name\":\"\xE0\x80\x80\",\"age\":1}",       // an overlong form
           "{\"name\":\"a\nb\",\"age\":1}",               // a raw control character
           R"({"name":"x","age":1,"role":"root"})",       // not in the enum
           R"({"name":"x","age":1,"tags":[]})",           // under minItems
           R"({"name":"x","age":1,"tags":["a","b","c","d"]})",  // over maxItems
           R"({"name":"x","age":1,"kind":"persons"})",    // not the const
           R"({"name":"x","age":1,"member":True})",
           R"({"name":"x","age":1}x)",                    // text after the value
           R"(["name"])",
       })
    EXPECT_FALSE(matches(kPerson, text)) << text;
  // Prefixes that can still become valid are alive; those that cannot are dead at once.
  EXPECT_TRUE(prefix_ok(kPerson, R"({"name":"Ann","ag)"));
  EXPECT_FALSE(prefix_ok(kPerson, R"({"nam ")"));
  EXPECT_FALSE(prefix_ok(kPerson, R"({"name":"Ann","age":31,"extra)"));
  EXPECT_FALSE(matches(kPerson, R"({"name":"Ann","ag)"));
}

TEST(JsonMatcher, LimitsWhitespaceRuns) {
  JsonConstraintOptions options;
  options.max_whitespace = 4;
  auto grammar = JsonGrammar::any_object();
  EXPECT_TRUE(JsonMatcher(grammar, options).feed("{    \"a\":    1}    "));
  EXPECT_FALSE(JsonMatcher(grammar, options).feed("{     \"a\":1}"));
  EXPECT_FALSE(JsonMatcher(grammar, options).feed("{\"a\":1}     "));
}

TEST(JsonMatcher, AnyObjectAndItsDepthLimit) {
  auto grammar = JsonGrammar::any_object();
  JsonMatcher nested(grammar);
  EXPECT_TRUE(nested.feed(R"({"a":[1,{"b":null,"c":[true,false,"x",-2.5e3]},[]],"d":{}})"));
  EXPECT_TRUE(nested.complete());
  EXPECT_FALSE(JsonMatcher(grammar).feed("[1]"));  // json_object: an object, not any value
  JsonConstraintOptions options;
  options.max_depth = 3;
  EXPECT_TRUE(JsonMatcher(grammar, options).feed(R"({"a":{"b":[1]}})"));
  EXPECT_FALSE(JsonMatcher(grammar, options).feed(R"({"a":{"b":[[)"));
}

TEST(JsonMatcher, RecursiveReferencesAndChoices) {
  json tree = json::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {
      "value": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(tree, R"({"value":1,"children":[{"value":"a"},{"value":2,"children":[]}]})"));
  EXPECT_FALSE(matches(tree, R"({"value":1,"children":[{"value":true}]})"));
  EXPECT_FALSE(matches(tree, R"({"value":1,"children":[{}]})"));
}

// Branches that begin alike are followed side by side until the text rules all but one out: objects told apart by
// their keys (anyOf), a discriminated oneOf (Pydantic's tagged union), a literal beside a string, integers beside
// numbers, and such choices as array items.
TEST(JsonMatcher, ChoicesThatBeginAlikeFollowEachBranch) {
  json person_or_address = json::parse(R"({"anyOf":[
    {"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]},
    {"type":"object","properties":{"name":{"type":"string"},"city":{"type":"string"}},"required":["name","city"]}]})");
  EXPECT_TRUE(matches(person_or_address, R"({"name":"a","age":3})"));
  EXPECT_TRUE(matches(person_or_address, R"({"city":"b","name":"a"})"));
  EXPECT_FALSE(prefix_ok(person_or_address, R"({"name":"a","age":3,"city")"));
  EXPECT_FALSE(prefix_ok(person_or_address, R"({"age":1.5)"));
  EXPECT_TRUE(prefix_ok(person_or_address, R"({"name":"a")"));
  EXPECT_FALSE(matches(person_or_address, R"({"name":"a"})"));
  json items = {{"type", "array"}, {"items", person_or_address}};
  EXPECT_TRUE(matches(items, R"([{"name":"a","age":3},{"name":"b","city":"c"},{"age":4,"name":"d"}])"));
  EXPECT_FALSE(prefix_ok(items, R"([{"name":"a","age":3},{"name":"b","age":"c")"));

  json pets = json::parse(R"({"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],
    "discriminator":{"propertyName":"pet_type"},
    "$defs":{"Cat":{"type":"object","properties":{"pet_type":{"const":"cat","title":"Pet Type","type":"string"},
                                                  "meows":{"type":"integer"}},"required":["pet_type","meows"]},
             "Dog":{"type":"object","properties":{"pet_type":{"const":"dog","title":"Pet Type","type":"string"},
                                                  "barks":{"type":"number"}},"required":["pet_type","barks"]}}})");
  EXPECT_TRUE(matches(pets, R"({"pet_type":"cat","meows":2})"));
  EXPECT_TRUE(matches(pets, R"({"barks":1.5,"pet_type":"dog"})"));
  EXPECT_FALSE(prefix_ok(pets, R"({"pet_type":"cat","barks")"));
  EXPECT_FALSE(matches(pets, R"({"barks":1.5})"));

  // A tagged union of many branches (each told apart from every other by its tag).
  json many = {{"oneOf", json::array()}};
  for (int i = 0; i < 256; ++i)
    many["oneOf"].push_back({{"type", "object"},
                             {"properties", {{"tag", {{"const", i}}}, {fmt::format("f{}", i), {{"type", "integer"}}}}},
                             {"required", {"tag"}}});
  EXPECT_TRUE(matches(many, R"({"f255":5,"tag":255})"));
  EXPECT_TRUE(matches(many, R"({"tag":0,"f0":-1})"));
  EXPECT_FALSE(matches(many, R"({"f254":5,"tag":255})"));
  many["oneOf"].push_back(many["oneOf"][0]);  // one more than the readings followed at once: refused, not cut
  EXPECT_THAT(schema_error(many.dump().c_str(), "tools"),
              ::testing::HasSubstr("tools.oneOf: 257 of its branches may begin with '{'; at most 256 may"));

  // Keywords beside a choice hold in each branch: a base object and its variants, as OpenAPI writes them.
  json variants = json::parse(R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
    "oneOf":[{"properties":{"kind":{"const":"a"}},"required":["kind"]},
             {"properties":{"kind":{"const":"b"},"size":{"type":"number"}},"required":["kind"]}]})");
  EXPECT_TRUE(matches(variants, R"({"id":1,"kind":"a"})"));
  EXPECT_TRUE(matches(variants, R"({"kind":"b","size":2.5,"id":-4})"));
  EXPECT_FALSE(matches(variants, R"({"kind":"a"})"));
  EXPECT_FALSE(prefix_ok(variants, R"({"kind":"a","size")"));
  // The base declares the discriminator the variants narrow, and allows null beside the object.
  json narrowed = json::parse(R"({"type":["object","null"],"properties":{"kind":{"type":"string"},"id":{"type":"integer"}},
    "required":["id","kind"],"oneOf":[{"type":"object","properties":{"kind":{"const":"cat"}}},
                                      {"type":"object","properties":{"kind":{"const":"dog"},"barks":{"type":"boolean"}}},
                                      {"type":"null"}]})");
  EXPECT_TRUE(matches(narrowed, R"({"kind":"dog","id":2,"barks":true})"));
  EXPECT_TRUE(matches(narrowed, R"({"id":2,"kind":"cat"})"));
  EXPECT_TRUE(matches(narrowed, "null"));
  EXPECT_FALSE(prefix_ok(narrowed, R"({"kind":"cow")"));
  EXPECT_FALSE(prefix_ok(narrowed, R"({"kind":"cat","barks")"));
  // Constants of one kind, as an enum is documented branch by branch.
  json documented = json::parse(R"({"oneOf":[{"const":"a","description":"first"},{"const":"b"},{"const":10},{"const":11}]})");
  EXPECT_TRUE(matches(documented, R"("b")"));
  EXPECT_TRUE(matches(documented, "11"));
  EXPECT_FALSE(matches(documented, "1"));

  json mode = json::parse(R"({"anyOf":[{"const":"auto"},{"type":"string","maxLength":2}]})");
  EXPECT_TRUE(matches(mode, R"("auto")"));
  EXPECT_TRUE(matches(mode, R"("au")"));
  EXPECT_FALSE(prefix_ok(mode, R"("aut")"));
  EXPECT_FALSE(prefix_ok(mode, R"("autos)"));

  json size = json::parse(R"({"type":["integer","number"],"minimum":0,"maximum":10})");
  EXPECT_TRUE(matches(size, "3"));
  EXPECT_TRUE(matches(size, "2.5"));
  EXPECT_TRUE(matches(size, "10"));
  EXPECT_FALSE(matches(size, "11"));
  EXPECT_FALSE(prefix_ok(size, "-1"));
}

// allOf: Pydantic's wrapper of a described reference (here in a recursive model, which must stay a reference), and
// schemas merged into one object (properties and required names together; a referenced base model).
TEST(JsonMatcher, AllOfWrappersAndMergedObjects) {
  json pydantic = json::parse(R"({
    "$defs": {"Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
              "Node": {"type": "object", "properties": {
                "color": {"allOf": [{"$ref": "#/$defs/Color"}], "description": "its color"},
                "next": {"anyOf": [{"allOf": [{"$ref": "#/$defs/Node"}], "description": "the next"}, {"type": "null"}]}},
               "required": ["color", "next"], "additionalProperties": false}},
    "allOf": [{"$ref": "#/$defs/Node"}], "title": "List"})");
  EXPECT_TRUE(matches(pydantic, R"({"color":"red","next":{"color":"green","next":null}})"));
  EXPECT_FALSE(matches(pydantic, R"({"color":"blue","next":null})"));
  EXPECT_FALSE(matches(pydantic, R"({"color":"red"})"));
  json merged = json::parse(R"({
    "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
    "allOf": [{"$ref": "#/$defs/Base"},
              {"properties": {"name": {"type": "string", "maxLength": 3}}, "required": ["name"]}],
    "properties": {"tag": {"enum": ["a"]}}})");
  EXPECT_TRUE(matches(merged, R"({"id":1,"name":"abc"})"));
  EXPECT_TRUE(matches(merged, R"({"id":1,"name":"abc","tag":"a"})"));
  EXPECT_FALSE(matches(merged, R"({"name":"abc"})"));            // Base's required id
  EXPECT_FALSE(matches(merged, R"({"id":1})"));                  // the second schema's required name
  EXPECT_FALSE(matches(merged, R"({"id":1,"name":"abcd"})"));    // its maxLength
  EXPECT_FALSE(matches(merged, R"({"id":"1","name":"abc"})"));   // Base's integer
  EXPECT_FALSE(matches(merged, R"({"id":1,"name":"a","tag":"b"})"));
}

// prefixItems: a tuple's items in order, then items (false: none past the prefix). Without minItems the whole tuple
// is written; a minItems below the prefix lets it end early.
TEST(JsonMatcher, PrefixItemsAreTuples) {
  // Pydantic's tuple[int, str].
  json pair = json::parse(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],
                              "minItems":2,"maxItems":2})");
  EXPECT_TRUE(matches(pair, R"([1,"a"])"));
  EXPECT_TRUE(matches(pair, R"([ -3 , "" ])"));
  EXPECT_FALSE(prefix_ok(pair, R"(["a")"));
  EXPECT_FALSE(prefix_ok(pair, R"([1,2)"));
  EXPECT_FALSE(prefix_ok(pair, R"([1])"));
  EXPECT_FALSE(prefix_ok(pair, R"([1,"a",)"));
  // No minItems: the whole prefix; items absent: any values after it.
  json open = json::parse(R"({"prefixItems":[{"type":"boolean"},{"enum":["x"]}]})");
  EXPECT_TRUE(matches(open, R"([true,"x"])"));
  EXPECT_TRUE(matches(open, R"([true,"x",{"a":[1]},null])"));
  EXPECT_FALSE(prefix_ok(open, R"([true])"));
  EXPECT_FALSE(prefix_ok(open, R"([])"));
  // items: a schema past the prefix, bounded by maxItems; a minItems below the prefix ends it early.
  json rest = json::parse(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},
                              "minItems":0,"maxItems":3})");
  EXPECT_TRUE(matches(rest, "[]"));
  EXPECT_TRUE(matches(rest, R"(["a"])"));
  EXPECT_TRUE(matches(rest, R"(["a",1,2])"));
  EXPECT_FALSE(prefix_ok(rest, "[1"));
  EXPECT_FALSE(prefix_ok(rest, R"(["a","b")"));
  EXPECT_FALSE(prefix_ok(rest, R"(["a",1,2,)"));
  // items false: nothing past the prefix; minItems past the prefix then needs items.
  json closed = json::parse(R"({"type":"array","prefixItems":[{"type":"null"},{"type":"null"}],"items":false,
                                "minItems":1})");
  EXPECT_TRUE(matches(closed, "[null]"));
  EXPECT_TRUE(matches(closed, "[null,null]"));
  EXPECT_FALSE(prefix_ok(closed, "[null,null,"));
  EXPECT_FALSE(prefix_ok(closed, "[]"));
  json more = json::parse(R"({"type":"array","prefixItems":[{"const":1}],"items":{"const":2},"minItems":3})");
  EXPECT_TRUE(matches(more, "[1,2,2]"));
  EXPECT_FALSE(prefix_ok(more, "[1,2]"));
  EXPECT_TRUE(matches(json::parse(R"({"type":"array","items":false})"), "[]"));
  EXPECT_FALSE(prefix_ok(json::parse(R"({"type":"array","items":false})"), "[1"));
}

// ---- pattern

json pattern_schema(const std::string& pattern, json lengths = json::object()) {
  lengths["type"] = "string";
  lengths["pattern"] = pattern;
  return lengths;
}

// The pattern sees the decoded characters: an escape or a UTF-8 character of any length is one, and a match may be
// anywhere unless ^ / $ anchor it.
TEST(JsonMatcher, PatternsMatchDecodedCharacters) {
  json letters = pattern_schema("^[a-z]+$");
  EXPECT_TRUE(matches(letters, R"("abc")"));
  EXPECT_TRUE(matches(letters, R"("\u0061b\u0063")"));
  EXPECT_FALSE(prefix_ok(letters, R"("")"));   // + needs one
  EXPECT_FALSE(prefix_ok(letters, R"("abC)"));  // refused at the byte
  EXPECT_FALSE(prefix_ok(letters, R"("a\u0041)"));
  EXPECT_FALSE(prefix_ok(letters, R"("a\u01)"));  // \u0100-\u01FF holds no letter a-z
  EXPECT_TRUE(prefix_ok(letters, R"("a\u006)"));
  EXPECT_FALSE(prefix_ok(letters, R"("a\n)"));
  json unanchored = pattern_schema(R"(\d{3}-\d{4})");
  EXPECT_TRUE(matches(unanchored, R"("call 555-1234 now")"));
  EXPECT_TRUE(matches(unanchored, R"("555-1234")"));
  EXPECT_FALSE(matches(unanchored, R"("555-123")"));
  EXPECT_TRUE(prefix_ok(unanchored, R"("555-123)"));
  json escapes = pattern_schema(R"(^a\nb\t"\\/$)");
  EXPECT_TRUE(matches(escapes, R"("a\nb\t\"\\\/")"));
  EXPECT_TRUE(matches(escapes, R"("a\u000Ab\u0009\u0022\u005c/")"));
  EXPECT_FALSE(prefix_ok(escapes, R"("a\r)"));
  EXPECT_FALSE(prefix_ok(escapes, R"("a\u000B)"));
  json one = pattern_schema("^.$");  // a code point, whatever its length
  for (const char* text : {R"("x")", "\"\xC3\xA9\"", "\"\xE4\xBD\xA0\"", "\"\xF0\x9F\xA6\x8A\"", R"("\u00e9")"})
    EXPECT_TRUE(matches(one, text)) << text;
  EXPECT_FALSE(prefix_ok(one, R"("\n)"));
  EXPECT_FALSE(prefix_ok(one, "\"\xC3\xA9\xC3"));
  json accents = pattern_schema("^[\u00e0-\u00ff]$");  // only lead byte 0xC3 can begin one
  EXPECT_TRUE(matches(accents, "\"\xC3\xA9\""));
  EXPECT_FALSE(prefix_ok(accents, "\"\xC4"));
  EXPECT_FALSE(prefix_ok(accents, "\"\xC3\x9F"));  // U+00DF
  EXPECT_FALSE(prefix_ok(accents, R"("\u01)"));
  EXPECT_TRUE(prefix_ok(accents, R"("\u00E)"));
  json emoji = pattern_schema(R"(^(?:\uD83E\uDD8A|x?\u{1F600})$)");  // a surrogate pair is one character
  EXPECT_TRUE(matches(emoji, "\"\xF0\x9F\xA6\x8A\""));
  EXPECT_TRUE(matches(emoji, "\"x\xF0\x9F\x98\x80\""));
  EXPECT_FALSE(prefix_ok(emoji, "\"\xF0\x9F\xA6\x8B"));
  // Alternatives anchor on their own side; a group of alternatives under ^...$ is whole.
  json sides = pattern_schema("^ab|cd$");
  EXPECT_TRUE(matches(sides, R"("abzzz")"));
  EXPECT_TRUE(matches(sides, R"("zzcd")"));
  EXPECT_FALSE(matches(sides, R"("zabz")"));
  json whole = pattern_schema("^(?<pair>ab|cd)$");
  EXPECT_FALSE(prefix_ok(whole, R"("abc)"));
  // Class escapes inside classes, a '-' beside one is itself, lazy quantifiers are the same language.
  json mixed = pattern_schema(R"(^[\d-z_]+?[^\s"]{1,2}$)");
  EXPECT_TRUE(matches(mixed, R"("-z_9ab")"));
  EXPECT_FALSE(prefix_ok(mixed, R"("y)"));
  EXPECT_FALSE(matches(mixed, R"("9 ")"));
  // A pattern beside other types: it narrows the string alone.
  json nullable = json::parse(R"({"type":["string","null"],"pattern":"^x+$"})");
  EXPECT_TRUE(matches(nullable, "null"));
  EXPECT_TRUE(matches(nullable, R"("xx")"));
  EXPECT_FALSE(prefix_ok(nullable, R"("y)"));
}

// Random strings of an alphabet the patterns care about, each character written raw or escaped at random: the matcher
// must be complete exactly where the oracle matches the decoded string.
TEST(JsonMatcher, PatternsAgreeWithARegexOracle) {
  const char* patterns[] = {
      "^[a-z]+$", R"(\d{2})", "^a|z$", "^(?:ab|c)*x?$", R"(^[^"\\]{2,4}$)", "x.y", R"(^\w+@\w+\.[a-z]{2,3}$)",
      "^(a|b)*a(a|b){2}$", R"(^\s*\S+\s*$)", "\u00e9|\u4e2d", "^.{3}$", "^[\U0001F600a]+$", R"(^(a+)(?:b|\.)?$)",
      "^a{2,}b{0,2}$", R"(^\\"?\/$)", "[^a-z0-9]", R"(^\x41\u0042\t?$)", "^$", "(?:)", "^a*?b+?$",
  };
  const std::vector<std::string> alphabet = {"a", "b", "c", "x", "y", "z", "A", "0", "9", "@", ".", "-", "_", " ",
                                             "\t", "\n", "\"", "\\", "/", "\xC3\xA9", "\xE4\xB8\xAD",
                                             "\xF0\x9F\x98\x80"};
  std::mt19937 random(11);
  for (const char* pattern : patterns) {
    json schema = pattern_schema(pattern);
    auto grammar = JsonGrammar::from_schema(schema, "schema");
    for (int trial = 0; trial < 600; ++trial) {
      std::string value;
      size_t length = random() % 7;
      for (size_t i = 0; i < length; ++i) value += alphabet[random() % alphabet.size()];
      std::string text = json(value).dump();  // escapes '"', '\' and controls
      if (random() % 2 && value.size() == 1 && static_cast<uint8_t>(value[0]) < 0x80)
        text = fmt::format("\"\\u{:04x}\"", static_cast<uint8_t>(value[0]));
      JsonMatcher matcher(grammar);
      bool complete = matcher.feed(text) && matcher.complete();
      bool expected = pattern_matches(pattern, value);
      ASSERT_EQ(complete, expected) << pattern << ": " << text;
    }
  }
}

// Every string of the alphabet "abx" up to the maxLength: the matcher keeps alive exactly the prefixes of strings
// that match within the lengths (a length and a pattern together never lead to a dead end), and ends exactly on them.
TEST(JsonMatcher, PatternsAndLengthsTogetherAllowExactlyTheirStrings) {
  const char* schemas[] = {
      R"({"pattern":"^(ab)+$","maxLength":5})",           R"({"pattern":"^(ab)+$","minLength":3,"maxLength":6})",
      R"({"pattern":"a","minLength":2,"maxLength":4})",    R"({"pattern":"^a*x[ab]*$","minLength":4,"maxLength":5})",
      R"({"pattern":"b$","maxLength":3})",                 R"({"pattern":"^[^a]{2}|x$","minLength":1,"maxLength":4})",
      R"({"pattern":"^(?:a|bb|xxx)*$","minLength":5,"maxLength":6})", R"({"pattern":"^(a|b)*a(a|b)$","maxLength":6})",
      R"({"pattern":"^x{0,2}$","maxLength":0})",
  };
  for (const char* text : schemas) {
    json schema = json::parse(text);
    schema["type"] = "string";
    std::string pattern = schema["pattern"];
    size_t min = schema.value("minLength", size_t{0}), max = schema["maxLength"];
    std::set<std::string> valid, prefixes;
    std::vector<std::string> all = {""};
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].size() < max)
        for (char c : std::string("abx")) all.push_back(all[i] + c);
    for (const std::string& value : all)
      if (value.size() >= min && pattern_matches(pattern, value)) {
        valid.insert(value);
        for (size_t k = 0; k <= value.size(); ++k) prefixes.insert(value.substr(0, k));
      }
    ASSERT_FALSE(valid.empty()) << text;
    auto grammar = JsonGrammar::from_schema(schema, "schema");
    for (const std::string& value : all) {
      JsonMatcher matcher(grammar);
      EXPECT_EQ(matcher.feed("\"" + value), prefixes.count(value) > 0) << text << ": " << value;
      EXPECT_EQ(matcher.feed("\"") && matcher.complete(), valid.count(value) > 0) << text << ": " << value;
    }
  }
}

TEST(JsonGrammar, PatternErrorsNameThePathAndPosition) {
  auto error_of = [](const char* schema) { return schema_error(schema, "response_format.json_schema.schema"); };
  std::string at = "response_format.json_schema.schema.properties.code.pattern: ";
  auto code = [](const char* pattern) {
    return json{{"properties", {{"code", {{"type", "string"}, {"pattern", pattern}}}}}}.dump();
  };
  EXPECT_EQ(error_of(code("a(?=b)").c_str()),
            at + "lookahead and lookbehind are not supported (at position 1 of the pattern)");
  EXPECT_EQ(error_of(code("(a)\\1").c_str()), at + "backreferences are not supported (at position 3 of the pattern)");
  EXPECT_EQ(error_of(code("\\bword").c_str()),
            at + "word boundaries (\\b, \\B) are not supported (at position 0 of the pattern)");
  EXPECT_EQ(error_of(code("a^b").c_str()), at + "'^' is supported only at the start of the pattern or of a top-level "
                                                 "alternative (at position 1 of the pattern)");
  EXPECT_EQ(error_of(code("(a$)").c_str()), at + "'$' is supported only at the end of the pattern or of a top-level "
                                                  "alternative (at position 2 of the pattern)");
  EXPECT_EQ(error_of(code("(?i)abc").c_str()),
            at + "only the groups ( ), (?: ) and (?<name> ) are supported (no flags) (at position 0 of the pattern)");
  EXPECT_EQ(error_of(code("\u00e9\\p{L}").c_str()),  // positions count characters
            at + "Unicode property escapes (\\p{...}) are not supported (at position 1 of the pattern)");
  EXPECT_EQ(error_of(code("[b-a]").c_str()), at + "a class range out of order (at position 1 of the pattern)");
  EXPECT_EQ(error_of(code("ab)").c_str()), at + "')' closes no group (at position 2 of the pattern)");
  EXPECT_EQ(error_of(code("(ab").c_str()), at + "the group is not closed (at position 0 of the pattern)");
  EXPECT_EQ(error_of(code("[ab").c_str()), at + "the character class is not closed (at position 0 of the pattern)");
  EXPECT_EQ(error_of(code("a{2").c_str()),
            at + "'{' begins no quantifier here (write \\{ for the character) (at position 1 of the pattern)");
  EXPECT_EQ(error_of(code("+a").c_str()), at + "'+' has nothing to repeat (at position 0 of the pattern)");
  EXPECT_EQ(error_of(code("a{3,2}").c_str()), at + "a quantifier {n,m} with n above m (at position 1 of the pattern)");
  EXPECT_EQ(error_of(code("\\q").c_str()), at + "this escape is not supported (at position 0 of the pattern)");
  EXPECT_EQ(error_of(code("[^\\s\\S]").c_str()), at + "no string matches the pattern");
  EXPECT_EQ(error_of(code("^.{5000}$").c_str()),
            at + "the pattern needs more than 4096 automaton states (a quantifier {n,m} repeats a copy of its atom m "
                 "times)");
  EXPECT_EQ(error_of(code("a.{20}").c_str()), at + "the pattern needs more than 4096 automaton states");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^a{3}$","maxLength":2})"),
            "response_format.json_schema.schema: no string of 0 to 2 characters matches the pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^(ab)+$","minLength":3,"maxLength":3})"),
            "response_format.json_schema.schema: no string of 3 to 3 characters matches the pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^[a-z]{1,1000}$","maxLength":5000})"),
            "response_format.json_schema.schema: a pattern of 1001 states beside a length bound of 5000 is too large "
            "to combine (at most 4194304 states times the bound)");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^ab?$","minLength":3})"),
            "response_format.json_schema.schema: no string of at least 3 characters matches the pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":5})"),
            "response_format.json_schema.schema.pattern: expected a regular expression, not 5");
  EXPECT_EQ(error_of(R"({"enum":["a"],"pattern":"a"})"),
            "response_format.json_schema.schema.pattern: 'pattern' is supported only beside \"type\" (not beside "
            "$ref, const, enum, anyOf or oneOf)");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^[a-z]{1,1000}$","maxLength":4000})"), "no error");
}

// ---- format

json format_schema(const std::string& format, json more = json::object()) {
  more["type"] = "string";
  more["format"] = format;
  return more;
}

TEST(JsonMatcher, FormatsMatchTheirCommonForm) {
  struct Case {
    const char* format;
    std::vector<const char*> valid, refused;  // refused: a prefix that is dead at its last byte
  };
  const Case cases[] = {
      {"date", {"2024-02-29", "2000-02-29", "1999-12-31", "0000-02-29"}, {"2023-02-29", "1900-02-29", "2023-04-31",
                                                                          "2023-13", "2023-00", "2023-1-", "99-"}},
      {"time", {"23:59:59Z", "00:00:00.123456+05:30", "12:30:00-00:00"}, {"24", "23:6", "23:59:6", "12:00:00z",
                                                                           "12:00:00+5", "12:00:00.Z"}},
      {"date-time", {"2024-02-29T23:59:59.5Z"}, {"2024-02-29 ", "2024-02-29t", "2024-02-3"}},
      {"uuid",
       {"123e4567-e89b-12d3-A456-426614174000"},
       {"123e4567e", "123e4567-e89g", "123e4567-e89b-12d3-a456-4266141740000"}},
      {"ipv4", {"0.0.0.0", "255.255.255.255", "192.168.1.20"}, {"256", "01", "1.2.3.4.", "1..", "1.2.3.4 "}},
      {"email", {"a.b+c@example.com", "x@sub.example-host.org"}, {"@", "a..", ".", "a@-", "a@b.c@", "a "}},
      {"hostname", {"localhost", "a-b.example.com", "x1"}, {"-", "a..", "a_", "a.-"}},
  };
  for (const Case& c : cases) {
    json schema = format_schema(c.format);
    for (const char* value : c.valid) {
      EXPECT_TRUE(matches(schema, json(value).dump())) << c.format << ": " << value;
      EXPECT_TRUE(valid_format(c.format, value)) << c.format << ": " << value;  // the checker agrees
    }
    for (const char* prefix : c.refused) {
      std::string text = fmt::format("\"{}", prefix);
      EXPECT_TRUE(prefix_ok(schema, text.substr(0, text.size() - 1))) << c.format << ": " << prefix;
      EXPECT_FALSE(prefix_ok(schema, text)) << c.format << ": " << prefix;
    }
  }
  EXPECT_FALSE(matches(format_schema("date"), R"("2024-02-2")"));
  EXPECT_FALSE(matches(format_schema("time"), R"("12:00:00")"));  // no offset
  EXPECT_FALSE(matches(format_schema("email"), R"("a@localhost")"));
  // A hostname has at most 253 characters.
  std::string labels;
  for (int i = 0; i < 4; ++i) labels += std::string(63, 'a') + ".";
  EXPECT_TRUE(matches(format_schema("hostname"), "\"" + labels.substr(0, 253) + "\""));
  EXPECT_FALSE(prefix_ok(format_schema("hostname"), "\"" + labels.substr(0, 253) + "a"));
  // Unknown formats, and formats of other types, are annotations.
  EXPECT_TRUE(matches(format_schema("int32"), R"("anything")"));
  EXPECT_TRUE(matches(json::parse(R"({"type":"integer","format":"int64"})"), "12"));
  // A pattern beside a format: both hold.
  json both = format_schema("date", {{"pattern", "^2024-"}});
  EXPECT_TRUE(matches(both, R"("2024-02-29")"));
  EXPECT_FALSE(prefix_ok(both, R"("2023)"));
  EXPECT_FALSE(prefix_ok(both, R"("2024-02-30)"));
  // Lengths beside a format.
  json short_mail = format_schema("email", {{"maxLength", 6u}});
  EXPECT_TRUE(matches(short_mail, R"("a@b.cd")"));
  EXPECT_FALSE(prefix_ok(short_mail, R"("ab@b.)"));  // no room for a two-letter domain
}

// Every date of some years, months 00-13 and days 00-32: the format takes exactly the calendar's dates.
TEST(JsonMatcher, DatesAgreeWithTheCalendar) {
  auto grammar = JsonGrammar::from_schema(format_schema("date"), "schema");
  for (int year : {0, 4, 100, 400, 1900, 1996, 2000, 2023, 2024, 2100, 9999})
    for (int month = 0; month <= 13; ++month)
      for (int day = 0; day <= 32; ++day) {
        std::string date = fmt::format("{:04}-{:02}-{:02}", year, month, day);
        JsonMatcher matcher(grammar);
        EXPECT_EQ(matcher.feed("\"" + date + "\"") && matcher.complete(), valid_date(date)) << date;
      }
}

TEST(JsonGrammar, FormatErrorsNameThePath) {
  EXPECT_EQ(schema_error(R"({"type":"string","format":5})"), "schema.format: expected a format name, not 5");
  EXPECT_EQ(schema_error(R"({"type":"string","format":"date","pattern":"^x"})"),
            "schema: no string matches both the pattern and the format");
  EXPECT_EQ(schema_error(R"({"type":"string","format":"uuid","maxLength":35})"),
            "schema: no string of 0 to 35 characters matches the format 'uuid'");
  EXPECT_EQ(schema_error(R"({"type":"string","format":"date","pattern":"-","minLength":11})"),
            "schema: no string of at least 11 characters matches the pattern and the format 'date'");
}

// A schema placed inside another (a tool's parameters inside the schema of a whole call) keeps its own "#..."
// references: Pydantic's "$defs", and "#" for itself.
TEST(JsonMatcher, AnEmbeddedSchemaKeepsItsReferences) {
  json parameters = json::parse(R"({"type": "object", "$defs": {"A": {"enum": ["x", "y"]}},
    "properties": {"a": {"$ref": "#/$defs/A"}, "child": {"$ref": "#"}}, "required": ["a"]})");
  json call = {{"type", "object"},
               {"properties", {{"arguments", embeddable_schema(parameters)}}},
               {"required", {"arguments"}}};
  EXPECT_TRUE(matches(call, R"({"arguments":{"a":"x","child":{"a":"y"}}})"));
  EXPECT_FALSE(matches(call, R"({"arguments":{"a":"z"}})"));
  EXPECT_FALSE(matches(call, R"({"arguments":{"a":"x","child":{"arguments":{"a":"x"}}}})"));
}

TEST(JsonMatcher, TopLevelNumberEndsAtTheEnd) {
  json schema = {{"type", "number"}};
  EXPECT_TRUE(matches(schema, "12.5"));
  EXPECT_TRUE(matches(schema, "12 "));
  EXPECT_FALSE(matches(schema, "12."));
  EXPECT_FALSE(matches(schema, "1 2"));
}

// Numbers are at most 40 bytes: a byte after which a number cannot end is refused where no digit would fit after
// it (accepted, it left no way on: no byte, not even the end, was allowed).
TEST(JsonMatcher, ANumberNeverRunsOutOfRoomUnfinished) {
  json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "number"}}}}}};
  std::string digits(38, '1');
  EXPECT_TRUE(matches(schema, R"({"a":)" + digits.substr(1) + "5.5}"));  // 40 bytes
  EXPECT_TRUE(matches(schema, R"({"a":)" + digits + "e5}"));
  EXPECT_FALSE(prefix_ok(schema, R"({"a":)" + digits + "5."));
  EXPECT_FALSE(prefix_ok(schema, R"({"a":)" + digits + "e+"));
  EXPECT_TRUE(matches(schema, R"({"a":)" + digits + "55}"));
}

// minLength / maxLength count characters: an escape, or a UTF-8 character of any length, is one.
TEST(JsonMatcher, StringLengthsCountCharacters) {
  json schema = json::parse(R"({"type":"string","minLength":2,"maxLength":4})");
  EXPECT_FALSE(prefix_ok(schema, R"("a")"));  // too short to close
  EXPECT_FALSE(prefix_ok(schema, R"("")"));
  EXPECT_TRUE(matches(schema, R"("ab")"));
  EXPECT_TRUE(matches(schema, R"("abcd")"));
  EXPECT_FALSE(prefix_ok(schema, R"("abcde)"));  // too long to grow
  EXPECT_FALSE(prefix_ok(schema, R"("\n")"));
  EXPECT_TRUE(matches(schema, R"("\n\u00e9")"));
  EXPECT_TRUE(matches(schema, R"("\u00e9\t\"\\")"));
  EXPECT_FALSE(prefix_ok(schema, R"("\u00e9\t\"\\\)"));
  EXPECT_FALSE(prefix_ok(schema, "\"\xF0\x9F\xA6\x8A\""));
  EXPECT_TRUE(matches(schema, "\"\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x8A\""));
  EXPECT_TRUE(matches(schema, "\"\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8A\""));
  EXPECT_FALSE(prefix_ok(schema, "\"\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8A\xF0"));
  json empty = json::parse(R"({"type":"string","maxLength":0})");
  EXPECT_TRUE(matches(empty, R"("")"));
  EXPECT_FALSE(prefix_ok(empty, R"("a)"));
  // Without a maximum, any length past the minimum; lengths apply to the string of a list of types only.
  json at_least = json::parse(R"({"type":"object","properties":{"s":{"type":["string","null"],"minLength":3}}})");
  EXPECT_TRUE(matches(at_least, R"({"s":")" + std::string(1000, 'x') + R"("})"));
  EXPECT_TRUE(matches(at_least, R"({"s":null})"));
  EXPECT_FALSE(prefix_ok(at_least, R"({"s":"xy")"));
  EXPECT_TRUE(matches(json::parse(R"({"type":"object","minLength":3})"), "{}"));
}

// Every integer string in [LOW, HIGH], and "-0" where 0 is among them (JSON's -0 is 0).
std::set<std::string> integer_texts(int64_t low, int64_t high) {
  std::set<std::string> texts;
  for (int64_t value = low;; ++value) {
    texts.insert(std::to_string(value));
    if (value == high) break;
  }
  if (low <= 0 && high >= 0) texts.insert("-0");
  return texts;
}

// Walks every text of '-', digits and the other bytes of numbers that the matcher keeps alive: it must keep alive
// exactly the prefixes of TEXTS (so it refuses a byte where no text continues, and never reaches a dead end), and
// be complete exactly on TEXTS.
void expect_exactly(const json& schema, const std::set<std::string>& texts) {
  std::set<std::string> prefixes;
  for (const std::string& text : texts)
    for (size_t length = 0; length <= text.size(); ++length) prefixes.insert(text.substr(0, length));
  std::vector<std::pair<std::string, JsonMatcher>> stack;
  stack.emplace_back("", JsonMatcher(JsonGrammar::from_schema(schema, "schema")));
  while (!stack.empty()) {
    auto [text, matcher] = std::move(stack.back());
    stack.pop_back();
    EXPECT_EQ(matcher.complete(), texts.count(text) > 0) << schema.dump() << ": " << text;
    for (char c : std::string("-0123456789+.eE")) {
      JsonMatcher next(matcher);
      bool alive = next.feed(std::string(1, c));
      ASSERT_EQ(alive, prefixes.count(text + c) > 0) << schema.dump() << ": " << text + c;
      if (alive) stack.emplace_back(text + c, std::move(next));
    }
  }
}

TEST(JsonMatcher, IntegerBoundsAllowExactlyTheRange) {
  auto range = [](json bounds) {
    bounds["type"] = "integer";
    return bounds;
  };
  expect_exactly(range({{"minimum", -15}, {"maximum", 123}}), integer_texts(-15, 123));
  expect_exactly(range({{"minimum", 0}, {"maximum", 0}}), integer_texts(0, 0));
  expect_exactly(range({{"minimum", 7}, {"maximum", 7}}), integer_texts(7, 7));
  expect_exactly(range({{"minimum", -100}, {"maximum", -3}}), integer_texts(-100, -3));
  expect_exactly(range({{"minimum", -7}, {"maximum", -7}}), integer_texts(-7, -7));
  expect_exactly(range({{"minimum", -1000}, {"maximum", 999}}), integer_texts(-1000, 999));
  expect_exactly(range({{"exclusiveMinimum", -4}, {"exclusiveMaximum", 9}}), integer_texts(-3, 8));
  expect_exactly(range({{"exclusiveMinimum", 0}, {"maximum", 10}}), integer_texts(1, 10));
  expect_exactly(range({{"minimum", -10}, {"exclusiveMaximum", 0}}), integer_texts(-10, -1));
  // Fractions round inward; of two lower (upper) bounds the higher (lower) holds.
  expect_exactly(range({{"minimum", -2.5}, {"maximum", 3.7}}), integer_texts(-2, 3));
  expect_exactly(range({{"exclusiveMinimum", 1.5}, {"exclusiveMaximum", 4.0}}), integer_texts(2, 3));
  expect_exactly(range({{"minimum", 0}, {"exclusiveMinimum", 5}, {"maximum", 30}, {"exclusiveMaximum", 21}}),
                 integer_texts(6, 20));
  // 2^53 + 1 is no double: the bound is compared digit by digit.
  expect_exactly(range({{"minimum", 9007199254740000}, {"maximum", 9007199254740993}}),
                 integer_texts(9007199254740000, 9007199254740993));
  expect_exactly(range({{"minimum", -9007199254740993}, {"exclusiveMaximum", -9007199254740900}}),
                 integer_texts(-9007199254740993, -9007199254740901));
}

TEST(JsonMatcher, IntegerBoundsAtTheEdges) {
  json int64 = json::parse(R"({"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807})");
  EXPECT_TRUE(matches(int64, "-9223372036854775808"));
  EXPECT_TRUE(matches(int64, "9223372036854775807"));
  EXPECT_TRUE(matches(int64, "0"));
  EXPECT_FALSE(prefix_ok(int64, "-9223372036854775809"));
  EXPECT_FALSE(prefix_ok(int64, "9223372036854775808"));
  EXPECT_FALSE(prefix_ok(int64, "10000000000000000000"));
  EXPECT_FALSE(prefix_ok(int64, "012"));
  // One bound: any number of digits on its open side, up to the 40 bytes of a number.
  json at_least = json::parse(R"({"type":"integer","minimum":10})");
  EXPECT_TRUE(matches(at_least, "10"));
  EXPECT_TRUE(matches(at_least, "1" + std::string(39, '0')));
  EXPECT_FALSE(prefix_ok(at_least, "1" + std::string(40, '0')));
  EXPECT_FALSE(matches(at_least, "9"));
  EXPECT_FALSE(prefix_ok(at_least, "-"));
  EXPECT_FALSE(prefix_ok(at_least, "0"));
  json at_most = json::parse(R"({"type":"integer","maximum":-10})");
  EXPECT_TRUE(matches(at_most, "-" + std::string(39, '9')));
  EXPECT_TRUE(prefix_ok(at_most, "-9"));  // -90, ...
  EXPECT_FALSE(matches(at_most, "-9"));
  EXPECT_FALSE(prefix_ok(at_most, "-0"));
  EXPECT_FALSE(prefix_ok(at_most, "1"));
  EXPECT_TRUE(matches(json::parse(R"({"type":"integer","minimum":0})"), "-0"));
  // Inside an object the value ends at the next byte; a digit past the range is refused there.
  json object = json::parse(R"({"type":"object","properties":{"n":{"type":"integer","minimum":15,"maximum":70}}})");
  EXPECT_TRUE(matches(object, R"({"n":15})"));
  EXPECT_TRUE(matches(object, R"({"n":70 })"));
  EXPECT_TRUE(prefix_ok(object, R"({"n":7)"));  // 70
  EXPECT_FALSE(matches(object, R"({"n":7})"));
  EXPECT_FALSE(prefix_ok(object, R"({"n":71)"));
  EXPECT_FALSE(prefix_ok(object, R"({"n":8)"));  // below 15, and 80 is above 70
  EXPECT_FALSE(prefix_ok(object, R"({"n":-)"));
}

// ---- bounded numbers against an independent reference
// A bounded number is written without an exponent, in at most 40 bytes. Its bounds are exact decimals: a double's
// shortest round-trip text (here from std::to_chars), the next double inward for an exclusive one, an integer's own
// digits. The reference decides by arithmetic on the decimals what the automaton decides digit by digit.

// A magnitude and sign exactly: integer digits without leading zeros ("0" for none), fraction without trailing zeros.
struct Decimal {
  bool negative = false;
  std::string integer = "0", fraction;
};

Decimal normal(bool negative, std::string integer, std::string fraction) {
  integer.erase(0, std::min(integer.find_first_not_of('0'), integer.size() - 1));
  fraction.erase(std::min(fraction.find_last_not_of('0') + 1, fraction.size()));
  return {negative && (integer != "0" || !fraction.empty()), integer, fraction};
}

// TEXT, a JSON number or a std::to_chars one ("-1.5", "5e-324", "1e+30"), exactly.
Decimal decimal(const std::string& text) {
  bool negative = text[0] == '-';
  size_t e = text.find_first_of("eE");
  std::string mantissa = text.substr(negative, e == std::string::npos ? std::string::npos : e - negative);
  long exponent = e == std::string::npos ? 0 : std::stol(text.substr(e + 1));
  size_t dot = mantissa.find('.');
  std::string digits = mantissa;
  if (dot != std::string::npos) digits.erase(dot, 1);
  // Pad so that the point, DIGITS integer digits in, falls inside them.
  long point = static_cast<long>(dot == std::string::npos ? mantissa.size() : dot) + exponent;
  std::string padded = std::string(static_cast<size_t>(std::max(0L, -point)), '0') + digits +
                       std::string(static_cast<size_t>(std::max(0L, point - static_cast<long>(digits.size()))), '0');
  size_t split = static_cast<size_t>(std::max(0L, point));
  return normal(negative, "0" + padded.substr(0, split), padded.substr(split));
}

int compare_magnitudes(const Decimal& a, const Decimal& b) {
  if (a.integer.size() != b.integer.size()) return a.integer.size() < b.integer.size() ? -1 : 1;
  if (a.integer != b.integer) return a.integer < b.integer ? -1 : 1;
  return a.fraction == b.fraction ? 0 : a.fraction < b.fraction ? -1 : 1;
}
int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  return a.negative ? -compare_magnitudes(a, b) : compare_magnitudes(a, b);
}

// The least magnitude of at most DIGITS fraction digits that is at least A's.
Decimal round_up(const Decimal& a, size_t digits) {
  if (a.fraction.size() <= digits) return a;
  std::string all = a.integer + a.fraction.substr(0, digits);  // cut a nonzero tail: one unit of the last place up
  size_t i = all.size();
  while (i > 0 && all[i - 1] == '9') all[--i] = '0';
  if (i == 0) all.insert(0, "1");
  else ++all[i - 1];
  return normal(false, all.substr(0, all.size() - digits), all.substr(all.size() - digits));
}

struct Range {
  std::optional<Decimal> low, high;  // inclusive
};

std::string shortest(double value) {
  char text[64];
  return std::string(text, std::to_chars(text, text + sizeof(text), value).ptr);
}

Range range_of(const json& schema) {
  Range range;
  for (const char* keyword : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!schema.contains(keyword)) continue;
    const json& value = schema[keyword];
    bool lower = std::string(keyword).find("inimum") != std::string::npos;
    bool exclusive = std::string(keyword).starts_with("exclusive");
    Decimal bound = value.is_number_integer() && !exclusive
                        ? decimal(value.dump())
                        : decimal(shortest(exclusive ? std::nextafter(value.get<double>(), lower ? HUGE_VAL : -HUGE_VAL)
                                                     : value.get<double>()));
    std::optional<Decimal>& kept = lower ? range.low : range.high;
    if (!kept || (compare(bound, *kept) > 0) == lower) kept = bound;
  }
  return range;
}

// The sign and digits of TEXT if it is a prefix of a number without an exponent (the point's position in DOT).
struct NumberPrefix {
  bool negative = false;
  std::string integer, fraction;
  bool dot = false;
};
std::optional<NumberPrefix> number_prefix(const std::string& text) {
  NumberPrefix prefix;
  prefix.negative = text.starts_with('-');
  std::string rest = text.substr(prefix.negative);
  size_t dot = rest.find('.');
  prefix.dot = dot != std::string::npos;
  prefix.integer = rest.substr(0, dot);
  prefix.fraction = prefix.dot ? rest.substr(dot + 1) : "";
  auto digits = [](const std::string& s) { return s.find_first_not_of("0123456789") == std::string::npos; };
  if (!digits(prefix.integer) || !digits(prefix.fraction) || (prefix.dot && prefix.integer.empty()) ||
      (prefix.integer.size() > 1 && prefix.integer[0] == '0'))
    return std::nullopt;
  return prefix;
}

// Whether TEXT is a whole number without an exponent within RANGE.
bool reference_within(const std::string& text, const Range& range) {
  std::optional<NumberPrefix> prefix = number_prefix(text);
  if (!prefix || prefix->integer.empty() || (prefix->dot && prefix->fraction.empty())) return false;
  Decimal value = normal(prefix->negative, prefix->integer, prefix->fraction);
  return !(range.low && compare(value, *range.low) < 0) && !(range.high && compare(value, *range.high) > 0);
}

// Whether TEXT begins a number of at most 40 bytes, without an exponent, within RANGE. A number's shape is its sign,
// its number of integer digits, and at most as many fraction digits as there is room for (fewer are written with
// zeros): for each shape TEXT may take, the least value of that shape at least the lowest magnitude allowed on its
// side of zero must be at most the greatest value of that shape and the highest magnitude allowed.
bool reference_alive(const std::string& text, const Range& range) {
  std::optional<NumberPrefix> prefix = number_prefix(text);
  if (!prefix || text.size() > 40) return false;
  bool negative = prefix->negative;
  // A value -m is at least LOW where m is at most -LOW, and at most HIGH where m is at least -HIGH.
  const std::optional<Decimal>& toward = negative ? range.high : range.low;
  const std::optional<Decimal>& away = negative ? range.low : range.high;
  if (away && away->negative != negative && (away->integer != "0" || !away->fraction.empty())) return false;
  Decimal lowest;
  if (toward && toward->negative == negative) lowest = normal(false, toward->integer, toward->fraction);
  std::optional<Decimal> highest;
  if (away) highest = normal(false, away->integer, away->fraction);
  const std::string& integer = prefix->integer;
  bool integer_done = prefix->dot || integer == "0";
  size_t sign = negative;
  for (size_t length = std::max<size_t>(integer.size(), 1); length <= (integer_done ? integer.size() : 40 - sign);
       ++length) {
    size_t room = sign + length + 1 < 40 ? 40 - sign - length - 1 : 0;
    if (prefix->dot && room < std::max<size_t>(prefix->fraction.size(), 1)) continue;
    std::string least_integer = integer.empty() ? (length == 1 ? "0" : "1") : integer;
    least_integer.resize(length, '0');
    std::string greatest_integer = integer, greatest_fraction = prefix->fraction;
    greatest_integer.resize(length, '9');
    greatest_fraction.resize(std::max(room, greatest_fraction.size()), '9');
    Decimal least = normal(false, least_integer, prefix->fraction);
    Decimal greatest = normal(false, greatest_integer, greatest_fraction);
    Decimal first = round_up(lowest, room);
    if (compare_magnitudes(first, least) < 0) first = least;
    if (compare_magnitudes(first, greatest) <= 0 && (!highest || compare_magnitudes(first, *highest) <= 0))
      return true;
  }
  return false;
}

// Whether the whole TEXT is a JSON number SCHEMA's validator takes (comparing as doubles, as validators do).
bool valid_number(const std::string& text, const json& schema) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !value.is_discarded() && validate(value, schema, schema);
}

// Walks every text of up to DEPTH bytes of '-', digits, '.' and exponent bytes that the matcher keeps alive: it must
// keep alive exactly the texts the reference does, and be complete exactly on those the validator takes.
void expect_number_walk(const json& schema, size_t depth) {
  Range range = range_of(schema);
  std::vector<std::pair<std::string, JsonMatcher>> stack;
  stack.emplace_back("", JsonMatcher(JsonGrammar::from_schema(schema, "schema")));
  while (!stack.empty()) {
    auto [text, matcher] = std::move(stack.back());
    stack.pop_back();
    if (!text.empty()) {
      EXPECT_EQ(matcher.complete(), valid_number(text, schema)) << schema.dump() << ": " << text;
    }
    if (text.size() == depth) continue;
    for (char c : std::string("-0123456789.eE+")) {
      JsonMatcher next(matcher);
      bool alive = next.feed(std::string(1, c));
      ASSERT_EQ(alive, reference_alive(text + c, range)) << schema.dump() << ": " << text + c;
      if (alive) stack.emplace_back(text + c, std::move(next));
    }
  }
}

json number_schema(const char* bounds) {
  json schema = json::parse(bounds);
  schema["type"] = "number";
  return schema;
}

TEST(JsonMatcher, NumberBoundsAllowExactlyTheRange) {
  for (const char* bounds : {
           R"({"minimum":0,"maximum":2})", R"({"minimum":-1.5,"maximum":2.25})",
           R"({"minimum":5.25,"maximum":5.25})", R"({"minimum":0.1,"maximum":0.3})",
           R"({"maximum":-0.001,"minimum":-0.2})", R"({"minimum":-0.5,"maximum":0})",
           R"({"exclusiveMinimum":0,"exclusiveMaximum":1})", R"({"exclusiveMinimum":-2.5,"exclusiveMaximum":-2.25})",
           R"({"minimum":-1e-30,"maximum":1e-30})", R"({"minimum":1e30,"maximum":2e30})",
           R"({"minimum":99.5,"maximum":100.25})",
           R"({"minimum":0,"exclusiveMinimum":0.5,"maximum":3,"exclusiveMaximum":1})",
       })
    expect_number_walk(number_schema(bounds), 6);
  // One-sided bounds leave many more texts alive: shorter walks.
  for (const char* bounds : {R"({"minimum":0.1})", R"({"exclusiveMinimum":0})", R"({"exclusiveMaximum":1})",
                             R"({"maximum":-0.001})", R"({"minimum":-12.75})", R"({"maximum":1e-30})"})
    expect_number_walk(number_schema(bounds), 4);
}

std::string text_of(const Decimal& value) {
  return (value.negative ? "-" : "") + value.integer + (value.fraction.empty() ? "" : "." + value.fraction);
}

// Random walks to the 40-byte limit, each byte checked against the reference: the room a bound's digits need is
// counted exactly, and the automaton's digits compare exactly. Each walk first follows a bound's digits for a random
// number of bytes, so that it comes close to the bound where a digit more or less decides.
TEST(JsonMatcher, NumberBoundsHoldToTheLastByte) {
  std::mt19937 random(7);
  for (const char* bounds : {
           R"({"minimum":1e-38,"maximum":1e-38})", R"({"minimum":-1e-37,"maximum":-1e-37})",
           R"({"minimum":9.5e-38})", R"({"maximum":-9.5e-37})", R"({"minimum":-9.5e-37,"maximum":0})",
           R"({"exclusiveMinimum":0,"maximum":1e-30})", R"({"minimum":1e38})", R"({"maximum":-1e37})",
           R"({"minimum":9999.99,"maximum":9999.999})", R"({"minimum":-99.99,"exclusiveMaximum":99.99})",
           R"({"minimum":0.1,"maximum":0.1000001})", R"({"minimum":-1.5,"exclusiveMaximum":2.25})",
           R"({"minimum":123456.789,"maximum":123456.7891})", R"({"minimum":9.999,"maximum":10.001})",
           R"({"minimum":9007199254740993,"maximum":9007199254740995})",
       }) {
    json schema = number_schema(bounds);
    Range range = range_of(schema);
    auto grammar = JsonGrammar::from_schema(schema, "schema");
    std::vector<std::string> guides;
    for (const std::optional<Decimal>& bound : {range.low, range.high})
      if (bound) guides.push_back(text_of(*bound));
    for (int walk = 0; walk < 200; ++walk) {
      JsonMatcher matcher(grammar);
      std::string text;
      const std::string& guide = guides[random() % guides.size()];
      size_t follow = random() % (guide.size() + 1);
      for (;;) {
        std::string alive;
        for (char c : std::string("-0123456789.eE+")) {
          bool fed = JsonMatcher(matcher).feed(std::string(1, c));
          ASSERT_EQ(fed, reference_alive(text + c, range)) << bounds << ": " << text + c;
          if (fed) alive += c;
        }
        bool complete = matcher.complete();
        ASSERT_EQ(complete, reference_within(text, range)) << bounds << ": " << text;
        if (complete) {
          ASSERT_TRUE(valid_number(text, schema)) << bounds << ": " << text;
        }
        ASSERT_TRUE(complete || !alive.empty()) << "a dead end after " << text;
        bool guided = text.size() < follow && alive.find(guide[text.size()]) != std::string::npos;
        if (alive.empty() || (!guided && complete && random() % 16 == 0)) break;
        text += guided ? guide[text.size()] : alive[random() % alive.size()];
        ASSERT_TRUE(matcher.feed(text.substr(text.size() - 1)));
      }
    }
  }
}

TEST(JsonMatcher, NumberBoundsAtTheEdges) {
  json tiny = number_schema(R"({"minimum":1e-38})");
  std::string point_zeros = "0." + std::string(37, '0');
  EXPECT_TRUE(matches(tiny, point_zeros + "1"));  // 40 bytes
  EXPECT_FALSE(prefix_ok(tiny, point_zeros + "0"));
  EXPECT_FALSE(prefix_ok(tiny, "-"));
  EXPECT_TRUE(matches(tiny, "1"));
  EXPECT_FALSE(prefix_ok(tiny, "1e5"));  // no exponent beside bounds
  // 9.5e-38 needs 39 fraction digits: after 37 zeros no digit reaches it.
  json nines = number_schema(R"({"minimum":9.5e-38})");
  EXPECT_TRUE(matches(nines, "0." + std::string(36, '0') + "1"));
  EXPECT_FALSE(prefix_ok(nines, point_zeros));
  json huge = number_schema(R"({"maximum":-1e38})");
  EXPECT_TRUE(matches(huge, "-1" + std::string(38, '0')));  // 40 bytes
  EXPECT_FALSE(prefix_ok(huge, "-1" + std::string(38, '0') + "."));
  EXPECT_FALSE(prefix_ok(huge, "-9" + std::string(37, '9') + "."));
  EXPECT_TRUE(prefix_ok(huge, "-9" + std::string(37, '9')));
  // Written as an integer past 2^53, a bound is its own digits.
  json big = number_schema(R"({"minimum":9007199254740993,"maximum":9007199254740995})");
  EXPECT_TRUE(matches(big, "9007199254740993"));
  EXPECT_TRUE(matches(big, "9007199254740994.5"));
  EXPECT_TRUE(matches(big, "9007199254740995.000"));
  EXPECT_FALSE(prefix_ok(big, "9007199254740992"));
  EXPECT_FALSE(prefix_ok(big, "9007199254740995.1"));
  // Zero either way, and negative fractions.
  json around_zero = number_schema(R"({"minimum":0,"maximum":0})");
  for (const char* text : {"0", "-0", "0.000", "-0.0"}) EXPECT_TRUE(matches(around_zero, text)) << text;
  EXPECT_FALSE(prefix_ok(around_zero, "-0.1"));
  EXPECT_FALSE(prefix_ok(around_zero, "0.01"));
  json negative = number_schema(R"({"exclusiveMaximum":-0.5})");
  EXPECT_TRUE(matches(negative, "-0.50001"));
  EXPECT_FALSE(matches(negative, "-0.5"));
  EXPECT_TRUE(prefix_ok(negative, "-0.5"));
  EXPECT_FALSE(prefix_ok(negative, "-0.4"));
  // Inside an object the value ends at the next byte.
  json object = json::parse(R"({"type":"object","properties":{"x":{"type":"number","minimum":5.25,"maximum":5.25}}})");
  EXPECT_TRUE(matches(object, R"({"x":5.25})"));
  EXPECT_TRUE(matches(object, R"({"x":5.2500 })"));
  EXPECT_FALSE(prefix_ok(object, R"({"x":5})"));
  EXPECT_FALSE(prefix_ok(object, R"({"x":5.251)"));
  // Unbounded numbers keep their exponents.
  EXPECT_TRUE(matches(number_schema("{}"), "-1.5e+300"));
}

// Random walks over bytes: from the empty text, any byte the matcher allows, until it is complete and the walk
// stops. Each text must parse and hold to the schema, and no walk may find no way on.
TEST(JsonMatcher, RandomByteWalksEndValid) {
  const char* schemas[] = {
      R"({"type":"integer","minimum":-15,"maximum":123})",
      R"({"type":"integer","exclusiveMinimum":-101,"exclusiveMaximum":-2})",
      R"({"type":"integer","minimum":0,"maximum":0})",
      R"({"type":"integer","minimum":9007199254740990})",
      R"({"type":"integer","maximum":-1000})",
      R"({"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807})",
      R"({"type":"string","minLength":2,"maxLength":5})",
      R"({"type":"number","minimum":-1.5,"maximum":2.25})",
      R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
      R"({"type":"number","minimum":5.25,"maximum":5.25})",
      R"({"type":["number","null"],"maximum":-0.001})",
      R"({"type":"number","minimum":1e-30,"maximum":2e-30})",
      R"({"type":"object","properties":{
          "n":{"type":"array","items":{"type":"integer","minimum":-5,"maximum":5.5},"maxItems":3},
          "s":{"type":["string","null"],"minLength":3},
          "t":{"type":"string","maxLength":1},
          "x":{"type":"array","items":{"type":"number","exclusiveMinimum":-1,"maximum":0.25}},
          "k":{"type":"integer","minimum":-9007199254740993,"maximum":9007199254740993}},
        "required":["n","s","t","k"]})",
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer","minimum":0},{"enum":[1,"x"]}],
          "items":{"type":"boolean"},"minItems":1,"maxItems":5})",
      R"({"type":"string","pattern":"^[a-z]{2,4}(?:-\\d+)?$","maxLength":8})",
      R"({"type":"string","pattern":"x","minLength":2,"maxLength":6})",
      R"({"type":"object","properties":{"p":{"type":["string","null"],"pattern":"^(ab|\u00e9)+$","minLength":3},
          "q":{"type":"string","pattern":"[^a-z]$"}},"required":["p","q"]})",
      R"({"type":"string","format":"date-time"})",
      R"({"type":"object","properties":{"mail":{"type":"string","format":"email","maxLength":12},
          "ip":{"type":"string","format":"ipv4"},"id":{"type":"string","format":"uuid"},
          "host":{"type":"string","format":"hostname","minLength":4},
          "day":{"type":["string","null"],"format":"date","pattern":"-0[1-3]-"}},
        "required":["mail","ip","id","host","day"]})",
      R"({"prefixItems":[{"type":"null"},{"type":"array","prefixItems":[{"type":"boolean"}],"items":false}],
          "items":{"type":"string","maxLength":2}})",
      // choices whose branches begin alike
      R"({"type":"array","items":{"anyOf":[
          {"type":"object","properties":{"a":{"type":"integer","maximum":9},"b":{"type":"string","maxLength":2}},
           "required":["a"]},
          {"type":"object","properties":{"a":{"type":"number","minimum":5},"c":{"type":"null"}},"required":["c"]},
          {"type":"array","items":{"type":"integer"},"maxItems":2},{"type":"array","items":{"type":"boolean"}}]}})",
      R"({"type":["integer","number"],"minimum":-3,"maximum":3.5})",
      R"({"anyOf":[{"enum":["ab","abc",12]},{"type":"string","pattern":"^a[bc]*$","maxLength":4},
          {"type":"integer","minimum":10,"maximum":19}]})",
      R"({"oneOf":[{"type":"object","properties":{"t":{"enum":["x","y"]},"v":{"type":"integer"}},"required":["t"]},
          {"type":"object","properties":{"t":{"const":"z"},"v":{"type":"string"}},"required":["t","v"]},
          {"type":"string"}]})",
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":0}},"required":["id"],"anyOf":[
          {"properties":{"k":{"enum":["a",1]}},"required":["k"]},{"properties":{"k":{"type":"boolean"},"v":{"type":["null","array"],"items":{"type":"boolean"}}}}]})",
      R"({"$defs":{"e":{"anyOf":[{"type":"object","properties":{"l":{"$ref":"#/$defs/e"}},"required":["l"]},
          {"type":"object","properties":{"l":{"type":"integer"},"r":{"$ref":"#/$defs/e"}}},{"type":"integer"}]}},
          "$ref":"#/$defs/e"})",
  };
  std::mt19937 random(42);
  for (const char* text : schemas) {
    json schema = json::parse(text);
    auto grammar = JsonGrammar::from_schema(schema, "schema");
    for (int walk = 0; walk < 1000; ++walk) {
      JsonMatcher matcher(grammar);
      std::string document;
      for (;;) {
        std::vector<char> bytes, closing;
        for (int b = 0; b < 256; ++b)
          if (JsonMatcher(matcher).feed(std::string(1, static_cast<char>(b)))) {
            bytes.push_back(static_cast<char>(b));
            if (std::string_view("\"]},:").find(static_cast<char>(b)) != std::string_view::npos)
              closing.push_back(static_cast<char>(b));
          }
        bool complete = matcher.complete();
        ASSERT_TRUE(complete || !bytes.empty()) << "a dead end after " << document;
        if (complete && (bytes.empty() || random() % 4 == 0)) break;
        // Half the draws among the bytes that close something, so strings end.
        const std::vector<char>& pool = closing.empty() || random() % 2 ? bytes : closing;
        char b = pool[random() % pool.size()];
        document += b;
        ASSERT_TRUE(matcher.feed(std::string(1, b)));
      }
      json value;
      ASSERT_NO_THROW(value = json::parse(document)) << document;
      ASSERT_TRUE(validate(value, schema, schema)) << text << ": " << document;
    }
  }
}

std::string schema_error(const char* schema, const std::string& path) {
  try {
    JsonGrammar::from_schema(json::parse(schema), path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonGrammar, SchemaErrorsNameTheirPath) {
  auto error_of = [](const char* schema) { return schema_error(schema, "response_format.json_schema.schema"); };
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"age":{"type":"int"}}})"),
            "response_format.json_schema.schema.properties.age.type: unknown type 'int' (expected object, array, "
            "string, number, integer, boolean or null)");
  EXPECT_EQ(error_of(R"({"properties":{"name":{"type":"string","patternProperties":{}}}})"),
            "response_format.json_schema.schema.properties.name.patternProperties: the keyword 'patternProperties' is "
            "not supported in structured output");
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"a":{}},"required":["b"]})"),
            "response_format.json_schema.schema.required[0]: \"b\" is not one of the declared properties");
  // oneOf's branches that one value may match both of: no discriminator tells them apart.
  EXPECT_EQ(error_of(R"({"oneOf":[{"type":"object"},{"properties":{"a":{}}}]})"),
            "response_format.json_schema.schema.oneOf: branches 0 and 1 may both match one value (both may begin "
            "with '{', and no property both require has const or enum values that tell them apart); anyOf allows a "
            "value that both match");
  EXPECT_EQ(error_of(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})"),
            "response_format.json_schema.schema.oneOf: branches 0 and 1 may both match one value (both may begin "
            "with '-', and no property both require has const or enum values that tell them apart); anyOf allows a "
            "value that both match");
  EXPECT_THAT(error_of(R"({"oneOf":[{"properties":{"k":{"enum":["a","b"]}},"required":["k"]},
                                     {"properties":{"k":{"enum":["b","c"]}},"required":["k"]}]})"),
              ::testing::HasSubstr("schema.oneOf: branches 0 and 1 may both match one value"));
  EXPECT_THAT(error_of(R"({"oneOf":[{"properties":{"k":{"const":"a"}},"required":["k"]},
                                     {"properties":{"k":{"const":"b"}}}]})"),
              ::testing::HasSubstr("schema.oneOf: branches 0 and 1 may both match one value"));
  EXPECT_EQ(error_of(R"({"oneOf":[{"const":0},{"enum":[1,-0.0]}]})"),
            "response_format.json_schema.schema.oneOf: branches 0 and 1 may both match one value (their const / enum "
            "values share one); anyOf allows a value that both match");
  // 1 and 1.0 are one number: no discriminator.
  EXPECT_THAT(error_of(R"({"oneOf":[{"properties":{"k":{"const":1}},"required":["k"]},
                                     {"properties":{"k":{"enum":[2, 1.0]}},"required":["k"]}]})"),
              ::testing::HasSubstr("schema.oneOf: branches 0 and 1 may both match one value"));
  EXPECT_EQ(error_of(R"({"items":{"$ref":"#/nowhere"}})"),
            "response_format.json_schema.schema.items.$ref: \"#/nowhere\" names nothing in the schema");
  EXPECT_EQ(error_of(R"({"type":"array","prefixItems":[]})"),
            "response_format.json_schema.schema.prefixItems: expected a non-empty list of schemas, not []");
  EXPECT_EQ(error_of(R"({"type":"array","prefixItems":{"type":"string"}})"),
            "response_format.json_schema.schema.prefixItems: expected a non-empty list of schemas, not "
            "{\"type\":\"string\"}");
  EXPECT_EQ(error_of(R"({"properties":{"t":{"prefixItems":[{"type":"string"},{"type":"bool"}]}}})"),
            "response_format.json_schema.schema.properties.t.prefixItems[1].type: unknown type 'bool' (expected "
            "object, array, string, number, integer, boolean or null)");
  EXPECT_EQ(error_of(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})"),
            "response_format.json_schema.schema: minItems 2 asks for more items than the 1 of prefixItems, and items "
            "is false");
  EXPECT_EQ(error_of(R"({"type":"array","minItems":-1})"),
            "response_format.json_schema.schema.minItems: expected a count, not -1");
  EXPECT_EQ(error_of("[1]"), "response_format.json_schema.schema: a schema must be an object, not array");
  // allOf's schemas that cannot be one.
  EXPECT_EQ(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})"),
            "response_format.json_schema.schema.allOf[1].type: allOf's schemas give types no value has together "
            "(\"string\" and \"integer\")");
  EXPECT_EQ(error_of(R"({"allOf":[{"type":["string","number"]},{"type":["integer","null"]}],"minimum":3})"), "no error");
  EXPECT_EQ(error_of(R"({"allOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"a":{"type":"null"}}}]})"),
            "response_format.json_schema.schema.properties.a.allOf[1].type: allOf's schemas give types no value has "
            "together (\"string\" and \"null\")");
  EXPECT_EQ(error_of(R"({"anyOf":[{"$id":"x","type":"object"}],"required":[]})"),
            "response_format.json_schema.schema.anyOf: a branch with its own \"$id\" beside keywords of its choice "
            "is not supported (move them into the branch)");
  EXPECT_EQ(error_of(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})"),
            "response_format.json_schema.schema.allOf: one schema closes its object (additionalProperties false) "
            "to property 'b', which another adds");
  EXPECT_EQ(error_of(R"({"allOf":[]})"),
            "response_format.json_schema.schema.allOf: expected a non-empty list of schemas, not []");
  EXPECT_EQ(error_of(R"({"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"},{"type":"object"}]}},"$ref":"#/$defs/a"})"),
            "#/$defs/a: allOf and $ref nest more than 32 deep (a reference cycle?)");
  // Twelve levels that each merge the next one twice: 2^13 - 1 merges, refused after 4096.
  json branching = {{"$ref", "#/$defs/d0"}};
  for (int i = 0; i < 12; ++i) {
    json next = {{"$ref", fmt::format("#/$defs/d{}", i + 1)}};
    branching["$defs"][fmt::format("d{}", i)] = {{"allOf", {next, next}}};
  }
  branching["$defs"]["d12"] = {{"type", "object"}};
  EXPECT_THAT(schema_error(branching.dump().c_str()), ::testing::HasSubstr("more than 4096 allOf merges"));
}

TEST(JsonGrammar, LengthAndBoundErrorsNameTheirPath) {
  auto error_of = [](const char* schema) { return schema_error(schema); };
  EXPECT_EQ(error_of(R"({"properties":{"s":{"type":"string","minLength":5,"maxLength":2}}})"),
            "schema.properties.s: minLength 5 is above maxLength 2");
  EXPECT_EQ(error_of(R"({"type":"string","maxLength":1.5})"), "schema.maxLength: expected a count, not 1.5");
  // A schema built in code holds its counts as signed integers.
  EXPECT_NO_THROW(JsonGrammar::from_schema(json{{"type", "string"}, {"maxLength", 3}}, "schema"));
  EXPECT_THAT([] { JsonGrammar::from_schema(json{{"type", "string"}, {"maxLength", -3}}, "schema"); },
              ::testing::ThrowsMessage<Error>(::testing::StrEq("schema.maxLength: expected a count, not -3")));
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":10,"exclusiveMaximum":10})"),
            "schema: no integer is within its bounds (at least 10, at most 9)");
  EXPECT_EQ(error_of(R"({"type":["integer","null"],"minimum":1.2,"maximum":1.8})"),
            "schema: no integer is within its bounds (at least 2, at most 1)");
  EXPECT_EQ(error_of(R"({"type":"integer","maximum":"10"})"), "schema.maximum: expected a number, not \"10\"");
  // References that only lead to each other match nothing: refused, not a constraint that allows no token.
  EXPECT_EQ(error_of(R"({"$defs":{"node":{"type":"null"}},"$ref":"#"})"),
            "schema: a $ref leads back to itself before any value (references in a cycle with nothing to match)");
  EXPECT_EQ(error_of(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},)"
                     R"("type":"object","properties":{"x":{"$ref":"#/$defs/a"}}})"),
            "schema: a $ref leads back to itself before any value (references in a cycle with nothing to match)");
  // Past 2^53 a bound written as a double is already rounded (9007199254740993.0 parses to ...992).
  EXPECT_EQ(error_of(R"({"type":"integer","maximum":1e19})"),
            "schema.maximum: 1e+19 is 2^53 or past it, where a number written with a fraction or an exponent is no longer "
            "exact; write the bound as an integer");
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":9007199254740993.0})"),
            "schema.minimum: 9.007199254740992e+15 is 2^53 or past it, where a number written with a fraction or an exponent is "
            "no longer exact; write the bound as an integer");
  EXPECT_EQ(error_of(R"({"type":"integer","maximum":18446744073709551615})"),
            "schema.maximum: 18446744073709551615 is out of range: an integer's bounds, made inclusive, must fit in 64 "
            "bits");
  EXPECT_EQ(error_of(R"({"type":"integer","exclusiveMinimum":9223372036854775807})"),
            "schema.exclusiveMinimum: 9223372036854775807 is out of range: an integer's bounds, made inclusive, must "
            "fit in 64 bits");
  EXPECT_EQ(error_of(R"({"type":["number","null"],"minimum":0})"), "no error");
  EXPECT_EQ(error_of(R"({"properties":{"p":{"type":"number","minimum":3,"maximum":2.5}}})"),
            "schema.properties.p: no number is within its bounds (at least 3, at most 2.5)");
  EXPECT_EQ(error_of(R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1})"),
            "schema: no number is within its bounds (at least 1.0000000000000002, at most 0.9999999999999999)");
  // A bounded number has no exponent: bounds it cannot reach in 40 bytes are refused, not a dead end.
  EXPECT_EQ(error_of(R"({"type":"number","minimum":1e40})"),
            "schema: no number within its bounds can be written in 40 bytes (a number with bounds is written without "
            "an exponent)");
  EXPECT_EQ(error_of(R"({"type":"number","minimum":1.5e-38,"maximum":1.6e-38})"),
            "schema: no number within its bounds can be written in 40 bytes (a number with bounds is written without "
            "an exponent)");
  EXPECT_EQ(error_of(R"({"type":"number","exclusiveMinimum":1.7976931348623157e308})"),
            "schema.exclusiveMinimum: 1.7976931348623157e+308 leaves no number between it and the largest double");
  EXPECT_EQ(error_of(R"({"type":"number","maximum":"1"})"), "schema.maximum: expected a number, not \"1\"");
  EXPECT_EQ(error_of(R"({"enum":["a","bb"],"minLength":2})"),
            "schema.minLength: 'minLength' is supported only beside \"type\" (not beside $ref, const, enum, anyOf or "
            "oneOf)");
  EXPECT_EQ(error_of(R"({"items":{"maximum":3}})"),
            "schema.items.maximum: 'maximum' is supported only beside \"type\" (not beside $ref, const, enum, anyOf "
            "or oneOf)");
  EXPECT_EQ(error_of(R"({"type":"integer","multipleOf":2})"),
            "schema.multipleOf: the keyword 'multipleOf' is not supported in structured output");
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807})"),
            "no error");
}

// ---- token masks over real vocabularies ------------------------------------------------------------------

const json kDeep = [] {
  json schema = {{"type", "integer"}};
  for (int level = 0; level < 12; ++level)
    schema = {{"type", "object"}, {"properties", {{"next", schema}, {"id", {{"type", "string"}}}}},
              {"required", {"next"}}};
  return schema;
}();

// Tuples: a whole one, one with items past it, one that may end early.
const json kTuples = json::parse(R"({
  "type": "object",
  "properties": {
    "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "minItems": 2, "maxItems": 2},
    "row": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "boolean"}],
            "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 4},
    "head": {"type": "array", "prefixItems": [{"enum": ["a", "b"]}, {"type": "null"}], "items": false, "minItems": 1}
  },
  "required": ["point", "row", "head"]
})");

const json kItems = json::parse(R"({
  "type": "object",
  "properties": {
    "items": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
      "sku": {"type": "string"}, "count": {"type": "integer"}, "price": {"type": "number"},
      "color": {"enum": ["red", "green", "blue"]}}, "required": ["sku", "count", "color"]}},
    "note": {"type": ["string", "null"]},
    "ok": {"type": "boolean"}
  },
  "required": ["items", "ok"]
})");

// Lengths below and above the longest token (a string with room for every token is walked as plain text), and
// integer and number bounds.
const json kNarrowed = json::parse(R"({
  "type": "object",
  "properties": {
    "code": {"type": "string", "minLength": 3, "maxLength": 6},
    "text": {"type": "string", "minLength": 1, "maxLength": 400},
    "name": {"type": "string", "minLength": 12},
    "count": {"type": "integer", "minimum": -15, "maximum": 123},
    "big": {"type": "integer", "exclusiveMinimum": 9007199254740992},
    "ratio": {"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.25},
    "scores": {"type": "array", "maxItems": 3, "items": {"type": "integer", "minimum": -100, "maximum": -3}}
  },
  "required": ["code", "text", "name", "count", "big", "ratio", "scores"]
})");

// Patterns: fixed shapes, one with a length bound that forces its match to be written in time (unanchored, so that
// past the match any text is plain), escaped quotes, accented letters of two-byte characters.
const json kPatterned = json::parse(R"({
  "type": "object",
  "properties": {
    "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"},
    "slug": {"type": "string", "pattern": "^[a-z0-9]+(?:-[a-z0-9]+)*$", "maxLength": 20},
    "word": {"type": "string", "pattern": "^\\w+$", "minLength": 3},
    "note": {"type": "string", "pattern": "ok", "maxLength": 12},
    "quoted": {"type": "string", "pattern": "^\"[^\"]*\"$", "maxLength": 8},
    "accent": {"type": ["string", "null"], "pattern": "^[\u00e0-\u00ff]+\\.?$"}
  },
  "required": ["code", "slug", "word", "note", "quoted", "accent"]
})");

const json kFormatted = json::parse(R"({
  "type": "object",
  "properties": {
    "when": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date", "pattern": "^20"},
    "ip": {"type": "string", "format": "ipv4"},
    "id": {"type": "string", "format": "uuid"},
    "mail": {"type": "string", "format": "email", "maxLength": 30},
    "host": {"type": "string", "format": "hostname", "maxLength": 20}
  },
  "required": ["when", "day", "ip", "id", "mail", "host"]
})");

// Choices whose branches begin alike: objects told apart only by their keys (OpenAI's example of anyOf), a
// discriminated oneOf as Pydantic writes it, a literal beside a string, and integers beside numbers.
const json kUnions = json::parse(R"({
  "type": "object",
  "properties": {
    "item": {"type": "array", "maxItems": 3, "items": {"anyOf": [
      {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"}},
       "required": ["name", "age"]},
      {"type": "object", "properties": {"name": {"type": "string"}, "street": {"type": "string", "maxLength": 4}},
       "required": ["name"]}]}},
    "pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "discriminator": {"propertyName": "kind"}},
    "mode": {"anyOf": [{"const": "auto"}, {"type": "string", "maxLength": 3}]},
    "size": {"type": ["integer", "number"], "minimum": -2, "maximum": 40}
  },
  "required": ["item", "pet", "mode", "size"],
  "$defs": {
    "Cat": {"type": "object", "properties": {"kind": {"const": "cat", "type": "string"}, "lives": {"type": "integer"}},
            "required": ["kind", "lives"]},
    "Dog": {"type": "object", "properties": {"kind": {"const": "dog", "type": "string"}, "lives": {"type": "number"},
                                             "good": {"type": "boolean"}},
            "required": ["kind"]}
  }
})");

class JsonConstraintWalk : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_PATH(test::tokenizer_dir(GetParam()), "run scripts/setup.sh to fetch the tokenizer files");
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(test::tokenizer_dir(GetParam())));
    trie_ = TokenTrie::of(*tokenizer_);
  }

  int32_t eos() const { return *tokenizer_->token_id(GetParam() == std::string("qwen3") ? "<|im_end|>" : "</s>"); }

  // Draws random allowed ids until the constraint ends; checks every mask against the byte automaton at
  // the steps in CHECK_EVERY; returns the text.
  std::string walk(const std::shared_ptr<const JsonGrammar>& grammar, uint32_t seed, size_t check_every) {
    auto constraint = make_json_constraint(grammar, trie_, {eos()});
    std::mt19937 random(seed);
    std::string text;
    std::vector<uint8_t> allowed(tokenizer_->vocab_size() + 7);  // logits may outnumber the vocabulary
    for (size_t step = 0; step < 4000; ++step) {
      std::fill(allowed.begin(), allowed.end(), 1);
      constraint->mask(allowed);
      expect_same_bits(*constraint, allowed);
      if (step % check_every == 0) check_mask(grammar, text, allowed);
      std::vector<int32_t> ids, closing;
      for (size_t id = 0; id < allowed.size(); ++id) {
        if (!allowed[id]) continue;
        ids.push_back(static_cast<int32_t>(id));
        std::string_view bytes = trie_->bytes(static_cast<int32_t>(id));
        if (static_cast<int32_t>(id) == eos() || bytes.find_first_of("\"]},:") != std::string_view::npos)
          closing.push_back(static_cast<int32_t>(id));
      }
      EXPECT_FALSE(ids.empty()) << "no id allowed after " << text;
      if (ids.empty()) return text;
      // Half the draws among the ids that close something, so the walk ends in a few hundred steps.
      const std::vector<int32_t>& pool = closing.empty() || random() % 2 ? ids : closing;
      int32_t id = pool[random() % pool.size()];
      EXPECT_EQ(allowed[id], 1);
      constraint->accept(id);
      if (id == eos()) {
        EXPECT_TRUE(constraint->complete());
        std::fill(allowed.begin(), allowed.end(), 1);
        constraint->mask(allowed);
        EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 1), 1);  // EOS alone after the end
        expect_same_bits(*constraint, allowed);
        return text;
      }
      text += trie_->bytes(id);
    }
    ADD_FAILURE() << "the walk did not end: " << text;
    return text;
  }

  // The constraint's mask as bits for the GPU (mask_bits, its words as cached) allows the ids ALLOWED (its
  // mask()) does, and no id past them.
  static void expect_same_bits(TokenConstraint& constraint, const std::vector<uint8_t>& allowed) {
    const size_t ids = allowed.size();
    std::vector<uint32_t> bits(ids / 32 + 2, 0);  // one word more than the ids need: must stay clear
    for (size_t id = 0; id < ids; ++id) bits[id / 32] |= uint32_t{1} << (id % 32);
    constraint.mask_bits(bits, ids);
    for (size_t id = 0; id < ids; ++id)
      ASSERT_EQ(bits[id / 32] >> (id % 32) & 1, allowed[id]) << "id " << id;
    EXPECT_EQ(bits.back(), 0u);
  }

  // Every allowed id continues TEXT into a live prefix (EOS: TEXT is complete), and every refused id
  // does not.
  void check_mask(const std::shared_ptr<const JsonGrammar>& grammar, const std::string& text,
                  const std::vector<uint8_t>& allowed) {
    JsonMatcher at_text(grammar);
    ASSERT_TRUE(at_text.feed(text));
    for (size_t id = 0; id < allowed.size(); ++id) {
      std::string_view bytes = trie_->bytes(static_cast<int32_t>(id));
      bool viable;
      if (static_cast<int32_t>(id) == eos())
        viable = at_text.complete();
      else if (bytes.empty())
        viable = false;  // added tokens and ids past the vocabulary
      else
        viable = JsonMatcher(at_text).feed(bytes);
      ASSERT_EQ(allowed[id], viable) << "id " << id << " '" << bytes << "' after '" << text << "'";
    }
  }

  // Feeding TEXT's tokens one by one, how many masks the constraint walks the vocabulary for and how many it takes
  // from its cache; every token must be allowed.
  JsonMaskCounts mask_counts(const json& schema, const std::string& text) {
    JsonMaskCounts counts;
    JsonConstraintOptions options;
    options.counts = &counts;
    auto constraint = make_json_constraint(JsonGrammar::from_schema(schema, "schema"), trie_, {eos()}, options);
    std::vector<uint32_t> bits((tokenizer_->vocab_size() + 31) / 32);
    for (int32_t id : tokenizer_->encode(text)) {
      std::fill(bits.begin(), bits.end(), ~0u);
      constraint->mask_bits(bits, tokenizer_->vocab_size());
      EXPECT_TRUE(bits[id / 32] >> (id % 32) & 1) << "id " << id;
      constraint->accept(id);
    }
    return counts;
  }

  void expect_valid(const json& schema, const std::string& text) {
    json value;
    ASSERT_NO_THROW(value = json::parse(text)) << text;
    EXPECT_TRUE(validate(value, schema, schema)) << text;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::shared_ptr<const TokenTrie> trie_;
};

TEST_P(JsonConstraintWalk, WalksParseAndValidate) {
  for (const json* schema : {&kPerson, &kItems, &kDeep, &kNarrowed, &kTuples, &kPatterned, &kFormatted, &kUnions}) {
    auto grammar = JsonGrammar::from_schema(*schema, "schema");
    for (uint32_t seed = 1; seed <= 4; ++seed) expect_valid(*schema, walk(grammar, seed, 1000));
  }
}

// Several readings (an integer or a number) carried from id to id, digits one id each as these vocabularies write
// them: each id is allowed by the mask before it, and the text ends complete. (Under the sanitized build's
// library assertions this also checks the readings' bookkeeping as they are copied from id to id.)
TEST_P(JsonConstraintWalk, ReadingsCarryFromIdToId) {
  json numbers = json::parse(R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"number"}]}})");
  for (const char* text : {"[1.5,23,4,0.25,7]", "[12,3.5e2,-4]"}) {
    auto constraint = make_json_constraint(JsonGrammar::from_schema(numbers, "schema"), trie_, {eos()});
    std::vector<int32_t> ids = tokenizer_->encode(text);
    ids.push_back(eos());
    std::vector<uint8_t> allowed(tokenizer_->vocab_size());
    for (int32_t id : ids) {
      std::fill(allowed.begin(), allowed.end(), 1);
      constraint->mask(allowed);
      ASSERT_EQ(allowed[id], 1) << "id " << id << " of " << text;
      constraint->accept(id);
    }
    EXPECT_TRUE(constraint->complete()) << text;
  }
}

TEST_P(JsonConstraintWalk, MasksAllowExactlyTheIdsThatContinue) {
  walk(JsonGrammar::from_schema(kItems, "schema"), 7, 9);
  walk(JsonGrammar::from_schema(kNarrowed, "schema"), 9, 3);
  walk(JsonGrammar::from_schema(kTuples, "schema"), 10, 3);
  walk(JsonGrammar::from_schema(kPatterned, "schema"), 11, 2);
  walk(JsonGrammar::from_schema(kFormatted, "schema"), 12, 2);
  walk(JsonGrammar::from_schema(kUnions, "schema"), 13, 2);
  walk(JsonGrammar::any_object(), 8, 9);
}

// Counts of characters and items are compared with their bounds only: a count far enough from them that no token
// reaches one shares its mask with the others like it. Checked at every step where the counts come near the bounds.
TEST_P(JsonConstraintWalk, MasksNearCountBoundsAllowExactlyTheIdsThatContinue) {
  const size_t longest = trie_->max_token_length();
  json strings = {{"type", "array"},
                  {"items", {{"type", "string"}, {"minLength", longest + 9}, {"maxLength", longest + 40}}},
                  {"minItems", 2}};
  json text = {{"type", "string"}, {"minLength", longest + 30}};
  const size_t commas = trie_->max_token_commas();  // items one token may end: one more
  json numbers = {{"type", "array"},
                  {"items", {{"type", "integer"}}},
                  {"minItems", commas + 4},
                  {"maxItems", commas + 9}};
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    expect_valid(strings, walk(JsonGrammar::from_schema(strings, "schema"), seed, 1));
    expect_valid(text, walk(JsonGrammar::from_schema(text, "schema"), seed + 10, 1));
    expect_valid(numbers, walk(JsonGrammar::from_schema(numbers, "schema"), seed + 20, 1));
  }
}

TEST_P(JsonConstraintWalk, LongStringsAndArraysShareTheirMasks) {
  std::string words, items = "[";
  for (int i = 0; i < 150; ++i) words += "lorem ipsum ";
  for (int i = 0; i < 150; ++i) items += "\"ab\", ";
  json long_string = {{"type", "string"}, {"minLength", 100000}};
  json bounded_string = {{"type", "string"}, {"maxLength", 5000}};
  json short_strings = {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 8}}}, {"minItems", 1000}};
  for (const auto& [schema, text] : {std::pair(long_string, "\"" + words), std::pair(bounded_string, "\"" + words),
                                     std::pair(short_strings, items)}) {
    JsonMaskCounts counts = mask_counts(schema, text);
    EXPECT_LE(counts.walked, 12u) << schema.dump();
    EXPECT_GE(counts.cached, 100u) << schema.dump();
  }
}

// Requests with one schema share its grammar and their states' masks: a constraint walks the vocabulary only for
// states no constraint of the grammar met before, and constraints on several threads at once get the masks one
// alone gets.
TEST_P(JsonConstraintWalk, RequestsWithOneSchemaShareTheirMasks) {
  json schema = {{"type", "object"},
                 {"description", std::string("shared masks, ") + GetParam()},  // a grammar no other test compiles
                 {"properties", {{"name", {{"type", "string"}}}, {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                 {"required", {"name", "tags"}}};
  const std::string text = R"({"name": "Ann Lee", "tags": ["red", "green", "blue"]})";
  auto grammar = JsonGrammar::from_schema(schema, "schema");
  EXPECT_EQ(JsonGrammar::from_schema(schema, "schema"), grammar);
  // Every step's mask of one constraint over TEXT's ids, and how it made them.
  auto masks_over_text = [&](JsonMaskCounts& counts) {
    JsonConstraintOptions options;
    options.counts = &counts;
    auto constraint = make_json_constraint(grammar, trie_, {eos()}, options);
    std::vector<std::vector<uint32_t>> masks;
    for (int32_t id : tokenizer_->encode(text)) {
      masks.emplace_back((tokenizer_->vocab_size() + 31) / 32, ~0u);
      constraint->mask_bits(masks.back(), tokenizer_->vocab_size());
      constraint->accept(id);
    }
    return masks;
  };
  JsonMaskCounts first_counts;
  auto first = masks_over_text(first_counts);
  EXPECT_GT(first_counts.walked, 0u);
  std::vector<std::thread> threads;
  std::vector<JsonMaskCounts> counts(4);
  std::vector<std::vector<std::vector<uint32_t>>> masks(4);
  for (size_t t = 0; t < 4; ++t) threads.emplace_back([&, t] { masks[t] = masks_over_text(counts[t]); });
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(counts[t].walked, 0u) << "thread " << t;
    EXPECT_TRUE(masks[t] == first) << "thread " << t;
  }
}

TEST_P(JsonConstraintWalk, AnyObjectWalksParse) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::string text = walk(JsonGrammar::any_object(), seed, 1000);
    json value;
    ASSERT_NO_THROW(value = json::parse(text)) << text;
    EXPECT_TRUE(value.is_object());
  }
}

TEST_P(JsonConstraintWalk, CompleteValueAllowsEosAndLimitedWhitespace) {
  JsonConstraintOptions options;
  options.max_whitespace = 2;
  auto constraint = make_json_constraint(JsonGrammar::from_schema(kPerson, "schema"), trie_, {eos()}, options);
  std::vector<uint8_t> allowed(tokenizer_->vocab_size());
  for (int32_t id : tokenizer_->encode(R"({"name": "Ann", "age": 31})")) {
    std::fill(allowed.begin(), allowed.end(), 1);
    constraint->mask(allowed);
    EXPECT_EQ(allowed[eos()], 0);
    ASSERT_EQ(allowed[id], 1) << id;
    constraint->accept(id);
  }
  EXPECT_TRUE(constraint->complete());
  std::fill(allowed.begin(), allowed.end(), 1);
  constraint->mask(allowed);
  EXPECT_EQ(allowed[eos()], 1);
  int32_t space = -1;
  size_t allowed_count = 0;
  for (size_t id = 0; id < allowed.size(); ++id) {
    allowed_count += allowed[id];
    if (allowed[id] && trie_->bytes(static_cast<int32_t>(id)) == " ") space = static_cast<int32_t>(id);
    if (allowed[id] && static_cast<int32_t>(id) != eos()) {
      EXPECT_EQ(trie_->bytes(static_cast<int32_t>(id)).find_first_not_of(" \n\t\r"), std::string_view::npos);
    }
  }
  ASSERT_GE(space, 0);
  constraint->accept(space);
  constraint->accept(space);
  std::fill(allowed.begin(), allowed.end(), 1);
  constraint->mask(allowed);
  EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 1), 1);  // only EOS after the whitespace limit
  EXPECT_EQ(allowed[eos()], 1);
  EXPECT_THROW(constraint->accept(space), Error);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, JsonConstraintWalk, ::testing::Values("qwen3", "llama2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gerbil
