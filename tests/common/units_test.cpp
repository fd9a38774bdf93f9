#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/common/units.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace memsim {
namespace {

TEST(ParseBytes, EverySuffix)
{
  EXPECT_EQ(units::parse_bytes("1000000"), 1000000u);
  EXPECT_EQ(units::parse_bytes("12B"), 12u);
  EXPECT_EQ(units::parse_bytes("2KB"), 2000u);
  EXPECT_EQ(units::parse_bytes("1.5MB"), 1500000u);
  EXPECT_EQ(units::parse_bytes("16GB"), 16000000000u);
  EXPECT_EQ(units::parse_bytes("1TB"), 1000000000000u);
  EXPECT_EQ(units::parse_bytes("1KiB"), 1024u);
  EXPECT_EQ(units::parse_bytes("3MiB"), 3u * 1024 * 1024);
  EXPECT_EQ(units::parse_bytes("16GiB"), 16ull << 30);
  EXPECT_EQ(units::parse_bytes("1TiB"), 1ull << 40);
  EXPECT_EQ(units::parse_bytes("1e6"), 1000000u);
}

TEST(ParseBytes, RejectionsSayWhy)
{
  auto message = [](const char* text) {
    try {
      (void)units::parse_bytes(text);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("16Gib"), "'16Gib' is not a size: unknown unit 'Gib' (accepted: B, KB, MB, GB, TB, KiB, MiB, GiB, "
                              "TiB; e.g. 16GiB)");
  EXPECT_EQ(message("GiB"), "'GiB' is not a size: it must start with a number");
  EXPECT_EQ(message("-1GB"), "'-1GB' is not a size: it must be finite and not negative");
  EXPECT_EQ(message("0.5B"), "'0.5B' is not a whole number of bytes");
  EXPECT_EQ(message("25GB/s"), "'25GB/s' is not a size: unknown unit 'GB/s' (accepted: B, KB, MB, GB, TB, KiB, MiB, "
                               "GiB, TiB; e.g. 16GiB)");
  EXPECT_EQ(message("inf"), "'inf' is not a size: it must be finite and not negative");
}

TEST(ParseBandwidth, Units)
{
  EXPECT_DOUBLE_EQ(units::parse_bandwidth("25GB/s"), 25e9);
  EXPECT_DOUBLE_EQ(units::parse_bandwidth("1GiB/s"), 1073741824.0);
  EXPECT_DOUBLE_EQ(units::parse_bandwidth("900MB/s"), 900e6);
  EXPECT_DOUBLE_EQ(units::parse_bandwidth("1e9"), 1e9);
  EXPECT_THROW((void)units::parse_bandwidth("25GB"), std::invalid_argument);
  EXPECT_THROW((void)units::parse_bandwidth("0GB/s"), std::invalid_argument);
  EXPECT_THROW((void)units::parse_bandwidth("25Gbps"), std::invalid_argument);
}

TEST(ParseDuration, Units)
{
  EXPECT_DOUBLE_EQ(units::parse_duration("2us"), 2e-6);
  EXPECT_DOUBLE_EQ(units::parse_duration("1.5ms"), 1.5e-3);
  EXPECT_DOUBLE_EQ(units::parse_duration("3ns"), 3e-9);
  EXPECT_DOUBLE_EQ(units::parse_duration("2s"), 2.0);
  EXPECT_DOUBLE_EQ(units::parse_duration("0"), 0.0);
  EXPECT_THROW((void)units::parse_duration("2 hours"), std::invalid_argument);
}

TEST(Format, HumanReadable)
{
  EXPECT_EQ(units::format_bytes(512), "512B");
  EXPECT_EQ(units::format_bytes(16.0 * (1ull << 30)), "16.00GiB");
  EXPECT_EQ(units::format_duration(0.0015), "1.500ms");
  EXPECT_EQ(units::format_duration(2.5e-6), "2.500us");
}

TEST(JsonIo, SyntaxErrorNamesTheByte)
{
  try {
    (void)json_io::parse_text("{\"a\": [1, 2,, 3]}", "doc.json");
    FAIL();
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "doc.json: byte 13");
  }
}

TEST(JsonIo, SchemaErrorsNameThePath)
{
  auto document = json_io::parse_text(R"({"format": "x", "version": 1, "list": [{"n": "three"}]})", "doc.json");
  json_io::Node root(document, "doc.json");
  try {
    (void)root.at("list").item(0).at("n").as_int();
    FAIL();
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "doc.json: at /list/0/n: expected an integer, found \"three\"");
  }
  try {
    root.only_keys({"format", "version"});
    FAIL();
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "doc.json: at /list: unknown key 'list' (valid keys: format, version)");
  }
  EXPECT_THROW(root.expect_format("y", 1), InputError);
  EXPECT_THROW(root.expect_format("x", 2), InputError);
  EXPECT_NO_THROW(root.expect_format("x", 1));
}

} // namespace
} // namespace memsim
