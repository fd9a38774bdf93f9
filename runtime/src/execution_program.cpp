#include "memsim/runtime/execution_program.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/sim/execution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace memsim::runtime {

std::string ProgramFailure::message(double time_s) const
{
  if (step < 0)
    return what; // the initially resident tensors: no step, no time
  FailureText timed = text;
  timed.time_s = time_s;
  return failure_message(kind, timed);
}

int program_device(const Plan& plan)
{
  for (const Step& step : plan.steps)
    if (step.device != kHostDevice)
      return step.device;
  return 0;
}

void check_runtime_supports(const Plan& plan, const std::string& source_name)
{
  if (plan.policy && plan.policy->name != "none")
    throw InputError(fmt::format("{}: at /policy", source_name),
                     fmt::format("memsim-cuda runs static plans; this one names the online policy '{}': run it with "
                                 "`memsim simulate --realized-plan out.json` and give memsim-cuda the realized plan",
                                 plan.policy->name));
  if (!plan.instance_scopes.empty())
    throw InputError(fmt::format("{}: at /instance_scopes", source_name),
                     "memsim-cuda allocates every instance's tensors at the start: scoped residency "
                     "(instance_scopes) runs in the simulator only");
  const int gpu = program_device(plan);
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::send || step.kind == StepKind::recv)
      throw InputError(fmt::format("{}: at /steps/{}/kind", source_name, step.id),
                       fmt::format("memsim-cuda runs single-GPU plans; step {} is a {}", step.id,
                                   to_string(step.kind)));
    for (StepId dep : step.deps)
      if (dep < 0 || dep >= step.id)
        throw InputError(fmt::format("{}: at /steps/{}/deps", source_name, step.id),
                         fmt::format("step {} depends on step {}: deps must name earlier steps", step.id, dep));
    if (is_collective(step.kind) && (step.group.size() > 1 || (step.group.size() == 1 && step.group[0] != gpu)))
      throw InputError(fmt::format("{}: at /steps/{}/group", source_name, step.id),
                       fmt::format("step {}: {} over group [{}] needs {} GPUs; memsim-cuda runs a plan on one GPU "
                                   "(ring collectives over several GPUs are not supported)",
                                   step.id, to_string(step.kind), fmt::join(step.group, ", "), step.group.size()));
    // UVM's fault-batch handling is a modelled cost with no copy engine behind it: running the copy alone would
    // time a different plan.
    if (step.service_s > 0)
      throw InputError(fmt::format("{}: at /steps/{}/service_s", source_name, step.id),
                       fmt::format("step {}: memsim-cuda has no counterpart of a policy's service time ({} s before "
                                   "the copy, e.g. UVM fault handling); simulate this plan instead",
                                   step.id, step.service_s));
    if (step.device != gpu && step.device != kHostDevice) // host steps (v2) run beside the one GPU
      throw InputError(fmt::format("{}: at /steps/{}/device", source_name, step.id),
                       fmt::format("memsim-cuda runs single-GPU plans; step {} uses device {} but the plan's GPU is "
                                   "device {}",
                                   step.id, step.device, gpu));
  }
}

namespace {

using Clock = std::vector<std::int64_t>; // per stream: highest position known complete (-1: none)

void merge_into(Clock& into, const Clock& from)
{
  for (std::size_t s = 0; s < into.size(); ++s)
    into[s] = std::max(into[s], from[s]);
}

// Builds the program step by step in list order; stops at the first failure.
class ProgramBuilder {
public:
  ProgramBuilder(const Plan& plan, const Trace& trace, const PoolConfig& pool, const Machine& machine)
      : plan_(plan), trace_(trace), device_(program_device(plan)),
        ledger_(trace, ledger_config(plan, trace, pool, device_)), cost_(trace, machine)
  {
    program_.pool = pool;
    program_.plan_step_count = plan.steps.size();
    program_.device = device_;
    assign_streams();
  }

  Program build()
  {
    if (!place_initial_residents())
      return std::move(program_);
    for (const Step& step : plan_.steps) {
      if (!add_step(step))
        break;
      if (++since_settle_ >= 64) {
        settle(static_cast<std::size_t>(step.id));
        since_settle_ = 0;
      }
    }
    return std::move(program_);
  }

private:
  using TensorKey = std::pair<int, TensorId>; // (instance, tensor)

