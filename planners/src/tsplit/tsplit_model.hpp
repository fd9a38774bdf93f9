#pragma once
// TSPLIT's planning state and analytic cost model (docs: ../shared/specs/tsplit.md §3.3 and §4; Nie et al., ICDE
// 2022, Eq. 2-6): the memory option of every tensor, the memory M_i of every op under those options (the default
// schedule's profile from TraceAnalysis plus interval changes), the PCIe occupancy simulation per direction, and
// the ΔM / ΔT of the candidates Alg. 2 compares.
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memsim::tsplit {

struct Options {
  bool split = true;              // false: "TSPLIT w/o Split"
  std::string dims = "batch";     // split dimensions the planner may use (tsplit_dims.hpp)
  int max_split = 32;             // most micro-tensors per split
  bool split_workspace = true;    // a split op's workspace shrinks with its micro-ops (§11-A8)
  bool split_dead_inputs = false; // split inputs dead after the op too (their parts are just freed, §11-A4)
  bool swap_gradients = false;    // gradients are non-split swap/recompute candidates too
  bool recompute = true;          // recomputation is an option (false: swap only)
  // After a recomputed tensor's first regeneration, its later readers (§5): "memory" frees it after each reader and
  // regenerates it for the next one; "speed" keeps it to its last reader; "lru" keeps it across a gap while the
  // planner's memory account leaves room there and regenerates it otherwise.
  std::string recompute_mode = "memory";
  // analytic: candidates scored by Eq. 2-6; simulated: the analytic model's top ones re-scored by running the plan
  // so far with each on the fast engine (tsplit_simulated.hpp; not in the paper).
  std::string cost = "analytic";
};

// Ops (after, until) exclusive without a recomputed tensor; it is regenerated just before `until`.
struct Gap {
  OpId after = -1;
  OpId until = -1;
};

// What happens to a tensor between two of its reads. `drop`: a split input dead after its split op.
enum class Move { reside, swap, recompute, drop };

struct TensorConfig {
  Move move = Move::reside;
  OpId gap_start = -1;   // absent from the op after this one (its last read before the gap, or its split op) ...
  OpId gap_end = -1;     // ... until this op reads it again (-1 for drop)
  OpId trigger = -1;     // swap: the prefetch is issued before this op and counts from it
  OpId needed_at = -1;   // the bottleneck op the decision was made for
  int parts = 1;         // > 1: split at gap_start, its parts leave one by one
  std::vector<Gap> gaps; // recompute: (gap_start, gap_end) first, then the later gaps recompute_mode drops it over
};

// An op run as `parts` micro-ops; `inputs` are its inputs freed part by part (their configs say how).
struct SplitDecision {
  int parts = 1;
  std::string dim = "batch";
  std::int64_t extent = 0; // rows along dim (0: unknown, equal byte shares)
  int halo = 0;            // micro-op u reads input parts u-halo..u+halo: part u is freed after micro-op u+halo
  std::vector<TensorId> inputs;
};

struct Candidate {
  bool split = false;
  Move move = Move::reside;
  TensorId tensor = -1; // non-split
  OpId producer = -1;
  int parts = 1;                // split
  std::string dim;              // split: along this dimension ...
  std::int64_t extent = 0;      // ... of this many rows
  int halo = 0;                 // ... reading this many neighbour parts on each side (SplitDecision::halo)
  std::vector<TensorId> inputs; // split: the inputs freed part by part
  std::vector<Move> moves;      // split: per input
  std::uint64_t saved = 0;      // ΔM at the bottleneck op
  double cost_s = 0;            // ΔT
  double ratio() const { return cost_s / static_cast<double>(saved); }
};

// Bytes of micro-tensor u (0-based) of `bytes` split in `parts` along an extent `extent` (0: unknown): parts
// 0..K-1 get ceil(E/p) rows and the rest floor(E/p) (K = E mod p); with E unknown, equal parts with the remainder
// on part 0. The parts add up to `bytes`.
std::uint64_t part_bytes(std::uint64_t bytes, int parts, int u, std::int64_t extent);

// a beats b by ΔT/ΔM (cost_s/saved) with the spec's ties (§4 item 4): the larger ΔM, then for non-split the earlier
// producer. The best of a list is the first one nothing later beats: on a full tie the first listed (non-split: the
// lower tensor id, swap before recompute; split: the earlier dim, swap before recompute, fewer parts).
bool better_non_split(const Candidate& a, const Candidate& b);
bool better_split(const Candidate& a, const Candidate& b);
using CandidateOrder = bool (*)(const Candidate& a, const Candidate& b);
std::optional<Candidate> best_of(const std::vector<Candidate>& candidates, CandidateOrder better);
// Alg. 2 line 15: ratio1 <= ratio2 keeps the tensor whole.
std::optional<Candidate> prefer_whole_or_split(const std::optional<Candidate>& keep_whole,
                                               const std::optional<Candidate>& split);

class Model {
public:
  Model(const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget, const Options& options);

  // Recomputes M, the occupancy and the windows after a decision.
  void evaluate();
  std::uint64_t memory(OpId op) const { return memory_[static_cast<std::size_t>(op)]; }

  // Alg. 2's steps 1 and 2 at bottleneck `op`: every candidate with ΔM > 0, in the order the ties keep, and the best
  // of them by the analytic ΔT/ΔM (best_of with better_non_split / better_split).
  std::vector<Candidate> non_split_candidates(OpId op) const;
  std::vector<Candidate> split_candidates(OpId op) const;
  std::optional<Candidate> best_non_split(OpId op) const;
  std::optional<Candidate> best_split(OpId op) const;
  void apply(const Candidate& candidate, OpId op);

  // Seconds to move `bytes` between gpu0 and the host in `transfers` copies (route bandwidth and latency).
  double transfer_time(std::uint64_t bytes, int transfers) const;

  const TensorConfig& config(TensorId tensor) const { return configs_[static_cast<std::size_t>(tensor)]; }
  const SplitDecision& split_of(OpId op) const { return splits_[static_cast<std::size_t>(op)]; }
  // Extra reads (recomputations read their producer's inputs at the consumer) included, sorted.
  const std::vector<OpId>& reads(TensorId tensor) const { return reads_[static_cast<std::size_t>(tensor)]; }
  double op_time(OpId op) const { return op_time_[static_cast<std::size_t>(op)]; }
  double micro_op_time(OpId op, int parts) const;
  std::optional<OpId> last_read_before(TensorId tensor, OpId op) const;
  std::optional<OpId> next_read_after(TensorId tensor, OpId op) const;

private:
  double free_d2h(OpId first, OpId last) const; // Σ (1 - Oc_d2h) T over ops [first, last]
  double free_h2d(OpId first, OpId last) const;
  OpId trigger_for(OpId op, OpId next_read) const;
  bool resident_at(TensorId tensor, OpId op) const;
  bool recomputable(TensorId tensor, OpId read_at) const;
  double swap_cost(TensorId tensor, OpId op, OpId trigger) const;
  double recompute_cost(TensorId tensor) const; // one regeneration
  // The gaps a tensor recomputed for the read at `first_read` is absent over, per recompute_mode.
  std::vector<Gap> recompute_gaps(TensorId tensor, OpId gap_start, OpId first_read) const;
  void price_split(Candidate& candidate, OpId op) const; // fills saved and cost_s
  std::uint64_t split_saving(OpId op, const SplitDecision& split) const;
  double split_swap_stall(OpId op, const SplitDecision& split, const std::vector<TensorId>& swapped) const;
  int most_parts(std::int64_t extent) const;
  void consider_split(std::vector<Candidate>& found, const Candidate& candidate) const;

  const TraceAnalysis* analysis_;
  const Trace* trace_;
  Options options_;
  std::uint64_t budget_;
  CostModel cost_;
  double bandwidth_ = 0; // bytes/s of gpu0's route to the host
  double latency_ = 0;
  std::int64_t extent_ = 0;       // the batch
  std::vector<std::string> dims_; // options.dims, parsed
  bool splits_declared_ = false;  // the trace lists split dimensions (else they come from the op type)
  std::vector<double> op_time_;
  std::vector<TensorConfig> configs_;
  std::vector<SplitDecision> splits_;
  std::vector<std::vector<OpId>> reads_;
  std::vector<TensorId> candidates_; // tensors Step 1 may swap or recompute
  // Derived by evaluate().
  std::vector<std::uint64_t> memory_;
  std::vector<OpId> last_over_;      // per op: the latest op at or before it whose M exceeds the budget (-1: none)
  std::vector<double> free_d2h_sum_; // prefix sums of (1 - Oc) T
  std::vector<double> free_h2d_sum_;
  std::vector<double> occupancy_d2h_;
  std::vector<double> occupancy_h2d_;
};

} // namespace memsim::tsplit
