// dtr: Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021) as its authors' simulator simrd computes it
// (RuntimeV2EagerOptimized, spec dynn-offload.md 1.8). Storages are memsim tensors. When a step's allocations do not
// fit, evict (drop, no copy) the unlocked storage with the smallest heuristic value, one at a time, until they fit;
// a step that reads an evicted storage rematerializes it by recomputing its producer, recursively (the recompute's
// own missing inputs are asked about when it is admitted). Locks are the driver's pins: the inputs of every step
// waiting to run and of every running step. Constants (inputs, weights, optimizer state) are never evicted.
// The plan's frees are simrd's eager eviction: a released storage stays rematerializable and counts as evicted in
// its neighbours' costs.
//
// simrd's accounting reproduced here: the clock is simulated time; a step touches its inputs (last access = now)
// when the policy first hears of it, before anything it needs is rematerialized; a first computation stamps its
// outputs at its end, a recomputation stamps nothing; the pool is ordered by when a storage last became evictable
// (its recomputation, or the end of the last step that locked it) and ties go to the last candidate, a zero value
// wins at once. Not visible in memsim traces, so not reproduced: the compute of aliasing ops (a view's op adds to
// its storage's cost and is rerun when the view is used after an eviction).
#include "memsim/common/policy_registry.hpp"
#include "memsim/sim/memory_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace memsim {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct DtrOptions {
  std::string heuristic = "dtr";
  double overhead_limit = 0;
};

// h(t) of a candidate; the smallest is evicted.
enum class Heuristic {
  dtr,       // (c0 + c0 of the evicted neighbourhood, both directions) / (bytes x staleness)
  dtr_eq,    // the neighbourhood's cost from union-find classes of evicted storages
  dtr_local, // c0 / (bytes x staleness)
  lru,       // last access
  size,      // 1 / bytes
  msps       // (c0 + c0 of the evicted ancestors) / bytes
};

Heuristic heuristic_from(const std::string& name)
{
  static const std::map<std::string, Heuristic> names{
      {"dtr", Heuristic::dtr}, {"dtr-eq", Heuristic::dtr_eq}, {"dtr-local", Heuristic::dtr_local},
      {"lru", Heuristic::lru}, {"size", Heuristic::size},     {"msps", Heuristic::msps}};
  return names.at(name);
}

// h_DTR^eq's classes: union-find over evicted storages, a class worth the sum of what it absorbed; classes merge
// when a storage is evicted next to them and never split (a rematerialized member only takes its cost out).
class EvictedClasses {
public:
  int add(double cost)
  {
    parent_.push_back(static_cast<int>(parent_.size()));
    value_.push_back(cost);
    return parent_.back();
  }
  int root(int node)
  {
    int top = node;
    while (parent_[static_cast<std::size_t>(top)] != top)
      top = parent_[static_cast<std::size_t>(top)];
    while (parent_[static_cast<std::size_t>(node)] != top)
      node = std::exchange(parent_[static_cast<std::size_t>(node)], top);
    return top;
  }
  double value(int node) { return value_[static_cast<std::size_t>(root(node))]; }
  void merge(int from, int into)
  {
    const int a = root(from), b = root(into);
    if (a == b)
      return;
    parent_[static_cast<std::size_t>(a)] = b;
    value_[static_cast<std::size_t>(b)] += value_[static_cast<std::size_t>(a)];
  }
  void take_out(int node, double cost) { value_[static_cast<std::size_t>(root(node))] -= cost; }

private:
  std::vector<int> parent_;
  std::vector<double> value_;
};

class Dtr final : public MemoryPolicy {
public:
  explicit Dtr(const DtrOptions& options) : heuristic_(heuristic_from(options.heuristic)), options_(options) {}

  void on_access(const TensorAccess& access, const PolicyView& view) override
  {
    const Step& step = view.step(access.step);
    if (is_run(step))
      begin_run(step, view);
  }

  std::vector<PolicyAction> on_step_start(const Step& step, const PolicyView& view) override
  {
    if (step.kind == StepKind::free && step.device >= 0) { // the framework's release: simrd's eager eviction
      Space& space = space_of(step.device, step.instance, view);
      if (space.storages[index(*step.tensor)].material)
        drop(space, *step.tensor, view);
    }
    return {};
  }

  std::vector<PolicyAction> on_step_end(const Step& step, const PolicyView& view) override
  {
    if (step.kind == StepKind::compute && step.device >= 0) { // a first computation stamps its outputs
      Space& space = space_of(step.device, step.instance, view);
      for (TensorId output : view.trace().op(*step.op).outputs)
        space.storages[index(output)].last_access = view.now();
    }
    return {};
  }

