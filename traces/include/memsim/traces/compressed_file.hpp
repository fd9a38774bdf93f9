#pragma once
// Whole-file reads and writes that handle gzip (`.gz`) transparently, through zlib.
#include <filesystem>
#include <string>
#include <string_view>

namespace memsim {

// The file's bytes, decompressed when it is gzip (zlib detects the magic; plain files pass through).
// Throws InputError(path, ...) when it cannot be opened or the gzip stream is corrupt or truncated.
std::string read_possibly_gzipped(const std::filesystem::path& path);

// Writes `text`, gzip-compressed when the path ends in ".gz" (deterministic: no name, no timestamp).
void write_possibly_gzipped(const std::filesystem::path& path, std::string_view text);

} // namespace memsim
