// The component registry and typed parameters (common/registry.hpp, common/params.hpp) on a made-up component
// kind: names, duplicates, parameter declarations bound to fields, checks, defaults and `k=v` parsing.
#include "memsim/common/error.hpp"
#include "memsim/common/policy_registry.hpp"
#include "memsim/common/registry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

namespace memsim {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

struct WidgetOptions {
  int size = 8;
  double ratio = 0.5;
  bool fast = false;
  std::string mode = "plain";
};

const ParamList<WidgetOptions> kWidgetParams{
    param("size", &WidgetOptions::size, "how many", {.min = 1, .max = 64}),
    param("ratio", &WidgetOptions::ratio, "a fraction", {.min = 0, .max = 1}),
    param("fast", &WidgetOptions::fast, "go fast"),
    param("mode", &WidgetOptions::mode, "how", {.choices = {"plain", "fancy"}}),
};

using WidgetInfo = Component<std::function<WidgetOptions(const ParamValues&)>>;

WidgetInfo widget(std::string name)
{
  return WidgetInfo{std::move(name), "a widget", kWidgetParams.specs(),
                    [](const ParamValues& values) { return kWidgetParams.bind(values); }};
}

Registry<WidgetInfo> two_widgets()
{
  Registry<WidgetInfo> registry("widget");
  registry.add(widget("b"));
  registry.add(widget("a"));
  return registry;
}

std::string error_of(const std::function<void()>& action)
{
  try {
    action();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "no error";
}

TEST(Registry, ListsEntriesByName)
{
  const Registry<WidgetInfo> registry = two_widgets();
  ASSERT_EQ(registry.all().size(), 2u);
  EXPECT_EQ(registry.all()[0]->name, "a");
  EXPECT_EQ(registry.all()[1]->name, "b");
  EXPECT_EQ(registry.names(), "a, b");
  EXPECT_EQ(registry.find("c"), nullptr);
  EXPECT_EQ(&registry.get("b"), registry.find("b"));
}

TEST(Registry, UnknownNameListsTheValidOnes)
{
  const Registry<WidgetInfo> registry = two_widgets();
  EXPECT_THROW((void)registry.get("c"), InputError);
  EXPECT_EQ(error_of([&] { (void)registry.get("c"); }), "unknown widget 'c' (valid: a, b)");
  EXPECT_EQ(Registry<WidgetInfo>("widget").names(), "none");
}

TEST(Registry, DuplicateNameThrowsNamingBothRegistrations)
{
  Registry<WidgetInfo> registry = two_widgets();
  const std::string message = error_of([&] { registry.add(widget("a")); });
  EXPECT_THAT(message, HasSubstr("widget 'a' is registered twice: at "));
  EXPECT_THAT(message, HasSubstr("registry_test.cpp:")); // both places are this file, on different lines
  EXPECT_THROW(registry.add(widget("b")), DuplicateRegistration);
  EXPECT_EQ(registry.all().size(), 2u);
}

TEST(Registry, BothPlacesAreTheCallersLines)
{
  Registry<WidgetInfo> registry("widget");
  const unsigned first = __LINE__ + 1;
  registry.add(widget("a"));
  const unsigned second = __LINE__ + 1;
  const std::string message = error_of([&] { registry.add(widget("a")); });
  EXPECT_EQ(message,
            fmt::format("widget 'a' is registered twice: at {}:{} and at {}:{}", __FILE__, first, __FILE__, second));
}

TEST(RegistryDeathTest, StaticDuplicateRegistrationAbortsWithTheMessage)
{
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Registry<WidgetInfo> registry("widget");
        register_or_abort(registry, widget("a"));
        register_or_abort(registry, widget("a"));
      },
      "memsim: widget 'a' is registered twice");
}

TEST(Params, DeclarationsComeFromTheFields)
{
  const std::vector<ParamSpec> specs = kWidgetParams.specs();
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].name, "size");
  EXPECT_EQ(specs[0].type, ParamType::integer);
  EXPECT_EQ(specs[0].default_value, Json(8));
  EXPECT_EQ(specs[0].min, 1.0);
  EXPECT_EQ(specs[0].max, 64.0);
  EXPECT_EQ(specs[1].type, ParamType::number);
  EXPECT_EQ(specs[1].default_value, Json(0.5));
  EXPECT_EQ(specs[2].type, ParamType::boolean);
  EXPECT_EQ(specs[2].default_value, Json(false));
  EXPECT_EQ(specs[3].type, ParamType::string);
  EXPECT_EQ(specs[3].default_value, Json("plain"));
  EXPECT_EQ(describe_range(specs[0]), " in [1, 64]");
  EXPECT_EQ(describe_range(specs[3]), " one of plain, fancy");
  EXPECT_EQ(describe_range(specs[2]), "");
}

