#pragma once
// Trace generators (`memsim gen KIND`, experiments' `generate: {kind: KIND, ...}`) in the component registry. Their
// parameters are the fields of the generator's spec struct (CnnSpec, TransformerSpec); the caller supplies the
// roofline of its GPU for the dtype the parameters ask for.
#include "memsim/common/registry.hpp"
#include "memsim/traces/generators.hpp"

#include <functional>
#include <string>

namespace memsim {

using RooflineFor = std::function<Roofline(const std::string& dtype)>;
using GenerateFunction = std::function<Trace(const ParamValues&, const RooflineFor&)>;
using GeneratorInfo = Component<GenerateFunction>;
using GeneratorRegistry = Registry<GeneratorInfo>;

// Holds cnn and transformer (registered in generator_registry.cpp).
GeneratorRegistry& generator_registry();

} // namespace memsim
