#include "memsim/sim/execution.hpp"

#include "collectives.hpp"
#include "policy_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <tuple>

namespace memsim {

namespace {

class Execution final : private Schedule {
public:
  Execution(const Trace& trace, const Plan& plan, const ExecutionConfig& config, const OpTime& op_time,
            Physics& physics)
      : trace_(trace), plan_(plan), config_(config), op_time_(op_time), physics_(physics),
        ledger_(trace, with_instances(config.memory, plan))
  {
    const std::size_t step_count = plan_.steps.size();
    stream_of_step_.resize(step_count);
    remaining_deps_.resize(step_count);
    successors_.resize(step_count);
    for (const Step& step : plan_.steps) {
      auto [found, added] = stream_index_.emplace(std::make_pair(step.device, step.stream), streams_.size());
      if (added)
        streams_.push_back(Stream{});
      streams_[found->second].steps.push_back(step.id);
      stream_of_step_[static_cast<std::size_t>(step.id)] = found->second;
      std::vector<StepId> deps = step.deps;
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      remaining_deps_[static_cast<std::size_t>(step.id)] = static_cast<int>(deps.size());
      for (StepId dep : deps)
        successors_[static_cast<std::size_t>(dep)].push_back(step.id);
    }
    records_.resize(step_count);
    scope_opened_by_.assign(step_count, -1);
    scope_closed_by_.assign(step_count, -1);
    for (const InstanceScope& scope : plan_.instance_scopes) {
      if (scope.first_step < 0 || scope.last_step < 0 || static_cast<std::size_t>(scope.first_step) >= step_count ||
          static_cast<std::size_t>(scope.last_step) >= step_count)
        continue; // validate_plan refuses it with its location; an unvalidated plan must not index out of range
      scope_opened_by_[static_cast<std::size_t>(scope.first_step)] = scope.instance;
      scope_closed_by_[static_cast<std::size_t>(scope.last_step)] = scope.instance;
    }
    executed_.assign(step_count, 0);
    workspace_handle_.assign(step_count, 0);
    added_service_s_.assign(step_count, 0);
    if (config_.policy)
      policy_ = std::make_unique<PolicyDriver>(*config_.policy, trace_, plan_, static_cast<Schedule&>(*this));
  }

  RunResult run()
  {
    if (place_initial_residents()) {
      for (const Stream& stream : streams_)
        consider(stream.steps.front());
      loop();
    }
    for (std::size_t i = 0; i < records_.size(); ++i)
      if (executed_[i])
        result_.timeline.push_back(std::move(records_[i]));
    if (config_.build_realized_plan && !result_.error)
      result_.realized_plan = policy_ ? policy_->realized_plan(plan_) : plan_without_policy();
    result_.metrics = metrics_from_timeline(result_.timeline, result_.memory);
    result_.metrics.feasible = !result_.error;
    result_.metrics.peak_host_bytes = ledger_.peak(MemoryLedger::kHost);
    result_.metrics.swapped_bytes = swapped_bytes_;
    if (policy_)
      result_.metrics.policy = policy_->counters();
    result_.metrics.samples_per_s = samples_per_s();
    result_.metrics.peak_device_bytes = 0;
    for (std::size_t d = 0; d < ledger_.device_count(); ++d)
      result_.metrics.peak_device_bytes =
          std::max(result_.metrics.peak_device_bytes, ledger_.peak(static_cast<int>(d)));
    if (!config_.record_timeline) {
      result_.timeline.clear();
      result_.memory.clear();
    }
    return std::move(result_);
  }

private:
  struct Stream {
    std::vector<StepId> steps;
    std::size_t head = 0; // first step not finished
  };

