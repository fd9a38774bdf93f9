#pragma once
// Execution blocks of DyNN-Offload (Ren et al., HPCA 2024; spec dynn-offload.md §1.4, §1.7, §2.6): one iteration's
// op sequence cut into contiguous blocks. GPU memory is two equal buffers of C = budget / 2 bytes: the running
// block's working set and the next block's, which migrates (evict, then prefetch, serially on the host link) while
// the running block computes. Block j starts when block j - 1 has finished and its own migration has ended.
//
// The problem is stated on local tensor indices so that the partitioners can be tested on hand-made sequences;
// dynn_block.cpp builds it from a trace.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace memsim::dynn {

struct BlockOp {
  double time_s = 0;
  std::uint64_t workspace_bytes = 0;
  std::vector<std::uint32_t> tensors;  // every tensor the op reads or writes, each once
  std::vector<std::uint32_t> produced; // its outputs (allocated on the device when it runs)
  std::vector<std::uint32_t> updated;  // read and written in place (an optimizer step's weight and moments)
};

struct BlockProblem {
  std::vector<BlockOp> ops;
  std::vector<std::uint64_t> bytes;       // per tensor
  std::vector<std::uint8_t> needed_after; // per tensor: used after this sequence (by a later iteration)
  std::uint64_t capacity = 0;             // bytes per buffer: budget / 2
  double h2d_bytes_per_s = 0;
  double d2h_bytes_per_s = 0;
  double latency_s = 0; // paid by every transfer (each tensor is one copy)
};

// Exclusive end of each block, increasing; the last is ops.size().
using Partition = std::vector<std::size_t>;

// Ops of a problem indexed once: who accesses and writes each tensor, and the longest feasible block from each op.
class BlockIndex {
public:
  explicit BlockIndex(const BlockProblem& problem);
  const BlockProblem& problem() const { return *problem_; }
  std::size_t op_count() const { return problem_->ops.size(); }
  // Working-set bytes plus the largest workspace of ops [begin, end).
  std::uint64_t block_bytes(std::size_t begin, std::size_t end) const;
  // The largest `end` such that [begin, end) fits in the capacity; begin when even one op does not fit.
  std::size_t longest_end(std::size_t begin) const { return longest_end_[begin]; }
  // The longest feasible block over all starts (L of the spec's O(n L^2)).
  std::size_t longest_block() const { return longest_block_; }
  // Op indices that access tensor t, increasing.
  const std::vector<std::uint32_t>& accesses(std::uint32_t t) const { return accesses_[t]; }
  // The first op that writes t (produces or updates it), or op_count() when none does.
  std::size_t first_write(std::uint32_t t) const { return first_write_[t]; }
  bool produced(std::uint32_t t) const { return producer_[t] < op_count(); }
  std::size_t producer(std::uint32_t t) const { return producer_[t]; }
  // The first access of t at or after op `from`, or op_count().
  std::size_t next_access(std::uint32_t t, std::size_t from) const;
  // The last access of t before op `before`, or -1 when none.
  std::ptrdiff_t previous_access(std::uint32_t t, std::size_t before) const;
  // Whether t is used at or after op `from` (in this sequence or a later one).
  bool used_from(std::uint32_t t, std::size_t from) const;
  // Sum of op times of [begin, end).
  double compute_s(std::size_t begin, std::size_t end) const { return time_prefix_[end] - time_prefix_[begin]; }

private:
  const BlockProblem* problem_;
  std::vector<std::vector<std::uint32_t>> accesses_;
  std::vector<std::size_t> first_write_;
  std::vector<std::size_t> producer_;
  std::vector<std::size_t> longest_end_;
  std::size_t longest_block_ = 0;
  std::vector<double> time_prefix_;
};

