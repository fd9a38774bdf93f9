#pragma once
// Where a long command is, on stderr: an overwritten line on a terminal, or one timestamped line per update for a
// log (a probe left running for hours in the background, a sweep under nohup).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memsim::experiments {

// automatic: an overwritten line when stderr is a terminal, nothing otherwise; on: the overwritten line anyway;
// lines: a line per update, prefixed with the seconds since the command started; off: nothing.
enum class Progress { automatic, on, lines, off };

// "auto", "on", "lines", "off"; nullopt for anything else.
std::optional<Progress> progress_from_string(std::string_view text);
// The names progress_from_string reads, in the order --help lists them.
std::vector<std::string> progress_names();

class ProgressLine {
public:
  explicit ProgressLine(Progress progress);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return style_ != Progress::off; }
  // The same text twice in a row is written once (a log gains a line only when something changed).
  void show(std::string_view text);
  // Erases the overwritten line (lines stay: they are the log).
  void clear();

private:
  Progress style_; // automatic resolved: on, lines or off
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::string last_;
  bool shown_ = false;
};

} // namespace memsim::experiments
