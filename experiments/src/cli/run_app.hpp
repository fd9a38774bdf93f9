#pragma once
// Parsing and the exit-code contract shared by memsim and memsim-pilot: bad input exits 2 with a located message,
// an infeasible request 1, anything else 3.
#include "commands.hpp"

namespace memsim::cli {

// The running executable (/proc/self/exe): sweeps re-run it as workers, memsim finds memsim-pilot beside it.
std::filesystem::path own_executable();

int run_app(CLI::App& app, const Context& context, int argc, char** argv);

} // namespace memsim::cli
