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
#include <string>
#include <string_view>

namespace memsim::fast_json {

class Node;

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
  // A key of an object (key.data() != nullptr) or an index into an array.
  struct Segment {
    std::string_view key;
    std::size_t index = 0;
  };
  static constexpr std::size_t kInlineDepth = 6;

  Node(simdjson::dom::element value, const Document* document) : value_(value), document_(document) {}
  Node child(simdjson::dom::element value, Segment segment) const;
  std::optional<simdjson::dom::element> lookup(std::string_view key) const;
  const char* type_name() const;

  simdjson::dom::element value_;
  const Document* document_;
  // Segments beyond kInlineDepth are folded into `folded_` (only very deep documents pay for a string).
  std::string folded_;
  std::array<Segment, kInlineDepth> segments_{};
  std::size_t depth_ = 0;
  // simdjson finds an array element by walking from the first; item(i) resumes from item(i - 1) instead.
  mutable simdjson::dom::array::iterator cursor_{};
  mutable std::size_t cursor_index_ = 0;
  mutable bool has_cursor_ = false;
  mutable std::optional<std::size_t> counted_size_;
};

} // namespace memsim::fast_json
