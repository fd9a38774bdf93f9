// memsim import FORMAT: other tools' traces as memsim Traces, one subcommand per registered importer.
#include "commands.hpp"
#include "param_options.hpp"

#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/importer_registry.hpp"
#include "memsim/traces/layer_profile.hpp"
#include "memsim/traces/summary.hpp"

#include <fmt/format.h>

#include <memory>
#include <utility>

namespace memsim::cli {

void add_import_command(CLI::App& app, Context&)
{
  CLI::App* import = app.add_subcommand("import", "Convert another tool's trace into a memsim trace");
  import->require_subcommand(1);
  const ImporterRegistry& registry = importer_registry();
  for (const ImporterInfo* info : registry.all()) {
    CLI::App* command = import->add_subcommand(info->name, info->description);
    auto files = std::make_shared<std::pair<std::string, std::string>>(); // input, output
    command->add_option("FILE", files->first, "file to import (may be gzip-compressed)")->required();
    command->add_option("-o,--out", files->second, "trace to write (.trace.json, or .trace.json.gz to compress)")
        ->required();
    auto params = std::make_shared<ParamOptions>(command, info->params);
    command->callback([&registry, info, files, params] {
      const ImportedTrace imported = info->make(files->first, registry.complete_params(*info, params->given()));
      save_trace(imported.trace, files->second);
      const TraceSummary summary = summarize_trace(imported.trace, default_memory_profile(imported.trace));
      fmt::print("{}: {} ops, {} tensors, total_time_s {:.6f}, default_peak_bytes {}, resident_bytes {}\n",
                 files->second, summary.ops, summary.tensors, summary.total_time_s, summary.default_peak_bytes,
                 summary.resident_bytes);
      fmt::print("{}", imported.report);
    });
  }
  // A layer profile is not a trace (per-layer values at several microbatch sizes, no ops), so this importer writes
  // memsim's layer-profile format instead and sits beside the trace importers' registry.
  CLI::App* profile =
      import->add_subcommand("harmony-profile",
                             "Harmony's per-layer profile (its pickles converted to JSON) as a memsim layer profile");
  auto files = std::make_shared<std::pair<std::string, std::string>>();
  profile->add_option("FILE", files->first, "harmony-profile JSON (may be gzip-compressed)")->required();
  profile->add_option("-o,--out", files->second, "memsim-layer-profile JSON to write")->required();
  profile->callback([files] {
    const LayerProfile imported = import_harmony_profile(files->first);
    save_layer_profile(imported, files->second);
    fmt::print("{}: {} layers, {} forward and {} backward microbatch sizes ({}..{})\n", files->second,
               imported.num_layers(), imported.sampled_forward.size(), imported.sampled_backward.size(),
               imported.sampled_forward.front(), imported.sampled_forward.back());
  });
}

} // namespace memsim::cli
