// Plan loader and its checks against the bad-input corpus's good trace (two GPUs), as `memsim simulate` runs them.
#include "fuzz_input.hpp"

#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  static const memsim::Trace trace = memsim::load_trace(memsim::fuzz::fixture("good.trace.json"));
  const auto path = memsim::fuzz::input_file(data, size, ".plan.json");
  memsim::fuzz::expect_located_errors([&] {
    const memsim::Plan plan = memsim::load_plan(path);
    memsim::validate_plan(plan, trace, 2, path.string());
  });
  return 0;
}