  // The core's ledger over devices 0..device (only `device` is used): the pool allocator in memsim-cuda's
  // arena with stream-ordered reuse, the budget as the byte cap.
  static LedgerConfig ledger_config(const Plan& plan, const Trace& trace, const PoolConfig& pool, int device)
  {
    LedgerConfig config;
    const auto devices = static_cast<std::size_t>(device) + 1;
    config.device_capacity.assign(devices, pool.budget_bytes);
    config.arena_bytes.assign(devices, pool.arena_bytes);
    config.allocator = AllocatorKind::pool;
    config.alignment = pool.alignment;
    config.instance_count = plan_instance_count(plan);
    config.stream_ordered_reuse = true;
    config.shared_tensor = shared_tensors(trace, plan); // v2: one slot per device for shared kinds
    return config;
  }
  std::uint64_t live_bytes() const { return ledger_.in_use(device_); }

  void assign_streams()
  {
    std::map<std::pair<int, std::string>, std::size_t> index;
    for (const Step& step : plan_.steps) {
      auto [it, added] = index.emplace(std::make_pair(step.device, step.stream), program_.streams.size());
      if (added)
        program_.streams.push_back({step.device, step.stream});
      stream_of_.push_back(it->second);
    }
    const std::size_t stream_count = program_.streams.size();
    std::vector<std::int64_t> next_position(stream_count, 0);
    last_index_of_stream_.assign(stream_count, 0);
    latest_step_of_stream_.assign(stream_count, -1);
    pending_.assign(stream_count, PendingStream{});
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      position_.push_back(next_position[stream_of_[i]]++);
      last_index_of_stream_[stream_of_[i]] = i;
    }
  }

  // Whether release step `release` has completed once `clock` holds.
  bool covered(const Clock& clock, StepId release) const
  {
    auto index = static_cast<std::size_t>(release);
    return clock[stream_of_[index]] >= position_[index];
  }

  // Whether every step after list index `current` is ordered after `release`.
  bool ordered_for_all_future(StepId release, std::size_t current) const
  {
    for (std::size_t s = 0; s < program_.streams.size(); ++s) {
      if (last_index_of_stream_[s] <= current)
        continue; // no future steps on this stream
      StepId latest = latest_step_of_stream_[s];
      if (latest < 0 || !covered(done_[static_cast<std::size_t>(latest)], release))
        return false;
    }
    return true;
  }

  void settle(std::size_t current)
  {
    // Per stream: the position every future step is known to be ordered after.
    for (std::size_t s = 0; s < pending_.size(); ++s) {
      std::int64_t ordered_through = std::numeric_limits<std::int64_t>::max();
      for (std::size_t t = 0; t < program_.streams.size(); ++t) {
        if (last_index_of_stream_[t] <= current)
          continue;
        StepId latest = latest_step_of_stream_[t];
        ordered_through = std::min(ordered_through, latest < 0 ? -1 : done_[static_cast<std::size_t>(latest)][s]);
      }
      PendingStream& stream = pending_[s];
      while (stream.head < stream.position.size() && stream.position[stream.head] <= ordered_through)
        ++stream.head;
    }
    ledger_.settle(device_, [&](StepId release) { return ordered_for_all_future(release, current); });
  }

  // Releases not ordered before a step are kept per stream in stream order, with running byte sums, so
  // "bytes released but possibly still on the GPU" for a clock is a binary search per stream.
  struct PendingStream {
    std::vector<std::int64_t> position;
    std::vector<StepId> step;
    std::vector<std::uint64_t> cumulative; // bytes of entries 0..i
    std::size_t head = 0;                  // entries before head are ordered for every future step

    std::size_t first_uncovered(std::int64_t covered_through) const
    {
      return static_cast<std::size_t>(std::upper_bound(position.begin() + static_cast<std::ptrdiff_t>(head),
                                                       position.end(), covered_through) -
                                      position.begin());
    }
    std::uint64_t bytes_before(std::size_t index) const { return index == 0 ? 0 : cumulative[index - 1]; }
    std::uint64_t total() const { return cumulative.empty() ? 0 : cumulative.back(); }
  };

