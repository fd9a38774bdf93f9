// fast_json (simdjson) keeps json_io's located messages: byte offsets for syntax, JSON paths for schema errors.
#include "memsim/common/error.hpp"
#include "memsim/common/fast_json.hpp"
#include "memsim/common/json_io.hpp"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {
namespace {

// The message `body` throws as InputError, or "" when it throws nothing.
std::string message_of(const std::function<void()>& body)
{
  try {
    body();
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

std::string parse_error(const std::string& text)
{
  return message_of([&] { fast_json::Document document(text, "doc.json"); });
}

TEST(FastJson, SyntaxErrorsNameTheByteAsJsonIoDoes)
{
  for (const std::string text : {"{\"a\": [1, 2,, 3]}", "{\"a\": 1", "", "[1] x", "{\"a\": \"\\ud800\"}", "1e400",
                                 "{\"a\": tru}", "{\"a\": \"x\ty\"}"}) {
    const std::string nlohmann = message_of([&] {
      try {
        (void)json_io::parse_text(text, "doc.json");
      } catch (const nlohmann::json::out_of_range&) { // json_io lets "number overflow" (1e400) escape
      }
    });
    const std::string simdjson = parse_error(text);
    ASSERT_NE(simdjson, "") << text;
    EXPECT_EQ(simdjson.rfind("doc.json: byte ", 0), 0u) << simdjson;
    if (!nlohmann.empty()) {
      EXPECT_EQ(simdjson, nlohmann) << text;
    }
  }
  try {
    fast_json::Document document("{\"a\": [1, 2,, 3]}", "doc.json");
    FAIL();
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "doc.json: byte 13");
  }
}

TEST(FastJson, SchemaErrorsNameThePath)
{
  fast_json::Document document(R"({"format": "x", "version": 1, "list": [{"n": "three"}]})", "doc.json");
  const fast_json::Node root = document.root();
  EXPECT_EQ(message_of([&] { (void)root.at("list").item(0).at("n").as_int(); }),
            "doc.json: at /list/0/n: expected an integer, found \"three\"");
  EXPECT_EQ(message_of([&] {
              root.only_keys({"format", "version"});
            }),
            "doc.json: at /list: unknown key 'list' (valid keys: format, version)");
  EXPECT_EQ(message_of([&] { (void)root.at("list").item(3); }), "doc.json: at /list: no element 3");
  EXPECT_EQ(message_of([&] { (void)root.at("lists"); }), "doc.json: at /: missing required key 'lists'");
  EXPECT_EQ(message_of([&] { (void)root.at("format").size(); }),
            "doc.json: at /format: expected an array, found string");
  EXPECT_EQ(message_of([&] { (void)root.at("list").as_number(); }),
            "doc.json: at /list: expected a number, found array");
  EXPECT_EQ(message_of([&] { (void)root.at("version").as_bool(); }),
            "doc.json: at /version: expected true or false, found number");
  EXPECT_EQ(message_of([&] { root.at("list").item(0).at("n").expect_object(); }),
            "doc.json: at /list/0/n: expected an object, found string");
  EXPECT_THROW(root.expect_format("y", 1), InputError);
  EXPECT_EQ(message_of([&] { root.expect_format("x", 2); }),
            "doc.json: at /version: unsupported x version 1 (this build reads version 2)");
  EXPECT_NO_THROW(root.expect_format("x", 1));
}

// The same walk over both parsers gives the same message, for every kind of schema error.
TEST(FastJson, SameMessagesAsJsonIoNode)
{
  const std::string text = R"({"s": "text", "f": 1.5, "n": -3, "b": true, "z": null, "o": {"k": [1, {"x": 2}]},
                               "zz": 1, "aa": 2})";
  const json_io::Json parsed = json_io::parse_text(text, "doc.json");
  json_io::Node slow(parsed, "doc.json");
  fast_json::Document document(text, "doc.json");
  const fast_json::Node fast = document.root();
  const std::vector<std::function<void(const json_io::Node&)>> slow_walks = {
      [](const auto& n) { (void)n.at("s").as_int(); },
      [](const auto& n) { (void)n.at("f").as_int(); },
      [](const auto& n) { (void)n.at("n").as_uint(); },
      [](const auto& n) { (void)n.at("b").as_string(); },
      [](const auto& n) { (void)n.at("z").as_number(); },
      [](const auto& n) { (void)n.at("o").as_int(); },
      [](const auto& n) { (void)n.at("o").at("k").item(1).at("x").as_string(); },
      [](const auto& n) {
        n.only_keys({"s", "f", "n", "b", "z", "o"});
      },
      [](const auto& n) { (void)n.get_int("s", 0); },
      [](const auto& n) { (void)n.get_uint("n", 0); },
      [](const auto& n) { (void)n.at("o").at("k").item(0).size(); },
  };
  const std::vector<std::function<void(const fast_json::Node&)>> fast_walks = {
      [](const auto& n) { (void)n.at("s").as_int(); },
      [](const auto& n) { (void)n.at("f").as_int(); },
      [](const auto& n) { (void)n.at("n").as_uint(); },
      [](const auto& n) { (void)n.at("b").as_string(); },
      [](const auto& n) { (void)n.at("z").as_number(); },
      [](const auto& n) { (void)n.at("o").as_int(); },
      [](const auto& n) { (void)n.at("o").at("k").item(1).at("x").as_string(); },
      [](const auto& n) {
        n.only_keys({"s", "f", "n", "b", "z", "o"});
      },
      [](const auto& n) { (void)n.get_int("s", 0); },
      [](const auto& n) { (void)n.get_uint("n", 0); },
      [](const auto& n) { (void)n.at("o").at("k").item(0).size(); },
  };
  for (std::size_t i = 0; i < slow_walks.size(); ++i) {
    const std::string expected = message_of([&] { slow_walks[i](slow); });
    ASSERT_NE(expected, "") << i;
    EXPECT_EQ(message_of([&] { fast_walks[i](fast); }), expected) << i;
  }
  EXPECT_EQ(fast.to_json(), parsed);
  EXPECT_EQ(fast.to_json().dump(), parsed.dump());
}

