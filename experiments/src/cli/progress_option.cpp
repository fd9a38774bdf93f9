// --progress on the commands that run long (plan, max-scale, run).
#include "commands.hpp"

#include <string>

namespace memsim::cli {

CLI::Option* add_progress_option(CLI::App* command, experiments::Progress& progress)
{
  return command
      ->add_option_function<std::string>(
          "--progress", [&progress](const std::string& text) { progress = *experiments::progress_from_string(text); },
          "where the work is, on stderr: auto (an overwritten line on a terminal, nothing otherwise), on, lines (a "
          "line per update with the seconds elapsed: for a log) or off")
      ->check(CLI::IsMember(experiments::progress_names()))
      ->default_str("auto");
}

} // namespace memsim::cli
