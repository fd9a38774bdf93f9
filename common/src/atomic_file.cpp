#include "memsim/common/atomic_file.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace memsim {

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

} // namespace memsim