  std::vector<PolicyAction> on_allocation_denied(const AllocationDemand& demand, const PolicyView& view) override
  {
    const Step& step = view.step(demand.step);
    touch(step, view);
    space_of(demand.device, step.instance, view);
    std::uint64_t in_use = demand.in_use;
    std::vector<PolicyAction> actions;
    while (in_use + demand.bytes > demand.capacity) {
      const std::optional<std::pair<Space*, TensorId>> victim = choose(demand.device, view);
      if (!victim)
        break; // nothing left to evict: the step fails out of memory
      auto [space, tensor] = *victim;
      drop(*space, tensor, view);
      actions.push_back(PolicyAction::evict(TensorSlot{space->device, space->instance, tensor}));
      const std::uint64_t bytes = view.trace().tensor(tensor).bytes;
      in_use = in_use > bytes ? in_use - bytes : 0;
    }
    return actions;
  }

  std::vector<PolicyAction> on_missing_tensor(const MissingTensor& missing, const PolicyView& view) override
  {
    touch(view.step(missing.step), view);
    const std::optional<OpId> op = view.producer(missing.tensor.tensor);
    if (!op)
      return {};
    Space& space = space_of(missing.tensor.space, missing.tensor.instance, view);
    const double cost = view.op_time(*op, space.device);
    if (options_.overhead_limit > 0 && remat_s_ + cost > (options_.overhead_limit - 1) * compute_s(view))
      return {}; // simrd's remat limit: the run thrashes
    remat_s_ += cost;
    space.remat_target[*op] = missing.tensor.tensor;
    return {PolicyAction::rematerialize(missing.tensor)};
  }

private:
  struct Storage {
    bool material = false;
    double last_access = -kInfinity;
    std::uint64_t pool_position = 0; // 0: not in the pool
    int evicted_class = -1;          // h_DTR^eq
  };
  struct Space { // one device of one instance
    int device = 0;
    int instance = 0;
    std::vector<Storage> storages; // per tensor
    std::set<std::pair<std::uint64_t, TensorId>> pool;
    std::map<OpId, TensorId> remat_target; // what a recompute was asked for
    std::vector<std::uint32_t> seen;       // neighbourhood walks
    std::uint32_t walk = 0;
  };

  static std::size_t index(TensorId id) { return static_cast<std::size_t>(id); }
  static bool is_run(const Step& step)
  {
    return (step.kind == StepKind::compute || step.kind == StepKind::recompute) && step.device >= 0 && step.op;
  }

  void build_graph(const PolicyView& view)
  {
    const Trace& trace = view.trace();
    consumers_.assign(trace.tensors.size(), {});
    for (const Op& op : trace.ops)
      for (TensorId input : op.inputs)
        consumers_[index(input)].push_back(op.id);
    op_seen_.assign(trace.ops.size(), 0);
    cost_.assign(trace.tensors.size(), -1);
    graph_built_ = true;
  }

  Space& space_of(int device, int instance, const PolicyView& view)
  {
    if (!graph_built_)
      build_graph(view);
    auto [found, added] = spaces_.try_emplace({device, instance});
    Space& space = found->second;
    if (added) {
      space.device = device;
      space.instance = instance;
      space.storages.resize(view.trace().tensors.size());
      space.seen.resize(view.trace().tensors.size(), 0);
      for (const Tensor& tensor : view.trace().tensors) // the constants; the rest is made while the policy looks on
        if (constant(tensor.id, view) && view.resident(TensorSlot{device, instance, tensor.id}))
          space.storages[index(tensor.id)].material = true;
    }
    return space;
  }

  double compute_s(const PolicyView& view)
  {
    if (!compute_s_) {
      double total = 0;
      for (const Op& op : view.trace().ops)
        total += view.op_time(op.id, 0);
      compute_s_ = total;
    }
    return *compute_s_;
  }

  // c0: the time of the op that produces the storage (0 for a constant).
  double cost(const Space& space, TensorId tensor, const PolicyView& view)
  {
    double& cached = cost_[index(tensor)];
    if (cached < 0) {
      const std::optional<OpId> op = view.producer(tensor);
      cached = op ? view.op_time(*op, space.device) : 0.0;
    }
    return cached;
  }

  // Storages simrd knows: constants, and the outputs of ops it has been asked to run.
  bool exists(TensorId tensor, const PolicyView& view) const
  {
    const std::optional<OpId> op = view.producer(tensor);
    return !op || op_seen_[static_cast<std::size_t>(*op)];
  }
  bool evicted(const Space& space, TensorId tensor, const PolicyView& view) const
  {
    return !space.storages[index(tensor)].material && exists(tensor, view);
  }
  bool constant(TensorId tensor, const PolicyView& view) const
  {
    return is_initially_resident(view.trace().tensor(tensor).kind) || !view.producer(tensor);
  }

