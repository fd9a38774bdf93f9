// memsim import: other tools' traces (DTR logs, Checkmate graphs, PyTorch execution graphs) as memsim Traces.
#include "commands.hpp"

#include "memsim/traces/importers.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/summary.hpp"

#include <fmt/format.h>

#include <memory>
#include <optional>

namespace memsim::cli {
namespace {

struct ImportOptions {
  std::string input;
  std::string out;
  double seconds_per_cost_unit = 1e-3;
  std::string profile;
};

void report(const Trace& trace, const std::string& out)
{
  save_trace(trace, out);
  const TraceSummary summary = summarize_trace(trace, default_memory_profile(trace));
  fmt::print("{}: {} ops, {} tensors, total_time_s {:.6f}, default_peak_bytes {}, resident_bytes {}\n", out,
             summary.ops, summary.tensors, summary.total_time_s, summary.default_peak_bytes, summary.resident_bytes);
}

CLI::App* add_format(CLI::App* import, const char* name, const char* description, ImportOptions& options)
{
  CLI::App* command = import->add_subcommand(name, description);
  command->add_option("FILE", options.input, "file to import (may be gzip-compressed)")->required();
  command->add_option("-o,--out", options.out, "trace to write (.trace.json, or .trace.json.gz to compress)")
      ->required();
  return command;
}

} // namespace

void add_import_command(CLI::App& app, Context&)
{
  CLI::App* import = app.add_subcommand("import", "Convert another tool's trace into a memsim trace");
  import->require_subcommand(1);
  auto options = std::make_shared<ImportOptions>();

  CLI::App* dtr = add_format(import, "dtr",
                             "DTR prototype log (JSON lines; simrd's accounting: storages, eager release)", *options);
  dtr->callback([options] {
    DtrImportStats stats;
    Trace trace = import_dtr_log(options->input, &stats);
    report(trace, options->out);
    fmt::print("  DTR log: {} CALL, {} MUTATE, {} RELEASE; compute {:.6f} s; constants {} bytes ({} appear after the "
               "first op)\n",
               stats.calls, stats.mutates, stats.releases, stats.total_compute_s, stats.constant_bytes,
               stats.constants_after_first_call);
  });

  CLI::App* checkmate = add_format(import, "checkmate", "Checkmate training graph (networkx node-link JSON)", *options);
  checkmate->add_option("--seconds-per-cost", options->seconds_per_cost_unit,
                        "seconds per unit of the nodes' cost_cpu (Checkmate's profiled costs: milliseconds)")
      ->default_val(1e-3)
      ->check(CLI::PositiveNumber);
  checkmate->callback([options] {
    report(import_checkmate_graph(options->input, options->seconds_per_cost_unit), options->out);
  });

  CLI::App* eg = add_format(import, "pytorch-eg", "PyTorch execution graph (ExecutionGraphObserver, schema 1.0.x)",
                            *options);
  eg->add_option("--profile", options->profile,
                 "Chrome/Kineto trace of the same iteration from torch.profiler: op times (else 0)");
  eg->callback([options] {
    std::optional<std::filesystem::path> profile;
    if (!options->profile.empty())
      profile = options->profile;
    report(import_pytorch_execution_graph(options->input, profile), options->out);
  });
}

} // namespace memsim::cli
