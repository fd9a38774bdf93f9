#include "memsim/experiments/progress_line.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>

namespace memsim::experiments {

namespace {
constexpr std::size_t kTerminalWidth = 100; // an overwritten line that wraps can no longer be erased
} // namespace

std::optional<Progress> progress_from_string(std::string_view text)
{
  if (text == "auto")
    return Progress::automatic;
  if (text == "on")
    return Progress::on;
  if (text == "lines")
    return Progress::lines;
  if (text == "off")
    return Progress::off;
  return std::nullopt;
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