TEST(FastJson, RepeatedKeysAreRefused)
{
  fast_json::Document document(R"({"a": 1, "b": 2, "a": 3})", "doc.json");
  EXPECT_EQ(message_of([&] { document.root().only_keys({"a", "b"}); }), "doc.json: at /a: duplicate key 'a'");
}

struct ThreeKeys {
  static constexpr std::array<std::string_view, 3> names{"a", "bb", "c"};
};

// Members reads an object in one pass and must fail exactly as only_keys and Node::at do.
TEST(FastJson, MembersFailAsOnlyKeysAndAt)
{
  fast_json::Document document(
      R"({"ok": {"c": [1], "a": 7}, "unknown": {"a": 1, "zz": 2, "d": 3}, "twice": {"bb": 1, "a": 2, "bb": 3},
          "list": [1, 2], "deep": [[[[{"x": {"a": "seven"}}]]]]})",
      "doc.json", "/base");
  const fast_json::Node root = document.root();
  for (const char* key : {"unknown", "twice", "list"}) {
    const std::string by_only_keys = message_of([&] { root.at(key).only_keys({"a", "bb", "c"}); });
    ASSERT_NE(by_only_keys, "") << key;
    EXPECT_EQ(message_of([&] { const fast_json::Members<ThreeKeys> members(root.at(key)); }), by_only_keys) << key;
  }
  EXPECT_EQ(message_of([&] { const fast_json::Members<ThreeKeys> members(root.at("unknown")); }),
            "doc.json: at /base/unknown/d: unknown key 'd' (valid keys: a, bb, c)");
  EXPECT_EQ(message_of([&] { const fast_json::Members<ThreeKeys> members(root.at("twice")); }),
            "doc.json: at /base/twice/bb: duplicate key 'bb'");

  const fast_json::Node ok = root.at("ok");
  const fast_json::Members<ThreeKeys> members(ok);
  EXPECT_TRUE(members.has("a"));
  EXPECT_FALSE(members.has("bb"));
  EXPECT_TRUE(members.has("c"));
  EXPECT_EQ(members.at("a").as_int(), 7);
  EXPECT_EQ(members.at("c").item(0).as_int(), 1);
  EXPECT_EQ(members.at("c").path(), "/base/ok/c");
  EXPECT_FALSE(members.find("bb").has_value());
  EXPECT_EQ(members.get_int("bb", -4), -4);
  EXPECT_EQ(members.get_string("bb", "none"), "none");
  EXPECT_EQ(message_of([&] { (void)members.at("bb"); }), message_of([&] { (void)ok.at("bb"); }));
  EXPECT_EQ(message_of([&] { (void)members.at("bb"); }), "doc.json: at /base/ok: missing required key 'bb'");
  EXPECT_EQ(message_of([&] { (void)members.get_string("a", ""); }),
            "doc.json: at /base/ok/a: expected a string, found number");

  // Deeper than the inline path segments, a member's path is still whole.
  const fast_json::Node x = root.at("deep").item(0).item(0).item(0).item(0).at("x");
  const fast_json::Members<ThreeKeys> deep(x);
  EXPECT_EQ(message_of([&] { (void)deep.at("a").as_int(); }),
            "doc.json: at /base/deep/0/0/0/0/x/a: expected an integer, found \"seven\"");
}

