#pragma once
// Random but valid simulation inputs for the differential tests, seeded deterministically: small training traces,
// machines of 1-4 GPUs (direct PCIe, shared PCIe switches, NVLink, split and shared duplex, latencies) and DAG plans
// over them that use every step kind on several streams. Sizes and times come from small grids so that
// completions often coincide exactly (the cases where engines must break ties the same way). Some plans are
// feasible, some fail (out of memory, fragmentation, host memory, non-resident reads, double allocation, missing
// host copies, deadlock). With PlanShape::v2 they also use the v2 plan additions.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <random>
#include <string>

namespace memsim::test {

struct RandomCase {
  std::uint64_t seed = 0;
  Trace trace;
  Machine machine;
  Plan plan;
  std::string notes; // what the generator did on purpose (injected faults), for failure messages
};

Trace random_trace(std::mt19937_64& rng);
Machine random_machine(std::mt19937_64& rng);
// `single_device`: every step on gpu0, no send/recv (what memsim-cuda runs); `single_stream` also puts every step
// on one stream.
struct PlanShape {
  bool single_device = false;
  bool single_stream = false;
  // v2 additions: split/merge views, host compute, ring collectives, initial_placement, shared weights and
  // gradients, several iterations (both differential tests use them; single_device plans get no collectives).
  bool v2 = false;
  // instance_scopes: half the cases get one scope per instance, from its first to its last step (memsim-cuda refuses
  // scopes, so only the simulator's differential test asks for them).
  bool scopes = false;
};
Plan random_plan(const Trace& trace, const Machine& machine, std::mt19937_64& rng, const PlanShape& shape,
                 std::string& notes);

RandomCase random_case(std::uint64_t seed, const PlanShape& shape = {});

} // namespace memsim::test
