// --state-dir on the commands that run planners (plan, max-scale).
#include "commands.hpp"

namespace memsim::cli {

CLI::Option* add_state_dir_option(CLI::App* command, std::filesystem::path& folder)
{
  return command->add_option(
      "--state-dir", folder,
      "keep a long planner search's state in this folder (created if missing) and resume from it: a run stopped "
      "midway continues where it was, with the same plan (mu-two's ring saves a file per ring every 25 rounds and "
      "removes it when the ring's search ends)");
}

} // namespace memsim::cli
