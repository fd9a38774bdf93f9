#pragma once
// A Plan turned into what memsim-cuda enqueues: one CUDA stream per plan (device, stream), the event
// waits each step needs, and every allocation decided on the host in list order (a valid topological
// order: deps name earlier steps). Built without CUDA so it is unit-tested everywhere.
//
// Memory goes through the execution core the simulators use (memsim/sim/ledger.hpp: the MemoryLedger with the
// pool allocator, DevicePool placement, the initial-residency rule, one FailureKind and one message format), so
// the three backends -- SimGrid engine, fast engine, this program -- agree on what fits and on how a plan fails.
//
// Approximation (see runtime/README.md): the simulator decides memory in simulated time order, this
// program in list order. The byte cap is still enforced physically on the GPU: an allocation counts every
// released block whose release is not ordered before it (through deps, stream order or vector clocks) as
// still in use, and waits on release events until the request fits. So the GPU never holds more than
// the budget, OOM happens exactly when the list-order bytes in use plus the request exceed the budget,
// and the extra waits (memory_waits) are where list order cost time the simulator would not see. When list
// order is the simulated order (e.g. a plan on one stream), feasibility, the failure and the peak are the
// simulator's.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/ledger.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memsim::runtime {

struct StreamKey {
  int device = 0;
  std::string name;
};

// host_busy (v2 host compute, device -1): a busy loop on a host thread for kernel_time_s, ordered by the step's
// stream and event waits.
enum class WorkKind { none, kernel, copy_h2d, copy_d2h, host_busy };

struct ProgramStep {
  StepId step = 0; // the plan step (program steps are plan steps 0..n-1 in list order)
  StepKind kind = StepKind::compute;
  std::size_t stream = 0;       // index into Program::streams
  std::vector<StepId> waits;    // steps whose end event this step's stream waits on (deps + memory), minimal
  std::size_t memory_waits = 0; // how many of `waits` exist only to order memory reuse or the byte cap
  WorkKind work = WorkKind::none;
  std::optional<OpId> op;
  std::optional<TensorId> tensor;
  int instance = 0;
  int iteration = 0;               // the plan step's iteration (v2)
  int loop = 0;                    // the plan step's loop (v2)
  double kernel_time_s = 0;        // kernel: the trace's time for the op; host_busy: the simulator's host time
  std::optional<double> flops;     // kernel: the op's flops (gemm kernels)
  std::uint64_t device_offset = 0; // copies: where the tensor lives in the arena
  std::size_t host_buffer = 0;     // copies: index into Program::host_buffers
  std::uint64_t copy_bytes = 0;
  std::uint64_t record_bytes = 0;       // StepRecord::bytes: transferred, or allocated outputs of a compute
  std::string label;                    // op or tensor name
  std::vector<std::size_t> allocations; // Program::allocations made at this step's start
  std::vector<std::size_t> releases;    // Program::allocations released at this step's end
};

struct Allocation {
  std::optional<TensorId> tensor; // none: an op's workspace
  int instance = 0;
  std::uint64_t bytes = 0; // exact (accounting); the arena block is rounded up to the pool alignment
  std::uint64_t offset = 0;
  StepId allocated_by = -1; // -1: initially resident
  std::optional<StepId> released_by;
};

struct HostBuffer {
  TensorId tensor = 0;
  int instance = 0;
  std::uint64_t bytes = 0;
};

// Why the plan cannot run past `step` (infeasible result): the core's kinds and message (without a time; the
// measured time is added when the timeline is assembled).
struct ProgramFailure {
  FailureKind kind = FailureKind::out_of_memory;
  StepId step = -1; // -1: the initially resident tensors do not fit
  std::optional<TensorId> tensor;
  std::uint64_t bytes_in_use = 0;
  std::uint64_t bytes_requested = 0;
  std::uint64_t largest_free_block = 0;
  std::vector<StepId> after_steps;          // steps it would have waited for (its time is the end of the last)
  FailureText text;                         // failure_message's parts
  std::string what;                         // failure_message(kind, text): the message before the run
  std::string message(double time_s) const; // the message at the measured time
};

struct PoolConfig {
  std::uint64_t budget_bytes = 0; // the cap on exact bytes in use (already resolved: never 0)
  std::uint64_t arena_bytes = 0;  // bytes the arena really has (>= budget absorbs alignment/fragmentation; == budget
                                  // is the simulators' `--allocator pool`)
  std::uint64_t alignment = 256;
};

struct Program {
  int device = 0; // the plan's GPU (all GPU steps use one; host steps have device -1)
  std::vector<StreamKey> streams;
  std::vector<ProgramStep> steps;
  std::vector<Allocation> allocations;
  std::vector<std::size_t> initial_allocations; // allocations[i] resident before step 0
  std::vector<HostBuffer> host_buffers;
  std::vector<std::size_t> initial_host_buffers; // host_buffers[i] holding a tensor placed on the host at t = 0 (v2)
  std::optional<ProgramFailure> failure;
  PoolConfig pool;
  std::uint64_t peak_bytes = 0;     // list-order peak of exact bytes in use
  std::size_t dependency_waits = 0; // event waits from deps (after removing implied ones)
  std::size_t memory_waits = 0;     // event waits added for memory reuse / the cap
  std::size_t plan_step_count = 0;
};

// Plans memsim-cuda can execute: every GPU step on one device (host steps, device -1, beside it), no send/recv,
// collectives only over a group of that one GPU, deps on earlier steps only. Throws InputError naming the step
// ("source: at /steps/N/kind") otherwise.
void check_runtime_supports(const Plan& plan, const std::string& source_name);
// The plan's GPU: the device of its first step that is not a host step (0 if none).
int program_device(const Plan& plan);

// `trace` must already include the plan's extra ops/tensors (trace_with_extras). `machine` gives host compute its
// time (CostModel::host_op_time, as the simulator); without it, an op's cpu_time_s or else its time_s.
Program build_program(const Plan& plan, const Trace& trace, const PoolConfig& pool, const Machine& machine);
Program build_program(const Plan& plan, const Trace& trace, const PoolConfig& pool);

// One line per stream and totals, for --dry-run and logs.
std::string describe_program(const Program& program);

} // namespace memsim::runtime
