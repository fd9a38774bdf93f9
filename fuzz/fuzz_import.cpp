// One importer (MEMSIM_FUZZ_IMPORTER: dtr, checkmate, pytorch-eg) with default parameters, as `memsim import` runs
// it; what it writes must load again (an importer may not write a trace memsim refuses). For pytorch-eg, input
// "GRAPH\f\nPROFILE" also passes a profiler trace.
#include "fuzz_input.hpp"

#include "memsim/traces/importer_registry.hpp"

#include <nlohmann/json.hpp>

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace memsim;
  const ImporterRegistry& registry = importer_registry();
  const ImporterInfo& importer = registry.get(MEMSIM_FUZZ_IMPORTER);
  const auto [document, second] = fuzz::split_documents(data, size);
  const auto path =
      fuzz::input_file(reinterpret_cast<const std::uint8_t*>(document.data()), document.size(), ".import", "source");
  nlohmann::json params = nlohmann::json::object();
  if (!second.empty() && importer.name == "pytorch-eg")
    params["profile"] =
        fuzz::input_file(reinterpret_cast<const std::uint8_t*>(second.data()), second.size(), ".json", "profile")
            .string();
  std::optional<ImportedTrace> imported;
  fuzz::expect_located_errors([&] { imported = importer.make(path, registry.complete_params(importer, params)); });
  if (!imported)
    return 0;
  const auto written =
      std::filesystem::temp_directory_path() / ("memsim-fuzz-" + std::to_string(::getpid()) + "-imported.trace.json");
  save_trace(imported->trace, written);
  try {
    load_trace(written);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memsim-fuzz: the imported trace does not load: %s\n", error.what());
    std::abort();
  }
  return 0;
}