  // Schedule (what the policy driver may do): steps the policy adds get ids after the plan's.
  const Step& step(StepId id) const override
  {
    const auto index = static_cast<std::size_t>(id);
    return index < plan_.steps.size() ? plan_.steps[index] : added_steps_[index - plan_.steps.size()];
  }
  std::size_t step_count() const override { return plan_.steps.size() + added_steps_.size(); }
  StepId add_step(Step added, std::optional<StepId> run_before) override;
  void add_dep(StepId id, StepId dep) override
  {
    ++remaining_deps_[static_cast<std::size_t>(id)];
    successors_[static_cast<std::size_t>(dep)].push_back(id);
  }
  bool finished(StepId id) const override { return executed_[static_cast<std::size_t>(id)] != 0; }
  std::optional<StepId> stream_predecessor(StepId id) const override
  {
    const Stream& stream = streams_[stream_of_step_[static_cast<std::size_t>(id)]];
    if (stream.head == 0 || stream.head > stream.steps.size())
      return std::nullopt;
    return stream.steps[stream.head - 1];
  }
  double now() const override { return now_; }
  const MemoryLedger& ledger() const override { return ledger_; }
  double op_time(OpId op, int device) const override { return op_time_(trace_.op(op), device); }
  const Machine* machine() const override { return config_.machine; }
  void add_service_time(StepId id, double seconds) override
  {
    added_service_s_[static_cast<std::size_t>(id)] += seconds;
  }
  // What step `id` pays before its work: the plan's service time and what the policy added.
  double service_s(StepId id) const { return step(id).service_s + added_service_s_[static_cast<std::size_t>(id)]; }

  Plan plan_without_policy() const
  {
    Plan plan = plan_;
    plan.policy.reset();
    return plan;
  }

  LedgerConfig with_instances(LedgerConfig memory, const Plan& plan) const
  {
    memory.instance_count = plan_instance_count(plan);
    memory.shared_tensor = shared_tensors(trace_, plan);
    return memory;
  }

  void loop()
  {
    std::vector<StepId> finished;
    while (true) {
      while (!ready_.empty() && !result_.error) {
        const StepId id = ready_.top();
        ready_.pop();
        start(id);
      }
      if (physics_.idle())
        break;
      finished.clear();
      now_ = physics_.advance(finished);
      std::sort(finished.begin(), finished.end());
      for (StepId id : finished)
        work_ended(id);
    }
    if (!result_.error && executed_count_ < step_count())
      report_deadlock();
  }

  // Queues `id` if it heads its stream and every dep has finished.
  void consider(StepId id)
  {
    const Stream& stream = streams_[stream_of_step_[static_cast<std::size_t>(id)]];
    if (stream.head < stream.steps.size() && stream.steps[stream.head] == id &&
        remaining_deps_[static_cast<std::size_t>(id)] == 0)
      ready_.push(id);
  }

  static std::string describe(const Step& step) { return describe_step(step); }
  std::string describe_tensor(TensorId id) const { return memsim::describe_tensor(trace_, id); }

  void fail(FailureKind kind, const Step* step, std::optional<TensorId> tensor, int space, FailureText text)
  {
    if (result_.error)
      return;
    text.time_s = now_;
    text.space = space_name(space);
    ExecutionError error;
    error.kind = kind;
    error.device = space;
    error.step = step ? step->id : -1;
    error.tensor = tensor;
    error.time_s = now_;
    error.bytes_in_use = text.numbers.in_use;
    error.bytes_requested = text.numbers.requested;
    error.largest_free_block = text.numbers.largest_free_block;
    error.message = failure_message(kind, text);
    if (const std::string why = policy_ ? policy_->refusal() : std::string(); !why.empty())
      error.message += fmt::format(" ({})", why);
    result_.error = std::move(error);
  }

  void sample(int space)
  {
    if (config_.record_timeline && space != MemoryLedger::kHost)
      result_.memory.push_back(MemorySample{space, now_, ledger_.in_use(space)});
  }

