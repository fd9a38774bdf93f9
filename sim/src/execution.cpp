#include "memsim/sim/execution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>

namespace memsim {

std::size_t plan_instance_count(const Plan& plan)
{
  int instances = 1;
  for (const Step& step : plan.steps)
    instances = std::max(instances, step.instance + 1);
  return static_cast<std::size_t>(instances);
}

std::vector<std::vector<ResidentTensor>> initial_residents(const Trace& trace, const Plan& plan,
                                                           std::size_t device_count)
{
  std::vector<std::uint8_t> produced(trace.tensors.size(), 0);
  for (const Op& op : trace.ops)
    for (TensorId id : op.outputs)
      produced[static_cast<std::size_t>(id)] = 1;
  auto exists_before = [&](TensorId id) {
    return is_initially_resident(trace.tensor(id).kind) && !produced[static_cast<std::size_t>(id)];
  };

  const std::size_t instances = plan_instance_count(plan);
  const std::size_t tensors = trace.tensors.size();
  // Per (instance, tensor): bit d set when a step of that instance on device d references it.
  std::map<std::pair<int, TensorId>, std::vector<std::uint8_t>> referenced;
  std::vector<int> lowest_device(instances, -1);
  for (const Step& step : plan.steps) {
    if (step.device < 0 || static_cast<std::size_t>(step.device) >= device_count)
      continue;
    int& lowest = lowest_device[static_cast<std::size_t>(step.instance)];
    lowest = lowest < 0 ? step.device : std::min(lowest, step.device);
    auto mark = [&](TensorId id) {
      if (!exists_before(id))
        return;
      auto& devices = referenced[{step.instance, id}];
      devices.resize(device_count, 0);
      devices[static_cast<std::size_t>(step.device)] = 1;
    };
    if (step.op)
      for (TensorId id : trace.op(*step.op).inputs)
        mark(id);
    if (step.tensor)
      mark(*step.tensor);
  }
  std::vector<std::vector<ResidentTensor>> residents(device_count);
  for (std::size_t instance = 0; instance < instances; ++instance) {
    if (lowest_device[instance] < 0)
      continue; // no step runs this instance
    for (std::size_t t = 0; t < tensors; ++t) {
      const auto id = static_cast<TensorId>(t);
      if (!exists_before(id))
        continue;
      auto found = referenced.find({static_cast<int>(instance), id});
      for (std::size_t d = 0; d < device_count; ++d) {
        const bool here = found != referenced.end() ? found->second[d] != 0
                                                    : static_cast<int>(d) == lowest_device[instance];
        if (here)
          residents[d].push_back(ResidentTensor{static_cast<int>(instance), id});
      }
    }
  }
  return residents;
}

namespace {

class Execution {
public:
  Execution(const Trace& trace, const Plan& plan, const ExecutionConfig& config, const OpTime& op_time,
            Physics& physics)
      : trace_(trace), plan_(plan), config_(config), op_time_(op_time), physics_(physics),
        ledger_(trace, with_instances(config.memory, plan))
  {
    const std::size_t step_count = plan_.steps.size();
    index_streams();
    index_deps();
    start_s_.assign(step_count, 0.0);
    end_s_.assign(step_count, 0.0);
    executed_.assign(step_count, 0);
    workspace_handle_.assign(step_count, 0);
  }

  RunResult run()
  {
    if (place_initial_residents()) {
      for (const Stream& stream : streams_)
        consider(stream.steps.front());
      loop();
    }
    MetricsAccumulator metrics;
    if (config_.record_timeline)
      result_.timeline.reserve(executed_count_);
    for (std::size_t i = 0; i < executed_.size(); ++i) {
      if (!executed_[i])
        continue;
      const Step& step = plan_.steps[i];
      metrics.add(step.kind, step.device, step.stream, start_s_[i], end_s_[i], step_bytes(step));
      if (config_.record_timeline)
        result_.timeline.push_back(record_of(step));
    }
    result_.metrics = metrics.finish(result_.memory);
    result_.metrics.feasible = !result_.error;
    result_.metrics.peak_host_bytes = ledger_.peak(MemoryLedger::kHost);
    result_.metrics.peak_device_bytes = 0;
    for (std::size_t d = 0; d < ledger_.device_count(); ++d)
      result_.metrics.peak_device_bytes = std::max(result_.metrics.peak_device_bytes, ledger_.peak(static_cast<int>(d)));
    if (!config_.record_timeline)
      result_.memory.clear();
    return std::move(result_);
  }

private:
  struct Stream {
    int device = 0;
    const std::string* name = nullptr;
    std::vector<StepId> steps;
    std::size_t head = 0; // first step not finished
  };

