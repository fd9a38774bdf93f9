#pragma once
// The execution core: runs a Plan's semantics -- stream order, deps, what each step allocates, reads, moves and
// releases -- over an abstract "physics" that says how long work takes. The SimGrid engine and the fast engine
// are two physics for the same core, so they share every decision but timing.
//
// Order of events at one instant (the contract both engines follow): first every activity that ends at t
// finishes (releases happen), in step-id order; then every step that is ready starts, smallest step id first;
// steps without work (free, recv, zero-time ops) finish at once and may make more steps ready at t.
#include "memsim/planners/plan.hpp"
#include "memsim/sim/ledger.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace memsim {

// A node of the machine for work placement: a GPU index, or kHostNode for the host CPU / host memory.
inline constexpr int kHostNode = -1;

// What a started step asks the physics to do.
struct Work {
  enum class Kind { compute, transfer } kind = Kind::compute;
  int node = 0;       // compute: where it runs
  double seconds = 0; // compute: its duration when it runs alone
  int from = 0;       // transfer: source node
  int to = 0;         // transfer: destination node
  std::uint64_t bytes = 0;
  double service_s = 0; // paid before the work: a transfer's with the route's latency, a compute's before it runs
};

// Instants closer than this are one instant. SimGrid (the reference) completes together every activity whose
// completion date is within its surf/precision (default 1e-9 s) of the clock; the fast engine groups events the
// same way, so that completions equal in exact arithmetic but a few ulps apart in floating point happen at one
// instant, in step-id order, on both engines.
inline constexpr double kSimultaneous_s = 1e-9;

// How long work takes. start() returns true when the work takes no time at all (the step finishes at once);
// advance() moves time to the next instant at which some started work ends and returns that instant, with the
// steps that ended then (in any order). advance() is called only while work is in flight.
class Physics {
public:
  virtual ~Physics() = default;
  virtual bool start(StepId step, const Work& work) = 0;
  virtual double advance(std::vector<StepId>& finished) = 0;
  virtual bool idle() const = 0;
};

class MemoryPolicy;
struct Machine;

struct ExecutionConfig {
  LedgerConfig memory;                   // capacities are filled by make_execution_config
  std::vector<std::string> device_names; // for messages
  bool record_timeline = true;
  // An online memory policy (memory_policy.hpp) consulted during the run; its actions become steps that get ids
  // after the plan's. One policy object serves one run.
  MemoryPolicy* policy = nullptr;
  const Machine* machine = nullptr; // what a policy may look at (PolicyView::machine)
  // Fill RunResult::realized_plan (feasible runs only).
  bool build_realized_plan = false;
};

// Capacities from the machine's GPUs and the plan's budget (min of both; 0 = the GPU's memory).
using OpTime = std::function<double(const Op& op, int node)>;

// Runs `plan` over `trace` (which already holds the plan's extra ops/tensors). Never throws for an infeasible
// plan: the result carries the error.
RunResult execute_plan(const Trace& trace, const Plan& plan, const ExecutionConfig& config, const OpTime& op_time,
                       Physics& physics);

// The initial-residency rule (DESIGN.md v2, settled in sim/README.md): a tensor of kind input, weight or
// optimizer_state that no op produces exists before the iteration. For every instance that has steps, it is
// resident at t = 0 on every device where a step of that instance reads or names it; one that no step of the
// instance references lives on the lowest-numbered device that runs steps of that instance (it still takes
// memory there). Returns, per device, the (instance, tensor) pairs resident at t = 0, in (instance, tensor) order.
struct ResidentTensor {
  int instance = 0;
  TensorId tensor = 0;
};
// v2: the plan's initial_placement rules adjust this (sim/README.md): `device` keeps the rule above for the tensors
// it matches (of any kind), `host` and `none` take them off the GPUs; tensors of a kind shared_across_instances
// appear once per device, as instance 0.
std::vector<std::vector<ResidentTensor>> initial_residents(const Trace& trace, const Plan& plan,
                                                           std::size_t device_count);
// v2: the (instance, tensor) pairs an initial_placement rule puts on the host at t = 0: one per instance that has
// steps (once for a shared kind), in (instance, tensor) order.
std::vector<ResidentTensor> initial_host_residents(const Trace& trace, const Plan& plan);
// v2 instance_scopes: per instance, 1 when the plan gives it a scope. initial_residents lists a scoped instance's
// tensors (only those its steps reference; shared kinds excepted) like the others; the execution allocates them
// when the scope's first step starts instead of at t = 0.
std::vector<std::uint8_t> scoped_instances(const Plan& plan);
// Per tensor, 1 when its kind is shared_across_instances in this plan (LedgerConfig::shared_tensor).
std::vector<std::uint8_t> shared_tensors(const Trace& trace, const Plan& plan);

std::size_t plan_instance_count(const Plan& plan);

} // namespace memsim