// int_items reads what item(i).as_int() reads and reports the first fault a loop over item(i) would.
TEST(FastJson, IntItemsAsItemByItem)
{
  fast_json::Document document(
      R"({"ids": [3, 1e6, -2, 0], "mixed": [1, 2.5, "x"], "big": [9223372036854775808], "empty": [], "no": 4})",
      "doc.json");
  const fast_json::Node root = document.root();
  EXPECT_EQ(root.at("ids").int_items(), (std::vector<std::int64_t>{3, 1000000, -2, 0}));
  EXPECT_TRUE(root.at("empty").int_items().empty());
  EXPECT_EQ(message_of([&] { (void)root.at("mixed").int_items(); }),
            message_of([&] { (void)root.at("mixed").item(1).as_int(); }));
  EXPECT_EQ(message_of([&] { (void)root.at("mixed").int_items(); }),
            "doc.json: at /mixed/1: expected an integer, found 2.5");
  EXPECT_EQ(message_of([&] { (void)root.at("big").int_items(); }),
            "doc.json: at /big/0: integer 9223372036854775808 is too large (at most 9223372036854775807)");
  EXPECT_EQ(message_of([&] { (void)root.at("no").int_items(); }), "doc.json: at /no: expected an array, found number");
  // The check sees each number before the next element is read: element 0's fault comes before element 1's.
  const fast_json::Node mixed = root.at("mixed");
  std::vector<std::size_t> checked;
  EXPECT_EQ(message_of([&] {
              (void)mixed.int_items([&](std::size_t i, std::int64_t number) {
                checked.push_back(i);
                if (number == 1)
                  mixed.item(i).fail("one is refused");
              });
            }),
            "doc.json: at /mixed/0: one is refused");
  EXPECT_EQ(checked, (std::vector<std::size_t>{0}));
}

