#pragma once
// YAML documents with located errors: every message names file:line:col and the key.
// Separate target (memsim_common_yaml) so the CUDA runtime never links yaml-cpp.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace memsim::yaml_io {

YAML::Node read_file(const std::filesystem::path& path);

class Node {
public:
  Node(YAML::Node value, std::string source, std::string key_path = "")
      : value_(std::move(value)), source_(std::move(source)), key_path_(std::move(key_path))
  {
  }
  const YAML::Node& value() const { return value_; }
  const std::string& source() const { return source_; }
  std::string where() const; // "file.yaml:12:3"
  [[noreturn]] void fail(const std::string& message) const;

  bool has(const char* key) const;
  Node at(const char* key) const; // required
  Node item(std::size_t index) const;
  std::size_t size() const; // sequence length (fails when not a sequence)
  bool is_sequence() const { return value_.IsSequence(); }
  bool is_map() const { return value_.IsMap(); }
  bool is_scalar() const { return value_.IsScalar(); }
  void only_keys(std::initializer_list<std::string_view> allowed) const;
  void only_keys(const std::vector<std::string>& allowed) const; // keys known at run time
  void expect_map() const;
  // Map entries in document order as (key, value) pairs.
  std::vector<std::pair<std::string, Node>> entries() const;

  std::string as_string() const;
  double as_number() const;
  std::int64_t as_int() const;
  bool as_bool() const;
  std::uint64_t as_bytes() const; // "16GiB"
  double as_bandwidth() const;    // "25GB/s"
  double as_duration() const;     // "2us"

  void expect_format(const char* format, int version) const;

private:
  // Map entries whose keys are names, each once (else a located error).
  struct Entry {
    std::string key;
    YAML::Node key_node, value;
  };
  std::vector<Entry> checked_entries() const;

  YAML::Node value_;
  std::string source_;
  std::string key_path_;
};

} // namespace memsim::yaml_io
