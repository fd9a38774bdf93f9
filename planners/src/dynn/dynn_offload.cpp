// dynn-offload: DyNN-Offload's runtime (spec dynn-offload.md §1.7, §2.7) as an online memory policy. Every
// iteration is cut into execution blocks (the §2.6 DP at budget / 2 per buffer) with predicted working sets Ŵ_j;
// the runtime counts the ops it launches, and when block j's first op starts it evicts the resident tensors outside
// Ŵ_j ∪ Ŵ_{j+1} (written back first when used later and the host copy is stale), then prefetches what Ŵ_j and Ŵ_{j+1}
// still miss (not what those blocks produce), as far as the budget allows. A tensor an op needs that is not resident
// is fetched on demand (the op waits); when it was not predicted for the running block it is a misprediction.
// An allocation that does not fit evicts least recently used residents the running step does not use, those outside
// the predicted sets first. Predictions:
//   oracle  each iteration's own graph is partitioned at its start (perfect prediction, the `dynn-block` DP);
//   stale   iteration 0's blocks and working sets replayed on every iteration (the PGO failure the paper motivates):
//           blocks by op count, working sets by tensor name with the "it<0>." prefix renamed to the current
//           iteration's; names that do not exist are skipped;
//   pilot   a trained pilot (pilot_model=FILE, `memsim pilot train`) predicts each iteration's blocks from its input
//           sample and the static architecture (plain-C++ forward pass, pilot_model.hpp); the working sets are those
//           of the iteration's ops in the predicted op ranges, as the oracle's. Block counting follows the predicted
//           counts: when they add up to fewer ops than the iteration runs, the ops after the last predicted block
//           belong to none and what they need is fetched on demand (a misprediction); blocks predicted past the
//           iteration's end are never reached. With `memo`, an iteration with on-demand fetches records its correct
//           blocks (the DP's) under its rounded pilot output, and a later iteration with the same output uses them.
// With single_block_when_fits, an iteration whose keep-all peak (default lifetimes, TraceAnalysis) fits the budget
// runs as one block over the whole budget: its working set is brought in when it starts, nothing is evicted or
// prefetched during it (no double buffering is needed when nothing has to leave), so below keep-all's largest batch
// DyNN-Offload trains as PyTorch does after the first iteration's loads. Like the working sets, the test reads the
// resolved iteration.
// With strict_halves each block's buffer is budget / 2 (spec §2.7 item 4): a block's prefetches stop where its
// predicted set -- what of it is resident or on its way, its outputs and its largest workspace -- would pass budget /
// 2, so what does not fit comes on demand when an op reads it. Only the cap is modelled: a tensor both blocks use
// counts in both halves but stays where it is (the D2D copy across the boundary, at HBM bandwidth, has no step kind to
// run as). pilot_infer_s + map_s (the pilot's inference and the mapping of its output, spec §2.5) pause the compute
// stream before each iteration's first op, whatever the prediction (the oracle stands for a perfect pilot). Not
// modelled: the resolver from predicted blocks to a predicted graph (working sets come from the resolved iteration);
// the barrier is per tensor (an op waits for the copies of what it reads, not for the whole migration).
#include "memsim/common/error.hpp"
#include "memsim/common/policy_registry.hpp"
#include "memsim/planners/dynn/blocks.hpp"
#include "memsim/planners/dynn/pilot_model.hpp"
#include "memsim/planners/dynn/problem.hpp"
#include "memsim/sim/memory_policy.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace memsim {
namespace {

struct DynnOffloadOptions {
  std::string prediction = "oracle";
  std::string dp_sets = "conservative";
  double dp_work_limit = 1e9;
  std::string pilot_model;
  bool memo = true;
  bool single_block_when_fits = false;
  bool strict_halves = false;
  double pilot_infer_s = 0;
  double map_s = 0;
};

struct PredictedBlock {
  std::size_t end = 0;          // ops of the iteration launched when the block ends (the runtime's counter)
  std::set<TensorId> working;   // Ŵ_j
  std::set<TensorId> produced;  // first written in the block (allocated there, never prefetched)
  std::uint64_t workspace = 0;  // the largest workspace of its ops
  bool whole_iteration = false; // the iteration fits the budget: one block, nothing leaves while it runs
};

class DynnOffload final : public MemoryPolicy {
public:
  DynnOffload(const DynnOffloadOptions& options, std::shared_ptr<const dynn::PilotInference> pilot)
      : options_(options), pilot_(std::move(pilot))
  {
  }

