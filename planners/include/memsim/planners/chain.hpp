#pragma once
// Optimal chain planners on an abstract chain (Beaumont, Eyraud-Dubois, Shilova, NeurIPS 2021 "Efficient
// Combination of Rematerialization and Offloading for Training DNNs"; Beaumont et al. 2019 "Optimal checkpointing
// for heterogeneous chains" (rotor); Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2020 (offload only)).
//
// The DPs are pure functions of a `chain::Problem`: memory in integer units (the budget discretized in N levels),
// times in seconds. They return the optimal time in their model and the schedule that achieves it.
//
// Memory model (shared by every DP and by the exhaustive searches of the tests), layers l = 1..L:
//   a_l       output of layer l (a_0, the network input, is fixed memory outside the budget: size 0 here),
//   abar_l    everything layer l keeps for its backward when run in "F_all" mode (includes a_l),
//   delta_l   gradient of a_l, of size a_l,
//   of_l      transient extra memory while F_l runs, ob_l extra memory while B_l runs (beyond delta_{l-1}).
// F_l needs a_{l-1} and peaks at abar_l + of_l above what is in use (everything the layer keeps exists at its end);
// in F_all mode abar_l then stays (persistent until B_l), otherwise only a_l does (a checkpoint, or dropped later). B_l
// needs abar_l, delta_l and a_{l-1}; it produces delta_{l-1} and frees abar_l and delta_l. The incoming gradient
// delta_L is counted from the start (conservative: it exists only after the loss).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace memsim::chain {

constexpr double infinite_time = std::numeric_limits<double>::infinity();

struct Stage {
  double forward_time = 0;
  double backward_time = 0;
  int output = 0;            // a_l in units
  int saved = 0;             // abar_l in units (>= output)
  int forward_overhead = 0;  // of_l
  int backward_overhead = 0; // ob_l
  // Seconds to move a_l / abar_l between GPU and host (exact bytes, per-tensor latency); negative: output or saved
  // units times Problem::unit_transfer_time (the abstract problems of the tests).
  double output_transfer_time = -1;
  double saved_transfer_time = -1;
};

struct Problem {
  std::vector<Stage> stages;     // layer l is stages[l - 1]
  int memory = 0;                // M, the budget for activations in units
  double unit_transfer_time = 0; // seconds to move one unit between GPU and host (either direction)
  // Added to a prefetch time the DP only knows in units (its state keeps the item's size, not the item), so that
  // delta * unit_transfer_time + transfer_slack bounds the exact time from above (latency of the item's tensors).
  double transfer_slack = 0;

  int length() const { return static_cast<int>(stages.size()); }
  const Stage& stage(int layer) const { return stages[static_cast<std::size_t>(layer - 1)]; }
  int output(int layer) const { return layer == 0 ? 0 : stage(layer).output; }
  // Exact transfer time of the item at `layer` (abar_l when keep_all, else a_l).
  double item_transfer_time(int layer, bool keep_all) const
  {
    const Stage& s = stage(layer);
    const double exact = keep_all ? s.saved_transfer_time : s.output_transfer_time;
    return exact >= 0 ? exact : (keep_all ? s.saved : s.output) * unit_transfer_time;
  }
};

// One step of a schedule on the compute stream.
enum class ActionKind { forward_all, forward_checkpoint, forward_none, backward };
struct Action {
  ActionKind kind = ActionKind::forward_all;
  int layer = 0;
  bool operator==(const Action&) const = default;
};

