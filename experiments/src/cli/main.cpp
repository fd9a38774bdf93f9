// memsim: one executable, one subcommand per task. Bad input exits 2 with a located message.
#include "commands.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

#ifdef MEMSIM_WITH_TORCH
namespace memsim::cli {
void add_pilot_command(CLI::App& app, Context& context); // memsim pilot train | eval (cmd_pilot.cpp, libtorch)
} // namespace memsim::cli
#endif

namespace {

// The last word of a failing run must not fail itself: fmt::print throws when stderr cannot be written (a worker
// whose log is on a full disk), which here would end in std::terminate instead of the exit code.
void print_error(const std::string& message) { std::fputs(message.c_str(), stderr); }

} // namespace

int main(int argc, char** argv)
{
  memsim::cli::Context context;
  std::error_code ignored;
  context.executable = std::filesystem::read_symlink("/proc/self/exe", ignored);

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
  memsim::cli::add_pilot_command(app, context); // cmd_pilot.cpp
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : 2;
  } catch (const memsim::InputError& error) {
    print_error(fmt::format("memsim: {}\n", error.what()));
    return 2;
  } catch (const memsim::Infeasible& error) {
    print_error(fmt::format("memsim: infeasible: {}\n", error.what()));
    return 1;
  } catch (const std::exception& error) {
    print_error(fmt::format("memsim: internal error: {}\n", error.what()));
    return 3;
  }
  return context.exit_code;
}