  void on_access(const TensorAccess& access, const PolicyView& view) override
  {
    touch(access.tensor);
    const Step& step = view.step(access.step);
    if (access.kind == AccessKind::write ||
        (step.op && updates_in_place(view.trace().op(*step.op), view.trace().tensor(access.tensor.tensor))))
      dirty_.insert(access.tensor);
  }

  std::vector<PolicyAction> on_step_start(const Step& step, const PolicyView& view) override
  {
    if (!is_op_step(step))
      return {};
    follow(step, view);
    std::vector<PolicyAction> actions;
    if (launched_ < static_cast<std::ptrdiff_t>(block_))
      actions = migrate(block_, TensorSlot{step.device, step.instance, 0}, view, std::nullopt);
    ++ops_launched_;
    return actions;
  }

  // The pilot's inference and mapping, paid before each iteration's first op starts to compute.
  double pause_before(const Step& step, const PolicyView& view) override
  {
    if (!is_op_step(step))
      return 0;
    follow(step, view);
    return ops_launched_ == 0 ? options_.pilot_infer_s + options_.map_s : 0;
  }

  // The block barrier: a block's first op starts once every migration asked for so far is done.
  bool waits_for_policy(const Step& step, const PolicyView& view) override
  {
    if (!is_op_step(step))
      return false;
    follow(step, view);
    return block_ < blocks_.size() && ops_launched_ == (block_ == 0 ? 0 : blocks_[block_ - 1].end);
  }

  std::vector<PolicyAction> on_step_end(const Step& step, const PolicyView& view) override
  {
    if (!is_op_step(step) || !started_ || launched_ < static_cast<std::ptrdiff_t>(block_))
      return {};
    return bring_in(block_, TensorSlot{step.device, step.instance, 0}, view, std::nullopt, view.in_use(step.device),
                    true);
  }

  std::vector<PolicyAction> on_missing_tensor(const MissingTensor& missing, const PolicyView& view) override
  {
    const TensorSlot& slot = missing.tensor;
    if (!view.has_host_copy(slot.instance, slot.tensor))
      return {};
    const Step& step = view.step(missing.step);
    if (is_op_step(step)) {
      follow(step, view);
      // The iteration's first block: its migration is exposed, and this op waits for what it reads of it.
      if (launched_ < static_cast<std::ptrdiff_t>(block_)) {
        std::vector<PolicyAction> actions = migrate(block_, slot, view, slot);
        const bool covered = std::any_of(actions.begin(), actions.end(), [&](const PolicyAction& action) {
          return action.kind == PolicyAction::Kind::fetch && action.tensor == slot;
        });
        if (covered)
          return actions;
        std::vector<PolicyAction> fetch = fetch_on_demand(slot, view);
        actions.insert(actions.end(), fetch.begin(), fetch.end());
        return actions;
      }
    }
    return fetch_on_demand(slot, view);
  }

  // A fetch the op waits for; a misprediction when the running block's predicted set lacks the tensor.
  std::vector<PolicyAction> fetch_on_demand(const TensorSlot& slot, const PolicyView& view)
  {
    if (!predicted_now(slot.tensor)) {
      ++counters_.on_demand_fetches;
      counters_.on_demand_bytes += view.trace().tensor(slot.tensor).bytes;
      if (mispredicted_iteration_ != iteration_) {
        mispredicted_iteration_ = iteration_;
        ++counters_.mispredicted_iterations;
      }
    }
    dirty_.erase(slot);
    touch(slot);
    return {PolicyAction::fetch(slot)};
  }

