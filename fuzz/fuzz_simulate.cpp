// Load then simulate on the fast engine: input "PLAN" (against the bad-input corpus's good trace) or
// "TRACE\f\nPLAN", on the corpus's two-GPU machine, as `memsim simulate --engine fast` runs it.
#include "fuzz_input.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/traces/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace memsim;
  static const Machine machine = load_machine(fuzz::fixture("good.machine.yaml"));
  const auto [first, second] = fuzz::split_documents(data, size);
  const bool has_trace = !second.empty();
  const std::string_view plan_text = has_trace ? second : first;
  const auto plan_path =
      fuzz::input_file(reinterpret_cast<const std::uint8_t*>(plan_text.data()), plan_text.size(), ".plan.json");
  const auto trace_path =
      has_trace ? fuzz::input_file(reinterpret_cast<const std::uint8_t*>(first.data()), first.size(), ".trace.json")
                : fuzz::fixture("good.trace.json");
  fuzz::expect_located_errors([&] {
    const Trace trace = load_trace(trace_path);
    const Plan plan = load_plan(plan_path);
    validate_plan(plan, trace, static_cast<int>(machine.gpus.size()), plan_path.string());
    SimOptions options;
    options.engine = EngineKind::fast;
    simulate(trace, machine, plan, options);
  });
  return 0;
}
