#pragma once
// Harmony's runtime estimator (Li et al., PVLDB 2022; msr-fiddle/harmony 3_scheduler/simulator.py), reimplemented:
// compose the task graph of a configuration <U_F, P_F, U_B, P_B> in wrap-around pipeline (pp) or data-parallel (dp)
// mode, expand every task into events on per-rank streams, and run them in an event-driven simulation with
// Harmony's duration rules: swap bandwidth statically shared (bw_swap / N), p2p uncontended at bw_p2p, host messages
// at bw_msg / N (half duplex), time_del per FWD/BWD task, prefetch off. dp simulates rank 0 only, as Harmony does.
#include "memsim/traces/layer_profile.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace memsim::harmony {

enum class Mode { pp, dp };

struct LayerPack {
  std::size_t first = 0;
  std::size_t last = 0; // inclusive
  friend bool operator==(const LayerPack&, const LayerPack&) = default;
};

// P_B covers layers 0..R-1; its last pack holds the loss and runs its forward inside the backward task. P_F covers
// layers 0..first(P_B.back())-1, and is empty exactly when P_B has one pack.
struct Configuration {
  int u_forward = 1;
  int u_backward = 1;
  std::vector<LayerPack> packs_forward;
  std::vector<LayerPack> packs_backward;
};

// Defaults of Harmony's sched_args.py.
struct EstimatorSettings {
  double bw_swap = 11.5 * 1024 * 1024 * 1024; // bytes/s per direction host<->GPU, shared by the N GPUs
  double bw_p2p = 8.2 * 1024 * 1024 * 1024;   // bytes/s GPU<->GPU
  double bw_msg = 16.0 * 1024 * 1024 * 1024;  // bytes/s host memory copies between rank processes
  double time_del = 0.040;                    // seconds per FWD/BWD task (freeing its tensors)
};

struct EstimatedEvent {
  int task = 0;       // index in the global task order
  int microbatch = 0; // index in the task's group (0 for per-task events)
  int subpack = 0;    // forward sub-pack split at stashed layers
  int rank = 0;
  std::string stream; // SwapIn, SwapOut, P2PIn, P2POut, Compute, CPU
  std::string kind;   // WB, X, sX, FWD, Y, MSGsX, MSGY, REC, BWD, dY, dX, ARD, dWB, DEL, Update
  double begin_s = 0;
  double end_s = 0;
};

struct Estimate {
  double iteration_s = 0; // the last end time over all simulated ranks and streams
  std::vector<double> rank_end_s;
  std::vector<double> rank_compute_s; // FWD, REC and BWD time
  // Harmony's per-task GPU memory estimate (CofTask), the largest task per rank; reported, not enforced.
  std::vector<double> rank_memory_bytes;
  std::vector<EstimatedEvent> events; // in execution order
};

// Throws InputError for a configuration that does not fit the profile (packs, microbatch sizes outside the
// sampled ranges, a minibatch smaller than a microbatch) and Infeasible when the event graph deadlocks.
Estimate estimate(const LayerProfile& profile, int gpus, int minibatch, Mode mode, const Configuration& configuration,
                  const EstimatorSettings& settings = {});

// "0-9,10-19" -> packs; errors name `option`.
std::vector<LayerPack> parse_packs(const std::string& text, const std::string& option);
std::string format_packs(const std::vector<LayerPack>& packs);

} // namespace memsim::harmony