  bool place_initial_residents()
  {
    auto residents = initial_residents(trace_, plan_, ledger_.device_count());
    set_aside_scoped_residents(residents);
    for (std::size_t d = 0; d < residents.size(); ++d) {
      const int device = static_cast<int>(d);
      std::uint64_t needed = 0;
      for (const ResidentTensor& resident : residents[d])
        needed += trace_.tensor(resident.tensor).bytes;
      bool fits = needed <= ledger_.capacity(device);
      for (std::size_t i = 0; fits && i < residents[d].size(); ++i)
        fits = !ledger_.allocate(device, residents[d][i].instance, residents[d][i].tensor, -1);
      if (!fits) {
        ExecutionError error;
        error.kind = FailureKind::out_of_memory;
        error.device = device;
        error.bytes_in_use = needed;
        error.message =
            initial_residents_message(device,
                                      d < config_.device_names.size() ? config_.device_names[d] : space_name(device),
                                      needed, ledger_.capacity(device));
        result_.error = std::move(error);
        return false;
      }
    }
    if (!place_initial_host_residents())
      return false;
    for (std::size_t d = 0; d < ledger_.device_count(); ++d)
      result_.memory.push_back(MemorySample{static_cast<int>(d), 0.0, ledger_.in_use(static_cast<int>(d))});
    return true;
  }

  // v2 instance_scopes: a scoped instance's residents leave the t = 0 list for scoped_residents_, which its scopes
  // allocate and release. Shared kinds stay (one slot for every instance, never scoped).
  void set_aside_scoped_residents(std::vector<std::vector<ResidentTensor>>& residents)
  {
    if (plan_.instance_scopes.empty())
      return;
    const std::vector<std::uint8_t> scoped = scoped_instances(plan_);
    const std::vector<std::uint8_t> shared = shared_tensors(trace_, plan_);
    scoped_residents_.resize(scoped.size());
    for (std::size_t d = 0; d < residents.size(); ++d) {
      auto kept = residents[d].begin();
      for (const ResidentTensor& resident : residents[d]) {
        const bool is_shared = !shared.empty() && shared[static_cast<std::size_t>(resident.tensor)];
        if (scoped[static_cast<std::size_t>(resident.instance)] && !is_shared)
          scoped_residents_[static_cast<std::size_t>(resident.instance)].emplace_back(static_cast<int>(d),
                                                                                      resident.tensor);
        else
          *kept++ = resident;
      }
      residents[d].erase(kept, residents[d].end());
    }
  }

  // The scope that `step` opens: its instance's residents are allocated now (an OOM names this step).
  bool open_scope(const Step& step)
  {
    const auto index = static_cast<std::size_t>(step.id);
    if (index >= scope_opened_by_.size() || scope_opened_by_[index] < 0)
      return true;
    for (const auto& [device, tensor] : scoped_residents_[static_cast<std::size_t>(scope_opened_by_[index])])
      if (!allocate(step, device, tensor))
        return false;
    return true;
  }

  // The scope that step `id` closes: everything its instance still holds on the GPUs is released.
  void close_scope(StepId id)
  {
    const auto index = static_cast<std::size_t>(id);
    if (index >= scope_closed_by_.size() || scope_closed_by_[index] < 0)
      return;
    const int instance = scope_closed_by_[index];
    const std::vector<std::uint8_t> shared = shared_tensors(trace_, plan_);
    for (std::size_t d = 0; d < ledger_.device_count(); ++d) {
      const int device = static_cast<int>(d);
      bool released = false;
      for (std::size_t t = 0; t < trace_.tensors.size(); ++t) {
        const auto tensor = static_cast<TensorId>(t);
        if ((shared.empty() || !shared[t]) && ledger_.resident(device, instance, tensor)) {
          ledger_.release(device, instance, tensor, id);
          released = true;
        }
      }
      if (released)
        sample(device);
    }
  }

  // v2 initial_placement `host`: the bytes count against host memory from t = 0.
  bool place_initial_host_residents()
  {
    const std::vector<ResidentTensor> residents = initial_host_residents(trace_, plan_);
    std::uint64_t needed = 0;
    for (const ResidentTensor& resident : residents)
      needed += trace_.tensor(resident.tensor).bytes;
    bool fits = needed <= ledger_.capacity(MemoryLedger::kHost);
    for (std::size_t i = 0; fits && i < residents.size(); ++i)
      fits = !ledger_.allocate(MemoryLedger::kHost, residents[i].instance, residents[i].tensor, -1);
    if (fits)
      return true;
    ExecutionError error;
    error.kind = FailureKind::host_out_of_memory;
    error.device = MemoryLedger::kHost;
    error.bytes_in_use = needed;
    error.message = fmt::format("host memory full: the tensors placed on the host from the start need {} bytes, host "
                                "memory is {} bytes",
                                needed, ledger_.capacity(MemoryLedger::kHost));
    result_.error = std::move(error);
    return false;
  }

