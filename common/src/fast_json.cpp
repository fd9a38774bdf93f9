#include "memsim/common/fast_json.hpp"

#include "json_syntax_error.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/huge_pages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace memsim::fast_json {

namespace dom = simdjson::dom;

namespace {

// By value: a range-for over `get_object().value_unsafe()` would outlive the temporary result it refers to.
dom::object object_of(dom::element value)
{
  dom::object object;
  [[maybe_unused]] const auto error = value.get_object().get(object);
  return object;
}

dom::array array_of(dom::element value)
{
  dom::array array;
  [[maybe_unused]] const auto error = value.get_array().get(array);
  return array;
}

nlohmann::json to_nlohmann(dom::element value)
{
  switch (value.type()) {
  case dom::element_type::OBJECT: {
    nlohmann::json object = nlohmann::json::object();
    for (const dom::key_value_pair field : object_of(value)) // a repeated key: the last wins
      object[std::string(field.key)] = to_nlohmann(field.value);
    return object;
  }
  case dom::element_type::ARRAY: {
    nlohmann::json array = nlohmann::json::array();
    for (const dom::element element : array_of(value))
      array.push_back(to_nlohmann(element));
    return array;
  }
  case dom::element_type::STRING: return std::string(value.get_string().value_unsafe());
  case dom::element_type::INT64: {
    // nlohmann reads non-negative integers as unsigned; keep that so documents compare as before.
    const std::int64_t number = value.get_int64().value_unsafe();
    return number >= 0 ? nlohmann::json(static_cast<std::uint64_t>(number)) : nlohmann::json(number);
  }
  case dom::element_type::UINT64: return value.get_uint64().value_unsafe();
  case dom::element_type::DOUBLE: return value.get_double().value_unsafe();
  case dom::element_type::BOOL: return value.get_bool().value_unsafe();
  case dom::element_type::NULL_VALUE: return nullptr;
  }
  return nullptr;
}

} // namespace

static_assert(kReadSlack >= simdjson::SIMDJSON_PADDING);

namespace {
// simdjson's buffers are several times the text's size and every fresh page costs a fault: a finished Document
// leaves its parser to the next one on the thread (a trace, then its plan). Documents alive at once have their own.
thread_local std::unique_ptr<dom::parser> spare_parser;
} // namespace

Document::Document(const std::string& text, std::string source_name, std::string base_path)
    : parser_(spare_parser ? std::move(spare_parser) : std::make_unique<dom::parser>()),
      source_(std::move(source_name)), base_path_(std::move(base_path))
{
  // Room for a somewhat larger next document; pages never touched cost nothing.
  if (parser_->capacity() < text.size()) {
    const std::size_t capacity = std::min(text.size() + text.size() / 2, parser_->max_capacity());
    // The document's tape is sized here too (simdjson would size it to this text alone at parse time).
    const std::size_t wanted = std::max(capacity, text.size());
    if (parser_->allocate(wanted) || parser_->doc.allocate(wanted)) {
      parser_ = std::make_unique<dom::parser>(); // let parse() report the failure
    } else {
      // Fresh buffers of several times the text's size, written once per parse (sizes as simdjson allocates them).
      advise_huge_pages(parser_->doc.tape.get(), wanted * sizeof(std::uint64_t));
      advise_huge_pages(parser_->doc.string_buf.get(), 5 * wanted / 3);
      advise_huge_pages(parser_->implementation->structural_indexes.get(), wanted * sizeof(std::uint32_t));
    }
  }
  // simdjson copies the text into a padded buffer unless the string's spare capacity is enough padding.
  const bool has_bom = std::string_view(text).starts_with("\xEF\xBB\xBF"); // nlohmann skips a byte order mark
  auto parsed = has_bom ? parser_->parse(text.data() + 3, text.size() - 3, true) : parser_->parse(text);
  if (auto error = parsed.get(root_))
    detail::throw_syntax_error(text, source_, simdjson::error_message(error), parser_->max_depth());
}

Document::~Document()
{
  if (!spare_parser)
    spare_parser = std::move(parser_);
}

Node Document::root() const { return Node(root_, this); }

std::string Node::path() const
{
  std::string path = document_->base_path_ + folded_;
  for (std::size_t i = 0; i < depth_; ++i) {
    const Segment& segment = segments_[i];
    path += segment.key.data() ? fmt::format("/{}", segment.key) : fmt::format("/{}", segment.index);
  }
  return path;
}