  std::vector<PolicyAction> on_allocation_denied(const AllocationDemand& demand, const PolicyView& view) override
  {
    const std::uint64_t wanted = std::max<std::uint64_t>(demand.shortfall(), 1);
    std::uint64_t freed = 0;
    std::vector<PolicyAction> actions;
    std::set<TensorSlot> chosen;
    // Outside the predicted sets of the running and the next block first, then outside the running one, then any.
    for (int tier = 0; tier < 3 && freed < wanted; ++tier)
      for (const auto& [age, slot] : by_age_) {
        if (freed >= wanted)
          break;
        if (slot.space != demand.device || chosen.count(slot) || !view.resident(slot) || view.pinned(slot))
          continue;
        if ((tier < 2 && predicted_now(slot.tensor)) || (tier < 1 && predicted_next(slot.tensor)))
          continue;
        chosen.insert(slot);
        actions.push_back(release(slot, view));
        freed += view.trace().tensor(slot.tensor).bytes;
      }
    return actions;
  }

  PolicyCounters counters() const override { return counters_; }

private:
  // Least recently used last; what the policy brings in counts as used when it is asked for.
  void touch(const TensorSlot& slot)
  {
    auto [found, added] = last_use_.try_emplace(slot, 0);
    if (!added)
      by_age_.erase({found->second, slot});
    found->second = ++clock_;
    by_age_.insert({found->second, slot});
  }

  static bool updates_in_place(const Op& op, const Tensor& tensor)
  {
    return op.phase == Phase::update &&
           (tensor.kind == TensorKind::weight || tensor.kind == TensorKind::optimizer_state);
  }

  static bool is_op_step(const Step& step) { return step.kind == StepKind::compute && step.op && step.device >= 0; }

  bool predicted_now(TensorId tensor) const { return block_ < blocks_.size() && blocks_[block_].working.count(tensor); }
  bool predicted_next(TensorId tensor) const
  {
    return block_ + 1 < blocks_.size() && blocks_[block_ + 1].working.count(tensor);
  }

  // Offload when the tensor is used after the running op and the host has no current copy, else drop it.
  PolicyAction release(const TensorSlot& slot, const PolicyView& view)
  {
    const bool used_later = last_access_[static_cast<std::size_t>(slot.tensor)] > current_op_;
    const bool stale = dirty_.count(slot) || !view.has_host_copy(slot.instance, slot.tensor);
    dirty_.erase(slot);
    return used_later && stale ? PolicyAction::offload(slot) : PolicyAction::evict(slot);
  }

  // The runtime's op counter: a new iteration starts the prediction over; the block is the one the count is in.
  void follow(const Step& step, const PolicyView& view)
  {
    prepare(view);
    const Op& op = view.trace().op(*step.op);
    current_op_ = op_index_[static_cast<std::size_t>(op.id)];
    if (op.iteration != iteration_ || !started_) {
      if (started_)
        remember_misprediction();
      started_ = true;
      iteration_ = op.iteration;
      ops_launched_ = 0;
      block_ = 0;
      launched_ = -1;
      predict(view);
    }
    while (block_ + 1 < blocks_.size() && ops_launched_ >= blocks_[block_].end)
      ++block_;
    // The pilot's counts can end before the iteration does: the ops after its last block are in no block.
    if (pilot_ && !blocks_.empty() && ops_launched_ >= blocks_.back().end)
      block_ = blocks_.size();
  }

  // Evict what blocks `block` and `block + 1` do not need, then prefetch what they miss within the budget; `waited`
  // (a tensor the running op is missing) is fetched, not prefetched.
  std::vector<PolicyAction> migrate(std::size_t block, const TensorSlot& where, const PolicyView& view,
                                    std::optional<TensorSlot> waited)
  {
    const int device = where.space;
    launched_ = static_cast<std::ptrdiff_t>(block);
    std::vector<PolicyAction> actions;
    if (block >= blocks_.size())
      return actions;
    const PredictedBlock* next = block + 1 < blocks_.size() ? &blocks_[block + 1] : nullptr;
    const PredictedBlock& now = blocks_[block];
    std::uint64_t resident_bytes = view.in_use(device);
    for (const auto& [age, slot] : by_age_) {
      if (slot.space != device || slot.instance != where.instance || now.working.count(slot.tensor) ||
          (next && next->working.count(slot.tensor)) || !view.resident(slot) || view.pinned(slot))
        continue;
      actions.push_back(release(slot, view));
      resident_bytes -= view.trace().tensor(slot.tensor).bytes;
    }
    std::vector<PolicyAction> brought = bring_in(block, where, view, waited, resident_bytes, true);
    actions.insert(actions.end(), brought.begin(), brought.end());
    return actions;
  }

