#include "memsim/common/yaml_io.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

namespace memsim::yaml_io {

YAML::Node read_file(const std::filesystem::path& path)
{
  if (!std::filesystem::exists(path))
    throw InputError(path.string(), "no such file");
  try {
    YAML::Node document = YAML::LoadFile(path.string());
    if (document.IsNull())
      throw InputError(path.string() + ":1:1", "the file holds no YAML document (expected a mapping of keys)");
    return document;
  } catch (const YAML::BadFile&) {
    throw InputError(path.string(), "cannot open file");
  } catch (const YAML::ParserException& error) {
    throw InputError(fmt::format("{}:{}:{}", path.string(), error.mark.line + 1, error.mark.column + 1),
                     "invalid YAML: " + error.msg);
  }
}

std::string Node::where() const
{
  const YAML::Mark mark = value_.Mark();
  if (mark.is_null())
    return source_;
  return fmt::format("{}:{}:{}", source_, mark.line + 1, mark.column + 1);
}

void Node::fail(const std::string& message) const
{
  throw InputError(where(), key_path_.empty() ? message : fmt::format("{}: {}", key_path_, message));
}

bool Node::has(const char* key) const { return value_.IsMap() && value_[key]; }

Node Node::at(const char* key) const
{
  expect_map();
  YAML::Node child = value_[key];
  if (!child)
    fail(fmt::format("missing required key '{}'", key));
  return Node(child, source_, key_path_.empty() ? key : key_path_ + "." + key);
}

Node Node::item(std::size_t index) const
{
  if (!value_.IsSequence() || index >= value_.size())
    fail(fmt::format("no element {}", index));
  return Node(value_[index], source_, fmt::format("{}[{}]", key_path_, index));
}

std::size_t Node::size() const
{
  if (!value_.IsSequence())
    fail("expected a list");
  return value_.size();
}

void Node::expect_map() const
{
  if (!value_.IsMap())
    fail("expected a mapping (key: value)");
}

namespace {

// A key is a name: a plain scalar starting with a letter or '_' (not null, a boolean, a number, a list or a map).
bool is_name_key(const YAML::Node& key)
{
  if (!key.IsScalar())
    return false;
  const std::string& text = key.Scalar();
  static const std::set<std::string> reserved{"null",  "Null",  "NULL", "true", "True", "TRUE", "false",
                                              "False", "FALSE", "yes",  "no",   "on",   "off"};
  return !text.empty() && (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_') &&
         !reserved.count(text);
}

} // namespace

std::vector<Node::Entry> Node::checked_entries() const
{
  expect_map();
  std::vector<Entry> result;
  std::set<std::string> seen;
  for (const auto& entry : value_) {
    const Node key(entry.first, source_, key_path_);
    if (!is_name_key(entry.first))
      key.fail(fmt::format("a key must be a name (a letter or '_' first), found {}",
                           entry.first.IsScalar() ? fmt::format("'{}'", entry.first.Scalar())
                           : entry.first.IsNull() ? "null"
                                                  : "a list or mapping"));
    if (!seen.insert(entry.first.Scalar()).second) // an alias (*a) repeats its anchor's key
      key.fail(fmt::format("duplicate key '{}'", entry.first.Scalar()));
    result.push_back(Entry{entry.first.Scalar(), entry.first, entry.second});
  }
  return result;
}

std::vector<std::pair<std::string, Node>> Node::entries() const
{
  std::vector<std::pair<std::string, Node>> result;
  for (const auto& [key, key_node, value] : checked_entries()) {
    result.emplace_back(key, Node(value, source_, key_path_.empty() ? key : key_path_ + "." + key));
  }
  return result;
}

void Node::only_keys(std::initializer_list<std::string_view> allowed) const
{
  only_keys(std::vector<std::string>(allowed.begin(), allowed.end()));
}

void Node::only_keys(const std::vector<std::string>& allowed) const
{
  for (const auto& [key, key_node, value] : checked_entries()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string valid;
      for (auto name : allowed)
        valid += (valid.empty() ? "" : ", ") + name;
      Node(key_node, source_, key_path_).fail(fmt::format("unknown key '{}' (valid keys: {})", key, valid));
    }
  }
}

std::string Node::as_string() const
{
  if (!value_.IsScalar())
    fail("expected a scalar value");
  return value_.Scalar();
}

namespace {
template <typename Parse>
auto parse_scalar(const Node& node, Parse parse)
{
  std::string text = node.as_string();
  try {
    return parse(text);
  } catch (const std::invalid_argument& error) {
    node.fail(error.what());
  }
}
} // namespace

double Node::as_number() const
{
  return parse_scalar(*this, [](const std::string& t) { return units::parse_number(t); });
}

std::int64_t Node::as_int() const
{
  return parse_scalar(*this, [](const std::string& text) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size())
      throw std::invalid_argument(fmt::format("'{}' is not an integer", text));
    return static_cast<std::int64_t>(value);
  });
}

bool Node::as_bool() const
{
  std::string text = as_string();
  if (text == "true")
    return true;
  if (text == "false")
    return false;
  fail(fmt::format("'{}' is not true or false", text));
}

std::uint64_t Node::as_bytes() const
{
  return parse_scalar(*this, [](const std::string& t) { return units::parse_bytes(t); });
}
double Node::as_bandwidth() const
{
  return parse_scalar(*this, [](const std::string& t) { return units::parse_bandwidth(t); });
}
double Node::as_duration() const
{
  return parse_scalar(*this, [](const std::string& t) { return units::parse_duration(t); });
}

void Node::expect_format(const char* format, int version) const
{
  expect_map();
  std::string found = at("format").as_string();
  if (found != format)
    at("format").fail(fmt::format("expected format '{}', found '{}'", format, found));
  std::int64_t found_version = at("version").as_int();
  if (found_version != version)
    at("version").fail(fmt::format("unsupported {} version {} (this build reads version {})", format, found_version,
                                   version));
}

} // namespace memsim::yaml_io