TEST(FastJson, IntegersStayExact)
{
  fast_json::Document document(
      R"({"max": 18446744073709551615, "big": 9223372036854775808, "min": -9223372036854775808, "sci": 1e6,
          "half": 1.5, "neg": -3, "negf": -3.0, "huge": 1e300})",
      "doc.json");
  const fast_json::Node root = document.root();
  EXPECT_EQ(root.at("max").as_uint(), 18446744073709551615ull);
  EXPECT_EQ(root.at("big").as_uint(), 9223372036854775808ull);
  EXPECT_EQ(root.at("min").as_int(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(root.at("sci").as_uint(), 1000000u);
  EXPECT_EQ(root.at("sci").as_int(), 1000000);
  EXPECT_DOUBLE_EQ(root.at("max").as_number(), 18446744073709551615.0);
  EXPECT_EQ(message_of([&] { (void)root.at("big").as_int(); }),
            "doc.json: at /big: integer 9223372036854775808 is too large (at most 9223372036854775807)");
  EXPECT_EQ(message_of([&] { (void)root.at("half").as_uint(); }), "doc.json: at /half: expected an integer, found 1.5");
  EXPECT_EQ(message_of([&] { (void)root.at("neg").as_uint(); }),
            "doc.json: at /neg: expected a non-negative integer, found -3");
  EXPECT_EQ(message_of([&] { (void)root.at("negf").as_uint(); }),
            "doc.json: at /negf: expected a non-negative integer, found -3");
  EXPECT_EQ(message_of([&] { (void)root.at("huge").as_int(); }),
            "doc.json: at /huge: expected an integer, found 1e+300");
  EXPECT_EQ(root.at("max").to_json(), json_io::Json(18446744073709551615ull));
}

TEST(FastJson, IntegersBeyond64BitsAreLocated)
{
  EXPECT_EQ(parse_error(R"({"bytes": 18446744073709551616})"),
            "doc.json: byte 11: invalid JSON: integer 18446744073709551616 does not fit in 64 bits");
  EXPECT_EQ(parse_error(R"([1, "-99999999999999999999", -99999999999999999999])"),
            "doc.json: byte 30: invalid JSON: integer -99999999999999999999 does not fit in 64 bits");
}

TEST(FastJson, DeepNestingIsLocatedNotACrash)
{
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(parse_error(deep), "doc.json: byte 1025: invalid JSON: nesting deeper than 1024 levels");
  const std::string objects = [] {
    std::string text;
    for (int i = 0; i < 5000; ++i)
      text += "{\"a\": ";
    return text + "1" + std::string(5000, '}');
  }();
  EXPECT_EQ(parse_error(objects), "doc.json: byte 6145: invalid JSON: nesting deeper than 1024 levels");
  // Unclosed: nlohmann's own message for the end of input.
  const std::string unclosed = parse_error(std::string(100000, '['));
  EXPECT_EQ(unclosed.rfind("doc.json: byte 100001: invalid JSON: ", 0), 0u) << unclosed;
  // Within the limit the document reads.
  EXPECT_NO_THROW(fast_json::Document(std::string(1000, '[') + std::string(1000, ']'), "doc.json"));
}

TEST(FastJson, DeepPathsBeyondTheInlineSegments)
{
  fast_json::Document document(R"({"a": {"b": [{"c": {"d": [[{"e": {"f": {"g": "x"}}}]]}}]}})", "doc.json", "/extra/2");
  const fast_json::Node g =
      document.root().at("a").at("b").item(0).at("c").at("d").item(0).item(0).at("e").at("f").at("g");
  EXPECT_EQ(g.path(), "/extra/2/a/b/0/c/d/0/0/e/f/g");
  EXPECT_EQ(message_of([&] { (void)g.as_int(); }),
            "doc.json: at /extra/2/a/b/0/c/d/0/0/e/f/g: expected an integer, found \"x\"");
}

TEST(FastJson, ItemsInAnyOrder)
{
  fast_json::Document document("[10, 11, 12, 13]", "doc.json");
  const fast_json::Node list = document.root();
  EXPECT_EQ(list.size(), 4u);
  EXPECT_EQ(list.item(2).as_int(), 12);
  EXPECT_EQ(list.item(3).as_int(), 13);
  EXPECT_EQ(list.item(0).as_int(), 10);
  EXPECT_EQ(list.item(1).as_int(), 11);
  EXPECT_EQ(list.item(3).path(), "/3");
  EXPECT_EQ(message_of([&] { (void)list.item(4); }), "doc.json: at /: no element 4");
}

TEST(FastJson, ByteOrderMarkIsSkipped)
{
  fast_json::Document document("\xEF\xBB\xBF{\"a\": 1}", "doc.json");
  EXPECT_EQ(document.root().at("a").as_int(), 1);
}

} // namespace
} // namespace memsim