  // Streams in order of first appearance, and each step's stream.
  void index_streams()
  {
    std::map<std::pair<int, std::string_view>, std::size_t> stream_index;
    stream_of_step_.resize(plan_.steps.size());
    std::size_t last = 0; // consecutive steps mostly share a stream
    for (const Step& step : plan_.steps) {
      if (last >= streams_.size() || streams_[last].device != step.device || *streams_[last].name != step.stream) {
        auto [found, added] = stream_index.emplace(std::make_pair(step.device, std::string_view(step.stream)),
                                                   streams_.size());
        if (added)
          streams_.push_back(Stream{step.device, &step.stream, {}, 0});
        last = found->second;
      }
      streams_[last].steps.push_back(step.id);
      stream_of_step_[static_cast<std::size_t>(step.id)] = last;
    }
  }

  // Each step's count of distinct deps, and the steps that wait on each step (successors_ from
  // successor_begin_[id] to successor_begin_[id + 1], in step-id order).
  void index_deps()
  {
    const std::size_t step_count = plan_.steps.size();
    remaining_deps_.assign(step_count, 0);
    successor_begin_.assign(step_count + 1, 0);
    std::vector<StepId> scratch;
    auto distinct_deps = [&scratch](const Step& step) -> const std::vector<StepId>& {
      const std::vector<StepId>& deps = step.deps;
      if (std::adjacent_find(deps.begin(), deps.end(), std::greater_equal<>()) == deps.end())
        return deps; // already increasing: the usual case
      scratch.assign(deps.begin(), deps.end());
      std::sort(scratch.begin(), scratch.end());
      scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
      return scratch;
    };
    for (const Step& step : plan_.steps) {
      const std::vector<StepId>& deps = distinct_deps(step);
      remaining_deps_[static_cast<std::size_t>(step.id)] = static_cast<int>(deps.size());
      for (StepId dep : deps)
        ++successor_begin_[static_cast<std::size_t>(dep) + 1];
    }
    for (std::size_t i = 0; i < step_count; ++i)
      successor_begin_[i + 1] += successor_begin_[i];
    successors_.resize(successor_begin_[step_count]);
    std::vector<std::size_t> next(successor_begin_.begin(), successor_begin_.end() - 1);
    for (const Step& step : plan_.steps)
      for (StepId dep : distinct_deps(step))
        successors_[next[static_cast<std::size_t>(dep)]++] = step.id;
  }

  // What a finished step's record holds.
  std::uint64_t step_bytes(const Step& step) const
  {
    switch (step.kind) {
    case StepKind::compute:
    case StepKind::recompute: {
      std::uint64_t bytes = 0;
      for (TensorId output : trace_.op(*step.op).outputs)
        bytes += trace_.tensor(output).bytes;
      return bytes;
    }
    case StepKind::recv: return 0;
    default: return trace_.tensor(*step.tensor).bytes;
    }
  }
  StepRecord record_of(const Step& step) const
  {
    const auto index = static_cast<std::size_t>(step.id);
    return StepRecord{step.id,
                      step.kind,
                      step.device,
                      step.stream,
                      start_s_[index],
                      end_s_[index],
                      step_bytes(step),
                      step.op ? trace_.op(*step.op).name : trace_.tensor(*step.tensor).name};
  }

  static LedgerConfig with_instances(LedgerConfig memory, const Plan& plan)
  {
    memory.instance_count = plan_instance_count(plan);
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
        finish(id);
    }
    if (!result_.error && executed_count_ < plan_.steps.size())
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

