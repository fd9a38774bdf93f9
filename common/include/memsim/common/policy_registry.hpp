#pragma once
// Memory policies: online memory managers the simulator consults while it runs (lru-swap, DTR, UVM, ...). The
// MemoryPolicy interface belongs to sim/; here is only its registry, so that `memsim policies` and the experiment
// loader can list and check them. A policy registers next to its code with
//   MEMSIM_REGISTER_POLICY(lru_swap, "lru-swap", "evict the least recently used tensor to the host",
//                          {param("watermark", &LruSwapOptions::watermark, "...", {.min = 0, .max = 1})},
//                          [](const LruSwapOptions& options) { return std::make_unique<LruSwap>(options); });
#include "memsim/common/registry.hpp"

#include <functional>
#include <initializer_list>
#include <memory>

namespace memsim {

class MemoryPolicy; // sim/

using PolicyFactory = std::function<std::unique_ptr<MemoryPolicy>(const ParamValues&)>;
using PolicyInfo = Component<PolicyFactory>;
using PolicyRegistry = Registry<PolicyInfo>;

PolicyRegistry& policy_registry();

// `make` takes the policy's typed options and returns a std::unique_ptr to a MemoryPolicy (or a class derived from
// it); MemoryPolicy must be complete where this is called.
template <class Options, class Make>
PolicyInfo policy(std::string name, std::string description, ParamList<Options> params, Make make)
{
  std::vector<ParamSpec> specs = params.specs();
  return PolicyInfo{std::move(name), std::move(description), std::move(specs),
                    [params = std::move(params), make = std::move(make)](const ParamValues& values) {
                      return std::unique_ptr<MemoryPolicy>(make(params.bind(values)));
                    }};
}
// The parameters as a braced list of param(...) declarations: Options is deduced from them.
template <class Options, class Make>
PolicyInfo policy(std::string name, std::string description, std::initializer_list<BoundParam<Options>> params,
                  Make make)
{
  return policy(std::move(name), std::move(description), ParamList<Options>(params), std::move(make));
}
// A policy without parameters: `make` takes no arguments.
template <class Make>
PolicyInfo policy(std::string name, std::string description, Make make)
{
  return policy(std::move(name), std::move(description), ParamList<NoOptions>{},
                [make = std::move(make)](const NoOptions&) { return make(); });
}

} // namespace memsim

// The library holding the registrations must be linked whole (see memsim_planners_all in planners/CMakeLists.txt),
// or the linker drops them.
#define MEMSIM_REGISTER_POLICY(ident, ...)                                                                             \
  [[maybe_unused]] static const bool memsim_policy_registered_##ident =                                                \
      ::memsim::register_or_abort(::memsim::policy_registry(), ::memsim::policy(__VA_ARGS__))
