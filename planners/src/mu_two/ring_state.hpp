#pragma once
// μ-TWO's ring search state (ring_schedule.hpp), kept in a file so that a search killed after hours (ResNet-101's ring
// near its largest N) resumes where it stopped. The state at the start of a round fixes every later round (the
// scheduler's layouts and rings are caches of it), so a resumed search makes the same decisions and the same plan.
#include "ring_schedule.hpp"

#include "../swap_recompute_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim::planning::mu_two {

// An entry of the unrolled sequence named relative to a swapped tensor's iteration.
struct PromptRef {
  int sub_array = 0;
  OpId op = 0; // in that sub-array's graph
  bool recompute = false;
  int copy_delta = 0;
};

struct SwapChoice {
  int sub_array = 0;
  TensorId tensor = 0;
  std::optional<PromptRef> prompt; // none: right before its first backward use
};

// Everything the search has decided before round `round`.
struct RingState {
  std::size_t round = 0;
  std::vector<std::vector<bool>> dropped;           // per sub-array, per op: recomputed in the backward
  std::vector<std::vector<bool>> swapped, rejected; // per sub-array, per tensor
  std::vector<SwapChoice> swaps;
  Placement placement;
  std::optional<PromptRef> last_prompt;
  bool reached_peak = false;
  std::vector<RingDecision> decisions;
  std::uint64_t swapped_bytes = 0, recomputed_bytes = 0;
  std::size_t multiplexed_ops = 0;
};

// 16 hex digits naming what the search reads: the options, the sub-arrays' graphs (ops' phases, inputs, outputs and
// workspaces; tensors' bytes and kinds), their ops' times on the GPU and the host links.
std::string ring_fingerprint(const std::vector<const Trace*>& graphs, const std::vector<GraphStats>& stats,
                             const HostLink& d2h, const HostLink& h2d, const RingOptions& options);

// The state's file in `folder`: "mu-two-<label>-<fingerprint>.json" (the label's spaces as '-').
std::filesystem::path ring_state_file(const std::filesystem::path& folder, const std::string& label,
                                      const std::string& fingerprint);

// Writes the state whole or not at all (the process may be killed while it writes).
void save_ring_state(const std::filesystem::path& file, const std::string& fingerprint, const RingState& state);

// The state in `file`, nullopt when there is none. Throws InputError naming the file when it is not a state of these
// graphs (`graphs` gives each sub-array's op and tensor counts).
std::optional<RingState> load_ring_state(const std::filesystem::path& file, const std::string& fingerprint,
                                         const std::vector<const Trace*>& graphs);

} // namespace memsim::planning::mu_two