// The partitioner's cost model (spec §2.6), which the DP minimizes; two variants of the migration sets.
// `conservative` (the spec's, pairs): block r's migration prefetches W_r \ W_q \ Prod_r (q: the block before;
// survivors of the block before q are ignored) and writes back the tensors of W_q \ W_r that are used after r and
// were ever written (host copy possibly stale) -- charged to r's migration although the runtime writes them back
// one migration later, when q's buffer is released, so that the cost depends on (q, r) only.
// `exact` (triples): the runtime's sets given the two blocks before (p, q): Prefetch_r = W_r \ (W_p u W_q) \ Prod_r,
// Evict_r = W_p \ W_q \ W_r, written back when used after r and ever written before q. Only the staleness is
// approximated (a tensor evicted twice without a write in between is charged twice).
// Each transfer pays the latency. finish(r) = max(finish(q), start(q) + mig(r)) + comp(r); the first block's
// migration is fully exposed. The cost is the last block's finish.
enum class DpSets { conservative, exact };
double dp_cost(const BlockIndex& index, const Partition& partition, DpSets sets = DpSets::conservative);

struct DpResult {
  Partition partition;
  double cost_s = 0;                  // dp_cost of the partition, under `sets`
  bool greedy = false;                // the work limit was exceeded: maximal feasible blocks instead of the DP
  DpSets sets = DpSets::conservative; // the model minimized (exact falls back to conservative first)
};
// Minimizes dp_cost over all feasible partitions (ties: fewer blocks): a shortest path over blocks, O(n L^2)
// (previous block, block) pairs for `conservative`, O(n L^3) triples for `exact`; when that work exceeds work_limit,
// `exact` falls back to `conservative`, and `conservative` to greedy maximal blocks. Throws Infeasible when some op
// alone does not fit.
DpResult partition_dp(const BlockIndex& index, double work_limit = 1e9, DpSets sets = DpSets::conservative);

// Figure 12's ablations: `blocks` contiguous blocks (at most one per op) of equal op count, equal compute time, or
// equal bytes accessed (sum over ops of the bytes of the tensors each touches). May be infeasible (check with
// partition_fits).
enum class EqualBy { ops, time, bytes };
Partition partition_equal(const BlockIndex& index, EqualBy by, std::size_t blocks);
// The same split with the fewest block count >= `blocks` that fits (nullopt when not even one op per block does).
std::optional<Partition> partition_equal_fitting(const BlockIndex& index, EqualBy by, std::size_t blocks);
bool partition_fits(const BlockIndex& index, const Partition& partition);

// The runtime's exact sets and times for a partition (spec §2.6 without approximations): residents tracked across
// blocks, Evict_j = S_j \ (W_{j-1} u W_j), written back when used later and the host copy is stale (written since
// the last copy), Prefetch_j = W_j \ S_j \ Prod_j. After the last block every resident tensor is freed, stale ones
// needed by a later sequence written back first (the flush). This is what the emitted plan does and what the
// simulator reproduces.
struct BlockSchedule {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::vector<std::uint32_t> working_set; // W_j, by tensor index
  std::vector<std::uint32_t> write_back;  // evicted with a D2H copy first
  std::vector<std::uint32_t> evict;       // every evicted tensor (write_back included)
  std::vector<std::uint32_t> prefetch;
  double compute_s = 0;
  double migration_s = 0;
  double start_s = 0;
  double finish_s = 0;
};
struct Schedule {
  std::vector<BlockSchedule> blocks;
  std::vector<std::uint32_t> flush_write_back;
  std::vector<std::uint32_t> flush_free; // every tensor resident after the last block and not kept
  std::vector<std::uint32_t> kept;       // resident after the last block and kept (ScheduleBoundary::keep)
  std::vector<std::uint32_t> kept_stale; // those of them whose host copy is stale
  double flush_s = 0;
  double end_s = 0; // the last block's finish plus the flush
  std::uint64_t h2d_bytes = 0;
  std::uint64_t d2h_bytes = 0;
};
// What crosses the boundaries of the sequence when weights are retained across iterations (spec §4 A14): tensors
// resident when it starts (a subset of the first block's working set, some with a stale host copy), and those to
// keep resident after its last block (per tensor, 1: keep; empty: none) instead of freeing them.
struct ScheduleBoundary {
  std::vector<std::uint32_t> resident_at_start;
  std::vector<std::uint32_t> stale_at_start;
  std::vector<std::uint8_t> keep;
};
Schedule schedule_blocks(const BlockIndex& index, const Partition& partition, const ScheduleBoundary& boundary = {});

} // namespace memsim::dynn