// --- rotor: rematerialization only (Beaumont et al. 2019, §4 "dynamic program"; memory persistency: abar_l,
// once computed, stays until B_l). ---
class RotorTable {
public:
  explicit RotorTable(const Problem& problem);
  // opt(s, t, m): fastest way to backpropagate through layers s..t with memory m (a_{s-1} and delta_t inside m).
  double cost(int first, int last, int memory) const;
  std::vector<Action> sequence(int first, int last, int memory) const; // throws Infeasible if cost is infinite
  const Problem& problem() const { return *problem_; }

private:
  std::size_t index(int first, int last) const;
  // Which option achieves cost(s, t, m): 0 = F_all s first; j > s = checkpoint a_{j-1} (forward s..j-1 dropping
  // inputs). Recomputed on demand rather than stored, so the table's inner loop is a plain minimum that vectorizes.
  int choice(int first, int last, int memory) const;
  // The options' memory needs and times, shared by the table and choice() so both compute bit-identical candidates.
  int all_start(int first, int last) const;
  int kept_outside(int first) const;
  int forward_need(int first, int last, int layer) const; // memory while F layer runs in a checkpointed segment
  double segment_forward_time(int first, int layer) const;
  const Problem* problem_;
  int levels_ = 0;
  std::vector<double> forward_prefix_; // sum of u_F(1..l)
  std::vector<double> cost_;           // [index(s,t)][m]: rows of one s are adjacent
  // The same values with the rows of one t adjacent, [(t-1)t/2 + s-1][m]: the table's inner loop walks opt(j, t, .)
  // for j = s+1..t, which is strided in cost_ and contiguous here (memory-bound otherwise).
  std::vector<double> cost_by_last_;
};

struct RotorResult {
  double time = infinite_time;
  std::vector<Action> actions;
};
RotorResult solve_rotor(const Problem& problem);

// --- Block schedules: the combined model of pofo, offload-dp and the heuristics. ---
// The top-level forward is a series of blocks. A block is a single layer run F_all (its item: abar_l), a segment
// [first..last] run forward dropping everything but a_last (its item: the checkpoint a_last, recomputed from during
// the backward by rotor), or the final block [first..L] solved by rotor (loss inside). The item of a block may be
// offloaded: its D2H copy starts when the block's forward ends and must end when the next block's forward ends
// (the compute stream waits otherwise); it is freed then. It is prefetched while the block after next runs its
// backward (after the final block for the block just before the final one) and must be back when the next block's
// backward starts. These are whole-transfer steps: the memory of an item is held from the start of its prefetch and
// until the end of its offload (the paper's assumption 3 releases it progressively; we do not).
enum class BlockKind { keep_all, segment, final };
struct Block {
  BlockKind kind = BlockKind::final;
  int first = 1;
  int last = 1;
  bool offload_item = false;
  int backward_memory = 0; // memory given to rotor for a segment / the final block (evaluate: -1 = all that is left)
};

struct BlockSchedule {
  double time = infinite_time;
  std::vector<Block> blocks;
};

enum class CombinedMode {
  full,            // pofo
  offload_only,    // offload-dp: keep_all blocks and a final block of one layer
  hidden_offloads, // autocapper: offloads only where fully overlapped (no idle time)
};

struct CombinedOptions {
  CombinedMode mode = CombinedMode::full;
};

// pofo's DP over states (i, K, x, Delta): boundary i, persistent memory K of earlier items, x the kind of the item
// at i, Delta the size of the offloaded item whose prefetch overlaps the next block's backward. Idle times as the
// paper's Lemma 1: an overlapped transfer of duration d against compute of duration u idles max(0, d - u).
BlockSchedule solve_combined(const Problem& problem, const RotorTable& rotor, CombinedOptions options = {});
// The opportunist heuristic: offload abar of a prefix of layers whose transfers the forward hides, rotor the rest.
BlockSchedule solve_opportunist(const Problem& problem, const RotorTable& rotor);

// Evaluates a block schedule by simulating its three streams (compute, d2h, h2d) and checking memory at each phase;
// independent of the DP's bookkeeping. Returns infinite_time when invalid; `why` says why.
double evaluate_blocks(const Problem& problem, const RotorTable& rotor, const std::vector<Block>& blocks,
                       std::string* why = nullptr);

// Expands a block schedule into compute actions with the transfer events attached (see chain_plan in the planners).
struct Transfer {
  int block = 0;          // index into blocks
  int start_after = -1;   // compute action index after which it may start (-1: at once)
  int needed_before = -1; // compute action index that waits for it
  bool offload = true;
};
struct ExpandedSchedule {
  std::vector<Action> actions;
  std::vector<Transfer> transfers;
};
ExpandedSchedule expand_blocks(const RotorTable& rotor, const std::vector<Block>& blocks);

// Memory of one run of actions in the remat model (peak units, or -1 when an action is invalid); for tests.
int remat_peak(const Problem& problem, const std::vector<Action>& actions, int first, int last);

} // namespace memsim::chain
