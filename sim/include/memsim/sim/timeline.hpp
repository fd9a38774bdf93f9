#pragma once
// The timeline and metrics both executors (SimGrid simulator, CUDA runtime) produce, so runs compare.
#include "memsim/planners/plan.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace memsim {

struct StepRecord {
  StepId step = 0;
  StepKind kind = StepKind::compute;
  int device = 0;
  std::string stream;
  double start_s = 0;
  double end_s = 0;
  std::uint64_t bytes = 0; // bytes moved (transfers) or allocated (compute outputs)
  std::string label;       // op or tensor name
  int iteration = 0;       // the step's iteration (v2)
  int loop = 0;            // the step's training loop (v2; sim/README.md "Iterations")
};

// A memory sample per device: bytes in use from time_s on.
struct MemorySample {
  int device = 0;
  double time_s = 0;
  std::uint64_t bytes = 0;
};

// Why a plan cannot run: one list for every executor (simulators and memsim-cuda).
enum class FailureKind {
  out_of_memory,
  fragmentation,
  host_out_of_memory,
  not_resident,
  double_allocation,
  no_host_copy,
  deadlock
};
std::string_view to_string(FailureKind kind);

struct ExecutionError {
  StepId step = -1;
  std::optional<TensorId> tensor;
  double time_s = 0;
  std::uint64_t bytes_in_use = 0;
  std::uint64_t bytes_requested = 0;
  std::string message; // full sentence naming step, tensor, time and bytes
  FailureKind kind = FailureKind::out_of_memory;
  int device = 0;                       // where it happened (-1: the host)
  std::uint64_t largest_free_block = 0; // --allocator pool: the largest contiguous free block at the failure
};

// Counts an online policy keeps of its own decisions (zero without a policy, and when a realized plan is replayed):
// fetches a step had to wait for that the policy had not predicted, and iterations with at least one of them; for
// `uvm`, its page faults: fault batches serviced, the bytes the faulting reads missed and the bytes the (prefetch-
// widened) faults migrated (their ratio is UVM's amplification, spec uvm_amplification).
struct PolicyCounters {
  std::uint64_t on_demand_fetches = 0;
  std::uint64_t on_demand_bytes = 0;
  std::uint64_t mispredicted_iterations = 0;
  std::uint64_t fault_batches = 0;
  std::uint64_t fault_missing_bytes = 0;
  std::uint64_t fault_migrated_bytes = 0;
  bool operator==(const PolicyCounters&) const = default;
};

struct Metrics {
  bool feasible = true;
  double iteration_time_s = 0;
  double compute_busy_s = 0; // compute + recompute time on compute streams
  double stall_time_s = 0;   // compute-stream idle time waiting for data, until its last step
  double recompute_time_s = 0;
  std::uint64_t peak_device_bytes = 0; // max over devices
  std::uint64_t peak_host_bytes = 0;
  std::uint64_t h2d_bytes = 0;
  std::uint64_t d2h_bytes = 0;
  std::uint64_t p2p_bytes = 0;
  std::size_t steps_executed = 0;
  // v2 iterations: iteration i ends when its last step ends (never before iteration i-1 ends); its time is that end
  // minus the previous iteration's end (iteration 0: minus 0), so the times add up to the end of the last iteration.
  // steady_iteration_time_s is their mean over iterations >= 1, or iteration 0's time when there is only one.
  // Steps of several loops (independent trainings run one after another): each loop's iterations are timed so from
  // the end of the loop before it; iteration_times_s[i] sums the loops' iteration i and steady_iteration_time_s is
  // the sum of the loops' steady times.
  std::vector<double> iteration_times_s;
  double steady_iteration_time_s = 0;
  // Capacity and throughput figures (sim/README.md "Metrics").
  // Samples per second over steady_iteration_time_s: the plan's samples_per_iteration, else the trace's samples
  // (trace_samples_per_iteration: batch x fused models) x the plan's instances; absent when the trace names no batch
  // (and the plan no count) or no time passed.
  std::optional<double> samples_per_s;
  // Host-link utilization per direction: the time during which at least one host-to-GPU (prefetch) or GPU-to-host
  // (offload) copy is in flight, per GPU, over iteration_time_s, averaged over the GPUs that run steps. In [0, 1].
  double pcie_h2d_utilization = 0;
  double pcie_d2h_utilization = 0;
  // Bytes swapped out and back in: a prefetch to a GPU of a tensor that a free dropped there while the host held its
  // copy (each such round trip counts once; a final free of a dead tensor, or one recomputed instead, does not).
  std::uint64_t swapped_bytes = 0;
  // Bytes the recompute steps allocated (their outputs; workspace not counted; on the host too).
  std::uint64_t recomputed_bytes = 0;
  // μ-TWO's breakdown (Fig. 9b/9c): recompute time over GPU compute-busy time, and the part of the compute-busy
  // time during which a host copy of the same GPU is in flight (per GPU, the union of its prefetch and offload
  // intervals intersected with the union of its compute intervals, summed over GPUs) over compute-busy time.
  // Both 0 when nothing computed on a GPU.
  double recompute_fraction = 0;
  double swap_overlap_fraction = 0;
  PolicyCounters policy; // what the run's memory policy counted (MemoryPolicy::counters)
};

