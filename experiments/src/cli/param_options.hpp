#pragma once
// A component's declared parameters as command-line options of its subcommand (`memsim gen cnn --depth 16`,
// `memsim import checkmate --seconds-per-cost 0.5`): one option per parameter, a flag for a boolean.
#include "memsim/common/params.hpp"

#include <CLI/CLI.hpp>

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace memsim::cli {

class ParamOptions {
public:
  // Registers the options on `command`; keep the object alive until the command has run.
  ParamOptions(CLI::App* command, const std::vector<ParamSpec>& specs);

  // The options given, as JSON of the declared types. Throws InputError("--flag", ...) for a malformed value.
  nlohmann::json given() const;

private:
  struct Bound {
    ParamSpec spec;
    CLI::Option* option = nullptr;
    std::string text;  // value options
    bool flag = false; // boolean options
  };
  std::deque<Bound> bound_; // stable addresses: CLI11 writes into them
};

} // namespace memsim::cli
