#pragma once
// Worker processes and output folders shared by `memsim run` and `memsim validate --experiment`: each cell simulates
// in its own process (one SimGrid engine per process).
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim::experiments {

// Starts `argv` (argv[0] a path) with stdin from /dev/null and stdout+stderr into `log` (nullopt: inherited).
// Throws RunError when it cannot start.
pid_t spawn_process(const std::vector<std::string>& argv, const std::optional<std::filesystem::path>& log);
// Waits for `pid`, retrying on EINTR; returns the wait status.
int wait_for_process(pid_t pid);
// "exit code 3", "killed by signal 9 (Killed)", ...
std::string describe_status(int status);
// The last lines of a worker's log, indented for a failure message; "(no output)" when there is none.
std::string log_tail(const std::filesystem::path& log, std::size_t max_lines = 6);

// Creates `folder` (and parents) and checks that a file can be written in it; InputError naming the folder and
// the errno text otherwise (a path under a regular file, a read-only file system, a full disk).
void create_output_folder(const std::filesystem::path& folder);
// A CSV field, quoted when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& text);

} // namespace memsim::experiments
