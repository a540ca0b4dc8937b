// The one JSON reader (json/json_file.h): a key named twice anywhere is refused, naming where the text came
// from and the key; the same key in different objects is fine; ordered_json keeps the keys' order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "json/json_file.h"

namespace {

using gerbil::Error;
using gerbil::parse_json_strict;
using testing::HasSubstr;
using testing::ThrowsMessage;

TEST(StrictJson, RefusesAKeyNamedTwiceAtAnyDepth) {
  EXPECT_THAT([] { parse_json_strict(R"({"a": 1, "a": 2})", "top.json"); },
              ThrowsMessage<Error>(HasSubstr("top.json: names \"a\" twice")));
  EXPECT_THAT([] { parse_json_strict(R"([{"x": {"b": [], "c": 0, "b": null}}])", "deep.json", "the header"); },
              ThrowsMessage<Error>(HasSubstr("deep.json: the header: names \"b\" twice")));
  EXPECT_THAT([] { parse_json_strict<nlohmann::ordered_json>(R"({"m": [{"r": 1, "r": 1}]})", "chat messages"); },
              ThrowsMessage<Error>(HasSubstr("chat messages: names \"r\" twice")));
}

TEST(StrictJson, AcceptsTheSameKeyInDifferentObjects) {
  auto doc = parse_json_strict(R"({"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}], "c": {"a": {"a": 4}}})", "ok.json");
  EXPECT_EQ(doc["b"][1]["a"], 3);
  EXPECT_EQ(doc["c"]["a"]["a"], 4);
}

TEST(StrictJson, OrderedJsonKeepsTheKeysOrder) {
  auto doc = parse_json_strict<nlohmann::ordered_json>(R"({"z": 1, "a": 2, "m": 3})", "order.json");
  EXPECT_EQ(doc.dump(), R"({"z":1,"a":2,"m":3})");
}

TEST(StrictJson, SyntaxErrorsNameTheOrigin) {
  EXPECT_THAT([] { parse_json_strict("[1, 2", "cut.json"); },
              ThrowsMessage<Error>(HasSubstr("cut.json: not valid JSON")));
  EXPECT_THAT([] { gerbil::read_json_file("/nonexistent/gerbil.json"); },
              ThrowsMessage<Error>(HasSubstr("cannot open /nonexistent/gerbil.json")));
}

}  // namespace
