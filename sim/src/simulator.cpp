// The SimGrid executor. One actor per (device, stream) walks its steps in list order; a step whose deps are not
// all finished parks the actor on its own semaphore, and whoever finishes the last missing dep wakes it. No
// activity DAG is pre-built (DESIGN.md: that does not scale on SimGrid 3.32).
#include "memsim/sim/simulator.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/platform.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Semaphore.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

namespace memsim {

namespace s4u = simgrid::s4u;

namespace {

struct StreamQueue {
  int device = 0;
  std::string name;
  std::vector<StepId> steps;
  s4u::SemaphorePtr wake;
  StepId waiting_on = -1;
};

// Residency and memory of one device (or of the host), per (instance, tensor).
struct MemorySpace {
  std::vector<std::uint8_t> resident;
  std::uint64_t in_use = 0;
  std::uint64_t capacity = 0;
  std::uint64_t peak = 0;
};

class Execution {
public:
  Execution(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options)
      : trace_(trace), machine_(machine), plan_(plan), options_(options), cost_(trace, machine)
  {
    tensor_count_ = trace_.tensors.size();
    int instances = 1;
    for (const Step& step : plan_.steps)
      instances = std::max(instances, step.instance + 1);
    instance_count_ = static_cast<std::size_t>(instances);

    const std::size_t slots = instance_count_ * tensor_count_;
    devices_.resize(machine_.gpus.size());
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      devices_[d].resident.assign(slots, 0);
      const std::uint64_t memory = machine_.gpus[d].memory;
      devices_[d].capacity = plan_.budget_bytes == 0 ? memory : std::min(plan_.budget_bytes, memory);
    }
    host_.resident.assign(slots, 0);
    host_.capacity = machine_.host.memory == 0 ? UINT64_MAX : machine_.host.memory;

    // Initially resident tensors (inputs, weights, optimizer state) live on each device whose steps use them.
    for (const Step& step : plan_.steps) {
      auto make_resident = [&](TensorId id) {
        if (!is_initially_resident(trace_.tensor(id).kind))
          return;
        MemorySpace& space = devices_[static_cast<std::size_t>(step.device)];
        std::uint8_t& flag = space.resident[slot(step.instance, id)];
        if (!flag) {
          flag = 1;
          space.in_use += trace_.tensor(id).bytes;
        }
      };
      if (step.op)
        for (TensorId id : trace_.op(*step.op).inputs)
          make_resident(id);
      if (step.tensor)
        make_resident(*step.tensor);
    }
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      devices_[d].peak = devices_[d].in_use;
      result_.memory.push_back(MemorySample{static_cast<int>(d), 0.0, devices_[d].in_use});
    }

    // Streams in order of first appearance; successors of each step for the wake-ups.
    std::map<std::pair<int, std::string>, std::size_t> stream_index;
    stream_of_step_.resize(plan_.steps.size());
    remaining_deps_.resize(plan_.steps.size());
    successors_.resize(plan_.steps.size());
    for (const Step& step : plan_.steps) {
      auto key = std::make_pair(step.device, step.stream);
      auto found = stream_index.find(key);
      if (found == stream_index.end()) {
        found = stream_index.emplace(key, streams_.size()).first;
        streams_.push_back(StreamQueue{step.device, step.stream, {}, s4u::Semaphore::create(0), -1});
      }
      streams_[found->second].steps.push_back(step.id);
      stream_of_step_[static_cast<std::size_t>(step.id)] = found->second;
      std::vector<StepId> deps = step.deps;
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      remaining_deps_[static_cast<std::size_t>(step.id)] = static_cast<int>(deps.size());
      for (StepId dep : deps)
        successors_[static_cast<std::size_t>(dep)].push_back(step.id);
    }
    records_.resize(plan_.steps.size());
    executed_.assign(plan_.steps.size(), 0);
  }