  // Prefetches what the predicted sets of `block` and the block after it miss, while it fits beside the `resident`
  // bytes and what `block` still allocates (its outputs not made yet, its largest workspace); `waited` is fetched.
  // Called when a block starts (after its evictions) and again when each op ends: a tensor that was still leaving
  // (written back by the migration before) or had no room then is brought once it can be.
  std::vector<PolicyAction> bring_in(std::size_t block, const TensorSlot& where, const PolicyView& view,
                                     std::optional<TensorSlot> waited, std::uint64_t resident, bool after_releases)
  {
    std::vector<PolicyAction> actions;
    if (block >= blocks_.size())
      return actions;
    const int device = where.space;
    const PredictedBlock& now = blocks_[block];
    // Room is kept for what both blocks still allocate: a prefetch queued behind others may start only while the
    // next block runs.
    // A whole iteration that fits needs no reserve: its keep-all peak, what it allocates included, fits the budget.
    std::uint64_t reserve = now.workspace;
    for (std::size_t b = block; b < std::min(block + 2, blocks_.size()) && !now.whole_iteration; ++b) {
      reserve = std::max(reserve, blocks_[b].workspace);
      for (TensorId tensor : blocks_[b].produced)
        if (!view.resident(TensorSlot{device, where.instance, tensor}))
          reserve += view.trace().tensor(tensor).bytes;
    }
    // Copies asked for earlier and not arrived yet allocate when they start: count them as resident.
    for (auto it = incoming_.begin(); it != incoming_.end();)
      if (view.resident(*it) || !view.pinned(*it)) {
        it = incoming_.erase(it);
      } else {
        if (it->space == device)
          resident += view.trace().tensor(it->tensor).bytes;
        ++it;
      }
    const std::uint64_t capacity = view.capacity(device);
    std::uint64_t room = capacity > resident + reserve ? capacity - resident - reserve : 0;
    std::set<TensorId> asked; // a tensor in both blocks' sets is brought once
    auto bring = [&](const PredictedBlock& target) {
      std::uint64_t half_room = options_.strict_halves ? half_left(target, where, view, capacity / 2)
                                                       : std::numeric_limits<std::uint64_t>::max();
      for (TensorId tensor : target.working) {
        const TensorSlot slot{device, where.instance, tensor};
        const std::uint64_t bytes = view.trace().tensor(tensor).bytes;
        // Dead tensors stay out (a stale set may name one the framework has freed since).
        if (target.produced.count(tensor) || asked.count(tensor) || view.resident(slot) || view.pinned(slot) ||
            !view.has_host_copy(where.instance, tensor) || last_access_[static_cast<std::size_t>(tensor)] < current_op_)
          continue;
        const bool is_waited = waited && *waited == slot;
        if (!is_waited && (bytes > room || bytes > half_room))
          continue;
        room -= std::min(room, bytes);
        half_room -= std::min(half_room, bytes);
        asked.insert(tensor);
        incoming_.insert(slot);
        PolicyAction action = is_waited ? PolicyAction::fetch(slot) : PolicyAction::prefetch(slot);
        action.after_releases = after_releases;
        dirty_.erase(slot);
        touch(slot);
        actions.push_back(action);
      }
    };
    bring(now);
    if (block + 1 < blocks_.size())
      bring(blocks_[block + 1]);
    return actions;
  }

  // strict_halves: what of `half` bytes block `target`'s buffer has left: less its largest workspace, its outputs
  // (made or to come) and the tensors of its set that are resident or on their way, each while still used.
  std::uint64_t half_left(const PredictedBlock& target, const TensorSlot& where, const PolicyView& view,
                          std::uint64_t half) const
  {
    std::uint64_t held = target.workspace;
    for (TensorId tensor : target.working) {
      const TensorSlot slot{where.space, where.instance, tensor};
      const bool alive = last_access_[static_cast<std::size_t>(tensor)] >= current_op_;
      if (alive && (target.produced.count(tensor) || view.resident(slot) || incoming_.count(slot)))
        held += view.trace().tensor(tensor).bytes;
    }
    return half > held ? half - held : 0;
  }

