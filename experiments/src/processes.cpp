#include "memsim/experiments/processes.hpp"

#include "memsim/common/atomic_file.hpp"
#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/experiments/runner.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

extern char** environ;

namespace memsim::experiments {

void create_output_folder(const std::filesystem::path& folder)
{
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error)
    throw InputError(folder.string(), fmt::format("cannot create the output folder: {}", error.message()));
  // A folder that exists but refuses files (read-only mount, permissions) is found now, not after the sweep.
  const std::filesystem::path probe = folder / fmt::format(".memsim-write-test.{}", ::getpid());
  write_text_atomically(probe, "memsim\n");
  std::filesystem::remove(probe, error);
}

std::string csv_field(const std::string& text)
{
  if (text.find_first_of(",\"\r\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"')
      quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string log_tail(const std::filesystem::path& log, std::size_t max_lines)
{
  std::string text;
  try {
    text = read_text_file(log);
  } catch (const InputError&) {
    return "(no output)";
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    lines.push_back(line);
  if (lines.size() > max_lines)
    lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(max_lines));
  std::string tail;
  for (const auto& line : lines)
    tail += (tail.empty() ? "" : "\n    ") + line;
  return tail.empty() ? "(no output)" : tail;
}

std::string describe_status(int status)
{
  if (WIFEXITED(status))
    return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return fmt::format("wait status {}", status);
}

pid_t spawn_process(const std::vector<std::string>& argv, const std::optional<std::filesystem::path>& log)
{
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (log) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log->c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0)
    throw RunError(fmt::format("cannot start {}: {}", argv[0], std::strerror(error)));
  return pid;
}

int wait_for_process(pid_t pid)
{
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

} // namespace memsim::experiments
