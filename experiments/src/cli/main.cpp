// memsim: one executable, one subcommand per task. Bad input exits 2 with a located message.
#include "commands.hpp"
#include "run_app.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

#ifdef MEMSIM_WITH_TORCH
// `memsim pilot ...` runs memsim-pilot, built beside memsim: only it links libtorch, whose loading (about half a
// second and 190 MB) every other command would otherwise pay.
int exec_pilot(char** argv)
{
  const std::filesystem::path pilot = memsim::cli::own_executable().parent_path() / "memsim-pilot";
  ::execv(pilot.c_str(), argv);
  std::fputs(fmt::format("memsim: pilot: cannot run {}: {}\n", pilot.string(), std::strerror(errno)).c_str(), stderr);
  return 3;
}
#endif

} // namespace

int main(int argc, char** argv)
{
#ifdef MEMSIM_WITH_TORCH
  if (argc >= 2 && std::string(argv[1]) == "pilot")
    return exec_pilot(argv);
#endif
  memsim::cli::Context context;
  context.executable = memsim::cli::own_executable();

  CLI::App app{"memsim: simulate and plan GPU memory (swap, recompute, split) for DNN training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "memsim 0.1.0");
  memsim::cli::add_simulate_command(app, context);
  memsim::cli::add_plan_command(app, context);
  memsim::cli::add_list_commands(app, context);
  memsim::cli::add_gen_command(app, context);
  memsim::cli::add_run_command(app, context);
  memsim::cli::add_merge_command(app, context);
  memsim::cli::add_worker_command(app, context);
  memsim::cli::add_trace_command(app, context);
  memsim::cli::add_import_command(app, context);
  memsim::cli::add_validate_command(app, context);
  memsim::cli::add_max_scale_command(app, context);
  memsim::cli::add_harmony_command(app, context);
#ifdef MEMSIM_WITH_TORCH
  // Listed in --help; `memsim pilot ...` never reaches this parser (exec_pilot above).
  app.add_subcommand("pilot", "DyNN-Offload's pilot: train it, evaluate it (libtorch; runs memsim-pilot)")
      ->allow_extras();
#endif
  return memsim::cli::run_app(app, context, argc, argv);
}