  std::uint64_t unordered_bytes(const Clock& clock) const
  {
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < pending_.size(); ++s)
      total += pending_[s].total() - pending_[s].bytes_before(pending_[s].first_uncovered(clock[s]));
    return total;
  }

  // The release to wait on so that `deficit` more bytes are surely free: per stream the earliest release
  // that covers the deficit alone, the earliest of those over the streams; if no stream can, the last
  // release of the stream with the most unordered bytes (and the caller loops).
  StepId release_to_wait_for(const Clock& clock, std::uint64_t deficit) const
  {
    std::optional<StepId> best;
    StepId fallback = -1;
    std::uint64_t fallback_bytes = 0;
    for (std::size_t s = 0; s < pending_.size(); ++s) {
      const PendingStream& stream = pending_[s];
      const std::size_t first = stream.first_uncovered(clock[s]);
      if (first >= stream.position.size())
        continue;
      const std::uint64_t base = stream.bytes_before(first);
      auto enough = std::lower_bound(stream.cumulative.begin() + static_cast<std::ptrdiff_t>(first),
                                     stream.cumulative.end(), base + deficit);
      if (enough != stream.cumulative.end()) {
        StepId candidate = stream.step[static_cast<std::size_t>(enough - stream.cumulative.begin())];
        if (!best || candidate < *best)
          best = candidate;
      }
      if (stream.total() - base > fallback_bytes) {
        fallback_bytes = stream.total() - base;
        fallback = stream.step.back();
      }
    }
    return best ? *best : fallback;
  }

  // The failure in the core's terms: `action` done to `object` by `step` (see FailureText).
  void fail(const Denial& denial, const Step* step, std::optional<TensorId> tensor, const char* action,
            std::string object, int space)
  {
    ProgramFailure failure;
    failure.kind = denial.kind;
    failure.step = step ? step->id : -1;
    failure.tensor = tensor;
    failure.bytes_in_use = denial.in_use;
    failure.bytes_requested = denial.requested;
    failure.largest_free_block = denial.largest_free_block;
    failure.text = FailureText{step ? describe_step(*step) : std::string("the initially resident tensors"),
                               action,
                               std::move(object),
                               space_name(space),
                               std::nullopt,
                               denial,
                               -1};
    failure.what = failure_message(failure.kind, failure.text);
    if (step) {
      auto index = static_cast<std::size_t>(step->id);
      std::set<StepId> after(step->deps.begin(), step->deps.end());
      if (position_[index] > 0)
        after.insert(latest_step_of_stream_[stream_of_[index]]);
      failure.after_steps.assign(after.begin(), after.end());
    }
    program_.failure = std::move(failure);
  }

  // Allocates for step `step` (nullptr: initial residency) whose start clock is `clock` -- the tensor (instance,
  // tensor), or `bytes` of workspace when `tensor` is empty; adds the memory waits it needs to `memory_waits` and
  // `clock`. Returns the allocation index or nullopt (failed).
  std::optional<std::size_t> allocate(const Step* step, Clock& clock, std::vector<StepId>& memory_waits,
                                      std::optional<TensorId> tensor, int instance, std::uint64_t bytes)
  {
    const std::uint64_t budget = program_.pool.budget_bytes;
    auto wait_on = [&](StepId release) {
      if (covered(clock, release))
        return;
      memory_waits.push_back(release);
      merge_into(clock, done_[static_cast<std::size_t>(release)]);
    };
    // The cap: blocks released but not ordered before this step may still hold data on the GPU.
    if (step && live_bytes() + bytes <= budget)
      for (std::uint64_t unordered = unordered_bytes(clock); live_bytes() + unordered + bytes > budget;
           unordered = unordered_bytes(clock)) {
        const StepId release = release_to_wait_for(clock, live_bytes() + unordered + bytes - budget);
        if (release < 0)
          break; // unreachable: live + bytes <= budget was checked above
        wait_on(release);
      }
    Ordering ordering{[&](StepId release) { return covered(clock, release); }, {}};
    const StepId by = step ? step->id : -1;
    std::uint64_t handle = 0;
    auto denial = tensor ? ledger_.allocate(device_, instance, *tensor, by, &ordering)
                         : ledger_.allocate_bytes(device_, bytes, by, handle, &ordering);
    if (denial) {
      if (step)
        fail(*denial, step, tensor, "allocates",
             tensor ? describe_tensor(trace_, *tensor) : fmt::format("{} bytes of workspace", bytes), device_);
      return std::nullopt;
    }
    for (StepId release : ordering.waits)
      wait_on(release);
    program_.peak_bytes = std::max(program_.peak_bytes, live_bytes());
    Allocation allocation;
    allocation.tensor = tensor;
    allocation.instance = instance;
    allocation.bytes = bytes;
    allocation.offset = tensor ? ledger_.offset(device_, instance, *tensor) : handle;
    allocation.allocated_by = by;
    program_.allocations.push_back(allocation);
    return program_.allocations.size() - 1;
  }

  void release(std::size_t allocation_index, StepId step)
  {
    Allocation& allocation = program_.allocations[allocation_index];
    allocation.released_by = step;
    if (allocation.tensor)
      ledger_.release(device_, allocation.instance, *allocation.tensor, step);
    else
      ledger_.release_bytes(device_, allocation.bytes, allocation.offset, step);
    if (allocation.bytes > 0) {
      const auto index = static_cast<std::size_t>(step);
      PendingStream& stream = pending_[stream_of_[index]];
      stream.position.push_back(position_[index]);
      stream.step.push_back(step);
      stream.cumulative.push_back(stream.total() + allocation.bytes);
    }
  }

  // The core's initial-residency rule; like the simulators, the whole set is checked against the budget first.
  bool place_initial_residents()
  {
    const auto device = static_cast<std::size_t>(device_);
    const std::vector<ResidentTensor> residents = initial_residents(trace_, plan_, device + 1)[device];
    std::uint64_t needed = 0;
    for (const ResidentTensor& resident : residents)
      needed += trace_.tensor(resident.tensor).bytes;
    Clock clock(program_.streams.size(), -1);
    std::vector<StepId> waits;
    bool fits = needed <= program_.pool.budget_bytes;
    for (std::size_t i = 0; fits && i < residents.size(); ++i) {
      auto allocation = allocate(nullptr, clock, waits, residents[i].tensor, residents[i].instance,
                                 trace_.tensor(residents[i].tensor).bytes);
      fits = allocation.has_value();
      if (fits) {
        program_.initial_allocations.push_back(*allocation);
        resident_[{residents[i].instance, residents[i].tensor}] = *allocation;
      }
    }
    if (fits)
      return place_initial_host_residents();
    ProgramFailure failure;
    failure.bytes_in_use = needed;
    failure.what = initial_residents_message(device_, space_name(device_), needed, program_.pool.budget_bytes);
    program_.failure = std::move(failure);
    return false;
  }

  // v2 initial_placement `host`: a pinned host buffer holding the tensor from t = 0 (host memory is not capped
  // here: memsim-cuda does not model it).
  bool place_initial_host_residents()
  {
    for (const ResidentTensor& resident : initial_host_residents(trace_, plan_)) {
      if (auto denial = ledger_.allocate(MemoryLedger::kHost, resident.instance, resident.tensor, -1)) {
        ProgramFailure failure;
        failure.kind = FailureKind::host_out_of_memory;
        failure.bytes_in_use = denial->in_use;
        failure.what = "host memory full: the tensors placed on the host from the start do not fit";
        program_.failure = std::move(failure);
        return false;
      }
      program_.initial_host_buffers.push_back(host_buffer_for(resident.instance, resident.tensor));
    }
    return true;
  }

  // Shared slots (v2 shared_across_instances) are one copy for every instance: keyed as instance 0, as the ledger does.
  TensorKey key(int instance, TensorId tensor) const
  {
    return {shared_across_instances(plan_, trace_.tensor(tensor).kind) ? 0 : instance, tensor};
  }

  std::size_t host_buffer_for(int instance, TensorId tensor)
  {
    auto [it, added] = host_copy_.emplace(key(instance, tensor), program_.host_buffers.size());
    if (added)
      program_.host_buffers.push_back({tensor, instance, trace_.tensor(tensor).bytes});
    return it->second;
  }

  // Outputs already resident that a step writes where they are (the core's rule: no allocation): a shared weight
  // gradient a compute step adds into, and any output of a recompute that is still there.
  bool writes_in_place(const Step& step, TensorId output) const
  {
    const Tensor& tensor = trace_.tensor(output);
    if (!ledger_.resident(step.device, step.instance, output))
      return false;
    return step.kind == StepKind::recompute ||
           (tensor.kind == TensorKind::weight_grad && shared_across_instances(plan_, tensor.kind));
  }

  // A host step reading a tensor whose offload may still be copying waits for that copy's end event.
  void wait_for(const std::map<TensorKey, StepId>& writers, int instance, TensorId tensor, Clock& clock,
                std::vector<StepId>& waits)
  {
    auto writer = writers.find(key(instance, tensor));
    if (writer == writers.end() || covered(clock, writer->second))
      return;
    waits.push_back(writer->second);
    merge_into(clock, done_[static_cast<std::size_t>(writer->second)]);
  }
  void wait_for_offload(int instance, TensorId tensor, Clock& clock, std::vector<StepId>& waits)
  {
    wait_for(offloaded_by_, instance, tensor, clock, waits);
  }
  // A prefetch of what a host step computed copies only once that step has written it.
  void wait_for_host_writer(int instance, TensorId tensor, Clock& clock, std::vector<StepId>& waits)
  {
    wait_for(host_computed_by_, instance, tensor, clock, waits);
  }

  // Host compute (v2): outputs and workspace in host memory (pinned buffers the step writes).
  bool add_host_outputs(const Step& step, const Op& op)
  {
    constexpr int host = MemoryLedger::kHost;
    for (TensorId output : op.outputs) {
      if (writes_in_place(step, output))
        continue;
      if (auto denial = ledger_.allocate(host, step.instance, output, step.id)) {
        fail(*denial, &step, output, "allocates", describe_tensor(trace_, output), host);
        return false;
      }
      host_buffer_for(step.instance, output);
      host_computed_by_[key(step.instance, output)] = step.id;
    }
    if (op.workspace_bytes > 0) {
      std::uint64_t handle = 0;
      if (auto denial = ledger_.allocate_bytes(host, op.workspace_bytes, step.id, handle)) {
        fail(*denial, &step, std::nullopt, "allocates", fmt::format("{} bytes of workspace", op.workspace_bytes), host);
        return false;
      }
      ledger_.release_bytes(host, op.workspace_bytes, handle, step.id); // nothing else happens in between
    }
    return true;
  }

  // split / merge (v2): the core's ledger moves residency between the parent and its parts; on the GPU a part is
  // a view at its offset in the parent's block (no copy, no bytes), so only the program's bookkeeping changes.
  template <typename RequireResident>
  bool add_view(const Step& step, const RequireResident& require_resident)
  {
    const TensorId parent = *step.tensor;
    const bool splitting = step.kind == StepKind::split;
    if (splitting) {
      if (!require_resident(parent, "splits"))
        return false;
    } else {
      for (TensorId part : step.parts)
        if (!require_resident(part, "merges"))
          return false;
    }
    auto denial = splitting ? ledger_.split(step.device, step.instance, parent, step.parts, step.id)
                            : ledger_.merge(step.device, step.instance, parent, step.parts, step.id);
    if (denial) {
      const TensorId clash = ledger_.view_clash(step.device, step.instance, parent, step.parts, splitting);
      fail(*denial, &step, clash, splitting ? "splits into" : "merges into", describe_tensor(trace_, clash),
           step.device);
      return false;
    }
    if (step.device == kHostDevice)
      return true; // host views need no device bookkeeping
    const std::vector<TensorId> gone = splitting ? std::vector<TensorId>{parent} : step.parts;
    const std::vector<TensorId> made = splitting ? step.parts : std::vector<TensorId>{parent};
    for (TensorId tensor : gone) {
      auto found = resident_.find(key(step.instance, tensor));
      program_.allocations[found->second].released_by = step.id;
      resident_.erase(found);
    }
    for (TensorId tensor : made) {
      Allocation view;
      view.tensor = tensor;
      view.instance = step.instance;
      view.bytes = trace_.tensor(tensor).bytes;
      view.offset = ledger_.offset(device_, step.instance, tensor);
      view.allocated_by = step.id;
      program_.allocations.push_back(view);
      resident_[key(step.instance, tensor)] = program_.allocations.size() - 1;
    }
    return true;
  }

  bool add_step(const Step& step)
  {
    const auto index = static_cast<std::size_t>(step.id);
    const std::size_t stream = stream_of_[index];
    ProgramStep out;
    out.step = step.id;
    out.kind = step.kind;
    out.stream = stream;
    out.op = step.op;
    out.tensor = step.tensor;
    out.instance = step.instance;
    out.iteration = step.iteration;
    out.loop = step.loop;

    // Start clock: the stream predecessor, then the deps that it does not already imply.
    const StepId predecessor = latest_step_of_stream_[stream];
    Clock clock(program_.streams.size(), -1);
    if (predecessor >= 0)
      clock = done_[static_cast<std::size_t>(predecessor)];
    std::vector<StepId> candidates;
    for (StepId dep : step.deps)
      if (!covered(clock, dep) && std::find(candidates.begin(), candidates.end(), dep) == candidates.end())
        candidates.push_back(dep);
    for (StepId dep : candidates) {
      bool implied = std::any_of(candidates.begin(), candidates.end(), [&](StepId other) {
        return other != dep && covered(done_[static_cast<std::size_t>(other)], dep);
      });
      if (!implied)
        out.waits.push_back(dep);
    }
    std::sort(out.waits.begin(), out.waits.end());
    for (StepId wait : out.waits)
      merge_into(clock, done_[static_cast<std::size_t>(wait)]);
    program_.dependency_waits += out.waits.size();

    std::vector<StepId> memory_waits;
    const int space = step.device; // the GPU, or the host (v2 host compute)
    const bool on_host = space == kHostDevice;
    auto resident = [&](TensorId tensor) { return resident_.find(key(step.instance, tensor)); };
    // The core's checks, in the core's order (sim/src/execution.cpp).
    auto require_resident_in = [&](int where, TensorId tensor, const char* action) {
      if (ledger_.resident(where, step.instance, tensor))
        return true;
      fail(Denial{FailureKind::not_resident, ledger_.in_use(where), 0, 0, 0}, &step, tensor, action,
           describe_tensor(trace_, tensor), where);
      return false;
    };
    auto require_resident = [&](TensorId tensor, const char* action) {
      return require_resident_in(space, tensor, action);
    };
    std::vector<std::optional<std::size_t>> output_allocations; // per op output: none when written in place
    switch (step.kind) {
    case StepKind::compute:
    case StepKind::recompute: {
      const Op& op = trace_.op(*step.op);
      out.label = op.name;
      out.flops = op.flops;
      for (TensorId input : op.inputs) {
        if (!require_resident(input, "reads"))
          return false;
        if (on_host)
          wait_for_offload(step.instance, input, clock, memory_waits);
      }
      if (on_host) {
        // Host compute reads and writes host memory; its time is the simulator's host time for the op.
        out.work = WorkKind::host_busy;
        out.kernel_time_s = cost_.host_op_time(op);
        if (!add_host_outputs(step, op))
          return false;
        break;
      }
      out.work = WorkKind::kernel;
      out.kernel_time_s = op.time_s;
      for (TensorId output : op.outputs) {
        if (writes_in_place(step, output)) {
          output_allocations.emplace_back(); // resident: the kernel writes into (or adds into) it
          continue;
        }
        auto allocation = allocate(&step, clock, memory_waits, output, step.instance, trace_.tensor(output).bytes);
        if (!allocation)
          return false;
        out.allocations.push_back(*allocation);
        output_allocations.emplace_back(*allocation);
        out.record_bytes += trace_.tensor(output).bytes;
      }
      if (op.workspace_bytes > 0) {
        auto workspace = allocate(&step, clock, memory_waits, std::nullopt, step.instance, op.workspace_bytes);
        if (!workspace)
          return false;
        out.allocations.push_back(*workspace);
        out.releases.push_back(*workspace);
      }
      break;
    }
    case StepKind::prefetch: {
      const Tensor& tensor = trace_.tensor(*step.tensor);
      out.label = tensor.name;
      auto host = host_copy_.find(key(step.instance, tensor.id));
      if (!ledger_.resident(MemoryLedger::kHost, step.instance, tensor.id) || host == host_copy_.end()) {
        fail(Denial{FailureKind::no_host_copy, live_bytes(), tensor.bytes, 0, 0}, &step, tensor.id, "prefetches",
             describe_tensor(trace_, tensor.id), device_);
        return false;
      }
      wait_for_host_writer(step.instance, tensor.id, clock, memory_waits);
      auto allocation = allocate(&step, clock, memory_waits, tensor.id, step.instance, tensor.bytes);
      if (!allocation)
        return false;
      out.allocations.push_back(*allocation);
      out.work = WorkKind::copy_h2d;
      out.device_offset = program_.allocations[*allocation].offset;
      out.host_buffer = host->second;
      out.copy_bytes = tensor.bytes;
      out.record_bytes = tensor.bytes;
      break;
    }
    case StepKind::offload: {
      const Tensor& tensor = trace_.tensor(*step.tensor);
      out.label = tensor.name;
      if (!require_resident(tensor.id, "offloads"))
        return false;
      auto found = resident(tensor.id);
      if (!ledger_.resident(MemoryLedger::kHost, step.instance, tensor.id)) {
        if (auto denial = ledger_.allocate(MemoryLedger::kHost, step.instance, tensor.id, step.id)) {
          fail(*denial, &step, tensor.id, "offloads", describe_tensor(trace_, tensor.id), MemoryLedger::kHost);
          return false;
        }
      }
      offloaded_by_[key(step.instance, tensor.id)] = step.id;
      out.work = WorkKind::copy_d2h;
      out.device_offset = program_.allocations[found->second].offset;
      out.host_buffer = host_buffer_for(step.instance, tensor.id);
      out.copy_bytes = tensor.bytes;
      out.record_bytes = tensor.bytes;
      break;
    }
    case StepKind::free: {
      const Tensor& tensor = trace_.tensor(*step.tensor);
      out.label = tensor.name;
      if (!require_resident(tensor.id, "frees"))
        return false;
      if (on_host)
        ledger_.release(MemoryLedger::kHost, step.instance, tensor.id, step.id); // the pinned buffer stays
      else
        out.releases.push_back(resident(tensor.id)->second);
      break;
    }
    case StepKind::split:
    case StepKind::merge:
      out.label = trace_.tensor(*step.tensor).name;
      if (!add_view(step, require_resident))
        return false;
      break;
    case StepKind::allreduce:
    case StepKind::allgather:
    case StepKind::reducescatter: // a group of one (check_runtime_supports refuses larger ones): moves nothing
      out.label = trace_.tensor(*step.tensor).name;
      for (int device : step.group)
        if (!require_resident_in(device, *step.tensor, "reduces or gathers"))
          return false;
      break;
    case StepKind::send:
    case StepKind::recv:
      throw InputError(fmt::format("step {}", step.id), "memsim-cuda runs single-GPU plans (no send/recv)");
    }

    // Success: commit residency and releases (at the step's end), then the step's clocks.
    std::sort(memory_waits.begin(), memory_waits.end());
    memory_waits.erase(std::unique(memory_waits.begin(), memory_waits.end()), memory_waits.end());
    out.memory_waits = memory_waits.size();
    program_.memory_waits += memory_waits.size();
    out.waits.insert(out.waits.end(), memory_waits.begin(), memory_waits.end());
    std::sort(out.waits.begin(), out.waits.end());
    out.waits.erase(std::unique(out.waits.begin(), out.waits.end()), out.waits.end());
    if (step_names_op(step.kind) && !on_host) {
      const Op& op = trace_.op(*step.op);
      for (std::size_t i = 0; i < op.outputs.size(); ++i)
        if (output_allocations[i])
          resident_[key(step.instance, op.outputs[i])] = *output_allocations[i];
    } else if (step.kind == StepKind::prefetch) {
      resident_[key(step.instance, *step.tensor)] = out.allocations.front();
    } else if (step.kind == StepKind::free && !on_host) {
      resident_.erase(key(step.instance, *step.tensor));
    }
    for (std::size_t allocation : out.releases)
      release(allocation, step.id);
    clock[stream] = position_[index];
    done_.push_back(std::move(clock));
    latest_step_of_stream_[stream] = step.id;
    program_.steps.push_back(std::move(out));
    return true;
  }

  const Plan& plan_;
  const Trace& trace_;
  int device_;
  MemoryLedger ledger_;
  Program program_;
  std::vector<std::size_t> stream_of_; // per plan step
  std::vector<std::int64_t> position_; // per plan step: index within its stream
  std::vector<std::size_t> last_index_of_stream_;
  std::vector<StepId> latest_step_of_stream_;    // so far in the build
  std::vector<Clock> done_;                      // per built step: what is complete when it completes
  std::map<TensorKey, std::size_t> resident_;    // device copy -> allocation
  std::map<TensorKey, std::size_t> host_copy_;   // host copy -> host buffer
  std::map<TensorKey, StepId> offloaded_by_;     // host copy -> the offload that last wrote it
  std::map<TensorKey, StepId> host_computed_by_; // host copy -> the host step that computed it
  CostModel cost_;                               // host compute times: the simulator's host_op_time
  std::vector<PendingStream> pending_;           // per stream: released, maybe not yet ordered before every future step
  std::size_t since_settle_ = 0;
};

} // namespace