TEST(Params, CompletedValuesBindToTheOptionsFields)
{
  const Registry<WidgetInfo> registry = two_widgets();
  const WidgetInfo& a = registry.get("a");
  const ParamValues defaults = registry.complete_params(a, Json::object());
  EXPECT_EQ(defaults, (Json{{"size", 8}, {"ratio", 0.5}, {"fast", false}, {"mode", "plain"}}));
  const WidgetOptions given = a.make(registry.complete_params(a, {{"size", 3}, {"mode", "fancy"}, {"fast", true}}));
  EXPECT_EQ(given.size, 3);
  EXPECT_EQ(given.ratio, 0.5);
  EXPECT_TRUE(given.fast);
  EXPECT_EQ(given.mode, "fancy");
  // An integer is a number too.
  EXPECT_EQ(a.make(registry.complete_params(a, {{"ratio", 1}})).ratio, 1.0);
}

TEST(Params, WrongNamesTypesRangesAndChoicesAreRejected)
{
  const Registry<WidgetInfo> registry = two_widgets();
  const WidgetInfo& a = registry.get("a");
  auto complete = [&](const Json& given) { return error_of([&] { (void)registry.complete_params(a, given); }); };
  EXPECT_EQ(complete({{"sise", 3}}), "unknown parameter 'sise' for widget 'a' (valid: size, ratio, fast, mode)");
  EXPECT_EQ(complete({{"size", 1.5}}), "parameter 'size' of widget 'a': expected an integer, found 1.5");
  EXPECT_EQ(complete({{"size", 65}}), "parameter 'size' of widget 'a': 65 is outside [1, 64]");
  EXPECT_EQ(complete({{"ratio", "x"}}), "parameter 'ratio' of widget 'a': expected a number, found \"x\"");
  EXPECT_EQ(complete({{"fast", 1}}), "parameter 'fast' of widget 'a': expected true or false, found 1");
  EXPECT_EQ(complete({{"mode", "odd"}}), "parameter 'mode' of widget 'a': 'odd' is not one of plain, fancy");
  EXPECT_EQ(complete(Json::array()), "parameters of widget 'a' must be a mapping");
}

TEST(Params, AssignmentsParseAsTheDeclaredTypes)
{
  const Registry<WidgetInfo> registry = two_widgets();
  const WidgetInfo& a = registry.get("a");
  EXPECT_EQ(registry.parse_assignments(a, {"size=4", "ratio=0.25", "fast=true", "mode=fancy"}),
            (Json{{"size", 4}, {"ratio", 0.25}, {"fast", true}, {"mode", "fancy"}}));
  auto parse = [&](const std::string& assignment) {
    return error_of([&] { (void)registry.parse_assignments(a, {assignment}); });
  };
  EXPECT_EQ(parse("size=four"), "--param: 'size=four': 'four' is not a valid integer for parameter 'size'");
  EXPECT_EQ(parse("size=4x"), "--param: 'size=4x': '4x' is not a valid integer for parameter 'size'");
  EXPECT_EQ(parse("fast=yes"), "--param: 'fast=yes': 'yes' is not a valid boolean for parameter 'fast'");
  EXPECT_EQ(parse("size"), "--param: 'size' is not of the form name=value");
  EXPECT_EQ(parse("=4"), "--param: '=4' is not of the form name=value");
  EXPECT_EQ(parse("colour=red"), "--param: unknown parameter 'colour' for widget 'a' (valid: size, ratio, fast, mode)");
}

TEST(Params, CommandLineFlags)
{
  struct Spec {
    double channel_scale = 1;
    int seconds_per_cost = 1;
  };
  const ParamList<Spec> params{param("channel_scale", &Spec::channel_scale, "scale").flag("--channels"),
                               param("seconds_per_cost", &Spec::seconds_per_cost, "seconds")};
  EXPECT_EQ(command_line_flag(params.specs()[0]), "--channels");
  EXPECT_EQ(command_line_flag(params.specs()[1]), "--seconds-per-cost");
}

TEST(PolicyRegistry, ExistsBeforeAnyPolicy)
{
  EXPECT_EQ(policy_registry().kind(), "policy");
  EXPECT_THAT(error_of([] { (void)policy_registry().get("no-such-policy"); }),
              HasSubstr("unknown policy 'no-such-policy' (valid: "));
}

} // namespace
} // namespace memsim