  bool require_resident(const Step& step, int space, TensorId tensor, const char* action)
  {
    if (ledger_.resident(space, step.instance, tensor))
      return true;
    fail(FailureKind::not_resident, &step, tensor, space,
         FailureText{describe(step), action, describe_tensor(tensor), "", 0,
                     Denial{FailureKind::not_resident, ledger_.in_use(space), 0, 0, 0}, -1});
    return false;
  }

  // A copy is allocated at its destination when it starts, but complete only when it ends. recv and host steps
  // (v2) check completeness: they fail with not_resident on a tensor still arriving by a send or an offload.
  // (v1 GPU reads keep their meaning: they check residency only.)
  bool require_arrived(const Step& step, int space, TensorId tensor, const char* action)
  {
    if (!arriving_.count({space, step.instance, tensor}))
      return true;
    fail(FailureKind::not_resident, &step, tensor, space,
         FailureText{describe(step), action, describe_tensor(tensor) + " (still arriving)", "", 0,
                     Denial{FailureKind::not_resident, ledger_.in_use(space), 0, 0, 0}, -1});
    return false;
  }

  bool allocate(const Step& step, int space, TensorId tensor)
  {
    auto denial = ledger_.allocate(space, step.instance, tensor, step.id);
    if (!denial) {
      sample(space);
      return true;
    }
    fail(denial->kind, &step, tensor, space,
         FailureText{describe(step), "allocates", describe_tensor(tensor), "", 0, *denial, -1});
    return false;
  }

