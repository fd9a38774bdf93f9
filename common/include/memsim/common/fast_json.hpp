#pragma once
// Large memsim documents (traces, plans) read through simdjson's DOM with the same located errors as json_io:
// syntax errors name the byte offset, schema errors the JSON path. The path is kept as a few segments that point
// at keys the caller owns (string literals) or the document owns, and is formatted only when a message is made.
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace memsim::fast_json {

class Node;
template <typename Keys>
class Members;

// A parsed document; its Nodes point into it, so it must outlive them (it cannot move).
class Document {
public:
  // A syntax error becomes InputError("source: byte N", "invalid JSON: ..."). `base_path` prefixes every path
  // (a document that is an element of a larger one). Text with kReadSlack spare capacity (read_text_file) is
  // parsed in place; other text is copied once.
  Document(const std::string& text, std::string source_name, std::string base_path = "");
  ~Document();
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;

  Node root() const;

private:
  friend class Node;
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
  std::string source_;
  std::string base_path_;
};

// One value of a Document and the path that leads to it; the API of json_io::Node.
class Node {
public:
  std::string path() const;
  std::string where() const;
  [[noreturn]] void fail(const std::string& message) const;

  // Keys must outlive the Node and its children (the loaders pass string literals).
  bool has(const char* key) const;
  Node at(const char* key) const; // required member
  std::optional<Node> find(const char* key) const;
  Node item(std::size_t index) const;
  std::size_t size() const; // array length (fails when not an array)
  // An array of integers: what item(i).as_int() reads for each i, and fails as it does, without a Node per element.
  // `check(i, number)` sees each number before the next element is read (and may fail it), so that a document
  // with several faults reports the same one as a loop over item(i).
  template <typename Check>
  std::vector<std::int64_t> int_items(Check&& check) const;
  std::vector<std::int64_t> int_items() const
  {
    return int_items([](std::size_t, std::int64_t) {});
  }

  // Refuses members other than `allowed` (the contract: unknown keys are errors) and repeated members.
  void only_keys(std::initializer_list<std::string_view> allowed) const;
  void expect_object() const;

  std::string as_string() const;
  double as_number() const;
  std::int64_t as_int() const;
  std::uint64_t as_uint() const;
  bool as_bool() const;
  // Bounded values (the documented limits, README "Limits"): an integer in [min, max] (an index that fits an int,
  // an id below the document's count), a finite number that is not negative (a time, a size, a count of flops).
  std::int64_t as_int_in(std::int64_t min, std::int64_t max) const;
  double as_non_negative() const;

  // Optional members with defaults.
  std::string get_string(const char* key, const std::string& fallback) const;
  double get_number(const char* key, double fallback) const;
  std::int64_t get_int(const char* key, std::int64_t fallback) const;
  std::uint64_t get_uint(const char* key, std::uint64_t fallback) const;
  std::int64_t get_int_in(const char* key, std::int64_t fallback, std::int64_t min, std::int64_t max) const;

  // Checks `format` and `version` of a memsim document.
  void expect_format(const char* format, int version) const;

  // The value as nlohmann JSON, for small free-form parts (a plan's params).
  nlohmann::json to_json() const;

private:
  friend class Document;
  template <typename Keys>
  friend class Members;
  // A key of an object (key.data() != nullptr) or an index into an array.
  struct Segment {
    std::string_view key;
    std::size_t index;
  };
  static constexpr std::size_t kInlineDepth = 6;

  Node(simdjson::dom::element value, const Document* document) : value_(value), document_(document) {}
  Node child(simdjson::dom::element value, Segment segment) const;
  std::optional<simdjson::dom::element> lookup(std::string_view key) const;
  // only_keys's pass; also stores the value of allowed[i] in values[i] (when values is not empty) and returns the
  // bit mask of the allowed keys present.
  std::uint64_t read_members(std::span<const std::string_view> allowed, std::span<simdjson::dom::element> values) const;
  const char* type_name() const;

  simdjson::dom::element value_;
  const Document* document_;
  // Segments beyond kInlineDepth are folded into `folded_` (only very deep documents pay for a string).
  std::string folded_;
  // Only the first depth_ are set: zeroing all of them was the largest cost of making a child (10^6 per plan).
  std::array<Segment, kInlineDepth> segments_;
  std::size_t depth_ = 0;
  // simdjson finds an array element by walking from the first; item(i) resumes from item(i - 1) instead.
  mutable simdjson::dom::array::iterator cursor_{};
  mutable std::size_t cursor_index_ = 0;
  mutable bool has_cursor_ = false;
  mutable std::optional<std::size_t> counted_size_;
};

template <typename Check>
std::vector<std::int64_t> Node::int_items(Check&& check) const
{
  std::vector<std::int64_t> numbers;
  numbers.reserve(size());
  simdjson::dom::array array;
  [[maybe_unused]] const auto error = value_.get_array().get(array); // size() failed unless it is an array
  for (const simdjson::dom::element element : array) {
    std::int64_t number = 0;
    if (element.get_int64().get(number)) // not an int64: as_int() accepts some (1e6) and words the others' failure
      number = item(numbers.size()).as_int();
    check(numbers.size(), number);
    numbers.push_back(number);
  }
  return numbers;
}

// An object's members read in one pass: what only_keys refuses (unknown and repeated keys) is refused the same way,
// and each allowed key is then found without searching the object again. `Keys::names` is a constexpr array of the
// allowed keys (string literals); a key given to has/at/find is resolved to its position when compiled.
template <typename Keys>
class Members {
public:
  static constexpr std::size_t kCount = Keys::names.size();
  static_assert(kCount <= 64, "the present keys are a 64-bit mask");

  // One of Keys::names; a name that is not there does not compile.
  class Key {
  public:
    consteval Key(const char* name) : slot_(slot_of(name)) {} // NOLINT: implicit, from the literal
    std::size_t slot() const { return slot_; }

  private:
    static consteval std::size_t slot_of(std::string_view name)
    {
      for (std::size_t i = 0; i < kCount; ++i)
        if (Keys::names[i] == name)
          return i;
      throw std::logic_error("not an allowed key"); // at compile time: an error
    }
    std::size_t slot_;
  };

  // Fails as node.only_keys(Keys::names) does.
  explicit Members(const Node& node) : node_(node) { present_ = node.read_members(Keys::names, values_); }

  bool has(Key key) const { return (present_ >> key.slot()) & 1U; }
  std::optional<Node> find(Key key) const
  {
    if (!has(key))
      return std::nullopt;
    return member(key);
  }
  Node at(Key key) const // a required member: fails as Node::at does
  {
    if (!has(key))
      node_.fail("missing required key '" + std::string(Keys::names[key.slot()]) + "'");
    return member(key);
  }

  std::string get_string(Key key, const std::string& fallback) const
  {
    return has(key) ? member(key).as_string() : fallback;
  }
  double get_number(Key key, double fallback) const { return has(key) ? member(key).as_number() : fallback; }
  std::int64_t get_int(Key key, std::int64_t fallback) const { return has(key) ? member(key).as_int() : fallback; }
  std::uint64_t get_uint(Key key, std::uint64_t fallback) const { return has(key) ? member(key).as_uint() : fallback; }
  std::int64_t get_int_in(Key key, std::int64_t fallback, std::int64_t min, std::int64_t max) const
  {
    return has(key) ? member(key).as_int_in(min, max) : fallback;
  }

private:
  Node member(Key key) const { return node_.child(values_[key.slot()], Node::Segment{Keys::names[key.slot()], 0}); }

  const Node& node_;
  std::array<simdjson::dom::element, kCount> values_{};
  std::uint64_t present_ = 0;
};

} // namespace memsim::fast_json