  RunResult run()
  {
    std::vector<std::string> arguments{"memsim", "--log=root.thres:critical", "--log=xbt_cfg.thres:critical"};
    std::vector<char*> argv;
    for (auto& argument : arguments)
      argv.push_back(argument.data());
    int argc = static_cast<int>(argv.size());
    s4u::Engine engine(&argc, argv.data());
    platform_ = build_platform(engine, machine_);

    for (std::size_t d = 0; d < devices_.size(); ++d)
      if (devices_[d].in_use > devices_[d].capacity && !result_.error)
        fail(-1, std::nullopt, devices_[d].in_use, 0,
             fmt::format("device {} ('{}'): the tensors resident from the start need {} bytes, budget is {} bytes", d,
                         machine_.gpus[d].name, devices_[d].in_use, devices_[d].capacity));

    if (!result_.error)
      for (std::size_t q = 0; q < streams_.size(); ++q)
        s4u::Actor::create(fmt::format("gpu{}/{}", streams_[q].device, streams_[q].name),
                           platform_.gpu_hosts[static_cast<std::size_t>(streams_[q].device)],
                           [this, q] { run_stream(q); });
    engine.run();

    for (std::size_t i = 0; i < records_.size(); ++i)
      if (executed_[i])
        result_.timeline.push_back(std::move(records_[i]));
    result_.metrics = metrics_from_timeline(result_.timeline, result_.memory);
    result_.metrics.feasible = !result_.error;
    result_.metrics.peak_host_bytes = host_.peak;
    result_.metrics.peak_device_bytes = 0;
    for (const MemorySpace& device : devices_)
      result_.metrics.peak_device_bytes = std::max(result_.metrics.peak_device_bytes, device.peak);
    if (!options_.record_timeline) {
      result_.timeline.clear();
      result_.memory.clear();
    }
    return std::move(result_);
  }

private:
  std::size_t slot(int instance, TensorId tensor) const
  {
    return static_cast<std::size_t>(instance) * tensor_count_ + static_cast<std::size_t>(tensor);
  }

  void fail(StepId step, std::optional<TensorId> tensor, std::uint64_t in_use, std::uint64_t requested,
            std::string message)
  {
    if (result_.error)
      return;
    ExecutionError error;
    error.step = step;
    error.tensor = tensor;
    error.time_s = s4u::Engine::get_clock();
    error.bytes_in_use = in_use;
    error.bytes_requested = requested;
    error.message = std::move(message);
    result_.error = std::move(error);
    aborted_ = true;
    for (StreamQueue& stream : streams_)
      stream.wake->release(); // let parked actors see the abort and leave
  }

  std::string describe(const Step& step) const
  {
    return fmt::format("step {} ({} on gpu{}/{})", step.id, to_string(step.kind), step.device, step.stream);
  }
  std::string describe_tensor(TensorId id) const
  {
    return fmt::format("tensor {} '{}' ({} bytes)", id, trace_.tensor(id).name, trace_.tensor(id).bytes);
  }

  void record_memory(int device)
  {
    MemorySpace& space = devices_[static_cast<std::size_t>(device)];
    space.peak = std::max(space.peak, space.in_use);
    if (options_.record_timeline)
      result_.memory.push_back(MemorySample{device, s4u::Engine::get_clock(), space.in_use});
  }

  // Allocates `tensor` on `device` (or `bytes` of workspace when tensor is absent); false after an error.
  bool allocate(const Step& step, int device, std::optional<TensorId> tensor, std::uint64_t bytes)
  {
    MemorySpace& space = devices_[static_cast<std::size_t>(device)];
    if (tensor) {
      std::uint8_t& flag = space.resident[slot(step.instance, *tensor)];
      if (flag) {
        fail(step.id, tensor, space.in_use, bytes,
             fmt::format("{} allocates {} on gpu{} but it is already resident there (double allocation) at t={:.9f}s",
                         describe(step), describe_tensor(*tensor), device, s4u::Engine::get_clock()));
        return false;
      }
      flag = 1;
    }
    if (space.in_use + bytes > space.capacity) {
      fail(step.id, tensor, space.in_use, bytes,
           fmt::format("out of memory: {} allocates {} on gpu{} at t={:.9f}s with {} bytes in use; budget is {} "
                       "bytes",
                       describe(step), tensor ? describe_tensor(*tensor) : fmt::format("{} bytes of workspace", bytes),
                       device, s4u::Engine::get_clock(), space.in_use, space.capacity));
      return false;
    }
    space.in_use += bytes;
    record_memory(device);
    return true;
  }