  // Starts step `id` at now_: checks and allocations, then its work.
  void start(StepId id)
  {
    const Step& step = this->step(id);
    const auto admission = policy_ ? policy_->admit(id) : PolicyDriver::Admission::start;
    if (admission == PolicyDriver::Admission::wait)
      return; // considered again when what the policy added has finished
    StepRecord& record = records_[static_cast<std::size_t>(id)];
    record.step = id;
    record.iteration = step.iteration;
    record.loop = step.loop;
    record.kind = step.kind;
    record.device = step.device;
    record.stream = step.stream;
    record.start_s = now_;
    if (admission == PolicyDriver::Admission::skip) {
      finish(id); // a free of a tensor the policy already moved out: nothing left to do
      return;
    }
    if (!open_scope(step))
      return;
    std::optional<Work> work;
    switch (step.kind) {
    case StepKind::compute:
    case StepKind::recompute: {
      const Op& op = trace_.op(*step.op);
      record.label = op.name;
      for (TensorId input : op.inputs)
        if (!require_resident(step, step.device, input, "reads") ||
            (step.device == kHostNode && !require_arrived(step, step.device, input, "reads")))
          return;
      for (TensorId output : op.outputs) {
        if (writes_in_place(step, output))
          continue; // already there: no allocation
        if (!allocate(step, step.device, output))
          return;
        record.bytes += trace_.tensor(output).bytes;
      }
      if (op.workspace_bytes > 0) {
        auto denial = ledger_.allocate_bytes(step.device, op.workspace_bytes, step.id,
                                             workspace_handle_[static_cast<std::size_t>(id)]);
        if (denial) {
          fail(denial->kind, &step, std::nullopt, step.device,
               FailureText{describe(step), "allocates", fmt::format("{} bytes of workspace", op.workspace_bytes), "", 0,
                           *denial, -1});
          return;
        }
        sample(step.device);
      }
      work = Work{Work::Kind::compute, step.device, op_time_(op, step.device), 0, 0, 0, service_s(id)};
      record.start_s += work->service_s; // the op computes after the pause (its stream stalls meanwhile)
      break;
    }
    case StepKind::offload: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, step.device, tensor, "offloads"))
        return;
      if (!ledger_.resident(MemoryLedger::kHost, step.instance, tensor)) {
        if (auto denial = ledger_.allocate(MemoryLedger::kHost, step.instance, tensor, step.id)) {
          fail(denial->kind, &step, tensor, MemoryLedger::kHost,
               FailureText{describe(step), "offloads", describe_tensor(tensor), "", 0, *denial, -1});
          return;
        }
        arriving_.insert({MemoryLedger::kHost, step.instance, tensor});
      }
      work = Work{Work::Kind::transfer, 0, 0, step.device, kHostNode, record.bytes, service_s(id)};
      break;
    }
    case StepKind::prefetch: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!ledger_.resident(MemoryLedger::kHost, step.instance, tensor)) {
        fail(FailureKind::no_host_copy, &step, tensor, step.device,
             FailureText{describe(step), "prefetches", describe_tensor(tensor), "", 0,
                         Denial{FailureKind::no_host_copy, ledger_.in_use(step.device), record.bytes, 0, 0}, -1});
        return;
      }
      if (!allocate(step, step.device, tensor))
        return;
      if (dropped_with_host_copy_.erase({step.device, step.instance, tensor}) > 0)
        swapped_bytes_ += record.bytes; // a swap-in of what a free swapped out
      work = Work{Work::Kind::transfer, 0, 0, kHostNode, step.device, record.bytes, service_s(id)};
      break;
    }
    case StepKind::free: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, step.device, tensor, "frees"))
        return;
      if (step.device != kHostNode && ledger_.resident(MemoryLedger::kHost, step.instance, tensor))
        dropped_with_host_copy_.insert({step.device, step.instance, tensor});
      ledger_.release(step.device, step.instance, tensor, step.id);
      sample(step.device);
      break;
    }
    case StepKind::send: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, step.device, tensor, "sends"))
        return;
      if (!allocate(step, *step.peer, tensor))
        return;
      arriving_.insert({*step.peer, step.instance, tensor});
      work = Work{Work::Kind::transfer, 0, 0, step.device, *step.peer, record.bytes};
      break;
    }
    case StepKind::recv: // zero time: checks that the matching send has delivered the tensor here
      record.label = trace_.tensor(*step.tensor).name;
      if (!require_resident(step, step.device, *step.tensor, "receives") ||
          !require_arrived(step, step.device, *step.tensor, "receives"))
        return;
      break;
    case StepKind::split:
    case StepKind::merge:
      if (!start_view(step, record))
        return;
      break;
    case StepKind::allreduce:
    case StepKind::allgather:
    case StepKind::reducescatter:
      if (!start_collective(step, record))
        return;
      if (policy_)
        policy_->started(id);
      if (collectives_.find(id) == collectives_.end())
        finish(id); // nothing to move (a group of one, or every chunk took no time)
      return;
    }
    if (policy_)
      policy_->started(id);
    if (!work || physics_.start(id, *work))
      finish(id);
  }

  // Outputs already resident that a step writes where they are: a shared weight gradient a compute step adds
  // into, and any output of a recompute that is still there (the sibling of the one it brings back; DTR).
  bool writes_in_place(const Step& step, TensorId output) const
  {
    const Tensor& tensor = trace_.tensor(output);
    if (!ledger_.resident(step.device, step.instance, output))
      return false;
    return step.kind == StepKind::recompute ||
           (tensor.kind == TensorKind::weight_grad && shared_across_instances(plan_, tensor.kind));
  }

  // split / merge: zero-time views; the ledger moves residency between the parent and its parts.
  bool start_view(const Step& step, StepRecord& record)
  {
    const TensorId parent = *step.tensor;
    record.label = trace_.tensor(parent).name;
    record.bytes = 0;
    const bool splitting = step.kind == StepKind::split;
    if (splitting) {
      if (!require_resident(step, step.device, parent, "splits"))
        return false;
    } else {
      for (TensorId part : step.parts)
        if (!require_resident(step, step.device, part, "merges"))
          return false;
    }
    auto denial = splitting ? ledger_.split(step.device, step.instance, parent, step.parts, step.id)
                            : ledger_.merge(step.device, step.instance, parent, step.parts, step.id);
    if (denial) {
      const TensorId clash = ledger_.view_clash(step.device, step.instance, parent, step.parts, splitting);
      fail(denial->kind, &step, clash, step.device,
           FailureText{describe(step), splitting ? "splits into" : "merges into", describe_tensor(clash), "", 0,
                       *denial, -1});
      return false;
    }
    sample(step.device);
    return true;
  }

  // Collectives: the tensor must be resident on every device of the group (in place, no allocation); its ring
  // phases (collectives.hpp) run one after another.
  bool start_collective(const Step& step, StepRecord& record)
  {
    const TensorId tensor = *step.tensor;
    record.label = trace_.tensor(tensor).name;
    for (int device : step.group)
      if (!require_resident(step, device, tensor, "reduces or gathers"))
        return false;
    record.bytes = ring_bytes(step.kind, step.group, trace_.tensor(tensor).bytes);
    CollectiveRun run{ring_phase_count(step.kind, step.group.size()), 0, 0};
    if (run.phases > 0) {
      collectives_.emplace(step.id, run);
      start_phases(step.id);
    }
    return true;
  }

  // Starts phases of collective `id` until one has work in flight; the last one done ends the collective's run.
  void start_phases(StepId id)
  {
    auto found = collectives_.find(id);
    const Step& step = this->step(id);
    while (found->second.phase < found->second.phases) {
      int in_flight = 0;
      for (const ChunkTransfer& chunk : ring_phase(step.group, trace_.tensor(*step.tensor).bytes, found->second.phase))
        if (!physics_.start(id, Work{Work::Kind::transfer, 0, 0, chunk.from, chunk.to, chunk.bytes}))
          ++in_flight;
      ++found->second.phase;
      if (in_flight > 0) {
        found->second.in_flight = in_flight;
        return;
      }
    }
    collectives_.erase(found);
  }

  // Work of step `id` ended: a collective's chunk (its phase may be over), else the step's only work.
  void work_ended(StepId id)
  {
    auto found = collectives_.find(id);
    if (found == collectives_.end()) {
      finish(id);
      return;
    }
    if (--found->second.in_flight > 0)
      return;
    if (result_.error || found->second.phase >= found->second.phases) {
      collectives_.erase(found); // after a failure nothing new starts: the collective ends with this phase
      finish(id);
      return;
    }
    start_phases(id);
    if (collectives_.find(id) == collectives_.end())
      finish(id);
  }

  void finish(StepId id)
  {
    const Step& step = this->step(id);
    records_[static_cast<std::size_t>(id)].end_s = now_;
    if (step.op) {
      const std::uint64_t workspace = trace_.op(*step.op).workspace_bytes;
      if (workspace > 0) {
        ledger_.release_bytes(step.device, workspace, workspace_handle_[static_cast<std::size_t>(id)], id);
        sample(step.device);
      }
    }
    if (step.kind == StepKind::offload)
      arriving_.erase({MemoryLedger::kHost, step.instance, *step.tensor});
    else if (step.kind == StepKind::send)
      arriving_.erase({*step.peer, step.instance, *step.tensor});
    executed_[static_cast<std::size_t>(id)] = 1;
    ++executed_count_;
    close_scope(id);
    if (result_.error)
      return; // draining work in flight: nothing new starts
    if (policy_)
      policy_->finished(id);
    Stream& stream = streams_[stream_of_step_[static_cast<std::size_t>(id)]];
    ++stream.head;
    if (stream.head < stream.steps.size())
      consider(stream.steps[stream.head]);
    for (StepId successor : successors_[static_cast<std::size_t>(id)])
      if (--remaining_deps_[static_cast<std::size_t>(successor)] == 0)
        consider(successor);
  }

  // The plan's own count, else each instance trains the trace's samples (batch x fused models) once per iteration.
  std::optional<double> samples_per_s() const
  {
    const std::optional<std::int64_t> per_instance = trace_samples_per_iteration(trace_);
    const double time = result_.metrics.steady_iteration_time_s;
    if (!(time > 0))
      return std::nullopt;
    if (plan_.samples_per_iteration)
      return static_cast<double>(*plan_.samples_per_iteration) / time;
    if (!per_instance)
      return std::nullopt;
    return static_cast<double>(*per_instance) * static_cast<double>(plan_instance_count(plan_)) / time;
  }

  // Nothing is in flight or ready, yet steps remain: the first blocked stream names the dep it waits for.
  void report_deadlock()
  {
    for (const Stream& stream : streams_) {
      if (stream.head >= stream.steps.size())
        continue;
      const Step& step = this->step(stream.steps[stream.head]);
      StepId missing = -1;
      for (StepId dep : step.deps)
        if (!executed_[static_cast<std::size_t>(dep)]) {
          missing = dep;
          break;
        }
      fail(FailureKind::deadlock, &step, step.tensor, step.device,
           FailureText{describe(step), "", "", "", 0,
                       Denial{FailureKind::deadlock, ledger_.in_use(step.device), 0, 0, 0}, missing});
      return;
    }
  }

  const Trace& trace_;
  const Plan& plan_;
  std::deque<Step> added_steps_; // by the policy
  std::unique_ptr<PolicyDriver> policy_;
  std::map<std::pair<int, std::string>, std::size_t> stream_index_;
  const ExecutionConfig& config_;
  const OpTime& op_time_;
  Physics& physics_;
  MemoryLedger ledger_;
  std::vector<Stream> streams_;
  std::vector<std::size_t> stream_of_step_;
  std::vector<int> remaining_deps_;
  std::vector<std::vector<StepId>> successors_;
  std::vector<StepRecord> records_;
  std::vector<std::uint8_t> executed_;
  std::vector<std::uint64_t> workspace_handle_;
  std::vector<double> added_service_s_; // per step: the policy's pause before it (add_service_time)
  std::vector<int> scope_opened_by_;    // per plan step: the instance whose scope it opens, or -1
  std::vector<int> scope_closed_by_;    // per plan step: the instance whose scope it closes, or -1
  std::vector<std::vector<std::pair<int, TensorId>>> scoped_residents_; // per instance: (device, tensor)
  std::size_t executed_count_ = 0;
  std::uint64_t swapped_bytes_ = 0;
  std::set<std::tuple<int, int, TensorId>> dropped_with_host_copy_; // (GPU, instance, tensor) freed, host copy kept
  std::priority_queue<StepId, std::vector<StepId>, std::greater<>> ready_;
  struct CollectiveRun {
    int phases = 0;
    int phase = 0;     // the next phase to start
    int in_flight = 0; // transfers of the current phase still moving
  };
  std::map<StepId, CollectiveRun> collectives_;
  std::set<std::tuple<int, int, TensorId>> arriving_; // (space, instance, tensor) of copies in flight
  double now_ = 0;
  RunResult result_;
};