std::string Node::where() const
{
  std::string at = path();
  return at.empty() ? document_->source_ + ": at /" : fmt::format("{}: at {}", document_->source_, at);
}

void Node::fail(const std::string& message) const { throw InputError(where(), message); }

Node Node::child(dom::element value, Segment segment) const
{
  Node result(value, document_);
  if (!folded_.empty())
    result.folded_ = folded_;
  if (depth_ == kInlineDepth) {
    // Deeper than the inline segments: keep the formatted prefix as a string from here on.
    std::string prefix = path();
    result.folded_ = prefix.substr(document_->base_path_.size());
    result.segments_[0] = segment;
    result.depth_ = 1;
    return result;
  }
  std::copy_n(segments_.begin(), depth_, result.segments_.begin());
  result.segments_[depth_] = segment;
  result.depth_ = depth_ + 1;
  return result;
}

const char* Node::type_name() const
{
  // The names nlohmann uses, so messages read as before.
  switch (value_.type()) {
  case dom::element_type::ARRAY: return "array";
  case dom::element_type::OBJECT: return "object";
  case dom::element_type::STRING: return "string";
  case dom::element_type::BOOL: return "boolean";
  case dom::element_type::NULL_VALUE: return "null";
  default: return "number";
  }
}

std::optional<dom::element> Node::lookup(std::string_view key) const
{
  if (!value_.is_object())
    return std::nullopt;
  // Keys are short: comparing the first byte before the rest skips most calls to memcmp.
  const dom::object object = object_of(value_);
  for (auto field = object.begin(); field != object.end(); ++field) {
    const std::string_view name = field.key();
    if (name.size() == key.size() && (key.empty() || name[0] == key[0]) && name == key)
      return field.value();
  }
  return std::nullopt;
}

std::optional<Node> Node::find(const char* key) const
{
  const std::string_view name(key);
  if (auto found = lookup(name))
    return child(*found, Segment{name, 0});
  return std::nullopt;
}

bool Node::has(const char* key) const { return lookup(key).has_value(); }

Node Node::at(const char* key) const
{
  expect_object();
  std::optional<Node> found = find(key);
  if (!found)
    fail(fmt::format("missing required key '{}'", key));
  return std::move(*found);
}

std::size_t Node::size() const
{
  if (!value_.is_array())
    fail(fmt::format("expected an array, found {}", type_name()));
  const dom::array array = array_of(value_);
  const std::size_t count = array.size();
  if (count < simdjson::internal::JSON_COUNT_MASK)
    return count;
  // The tape saturates the count of very long arrays: count them, once per Node.
  if (!counted_size_)
    counted_size_ = static_cast<std::size_t>(std::distance(array.begin(), array.end()));
  return *counted_size_;
}

Node Node::item(std::size_t index) const
{
  if (!value_.is_array())
    fail(fmt::format("no element {}", index));
  const dom::array array = array_of(value_);
  if (!has_cursor_ || cursor_index_ > index) {
    cursor_ = array.begin();
    cursor_index_ = 0;
    has_cursor_ = true;
  }
  const dom::array::iterator end = array.end();
  for (; cursor_index_ < index && cursor_ != end; ++cursor_index_)
    ++cursor_;
  if (cursor_ == end)
    fail(fmt::format("no element {}", index));
  return child(*cursor_, Segment{{}, index});
}

void Node::expect_object() const
{
  if (!value_.is_object())
    fail(fmt::format("expected an object, found {}", type_name()));
}

void Node::only_keys(std::initializer_list<std::string_view> allowed) const
{
  (void)read_members(std::span<const std::string_view>(allowed.begin(), allowed.size()), {});
}

