#include "memsim/experiments/processes.hpp"

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

namespace {

[[noreturn]] void fail_to_write(const std::filesystem::path& path, const char* what, int error)
{
  throw InputError(path.string(), fmt::format("cannot {}: {}", what, std::strerror(error)));
}

// Flushes a file or folder to the disk, so that a crash of the machine cannot leave a renamed but empty file.
void sync_to_disk(int descriptor, const std::filesystem::path& path)
{
  if (::fsync(descriptor) != 0 && errno != EINVAL) // EINVAL: a file system without fsync (e.g. some FUSE)
    fail_to_write(path, "sync", errno);
}

} // namespace

void write_text_atomically(const std::filesystem::path& path, const std::string& text)
{
  std::filesystem::path temporary = path;
  temporary += fmt::format(".tmp.{}", ::getpid());
  const int file = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file < 0)
    fail_to_write(temporary, "create file", errno);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t count = ::write(file, text.data() + written, text.size() - written);
    if (count < 0 && errno == EINTR)
      continue;
    if (count < 0) {
      const int error = errno;
      ::close(file);
      ::unlink(temporary.c_str());
      fail_to_write(temporary, "write", error);
    }
    written += static_cast<std::size_t>(count);
  }
  try {
    sync_to_disk(file, temporary);
  } catch (const InputError&) {
    ::close(file);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::close(file) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail_to_write(temporary, "write", error);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail_to_write(path, "rename a finished file onto", error);
  }
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const int directory = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) { // the rename itself must survive a crash too
    try {
      sync_to_disk(directory, folder);
    } catch (const InputError&) {
      ::close(directory);
      throw;
    }
    ::close(directory);
  }
}

void remove_stale_temporaries(const std::filesystem::path& folder)
{
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    const std::size_t marker = name.rfind(".tmp.");
    if (marker == std::string::npos)
      continue;
    // A process that still lives (a worker left by a killed runner) may still rename its temporary into place.
    const pid_t writer = static_cast<pid_t>(std::strtol(name.c_str() + marker + 5, nullptr, 10));
    if (writer > 0 && (::kill(writer, 0) == 0 || errno == EPERM))
      continue;
    std::filesystem::remove(entry.path(), error);
  }
}

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