  // The blocks of the iteration now starting, by the chosen prediction.
  void predict(const PolicyView& view)
  {
    blocks_.clear();
    const auto found = problem_of_iteration_.find(iteration_);
    if (found == problem_of_iteration_.end())
      return;
    if (options_.single_block_when_fits && iteration_peak_.at(iteration_) <= view.capacity(0)) {
      const dynn::IterationProblem& iteration = problems_[found->second];
      blocks_ = blocks_of(iteration, dynn::Partition{iteration.problem.ops.size()}, nullptr);
      blocks_.front().whole_iteration = true;
      return;
    }
    if (options_.prediction == "oracle") {
      blocks_ = partition(problems_[found->second], nullptr);
      return;
    }
    if (pilot_) {
      blocks_ = blocks_of(problems_[found->second], pilot_partition(problems_[found->second], view), nullptr);
      return;
    }
    if (stale_blocks_.empty())
      stale_blocks_ = partition(problems_.front(), &view);
    const std::string from = fmt::format("it{}.", problems_.front().iteration);
    const std::string to = fmt::format("it{}.", iteration_);
    auto rename = [&](const std::set<std::string>& names) {
      std::set<TensorId> ids;
      for (const std::string& name : names) {
        const std::string renamed = name.rfind(from, 0) == 0 ? to + name.substr(from.size()) : name;
        if (auto id = by_name_.find(renamed); id != by_name_.end())
          ids.insert(id->second);
      }
      return ids;
    };
    for (const StaleBlock& stale : stale_names_)
      blocks_.push_back(PredictedBlock{stale.end, rename(stale.working), rename(stale.produced), stale.workspace});
  }

  struct StaleBlock {
    std::size_t end = 0;
    std::set<std::string> working;
    std::set<std::string> produced;
    std::uint64_t workspace = 0;
  };

  // Partitions one iteration (the dynn-block DP) into predicted blocks; with `names_of`, also records them by name
  // for the stale prediction.
  std::vector<PredictedBlock> partition(const dynn::IterationProblem& iteration, const PolicyView* names_of)
  {
    return blocks_of(iteration, dp_partition(iteration), names_of);
  }

  dynn::Partition dp_partition(const dynn::IterationProblem& iteration) const
  {
    const dynn::BlockIndex index(iteration.problem);
    const dynn::DpSets sets = options_.dp_sets == "exact" ? dynn::DpSets::exact : dynn::DpSets::conservative;
    return dynn::partition_dp(index, options_.dp_work_limit, sets).partition;
  }

  // The pilot's blocks for `iteration`: the memo's when it holds the pilot's output, else the predicted op counts
  // (§1.4's mapping when they add up; else followed as far as they go, cut at the iteration's end).
  dynn::Partition pilot_partition(const dynn::IterationProblem& iteration, const PolicyView& view)
  {
    std::vector<double> input = dynn::input_sample_features(view.trace(), iteration.ops);
    input.insert(input.end(), architecture_.begin(), architecture_.end());
    const std::vector<double> label = pilot_->predict(input, *pilot_->default_type());
    memo_key_.clear();
    for (double value : label)
      memo_key_.push_back(std::llround(value));
    if (const auto memo = memo_.find(memo_key_); memo != memo_.end())
      return memo->second;
    const std::size_t op_count = iteration.ops.size();
    if (std::optional<dynn::Partition> exact = dynn::partition_from_label(label, op_count))
      return *exact;
    dynn::Partition ends;
    std::size_t end = 0;
    for (std::size_t slot = 0; slot * dynn::kBlockVectorSize < label.size() && end < op_count; ++slot) {
      const double ops = std::round(label[slot * dynn::kBlockVectorSize]);
      if (!(ops >= 1))
        break;
      end = std::min(op_count, end + static_cast<std::size_t>(ops));
      ends.push_back(end);
    }
    return ends;
  }

