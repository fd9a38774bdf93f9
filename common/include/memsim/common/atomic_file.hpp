#pragma once
// Files that land whole or not at all: sweep cells, capacity results and planners' saved search state are written
// while a process may be killed at any moment.
#include <filesystem>
#include <string>

namespace memsim {

// Writes a temporary file, syncs it to the disk and renames it over `path` (then syncs the folder), so that a
// process killed at any point (even SIGKILL) or a machine crash never leaves half a file under `path`.
// Throws InputError "path: cannot write: No space left on device" (the errno text) when it cannot.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);
// Removes the temporaries (`*.tmp.PID`) that processes killed in the middle of write_text_atomically left (those
// whose PID no longer runs).
void remove_stale_temporaries(const std::filesystem::path& folder);

} // namespace memsim
