#include "json_syntax_error.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdint>
#include <optional>

namespace memsim::fast_json::detail {
namespace {

using Json = nlohmann::json;

// Accepts everything and records the first error; reading through SAX builds no document.
class FirstError final : public nlohmann::json_sax<Json> {
public:
  std::optional<std::size_t> byte;
  std::string message;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) override
  {
    byte = position;
    // As json_io::parse_text: nlohmann's message repeats the position; keep only the part after "]: ".
    message = error.what();
    if (auto cut = message.find("]: "); cut != std::string::npos)
      message = message.substr(cut + 3);
    return false;
  }
};

struct Limit {
  std::size_t byte; // 1-based, as nlohmann counts
  std::string message;
};

// Integers simdjson cannot hold: beyond uint64 (or below int64 when negative).
bool integer_fits(std::string_view token)
{
  const char* first = token.data();
  const char* last = token.data() + token.size();
  if (token.starts_with('-')) {
    std::int64_t value = 0;
    return std::from_chars(first, last, value).ec == std::errc{};
  }
  std::uint64_t value = 0;
  return std::from_chars(first, last, value).ec == std::errc{};
}

// Scans the (otherwise valid) text for the first nesting past `max_depth` or integer past 64 bits.
std::optional<Limit> first_limit(std::string_view text, std::size_t max_depth)
{
  std::size_t depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return Limit{i + 1, fmt::format("nesting deeper than {} levels", max_depth)};
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t end = i;
      bool integer = true;
      while (end < text.size() && std::string_view("0123456789+-.eE").find(text[end]) != std::string_view::npos) {
        integer = integer && std::string_view(".eE").find(text[end]) == std::string_view::npos;
        ++end;
      }
      const std::string_view token = text.substr(i, end - i);
      if (integer && !integer_fits(token))
        return Limit{i + 1, fmt::format("integer {} does not fit in 64 bits", token)};
      i = end - 1;
    }
  }
  return std::nullopt;
}

} // namespace

void throw_syntax_error(std::string_view text, const std::string& source, const char* simdjson_message,
                        std::size_t max_depth)
{
  FirstError first_error;
  Json::sax_parse(text.begin(), text.end(), &first_error);
  if (first_error.byte)
    throw InputError(fmt::format("{}: byte {}", source, *first_error.byte), "invalid JSON: " + first_error.message);
  if (auto limit = first_limit(text, max_depth))
    throw InputError(fmt::format("{}: byte {}", source, limit->byte), "invalid JSON: " + limit->message);
  throw InputError(source, fmt::format("invalid JSON: {}", simdjson_message));
}

} // namespace memsim::fast_json::detail
