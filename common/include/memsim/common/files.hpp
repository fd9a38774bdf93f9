#pragma once
// Whole-file text I/O with errors that name the file (InputError "path: cannot open file" / "cannot write file").
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace memsim {

// Text read from files keeps at least this much spare capacity after its end, so simdjson (which reads up to
// 64 bytes past the end) parses it in place instead of copying it.
constexpr std::size_t kReadSlack = 64;

// Reads the whole file with one allocation of its size (plus kReadSlack).
std::string read_text_file(const std::filesystem::path& path);
// Replaces the file's content; the folder must exist.
void write_text_file(const std::filesystem::path& path, std::string_view text);

} // namespace memsim