  // After an iteration the pilot mispredicted: its correct blocks for the pilot output it was predicted from.
  void remember_misprediction()
  {
    if (!pilot_ || !options_.memo || mispredicted_iteration_ != iteration_)
      return;
    const auto found = problem_of_iteration_.find(iteration_);
    if (found != problem_of_iteration_.end())
      memo_.insert_or_assign(memo_key_, dp_partition(problems_[found->second]));
  }

  // The predicted blocks of `iteration` cut at `ends`: the working sets, outputs and workspace of its ops in each
  // range; with `names_of`, also records them by name for the stale prediction.
  std::vector<PredictedBlock> blocks_of(const dynn::IterationProblem& iteration, const dynn::Partition& ends,
                                        const PolicyView* names_of)
  {
    std::vector<PredictedBlock> blocks;
    std::size_t begin = 0;
    for (std::size_t end : ends) {
      PredictedBlock block;
      block.end = end;
      for (std::size_t i = begin; i < std::min(end, iteration.problem.ops.size()); ++i) {
        const dynn::BlockOp& op = iteration.problem.ops[i];
        block.workspace = std::max(block.workspace, op.workspace_bytes);
        for (std::uint32_t t : op.tensors)
          block.working.insert(iteration.tensors[t]);
        for (std::uint32_t t : op.produced)
          block.produced.insert(iteration.tensors[t]);
      }
      if (names_of) {
        StaleBlock& stale = stale_names_.emplace_back();
        stale.end = end;
        stale.workspace = block.workspace;
        for (TensorId t : block.working)
          stale.working.insert(names_of->trace().tensor(t).name);
        for (TensorId t : block.produced)
          stale.produced.insert(names_of->trace().tensor(t).name);
      }
      blocks.push_back(std::move(block));
      begin = end;
    }
    return blocks;
  }

  // Indexes the trace once: its iterations as partitioning problems, op positions, last accesses, names.
  void prepare(const PolicyView& view)
  {
    if (prepared_)
      return;
    prepared_ = true;
    const Trace& trace = view.trace();
    problems_ = dynn::iteration_problems(trace, view.machine(), view.capacity(0) / 2);
    for (std::size_t i = 0; i < problems_.size(); ++i)
      problem_of_iteration_.try_emplace(problems_[i].iteration, i);
    op_index_.assign(trace.ops.size(), 0);
    last_access_.assign(trace.tensors.size(), 0);
    for (std::size_t i = 0; i < trace.ops.size(); ++i) {
      op_index_[static_cast<std::size_t>(trace.ops[i].id)] = i;
      for (const auto* ids : {&trace.ops[i].inputs, &trace.ops[i].outputs})
        for (TensorId t : *ids)
          last_access_[static_cast<std::size_t>(t)] = i;
    }
    for (const Tensor& tensor : trace.tensors)
      by_name_.try_emplace(tensor.name, tensor.id);
    if (options_.single_block_when_fits) {
      const MemoryProfile profile = default_memory_profile(trace);
      for (std::size_t i = 0; i < trace.ops.size(); ++i) {
        std::uint64_t& peak = iteration_peak_[trace.ops[i].iteration];
        peak = std::max(peak, profile.in_use_during[i]);
      }
    }
    if (pilot_)
      architecture_ = dynn::architecture_features(trace, pilot_->shape());
  }

  DynnOffloadOptions options_;
  std::shared_ptr<const dynn::PilotInference> pilot_; // with prediction=pilot
  std::vector<double> architecture_;                  // the pilot's static-architecture features of the trace
  std::vector<long long> memo_key_;                   // the running iteration's rounded pilot output
  std::map<std::vector<long long>, dynn::Partition> memo_;
  bool prepared_ = false;
  std::vector<dynn::IterationProblem> problems_;
  std::map<int, std::size_t> problem_of_iteration_;
  std::map<int, std::uint64_t> iteration_peak_; // keep-all bytes in use at the iteration's fullest op
  std::vector<std::size_t> op_index_;           // trace op id -> position in the trace
  std::vector<std::size_t> last_access_;        // per tensor: position of the last op that reads or writes it
  std::unordered_map<std::string, TensorId> by_name_;
  std::vector<StaleBlock> stale_names_;
  std::vector<PredictedBlock> stale_blocks_;