  std::string describe(const Step& step) const
  {
    return fmt::format("step {} ({} on gpu{}/{})", step.id, to_string(step.kind), step.device, step.stream);
  }
  std::string describe_tensor(TensorId id) const
  {
    return fmt::format("tensor {} '{}' ({} bytes)", id, trace_.tensor(id).name, trace_.tensor(id).bytes);
  }
  static std::string space_name(int space) { return space == MemoryLedger::kHost ? "host" : fmt::format("gpu{}", space); }

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
    result_.error = std::move(error);
  }

  void sample(int space)
  {
    if (config_.record_timeline && space != MemoryLedger::kHost)
      result_.memory.push_back(MemorySample{space, now_, ledger_.in_use(space)});
  }

  bool place_initial_residents()
  {
    const auto residents = initial_residents(trace_, plan_, ledger_.device_count());
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
        error.message = fmt::format("device {} ('{}'): the tensors resident from the start need {} bytes, budget is {} "
                                    "bytes",
                                    d, d < config_.device_names.size() ? config_.device_names[d] : space_name(device),
                                    needed, ledger_.capacity(device));
        result_.error = std::move(error);
        return false;
      }
    }
    for (std::size_t d = 0; d < ledger_.device_count(); ++d)
      result_.memory.push_back(MemorySample{static_cast<int>(d), 0.0, ledger_.in_use(static_cast<int>(d))});
    return true;
  }

  bool require_resident(const Step& step, int space, TensorId tensor, const char* action)
  {
    if (ledger_.resident(space, step.instance, tensor))
      return true;
    fail(FailureKind::not_resident, &step, tensor, space,
         FailureText{describe(step), action, describe_tensor(tensor), "", 0, Denial{FailureKind::not_resident,
                                                                                    ledger_.in_use(space), 0, 0, 0},
                     -1});
    return false;
  }

  bool allocate(const Step& step, int space, TensorId tensor)
  {
    auto denial = ledger_.allocate(space, step.instance, tensor, step.id);
    if (!denial) {
      sample(space);
      return true;
    }
    fail(denial->kind, &step, tensor, space, FailureText{describe(step), "allocates", describe_tensor(tensor), "", 0, *denial, -1});
    return false;
  }

  // Starts step `id` at now_: checks and allocations, then its work.
  void start(StepId id)
  {
    const Step& step = plan_.steps[static_cast<std::size_t>(id)];
    start_s_[static_cast<std::size_t>(id)] = now_;
    std::optional<Work> work;
    switch (step.kind) {
    case StepKind::compute:
    case StepKind::recompute: {
      const Op& op = trace_.op(*step.op);
      for (TensorId input : op.inputs)
        if (!require_resident(step, step.device, input, "reads"))
          return;
      for (TensorId output : op.outputs)
        if (!allocate(step, step.device, output))
          return;
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
      work = Work{Work::Kind::compute, step.device, op_time_(op, step.device), 0, 0, 0};
      break;
    }
    case StepKind::offload: {
      const TensorId tensor = *step.tensor;
      const std::uint64_t bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, step.device, tensor, "offloads"))
        return;
      if (!ledger_.resident(MemoryLedger::kHost, step.instance, tensor)) {
        if (auto denial = ledger_.allocate(MemoryLedger::kHost, step.instance, tensor, step.id)) {
          fail(denial->kind, &step, tensor, MemoryLedger::kHost,
               FailureText{describe(step), "offloads", describe_tensor(tensor), "", 0, *denial, -1});
          return;
        }
      }
      work = Work{Work::Kind::transfer, 0, 0, step.device, kHostNode, bytes};
      break;
    }
    case StepKind::prefetch: {
      const TensorId tensor = *step.tensor;
      const std::uint64_t bytes = trace_.tensor(tensor).bytes;
      if (!ledger_.resident(MemoryLedger::kHost, step.instance, tensor)) {
        fail(FailureKind::no_host_copy, &step, tensor, step.device,
             FailureText{describe(step), "prefetches", describe_tensor(tensor), "", 0,
                         Denial{FailureKind::no_host_copy, ledger_.in_use(step.device), bytes, 0, 0}, -1});
        return;
      }
      if (!allocate(step, step.device, tensor))
        return;
      work = Work{Work::Kind::transfer, 0, 0, kHostNode, step.device, bytes};
      break;
    }
    case StepKind::free: {
      const TensorId tensor = *step.tensor;
      if (!require_resident(step, step.device, tensor, "frees"))
        return;
      ledger_.release(step.device, step.instance, tensor, step.id);
      sample(step.device);
      break;
    }
    case StepKind::send: {
      const TensorId tensor = *step.tensor;
      const std::uint64_t bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, step.device, tensor, "sends"))
        return;
      if (!allocate(step, *step.peer, tensor))
        return;
      work = Work{Work::Kind::transfer, 0, 0, step.device, *step.peer, bytes};
      break;
    }
    case StepKind::recv: break;
    }
    if (!work || physics_.start(id, *work))
      finish(id);
  }

  void finish(StepId id)
  {
    const Step& step = plan_.steps[static_cast<std::size_t>(id)];
    end_s_[static_cast<std::size_t>(id)] = now_;
    if (step.op) {
      const std::uint64_t workspace = trace_.op(*step.op).workspace_bytes;
      if (workspace > 0) {
        ledger_.release_bytes(step.device, workspace, workspace_handle_[static_cast<std::size_t>(id)], id);
        sample(step.device);
      }
    }
    executed_[static_cast<std::size_t>(id)] = 1;
    ++executed_count_;
    if (result_.error)
      return; // draining work in flight: nothing new starts
    Stream& stream = streams_[stream_of_step_[static_cast<std::size_t>(id)]];
    ++stream.head;
    if (stream.head < stream.steps.size())
      consider(stream.steps[stream.head]);
    for (std::size_t i = successor_begin_[static_cast<std::size_t>(id)];
         i < successor_begin_[static_cast<std::size_t>(id) + 1]; ++i)
      if (--remaining_deps_[static_cast<std::size_t>(successors_[i])] == 0)
        consider(successors_[i]);
  }

  // Nothing is in flight or ready, yet steps remain: the first blocked stream names the dep it waits for.
  void report_deadlock()
  {
    for (const Stream& stream : streams_) {
      if (stream.head >= stream.steps.size())
        continue;
      const Step& step = plan_.steps[static_cast<std::size_t>(stream.steps[stream.head])];
      StepId missing = -1;
      for (StepId dep : step.deps)
        if (!executed_[static_cast<std::size_t>(dep)]) {
          missing = dep;
          break;
        }
      fail(FailureKind::deadlock, &step, step.tensor, step.device,
           FailureText{describe(step), "", "", "", 0, Denial{FailureKind::deadlock, ledger_.in_use(step.device), 0, 0, 0},
                       missing});
      return;
    }
  }

  const Trace& trace_;
  const Plan& plan_;
  const ExecutionConfig& config_;
  const OpTime& op_time_;
  Physics& physics_;
  MemoryLedger ledger_;
  std::vector<Stream> streams_;
  std::vector<std::size_t> stream_of_step_;
  std::vector<int> remaining_deps_;
  std::vector<std::size_t> successor_begin_;
  std::vector<StepId> successors_;
  std::vector<double> start_s_;
  std::vector<double> end_s_;
  std::vector<std::uint8_t> executed_;
  std::vector<std::uint64_t> workspace_handle_;
  std::size_t executed_count_ = 0;
  std::priority_queue<StepId, std::vector<StepId>, std::greater<>> ready_;
  double now_ = 0;
  RunResult result_;
};

} // namespace

RunResult execute_plan(const Trace& trace, const Plan& plan, const ExecutionConfig& config, const OpTime& op_time,
                       Physics& physics)
{
  Execution execution(trace, plan, config, op_time, physics);
  return execution.run();
}

} // namespace memsim
