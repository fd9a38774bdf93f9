// The importers and their parameters. Registered here, in the file that defines the registry, so that every
// program using the registry links them.
#include "memsim/traces/importer_registry.hpp"

#include "memsim/traces/importers.hpp"

#include <fmt/format.h>

namespace memsim {
namespace {

template <class Options>
ImporterInfo importer(std::string name, std::string description, ParamList<Options> params,
                      ImportedTrace (*import)(const std::filesystem::path&, const Options&))
{
  std::vector<ParamSpec> specs = params.specs();
  return ImporterInfo{std::move(name), std::move(description), std::move(specs),
                      [params = std::move(params), import](const std::filesystem::path& file,
                                                           const ParamValues& values) {
                        return import(file, params.bind(values));
                      }};
}

ImportedTrace import_dtr(const std::filesystem::path& file, const NoOptions&)
{
  DtrImportStats stats;
  ImportedTrace imported{import_dtr_log(file, &stats), ""};
  imported.report = fmt::format("  DTR log: {} CALL, {} MUTATE, {} RELEASE; compute {:.6f} s; constants {} bytes ({} "
                                "appear after the first op)\n",
                                stats.calls, stats.mutates, stats.releases, stats.total_compute_s, stats.constant_bytes,
                                stats.constants_after_first_call);
  return imported;
}

struct CheckmateOptions {
  double seconds_per_cost = 1e-3; // Checkmate profiles in milliseconds
};

ImportedTrace import_checkmate(const std::filesystem::path& file, const CheckmateOptions& options)
{
  // A range is inclusive; zero would make every op free.
  if (!(options.seconds_per_cost > 0))
    throw InputError("--seconds-per-cost", fmt::format("must be positive, found {}", options.seconds_per_cost));
  return {import_checkmate_graph(file, options.seconds_per_cost), ""};
}

struct PytorchEgOptions {
  std::string profile; // "" = none
};

ImportedTrace import_pytorch_eg(const std::filesystem::path& file, const PytorchEgOptions& options)
{
  std::optional<std::filesystem::path> profile;
  if (!options.profile.empty())
    profile = options.profile;
  return {import_pytorch_execution_graph(file, profile), ""};
}

} // namespace

ImporterRegistry& importer_registry()
{
  static ImporterRegistry registry = [] {
    ImporterRegistry importers("importer");
    register_or_abort(importers,
                      importer<NoOptions>("dtr",
                                          "DTR prototype log (JSON lines; simrd's accounting: storages, eager "
                                          "release)",
                                          {}, import_dtr));
    register_or_abort(importers,
                      importer<CheckmateOptions>(
                          "checkmate", "Checkmate training graph (networkx node-link JSON)",
                          {param("seconds_per_cost", &CheckmateOptions::seconds_per_cost,
                                 "seconds per unit of the nodes' cost_cpu (Checkmate's profiled costs: milliseconds)",
                                 {.min = 0})},
                          import_checkmate));
    register_or_abort(importers,
                      importer<PytorchEgOptions>(
                          "pytorch-eg", "PyTorch execution graph (ExecutionGraphObserver, schema 1.0.x)",
                          {param("profile", &PytorchEgOptions::profile,
                                 "Chrome/Kineto trace of the same iteration from torch.profiler: op times (else 0)")},
                          import_pytorch_eg));
    return importers;
  }();
  return registry;
}

} // namespace memsim
