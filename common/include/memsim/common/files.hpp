#pragma once
// Whole-file text I/O with errors that name the file (InputError "path: cannot open file" / "cannot write file").
#include <filesystem>
#include <string>
#include <string_view>

namespace memsim {

std::string read_text_file(const std::filesystem::path& path);
// Replaces the file's content; the folder must exist.
void write_text_file(const std::filesystem::path& path, std::string_view text);

} // namespace memsim
