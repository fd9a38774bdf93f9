#pragma once
// Shared by the libFuzzer harnesses: the loaders read files, so each input is written to a per-process file first;
// bad input must end in InputError (or Infeasible); any other exception is a finding, like a crash.
#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace memsim::fuzz {

// The fuzzer's bytes as a file named like the document it stands for (the suffix picks e.g. gzip or YAML).
inline std::filesystem::path input_file(const std::uint8_t* data, std::size_t size, std::string_view suffix,
                                        std::string_view role = "input")
{
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("memsim-fuzz-" + std::to_string(::getpid()) + "-" + std::string(role) + std::string(suffix));
  write_text_file(path, std::string(reinterpret_cast<const char*>(data), size));
  return path;
}

// Runs `body`: located input errors and infeasible requests are the expected answers to bad input.
template <typename Body>
void expect_located_errors(Body body)
{
  try {
    body();
  } catch (const InputError& error) {
    if (error.where().empty()) { // every loader's message names the file
      std::fprintf(stderr, "memsim-fuzz: unlocated input error: %s\n", error.what());
      std::abort();
    }
  } catch (const Infeasible&) {
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memsim-fuzz: internal error (memsim would exit 3): %s\n", error.what());
    std::abort();
  }
}

// Splits "A\f\nB" into A and B (a harness that reads two documents); no separator: B is empty.
inline std::pair<std::string_view, std::string_view> split_documents(const std::uint8_t* data, std::size_t size)
{
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = text.find("\f\n");
  if (cut == std::string_view::npos)
    return {text, {}};
  return {text.substr(0, cut), text.substr(cut + 2)};
}

inline std::filesystem::path fixture(const char* name) { return std::filesystem::path(MEMSIM_FUZZ_FIXTURES) / name; }

} // namespace memsim::fuzz
