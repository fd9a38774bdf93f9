#include "memsim/common/json_io.hpp"

#include "json_syntax_error.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace memsim::json_io {

namespace {
constexpr std::size_t kMaxJsonDepth = 1024; // as simdjson's default (README, Limits)
} // namespace

Json parse_text(std::string_view text, const std::string& source_name)
{
  // Deeper documents are refused as the simdjson loaders refuse them (dump() and the destructor would recurse).
  struct TooDeep {};
  const Json::parser_callback_t depth_limit = [](int depth, Json::parse_event_t, Json&) {
    if (static_cast<std::size_t>(depth) > kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), depth_limit);
  } catch (const TooDeep&) {
    fast_json::detail::throw_syntax_error(text, source_name, "nesting too deep", kMaxJsonDepth);
  } catch (const Json::parse_error& error) {
    // nlohmann's message repeats the position; keep only the part after "]: " when present.
    std::string message = error.what();
    if (auto cut = message.find("]: "); cut != std::string::npos)
      message = message.substr(cut + 3);
    throw InputError(fmt::format("{}: byte {}", source_name, error.byte), "invalid JSON: " + message);
  } catch (const Json::exception& error) {
    // A number beyond a double (1e400) is an out_of_range error without a position: locate it as fast_json does.
    fast_json::detail::throw_syntax_error(text, source_name, error.what(), kMaxJsonDepth);
  }
}

Json read_file(const std::filesystem::path& path) { return parse_text(read_text_file(path), path.string()); }

void write_file(const std::filesystem::path& path, const Json& document)
{
  if (path.has_parent_path())
    std::filesystem::create_directories(path.parent_path());
  write_text_file(path, document.dump(1) + "\n");
}

std::string Node::where() const
{
  return path_.empty() ? source_ + ": at /" : fmt::format("{}: at {}", source_, path_);
}

void Node::fail(const std::string& message) const { throw InputError(where(), message); }

bool Node::has(const char* key) const { return value_->is_object() && value_->contains(key); }

Node Node::at(const char* key) const
{
  expect_object();
  auto found = value_->find(key);
  if (found == value_->end())
    fail(fmt::format("missing required key '{}'", key));
  return Node(*found, source_, path_ + "/" + key);
}

Node Node::item(std::size_t index) const
{
  if (!value_->is_array() || index >= value_->size())
    fail(fmt::format("no element {}", index));
  return Node((*value_)[index], source_, fmt::format("{}/{}", path_, index));
}

std::size_t Node::size() const
{
  if (!value_->is_array())
    fail(fmt::format("expected an array, found {}", value_->type_name()));
  return value_->size();
}

void Node::expect_object() const
{
  if (!value_->is_object())
    fail(fmt::format("expected an object, found {}", value_->type_name()));
}

void Node::only_keys(std::initializer_list<std::string_view> allowed) const
{
  expect_object();
  for (const auto& [key, value] : value_->items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string valid;
      for (auto name : allowed)
        valid += (valid.empty() ? "" : ", ") + std::string(name);
      Node(value, source_, path_ + "/" + key).fail(fmt::format("unknown key '{}' (valid keys: {})", key, valid));
    }
  }
}

std::string Node::as_string() const
{
  if (!value_->is_string())
    fail(fmt::format("expected a string, found {}", value_->type_name()));
  return value_->get<std::string>();
}

double Node::as_number() const
{
  if (!value_->is_number())
    fail(fmt::format("expected a number, found {}", value_->type_name()));
  double number = value_->get<double>();
  if (!std::isfinite(number))
    fail("expected a finite number");
  return number;
}

std::int64_t Node::as_int() const
{
  if (value_->is_number_integer())
    return value_->get<std::int64_t>();
  if (value_->is_number_float()) {
    double number = value_->get<double>();
    if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 9e15)
      return static_cast<std::int64_t>(number);
  }
  fail(fmt::format("expected an integer, found {}", value_->dump()));
}

std::uint64_t Node::as_uint() const
{
  if (value_->is_number_unsigned())
    return value_->get<std::uint64_t>();
  std::int64_t number = as_int();
  if (number < 0)
    fail(fmt::format("expected a non-negative integer, found {}", number));
  return static_cast<std::uint64_t>(number);
}

bool Node::as_bool() const
{
  if (!value_->is_boolean())
    fail(fmt::format("expected true or false, found {}", value_->type_name()));
  return value_->get<bool>();
}

std::string Node::get_string(const char* key, const std::string& fallback) const
{
  return has(key) ? at(key).as_string() : fallback;
}
double Node::get_number(const char* key, double fallback) const { return has(key) ? at(key).as_number() : fallback; }
std::int64_t Node::get_int(const char* key, std::int64_t fallback) const
{
  return has(key) ? at(key).as_int() : fallback;
}
std::uint64_t Node::get_uint(const char* key, std::uint64_t fallback) const
{
  return has(key) ? at(key).as_uint() : fallback;
}

void Node::expect_format(const char* format, int version) const
{
  expect_object();
  std::string found = at("format").as_string();
  if (found != format)
    at("format").fail(fmt::format("expected format '{}', found '{}'", format, found));
  std::int64_t found_version = at("version").as_int();
  if (found_version != version)
    at("version").fail(fmt::format("unsupported {} version {} (this build reads version {})", format, found_version,
                                   version));
}

} // namespace memsim::json_io
