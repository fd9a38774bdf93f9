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

// Reads the whole file with one allocation of its size (plus kReadSlack), or into a recycled buffer.
std::string read_text_file(const std::filesystem::path& path);

// Large texts are read into buffers whose fresh pages cost more than the reading. A loader done with its text
// hands it back here, and the next read on the thread (a trace, then its plan) reuses its pages when it is large
// enough; large buffers get half again their size as room for that. text_buffer returns an empty string with at
// least `capacity` reserved.
void recycle_text(std::string&& text);
std::string text_buffer(std::size_t capacity);
// Replaces the file's content; the folder must exist.
void write_text_file(const std::filesystem::path& path, std::string_view text);

} // namespace memsim