struct RunResult {
  Metrics metrics;
  std::optional<ExecutionError> error;
  std::vector<StepRecord> timeline; // in step-id order (steps not reached are absent)
  std::vector<MemorySample> memory;
  // What actually ran as a static plan, policy actions included (asked for and the run feasible): replayed without
  // a policy it gives the same timeline.
  std::optional<Plan> realized_plan;
};

// Metrics derived from a timeline (shared by both executors so they compute them identically).
Metrics metrics_from_timeline(const std::vector<StepRecord>& timeline, const std::vector<MemorySample>& memory);

// The same metrics from steps fed one at a time in step-id order, for executors that keep no StepRecords.
// `stream` identifies (device, stream name) for the stall totals; `stream_name` must outlive finish().
class MetricsAccumulator {
public:
  void add(StepKind kind, int device, const std::string& stream_name, double start_s, double end_s, std::uint64_t bytes,
           int iteration = 0, int loop = 0);
  // Stall totals are summed in (device, stream name) order, as metrics_from_timeline does.
  Metrics finish(const std::vector<MemorySample>& memory);

private:
  struct StreamTotals {
    int device = 0;
    const std::string* name = nullptr;
    double busy = 0;
    double last_compute_end = 0;
  };
  StreamTotals& totals(int device, const std::string& name);

  Metrics metrics_;
  std::vector<StreamTotals> streams_;               // compute streams, in first-seen order
  std::size_t last_ = 0;                            // the stream of the previous compute step (most steps repeat it)
  std::vector<std::vector<double>> iteration_ends_; // per loop, the latest end of a step of each iteration
  // Per GPU, the [start, end) intervals of its host copies, per direction (0: h2d, 1: d2h), for the utilization.
  std::map<int, std::array<std::vector<std::pair<double, double>>, 2>> host_copies_;
  std::map<int, std::vector<std::pair<double, double>>> compute_intervals_; // per GPU, for swap_overlap_fraction
  std::set<int> gpus_;                                                      // GPUs that ran steps
};

// The `--json` object of `memsim simulate` (DESIGN appendix).
nlohmann::json metrics_to_json(const RunResult& result);
// Full timeline document (metrics + per-step records, read back by `memsim validate`) that is also a
// Chrome/Perfetto trace-event file: `traceEvents` holds to_perfetto's events.
nlohmann::json timeline_to_json(const RunResult& result, const std::string& process_name = "memsim");
RunResult timeline_from_json(const nlohmann::json& document, const std::string& source_name);
// Chrome/Perfetto trace-event JSON: one track per device x stream and a memory counter per device.
nlohmann::json to_perfetto(const RunResult& result, const std::string& process_name);

} // namespace memsim