  template <class Visit>
  void for_each_neighbour(TensorId tensor, bool children, const PolicyView& view, Visit visit)
  {
    const Trace& trace = view.trace();
    if (children) {
      for (OpId op : consumers_[index(tensor)])
        if (op_seen_[static_cast<std::size_t>(op)])
          for (TensorId output : trace.op(op).outputs)
            visit(output);
    } else if (const std::optional<OpId> op = view.producer(tensor)) {
      for (TensorId input : trace.op(*op).inputs)
        visit(input);
    }
  }

  // The summed c0 of the evicted storages reachable from `base` through evicted storages (simrd's Region).
  double region_cost(Space& space, TensorId base, bool children, const PolicyView& view)
  {
    const std::uint32_t walk = ++space.walk;
    space.seen[index(base)] = walk;
    double total = 0;
    std::vector<TensorId> stack{base};
    while (!stack.empty()) {
      const TensorId at = stack.back();
      stack.pop_back();
      for_each_neighbour(at, children, view, [&](TensorId next) {
        if (space.seen[index(next)] == walk || !evicted(space, next, view))
          return;
        space.seen[index(next)] = walk;
        total += cost(space, next, view);
        stack.push_back(next);
      });
    }
    return total;
  }

  double evicted_classes_cost(Space& space, TensorId tensor, const PolicyView& view)
  {
    std::set<int> roots;
    for (bool children : {false, true})
      for_each_neighbour(tensor, children, view, [&](TensorId next) {
        const int node = space.storages[index(next)].evicted_class;
        if (next != tensor && evicted(space, next, view) && node >= 0)
          roots.insert(classes_.root(node));
      });
    double total = 0;
    for (int root : roots)
      total += classes_.value(root);
    return total;
  }

  double value(Space& space, TensorId tensor, const PolicyView& view)
  {
    const Storage& storage = space.storages[index(tensor)];
    const double bytes = static_cast<double>(view.trace().tensor(tensor).bytes);
    const double staleness = view.now() - storage.last_access;
    auto ratio = [](double numerator, double denominator) {
      return denominator > 0 ? numerator / denominator : kInfinity; // NaN (0 x inf) counts as 0 too
    };
    const double own = cost(space, tensor, view);
    switch (heuristic_) {
    case Heuristic::dtr:
      return ratio(own + region_cost(space, tensor, true, view) + region_cost(space, tensor, false, view),
                   bytes * staleness);
    case Heuristic::dtr_eq: return ratio(own + evicted_classes_cost(space, tensor, view), bytes * staleness);
    case Heuristic::dtr_local: return ratio(own, bytes * staleness);
    case Heuristic::lru: return storage.last_access;
    case Heuristic::size: return ratio(1.0, bytes);
    case Heuristic::msps: return ratio(own + region_cost(space, tensor, false, view), bytes);
    }
    return kInfinity;
  }

  // simrd's choose: the smallest value in pool order, ties to the last; a zero value is taken at once. The pool
  // is the device's: every instance on it.
  std::optional<std::pair<Space*, TensorId>> choose(int device, const PolicyView& view)
  {
    std::vector<std::tuple<std::uint64_t, Space*, TensorId>> pool;
    for (auto& [key, space] : spaces_)
      if (space.device == device)
        for (const auto& [position, tensor] : space.pool)
          pool.emplace_back(position, &space, tensor);
    std::sort(pool.begin(), pool.end());
    std::optional<std::pair<Space*, TensorId>> best;
    double best_value = kInfinity;
    for (const auto& [position, space, tensor] : pool) {
      if (!space->storages[index(tensor)].material || view.pinned(TensorSlot{space->device, space->instance, tensor}))
        continue;
      const double h = value(*space, tensor, view);
      if (h <= best_value) {
        best_value = h;
        best = std::pair{space, tensor};
      }
      if (h == 0)
        break;
    }
    return best;
  }

  void append_to_pool(Space& space, TensorId tensor, const PolicyView& view)
  {
    Storage& storage = space.storages[index(tensor)];
    if (!storage.material || constant(tensor, view))
      return;
    if (storage.pool_position != 0)
      space.pool.erase({storage.pool_position, tensor});
    storage.pool_position = next_position_++;
    space.pool.insert({storage.pool_position, tensor});
  }