StepId Execution::add_step(Step added, std::optional<StepId> run_before)
{
  const auto id = static_cast<StepId>(step_count());
  added.id = id;
  std::size_t stream_number = 0;
  if (run_before) {
    stream_number = stream_of_step_[static_cast<std::size_t>(*run_before)];
    Stream& stream = streams_[stream_number];
    auto position =
        std::find(stream.steps.begin() + static_cast<std::ptrdiff_t>(stream.head), stream.steps.end(), *run_before);
    stream.steps.insert(position, id);
  } else {
    auto [found, created] = stream_index_.emplace(std::make_pair(added.device, added.stream), streams_.size());
    if (created)
      streams_.push_back(Stream{});
    stream_number = found->second;
    streams_[stream_number].steps.push_back(id);
  }
  stream_of_step_.push_back(stream_number);
  records_.emplace_back();
  executed_.push_back(0);
  workspace_handle_.push_back(0);
  added_service_s_.push_back(0);
  successors_.emplace_back();
  remaining_deps_.push_back(0);
  for (StepId dep : added.deps)
    if (!finished(dep))
      add_dep(id, dep);
  added_steps_.push_back(std::move(added));
  consider(id);
  return id;
}

} // namespace

RunResult execute_plan(const Trace& trace, const Plan& plan, const ExecutionConfig& config, const OpTime& op_time,
                       Physics& physics)
{
  Execution execution(trace, plan, config, op_time, physics);
  return execution.run();
}

} // namespace memsim
