#pragma once
// JSON documents with located errors: parse errors name the byte offset, schema errors the JSON path.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

namespace memsim::json_io {

using Json = nlohmann::json;

// Reads and parses a file; a syntax error becomes InputError("file: byte N", ...).
Json read_file(const std::filesystem::path& path);
Json parse_text(std::string_view text, const std::string& source_name);
void write_file(const std::filesystem::path& path, const Json& document);

// Walks a document while keeping the JSON path for messages ("trace.json: at /ops/3/inputs/1").
class Node {
public:
  Node(const Json& value, std::string source, std::string path = "")
      : value_(&value), source_(std::move(source)), path_(std::move(path))
  {
  }
  const Json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  std::string where() const;
  [[noreturn]] void fail(const std::string& message) const;

  bool has(const char* key) const;
  Node at(const char* key) const; // required member
  Node item(std::size_t index) const;
  std::size_t size() const; // array length (fails when not an array)

  // Refuses members other than `allowed` (the contract: unknown keys are errors).
  void only_keys(std::initializer_list<std::string_view> allowed) const;
  void expect_object() const;

  std::string as_string() const;
  double as_number() const;
  std::int64_t as_int() const;
  std::uint64_t as_uint() const;
  bool as_bool() const;

  // Optional members with defaults.
  std::string get_string(const char* key, const std::string& fallback) const;
  double get_number(const char* key, double fallback) const;
  std::int64_t get_int(const char* key, std::int64_t fallback) const;
  std::uint64_t get_uint(const char* key, std::uint64_t fallback) const;

  // Checks `format` and `version` of a memsim document.
  void expect_format(const char* format, int version) const;

private:
  const Json* value_;
  std::string source_;
  std::string path_;
};

} // namespace memsim::json_io