  // Evicted (by the policy or the plan's free): out of the pool; h_DTR^eq starts a class and merges its neighbours'.
  void drop(Space& space, TensorId tensor, const PolicyView& view)
  {
    Storage& storage = space.storages[index(tensor)];
    storage.material = false;
    if (storage.pool_position != 0)
      space.pool.erase({storage.pool_position, tensor});
    storage.pool_position = 0;
    if (heuristic_ != Heuristic::dtr_eq)
      return;
    storage.evicted_class = classes_.add(cost(space, tensor, view));
    for (bool children : {false, true})
      for_each_neighbour(tensor, children, view, [&](TensorId next) {
        const int node = space.storages[index(next)].evicted_class;
        if (next != tensor && evicted(space, next, view) && node >= 0)
          classes_.merge(node, storage.evicted_class);
      });
  }

  // The first the policy hears of a step that runs an op: its inputs are touched now, and its outputs exist (as
  // not yet material: simrd creates an op's outputs before it materializes the inputs).
  void touch(const Step& step, const PolicyView& view)
  {
    if (!is_run(step))
      return;
    const auto id = static_cast<std::size_t>(step.id);
    if (id >= touched_.size())
      touched_.resize(id + 1, 0);
    if (touched_[id])
      return;
    touched_[id] = 1;
    Space& space = space_of(step.device, step.instance, view);
    const Op& op = view.trace().op(*step.op);
    for (TensorId input : op.inputs)
      space.storages[index(input)].last_access = view.now();
    auto& seen = op_seen_[static_cast<std::size_t>(op.id)];
    if (!seen) {
      seen = 1;
      if (heuristic_ == Heuristic::dtr_eq) // simrd gives a new storage an empty class
        for (TensorId output : op.outputs)
          space.storages[index(output)].evicted_class = classes_.add(0);
    }
  }

  // The step starts: its new outputs are material and evictable, then its inputs go to the pool's end (simrd
  // unlocks them after the op; a lock still held by a waiting step keeps them pinned until that one runs too).
  void begin_run(const Step& step, const PolicyView& view)
  {
    touch(step, view);
    const auto id = static_cast<std::size_t>(step.id);
    if (id >= begun_.size())
      begun_.resize(id + 1, 0);
    if (begun_[id])
      return;
    begun_[id] = 1;
    Space& space = space_of(step.device, step.instance, view);
    const Op& op = view.trace().op(*step.op);
    TensorId target = op.outputs.empty() ? -1 : op.outputs.front();
    if (auto asked = space.remat_target.find(op.id);
        step.kind == StepKind::recompute && asked != space.remat_target.end())
      target = asked->second;
    std::vector<TensorId> order; // simrd: the siblings, then the tensor asked for
    for (TensorId output : op.outputs)
      if (output != target)
        order.push_back(output);
    if (target >= 0)
      order.push_back(target);
    for (TensorId output : order) {
      Storage& storage = space.storages[index(output)];
      if (storage.material)
        continue;
      storage.material = true;
      if (storage.evicted_class >= 0) {
        classes_.take_out(storage.evicted_class, cost(space, output, view));
        storage.evicted_class = -1;
      }
      append_to_pool(space, output, view);
    }
    for (TensorId input : op.inputs)
      append_to_pool(space, input, view);
  }

  Heuristic heuristic_;
  DtrOptions options_;
  bool graph_built_ = false;
  std::vector<std::vector<OpId>> consumers_; // per tensor
  std::vector<std::uint8_t> op_seen_;        // per op: asked to run at least once
  std::vector<double> cost_;                 // per tensor: c0, -1 until known
  std::map<std::pair<int, int>, Space> spaces_;
  EvictedClasses classes_;
  std::vector<std::uint8_t> touched_; // per step
  std::vector<std::uint8_t> begun_;   // per step
  std::uint64_t next_position_ = 1;   // pool order, across the spaces of a device
  double remat_s_ = 0;
  std::optional<double> compute_s_;
};

} // namespace

MEMSIM_REGISTER_POLICY(
    dtr, "dtr",
    "Dynamic Tensor Rematerialization as simrd computes it: when an allocation does not fit, drop the unlocked "
    "storage with the smallest h (h_DTR = cost of it and its evicted neighbourhood / (bytes x staleness)); "
    "recompute a dropped one, recursively, when it is read",
    {param("heuristic", &DtrOptions::heuristic,
           "dtr (evicted neighbourhood), dtr-eq (union-find classes), dtr-local, or the baselines lru, size, msps",
           {.choices = {"dtr", "dtr-eq", "dtr-local", "lru", "size", "msps"}}),
     param("overhead_limit", &DtrOptions::overhead_limit,
           "stop (fail) once recomputation exceeds (limit - 1) x the trace's compute time, as simrd's remat limit; "
           "0: no limit",
           {.min = 0})},
    [](const DtrOptions& options) { return std::make_unique<Dtr>(options); });

} // namespace memsim
