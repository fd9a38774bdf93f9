#pragma once
// The glue between the execution core and a MemoryPolicy (private to sim/). The core asks the driver before each
// step starts (admit), and tells it when one started or finished; the driver calls the policy and turns its actions
// into steps added to the running schedule, with the deps that keep them memory-safe under any timing. It also
// keeps what the realized plan needs: every step's deps as they were in the end, and the order steps started in.
#include "memsim/sim/ledger.hpp"
#include "memsim/sim/memory_policy.hpp"

#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

namespace memsim {

// What the driver may ask of the running schedule (the execution core implements it).
class Schedule {
public:
  virtual ~Schedule() = default;
  virtual const Step& step(StepId id) const = 0;
  virtual std::size_t step_count() const = 0;
  // Adds a step (its id is assigned and returned). With `run_before`, it joins the stream of that step just
  // before it; otherwise it is appended to its own (device, stream).
  virtual StepId add_step(Step step, std::optional<StepId> run_before) = 0;
  // `step` (not started) also waits for `dep`.
  virtual void add_dep(StepId step, StepId dep) = 0;
  virtual bool finished(StepId id) const = 0;
  // The step before `id` in its stream; `id` heads its stream (it is being admitted or started).
  virtual std::optional<StepId> stream_predecessor(StepId id) const = 0;
  virtual double now() const = 0;
  virtual const MemoryLedger& ledger() const = 0;
  virtual double op_time(OpId op, int device) const = 0; // the cost model's time of `op` there
  virtual const Machine* machine() const = 0;            // null when the caller gave none
  // `id` (not started) waits `seconds` more before its work: paid like its service time (Step::service_s).
  virtual void add_service_time(StepId id, double seconds) = 0;
};

class PolicyDriver final : private PolicyView {
public:
  PolicyDriver(MemoryPolicy& policy, const Trace& trace, const Plan& plan, Schedule& schedule);

  enum class Admission {
    start, // run it now (the core's checks report any failure as usual)
    wait,  // it waits for steps the policy added (or that were already on their way)
    skip   // a plan free (or offload) of a tensor the policy already moved out: it has nothing left to do
  };
  Admission admit(StepId id);
  std::string refusal() const { return policy_->refusal(); }
  PolicyCounters counters() const { return policy_->counters(); }
  void started(StepId id);
  void finished(StepId id);

  // The static plan of what happened (a feasible run): the steps in the order they started, policy steps
  // included, skipped ones left out, with their final deps; no policy.
  Plan realized_plan(const Plan& original) const;

private:
  std::vector<std::uint8_t> barrier_asked_; // per step: waits_for_policy was asked
  std::vector<double> paused_s_;            // per step: what pause_before charged (the realized plan's service_s)
  std::vector<StepId> open_actions_;        // policy copies and releases not known to have finished (waits_for_policy)
  std::vector<StepId> open_releases_;       // policy offloads' and evictions' frees, until finished (after_releases)
  struct History {                          // per tensor slot on a device
    StepId maker = -1;         // the step that made it resident (-1: resident from the start, or not resident)
    std::vector<StepId> users; // steps that read it since
    StepId displaced_by = -1;  // the policy free that last removed it
    bool displaced = false;    // removed by the policy and not freed or rewritten by the plan since
    StepId arriving = -1;      // a policy fetch / recompute that will make it resident, until it finishes
    StepId leaving = -1;       // a policy free that will remove it, until it runs
  };

  // PolicyView
  const Trace& trace() const override { return *trace_; }
  double now() const override { return schedule_->now(); }
  std::size_t device_count() const override { return schedule_->ledger().device_count(); }
  bool resident(const TensorSlot& slot) const override;
  bool has_host_copy(int instance, TensorId tensor) const override;
  bool pinned(const TensorSlot& slot) const override;
  std::uint64_t in_use(int space) const override { return schedule_->ledger().in_use(space); }
  std::uint64_t capacity(int space) const override { return schedule_->ledger().capacity(space); }
  std::optional<OpId> producer(TensorId tensor) const override;
  const Step& step(StepId id) const override { return schedule_->step(id); }
  double op_time(OpId op, int device) const override { return schedule_->op_time(op, device); }
  const Machine& machine() const override;

  bool is_policy_step(StepId id) const { return id >= plan_step_count_; }
  bool pending(StepId id) const { return id >= 0 && !schedule_->finished(id); }
  History& history(const TensorSlot& slot) { return histories_[slot]; }
  const History* find_history(const TensorSlot& slot) const;
  // Tensors a step reads / allocates on devices.
  std::vector<TensorSlot> reads(const Step& step) const;
  std::vector<TensorSlot> writes(const Step& step) const;
  void pin(const std::vector<TensorSlot>& slots, int delta);
  void grow(std::size_t step_count);
  void depend(StepId step, StepId dep);   // live and realized
  void note_dep(StepId step, StepId dep); // realized only (dep already finished)
  // Deps that make an added step start when `id` could: its deps and its stream predecessor.
  std::vector<StepId> trigger_deps(StepId id) const;

  std::optional<Admission> admit_free_or_offload(const Step& step);
  // Executes actions; `waiting` (if any) waits for the blocking ones. Returns whether it has to wait.
  bool execute(const std::vector<PolicyAction>& actions, const std::vector<StepId>& trigger,
               std::optional<StepId> waiting);
  StepId add_policy_step(StepKind kind, const TensorSlot& slot, std::string stream, std::vector<StepId> deps,
                         std::optional<OpId> op = std::nullopt, std::optional<StepId> run_before = std::nullopt,
                         double service_s = 0);
  std::vector<StepId> removal_deps(const TensorSlot& slot); // a victim is removed after its maker and its users
  // A plan free of a tensor whose host copy a policy offload made: once the plan touches that host copy no more (no
  // later prefetch, offload or host step of the tensor), the copy is dead too and a policy free on the host drops it,
  // so host memory does not fill with the copies of every tensor a policy ever swapped.
  void release_policy_host_copy(const Step& plan_free, std::vector<StepId> deps);

  MemoryPolicy* policy_;
  const Trace* trace_;
  const Plan* plan_;
  Schedule* schedule_;
  StepId plan_step_count_ = 0;
  std::vector<std::optional<OpId>> producer_;
  std::map<TensorSlot, History> histories_;
  std::map<TensorSlot, int> pins_;
  std::vector<std::vector<StepId>> realized_deps_; // per step
  std::vector<std::uint8_t> claimed_;              // admitted at least once (until its end)
  std::vector<std::vector<TensorSlot>> held_;      // the reads it has pinned so far (until its end)
  std::vector<std::uint8_t> started_;
  std::vector<std::uint8_t> skipped_;
  std::vector<std::vector<StepId>> inherited_; // skipped steps: what their dependents wait for instead
  std::vector<StepId> start_order_;
  std::set<std::pair<int, TensorId>> policy_host_copies_; // (instance, tensor) whose host copy a policy offload made
  std::map<std::pair<int, TensorId>, StepId> last_host_touch_; // the plan's last step using that host copy
  int current_iteration_ = 0; // of the plan step being admitted, started or finished: policy steps inherit it
  int current_loop_ = 0;      // likewise
};

} // namespace memsim