  bool require_resident(const Step& step, TensorId tensor, const char* why)
  {
    const MemorySpace& space = devices_[static_cast<std::size_t>(step.device)];
    if (space.resident[slot(step.instance, tensor)])
      return true;
    fail(step.id, tensor, space.in_use, 0,
         fmt::format("{} {} {} but it is not resident on gpu{} at t={:.9f}s (never produced, freed, or not yet "
                     "prefetched)",
                     describe(step), why, describe_tensor(tensor), step.device, s4u::Engine::get_clock()));
    return false;
  }

  void release(int device, int instance, TensorId tensor)
  {
    MemorySpace& space = devices_[static_cast<std::size_t>(device)];
    space.resident[slot(instance, tensor)] = 0;
    space.in_use -= trace_.tensor(tensor).bytes;
    record_memory(device);
  }

  // Runs one step on the calling actor; false when it failed (the simulation is aborted).
  bool execute(const Step& step, StepRecord& record)
  {
    const auto gpu = static_cast<std::size_t>(step.device);
    switch (step.kind) {
    case StepKind::compute:
    case StepKind::recompute: {
      const Op& op = trace_.op(*step.op);
      record.label = op.name;
      for (TensorId input : op.inputs)
        if (!require_resident(step, input, "reads"))
          return false;
      for (TensorId output : op.outputs) {
        if (!allocate(step, step.device, output, trace_.tensor(output).bytes))
          return false;
        record.bytes += trace_.tensor(output).bytes;
      }
      if (op.workspace_bytes > 0 && !allocate(step, step.device, std::nullopt, op.workspace_bytes))
        return false;
      const double seconds = cost_.op_time(op, static_cast<std::size_t>(step.device));
      if (seconds > 0)
        s4u::this_actor::execute(seconds * SimPlatform::kSimSpeed);
      if (op.workspace_bytes > 0) {
        devices_[static_cast<std::size_t>(step.device)].in_use -= op.workspace_bytes;
        record_memory(step.device);
      }
      return true;
    }
    case StepKind::offload: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, tensor, "offloads"))
        return false;
      std::uint8_t& on_host = host_.resident[slot(step.instance, tensor)];
      if (!on_host) {
        if (host_.in_use + record.bytes > host_.capacity) {
          fail(step.id, tensor, host_.in_use, record.bytes,
               fmt::format("host memory full: {} needs {} bytes for {} at t={:.9f}s with {} of {} bytes in use",
                           describe(step), record.bytes, describe_tensor(tensor), s4u::Engine::get_clock(),
                           host_.in_use, host_.capacity));
          return false;
        }
        on_host = 1;
        host_.in_use += record.bytes;
        host_.peak = std::max(host_.peak, host_.in_use);
      }
      transfer(platform_, gpu, platform_.host_node(), record.bytes);
      return true;
    }
    case StepKind::prefetch: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!host_.resident[slot(step.instance, tensor)]) {
        fail(step.id, tensor, devices_[static_cast<std::size_t>(step.device)].in_use, record.bytes,
             fmt::format("{} prefetches {} at t={:.9f}s but the host has no copy (it was never offloaded)",
                         describe(step), describe_tensor(tensor), s4u::Engine::get_clock()));
        return false;
      }
      if (!allocate(step, step.device, tensor, record.bytes))
        return false;
      transfer(platform_, platform_.host_node(), gpu, record.bytes);
      return true;
    }
    case StepKind::free: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, tensor, "frees"))
        return false;
      release(step.device, step.instance, tensor);
      return true;
    }
    case StepKind::send: {
      const TensorId tensor = *step.tensor;
      record.label = trace_.tensor(tensor).name;
      record.bytes = trace_.tensor(tensor).bytes;
      if (!require_resident(step, tensor, "sends"))
        return false;
      if (!allocate(step, *step.peer, tensor, record.bytes))
        return false;
      transfer(platform_, gpu, static_cast<std::size_t>(*step.peer), record.bytes);
      return true;
    }
    case StepKind::recv:
      record.label = trace_.tensor(*step.tensor).name;
      return true;
    }
    return true;
  }

  void finish(StepId id)
  {
    for (StepId successor : successors_[static_cast<std::size_t>(id)]) {
      if (--remaining_deps_[static_cast<std::size_t>(successor)] == 0) {
        StreamQueue& stream = streams_[stream_of_step_[static_cast<std::size_t>(successor)]];
        if (stream.waiting_on == successor)
          stream.wake->release();
      }
    }
  }

  void run_stream(std::size_t index)
  {
    StreamQueue& stream = streams_[index];
    for (StepId id : stream.steps) {
      while (remaining_deps_[static_cast<std::size_t>(id)] > 0 && !aborted_) {
        stream.waiting_on = id;
        ++parked_;
        if (parked_ + finished_streams_ == streams_.size())
          report_deadlock();
        stream.wake->acquire();
        --parked_;
        stream.waiting_on = -1;
      }
      if (aborted_)
        break;
      const Step& step = plan_.steps[static_cast<std::size_t>(id)];
      StepRecord& record = records_[static_cast<std::size_t>(id)];
      record.step = id;
      record.kind = step.kind;
      record.device = step.device;
      record.stream = stream.name;
      record.start_s = s4u::Engine::get_clock();
      const bool ok = execute(step, record);
      record.end_s = s4u::Engine::get_clock();
      if (!ok)
        break;
      executed_[static_cast<std::size_t>(id)] = 1;
      finish(id);
    }
    ++finished_streams_;
    if (!aborted_ && parked_ > 0 && parked_ + finished_streams_ == streams_.size())
      report_deadlock();
  }

  // Every unfinished stream is parked on a step whose deps can never finish.
  void report_deadlock()
  {
    for (const StreamQueue& stream : streams_) {
      if (stream.waiting_on < 0)
        continue;
      const Step& step = plan_.steps[static_cast<std::size_t>(stream.waiting_on)];
      StepId missing = -1;
      for (StepId dep : step.deps)
        if (!executed_[static_cast<std::size_t>(dep)]) {
          missing = dep;
          break;
        }
      fail(step.id, step.tensor, devices_[static_cast<std::size_t>(step.device)].in_use, 0,
           fmt::format("deadlock at t={:.9f}s: {} waits for step {}, which can never run (stream order and deps form "
                       "a cycle)",
                       s4u::Engine::get_clock(), describe(step), missing));
      return;
    }
  }

  const Trace& trace_;
  const Machine& machine_;
  const Plan& plan_;
  SimOptions options_;
  CostModel cost_;
  std::size_t tensor_count_ = 0;
  std::size_t instance_count_ = 1;
  std::vector<MemorySpace> devices_;
  MemorySpace host_;
  std::vector<StreamQueue> streams_;
  std::vector<std::size_t> stream_of_step_;
  std::vector<int> remaining_deps_;
  std::vector<std::vector<StepId>> successors_;
  std::vector<StepRecord> records_;
  std::vector<std::uint8_t> executed_;
  std::size_t parked_ = 0;
  std::size_t finished_streams_ = 0;
  bool aborted_ = false;
  SimPlatform platform_;
  RunResult result_;
};

} // namespace

RunResult simulate(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options)
{
  validate_plan(plan, trace, static_cast<int>(machine.gpus.size()), plan.planner.empty() ? "plan" : plan.planner);
  const Trace extended = trace_with_extras(trace, plan);
  Execution execution(extended, machine, plan, options);
  return execution.run();
}

} // namespace memsim