std::uint64_t Node::read_members(std::span<const std::string_view> allowed, std::span<dom::element> values) const
{
  expect_object();
  const dom::object object = object_of(value_);
  std::uint64_t seen = 0; // bit i: allowed[i] was met (repeats beyond 64 allowed keys go unchecked)
  for (const dom::key_value_pair field : object) {
    // Keys are short: comparing the length and the first byte before the rest skips most calls to memcmp.
    const auto found = std::find_if(allowed.begin(), allowed.end(), [&](std::string_view name) {
      return name.size() == field.key.size() && (name.empty() || name[0] == field.key[0]) && name == field.key;
    });
    if (found == allowed.end()) {
      // nlohmann kept keys sorted, so name the smallest unknown key as before.
      std::string_view unknown = field.key;
      dom::element value = field.value;
      for (const dom::key_value_pair other : object)
        if (other.key < unknown && std::find(allowed.begin(), allowed.end(), other.key) == allowed.end()) {
          unknown = other.key;
          value = other.value;
        }
      std::string valid;
      for (auto name : allowed)
        valid += (valid.empty() ? "" : ", ") + std::string(name);
      child(value, Segment{unknown, 0}).fail(fmt::format("unknown key '{}' (valid keys: {})", unknown, valid));
    }
    const auto bit_index = static_cast<std::size_t>(found - allowed.begin());
    if (bit_index < 64) {
      const std::uint64_t bit = std::uint64_t{1} << bit_index;
      if (seen & bit)
        child(field.value, Segment{field.key, 0}).fail(fmt::format("duplicate key '{}'", field.key));
      seen |= bit;
    }
    if (!values.empty())
      values[bit_index] = field.value;
  }
  return seen;
}

std::string Node::as_string() const
{
  if (!value_.is_string())
    fail(fmt::format("expected a string, found {}", type_name()));
  return std::string(value_.get_string().value_unsafe());
}

double Node::as_number() const
{
  if (!value_.is_number())
    fail(fmt::format("expected a number, found {}", type_name()));
  const double number = value_.get_double().value_unsafe();
  if (!std::isfinite(number))
    fail("expected a finite number");
  return number;
}

std::int64_t Node::as_int() const
{
  switch (value_.type()) {
  case dom::element_type::INT64: return value_.get_int64().value_unsafe();
  case dom::element_type::UINT64: // only integers above INT64_MAX are stored as unsigned
    fail(fmt::format("integer {} is too large (at most {})", value_.get_uint64().value_unsafe(),
                     std::numeric_limits<std::int64_t>::max()));
  case dom::element_type::DOUBLE: {
    // 1e6 written for a count is accepted when it is exactly an integer.
    const double number = value_.get_double().value_unsafe();
    if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 9e15)
      return static_cast<std::int64_t>(number);
    break;
  }
  default: break;
  }
  fail(fmt::format("expected an integer, found {}", to_json().dump()));
}

std::uint64_t Node::as_uint() const
{
  if (value_.type() == dom::element_type::UINT64)
    return value_.get_uint64().value_unsafe();
  const std::int64_t number = as_int();
  if (number < 0)
    fail(fmt::format("expected a non-negative integer, found {}", number));
  return static_cast<std::uint64_t>(number);
}

std::int64_t Node::as_int_in(std::int64_t min, std::int64_t max) const
{
  const std::int64_t number = as_int();
  if (number < min || number > max)
    fail(fmt::format("expected an integer from {} to {}, found {}", min, max, number));
  return number;
}

double Node::as_non_negative() const
{
  const double number = as_number();
  if (number < 0)
    fail(fmt::format("expected a number that is not negative, found {}", number));
  return number;
}

bool Node::as_bool() const
{
  if (!value_.is_bool())
    fail(fmt::format("expected true or false, found {}", type_name()));
  return value_.get_bool().value_unsafe();
}

std::string Node::get_string(const char* key, const std::string& fallback) const
{
  auto found = find(key);
  return found ? found->as_string() : fallback;
}
double Node::get_number(const char* key, double fallback) const
{
  auto found = find(key);
  return found ? found->as_number() : fallback;
}
std::int64_t Node::get_int(const char* key, std::int64_t fallback) const
{
  auto found = find(key);
  return found ? found->as_int() : fallback;
}
std::uint64_t Node::get_uint(const char* key, std::uint64_t fallback) const
{
  auto found = find(key);
  return found ? found->as_uint() : fallback;
}
std::int64_t Node::get_int_in(const char* key, std::int64_t fallback, std::int64_t min, std::int64_t max) const
{
  auto found = find(key);
  return found ? found->as_int_in(min, max) : fallback;
}

void Node::expect_format(const char* format, int version) const
{
  expect_object();
  const Node format_node = at("format");
  const std::string found = format_node.as_string();
  if (found != format)
    format_node.fail(fmt::format("expected format '{}', found '{}'", format, found));
  const Node version_node = at("version");
  const std::int64_t found_version = version_node.as_int();
  if (found_version != version)
    version_node.fail(fmt::format("unsupported {} version {} (this build reads version {})", format, found_version,
                                  version));
}

nlohmann::json Node::to_json() const { return to_nlohmann(value_); }

} // namespace memsim::fast_json
