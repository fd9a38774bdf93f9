#include "memsim/experiments/progress_line.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <utility>

namespace memsim::experiments {

namespace {
constexpr std::size_t kTerminalWidth = 100; // an overwritten line that wraps can no longer be erased
constexpr std::array<std::pair<std::string_view, Progress>, 4> kProgressNames{
    {{"auto", Progress::automatic}, {"on", Progress::on}, {"lines", Progress::lines}, {"off", Progress::off}}};
} // namespace

std::optional<Progress> progress_from_string(std::string_view text)
{
  for (const auto& [name, progress] : kProgressNames)
    if (text == name)
      return progress;
  return std::nullopt;
}

std::vector<std::string> progress_names()
{
  std::vector<std::string> names;
  for (const auto& entry : kProgressNames)
    names.emplace_back(entry.first);
  return names;
}

ProgressLine::ProgressLine(Progress progress) : style_(progress)
{
  if (style_ == Progress::automatic)
    style_ = ::isatty(STDERR_FILENO) ? Progress::on : Progress::off;
}

void ProgressLine::show(std::string_view text)
{
  if (style_ == Progress::off || (shown_ && text == last_))
    return;
  last_ = text;
  shown_ = true;
  if (style_ == Progress::lines) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    fmt::print(stderr, "[{:9.1f} s] {}\n", elapsed, text);
  } else {
    const std::string_view shown = text.size() > kTerminalWidth ? text.substr(0, kTerminalWidth - 3) : text;
    fmt::print(stderr, "\r\033[K{}{}", shown, text.size() > kTerminalWidth ? "..." : "");
  }
  std::fflush(stderr);
}

void ProgressLine::clear()
{
  if (style_ == Progress::on && shown_)
    fmt::print(stderr, "\r\033[K");
  shown_ = false;
  last_.clear();
}

} // namespace memsim::experiments