Program build_program(const Plan& plan, const Trace& trace, const PoolConfig& pool, const Machine& machine)
{
  return ProgramBuilder(plan, trace, pool, machine).build();
}

Program build_program(const Plan& plan, const Trace& trace, const PoolConfig& pool)
{
  return build_program(plan, trace, pool, Machine{});
}

std::string describe_program(const Program& program)
{
  std::string text;
  for (std::size_t s = 0; s < program.streams.size(); ++s) {
    std::size_t steps = 0;
    std::size_t waits = 0;
    for (const ProgramStep& step : program.steps)
      if (step.stream == s) {
        ++steps;
        waits += step.waits.size();
      }
    text += fmt::format("stream {} (device {}, '{}'): {} steps, {} event waits\n", s, program.streams[s].device,
                        program.streams[s].name, steps, waits);
  }
  text += fmt::format("steps: {} of {} enqueued; event waits: {} from deps, {} for memory ordering\n",
                      program.steps.size(), program.plan_step_count, program.dependency_waits, program.memory_waits);
  text +=
      fmt::format("memory: budget {} bytes, pool {} bytes, list-order peak {} bytes, {} pinned host buffers\n",
                  program.pool.budget_bytes, program.pool.arena_bytes, program.peak_bytes, program.host_buffers.size());
  std::size_t host_steps = 0;
  double host_s = 0;
  for (const ProgramStep& step : program.steps)
    if (step.work == WorkKind::host_busy) {
      ++host_steps;
      host_s += step.kernel_time_s;
    }
  if (host_steps > 0)
    text += fmt::format("host compute: {} steps, {:.6f} s of host busy loops\n", host_steps, host_s);
  std::string memory_waits;
  std::size_t listed = 0;
  for (const ProgramStep& step : program.steps)
    if (step.memory_waits > 0 && listed++ < 8)
      memory_waits += fmt::format(" {}", step.step);
  if (listed > 0)
    text += fmt::format("steps with memory-ordering waits:{}{}\n", memory_waits, listed > 8 ? " ..." : "");
  if (program.failure)
    text += fmt::format("infeasible ({}): {}\n", memsim::to_string(program.failure->kind), program.failure->what);
  return text;
}

} // namespace memsim::runtime
