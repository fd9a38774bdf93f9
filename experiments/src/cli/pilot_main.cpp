// memsim-pilot: `memsim pilot train | eval` (memsim execs it with its own arguments). A separate executable so that
// only it links libtorch.
#include "commands.hpp"
#include "run_app.hpp"

namespace memsim::cli {
void add_pilot_command(CLI::App& app, Context& context); // cmd_pilot.cpp
} // namespace memsim::cli

int main(int argc, char** argv)
{
  memsim::cli::Context context;
  context.executable = memsim::cli::own_executable();
  CLI::App app{"memsim pilot: DyNN-Offload's pilot (libtorch)", "memsim"};
  app.require_subcommand(1);
  memsim::cli::add_pilot_command(app, context);
  return memsim::cli::run_app(app, context, argc, argv);
}