  bool started_ = false;
  int iteration_ = 0;
  std::size_t current_op_ = 0;
  std::size_t ops_launched_ = 0;
  std::size_t block_ = 0;
  std::ptrdiff_t launched_ = -1; // the last block whose migration was started
  std::vector<PredictedBlock> blocks_;

  std::uint64_t clock_ = 0;
  std::map<TensorSlot, std::uint64_t> last_use_;
  std::set<std::pair<std::uint64_t, TensorSlot>> by_age_; // least recently used first
  std::set<TensorSlot> incoming_;                         // prefetched, not resident yet
  std::set<TensorSlot> dirty_;                            // written on the device since its host copy was made
  PolicyCounters counters_;
  int mispredicted_iteration_ = -1;
};

} // namespace

MEMSIM_REGISTER_POLICY(
    dynn_offload, "dynn-offload",
    "DyNN-Offload's runtime: execution blocks double-buffered in budget/2 halves; when block j starts, evict what "
    "blocks j and j+1 do not need and prefetch their predicted working sets; unpredicted tensors are fetched on demand",
    {param("prediction", &DynnOffloadOptions::prediction,
           "oracle: partition each iteration's own graph (perfect prediction); stale: replay iteration 0's blocks and "
           "working sets on every iteration (PGO), matched by tensor name; pilot: a trained pilot predicts each "
           "iteration's blocks (pilot_model)",
           {.choices = {"oracle", "stale", "pilot"}}),
     param("pilot_model", &DynnOffloadOptions::pilot_model,
           "with prediction=pilot: the memsim-pilot JSON file (memsim pilot train) run before each iteration"),
     param("memo", &DynnOffloadOptions::memo,
           "with prediction=pilot: after an iteration with on-demand fetches, remember its correct blocks for the "
           "same pilot output and use them when the pilot gives that output again"),
     param("dp_sets", &DynnOffloadOptions::dp_sets,
           "the partitioning DP's migration sets, as dynn-block's: conservative or exact",
           {.choices = {"conservative", "exact"}}),
     param("dp_work_limit", &DynnOffloadOptions::dp_work_limit,
           "above this much DP work the partitioner falls back (as dynn-block's)", {.min = 1}),
     param("single_block_when_fits", &DynnOffloadOptions::single_block_when_fits,
           "an iteration whose keep-all peak fits the budget runs as one block: its working set is loaded when it "
           "starts and nothing leaves while it runs (off: always budget/2 halves, as the authors' runtime)"),
     param("strict_halves", &DynnOffloadOptions::strict_halves,
           "physical halves: a block's prefetches stop where its predicted set, outputs and workspace would pass "
           "budget/2 (what does not fit comes on demand; the D2D copy of tensors crossing the halves is not "
           "modelled); off: logical halves, a prefetch may use whatever the budget has left"),
     param("pilot_infer_s", &DynnOffloadOptions::pilot_infer_s,
           "seconds of pilot inference paid before each iteration's first op (the paper: 30 us; 0: not charged)",
           {.min = 0}),
     param("map_s", &DynnOffloadOptions::map_s,
           "seconds mapping the pilot's output to blocks, paid with pilot_infer_s (the paper: 12.5 us)", {.min = 0})},
    [](const DynnOffloadOptions& options) {
      std::shared_ptr<const dynn::PilotInference> pilot;
      if (options.prediction == "pilot") {
        if (options.pilot_model.empty())
          throw InputError("dynn-offload", "prediction=pilot needs pilot_model=FILE (a memsim pilot train output)");
        pilot = std::make_shared<const dynn::PilotInference>(dynn::PilotInference::load(options.pilot_model));
        if (!pilot->default_type())
          throw InputError(options.pilot_model, "the model records no network type and has more than one network");
      } else if (!options.pilot_model.empty()) {
        throw InputError("dynn-offload", "pilot_model is given but prediction is not pilot");
      }
      if (options.strict_halves && options.single_block_when_fits)
        throw InputError("dynn-offload", "strict_halves and single_block_when_fits exclude each other (one block "
                                         "over the whole budget has no halves)");
      return std::make_unique<DynnOffload>(options, std::move(pilot));
    });

} // namespace memsim
