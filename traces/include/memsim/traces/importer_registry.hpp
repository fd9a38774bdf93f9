#pragma once
// Importers of other tools' traces (`memsim import FORMAT FILE -o OUT`) in the component registry.
#include "memsim/common/registry.hpp"
#include "memsim/traces/trace.hpp"

#include <filesystem>
#include <functional>
#include <string>

namespace memsim {

struct ImportedTrace {
  Trace trace;
  std::string report; // what the importer counted in the source, for the user ("" when nothing)
};

using ImportFunction = std::function<ImportedTrace(const std::filesystem::path& file, const ParamValues&)>;
using ImporterInfo = Component<ImportFunction>;
using ImporterRegistry = Registry<ImporterInfo>;

// Holds dtr, checkmate and pytorch-eg (registered in importer_registry.cpp).
ImporterRegistry& importer_registry();

} // namespace memsim
