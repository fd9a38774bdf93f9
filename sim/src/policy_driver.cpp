#include "policy_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace memsim {

namespace {
constexpr const char* kOffloadStream = "policy-d2h";
constexpr const char* kFetchStream = "policy-h2d";
constexpr const char* kEvictStream = "policy-evict";
constexpr const char* kHostReleaseStream = "policy-host";

void add_unique(std::vector<StepId>& ids, StepId id)
{
  if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end())
    ids.push_back(id);
}
} // namespace

std::string_view to_string(PolicyAction::Kind kind)
{
  switch (kind) {
  case PolicyAction::Kind::offload: return "offload";
  case PolicyAction::Kind::evict: return "evict";
  case PolicyAction::Kind::fetch: return "fetch";
  case PolicyAction::Kind::rematerialize: return "rematerialize";
  case PolicyAction::Kind::prefetch: return "prefetch";
  }
  return "?";
}

PolicyDriver::PolicyDriver(MemoryPolicy& policy, const Trace& trace, const Plan& plan, Schedule& schedule)
    : policy_(&policy), trace_(&trace), plan_(&plan), schedule_(&schedule),
      plan_step_count_(static_cast<StepId>(plan.steps.size())), producer_(trace.tensors.size())
{
  for (const Op& op : trace.ops)
    for (TensorId output : op.outputs)
      if (!producer_[static_cast<std::size_t>(output)])
        producer_[static_cast<std::size_t>(output)] = op.id;
  grow(plan.steps.size());
  for (const Step& step : plan.steps)
    if (step.tensor &&
        (step.device == kHostDevice || step.kind == StepKind::prefetch || step.kind == StepKind::offload))
      last_host_touch_[{step.instance, *step.tensor}] = step.id;
    else if (step.op && step.device == kHostDevice)
      for (const auto* ids : {&trace.op(*step.op).inputs, &trace.op(*step.op).outputs})
        for (TensorId tensor : *ids)
          last_host_touch_[{step.instance, tensor}] = step.id;
}

void PolicyDriver::release_policy_host_copy(const Step& plan_free, std::vector<StepId> deps)
{
  const std::pair<int, TensorId> copy{plan_free.instance, *plan_free.tensor};
  if (plan_free.device == kHostDevice || !policy_host_copies_.count(copy) || !has_host_copy(copy.first, copy.second))
    return;
  if (auto touch = last_host_touch_.find(copy); touch != last_host_touch_.end() && touch->second > plan_free.id)
    return;
  policy_host_copies_.erase(copy);
  add_policy_step(StepKind::free, TensorSlot{kHostDevice, copy.first, copy.second}, kHostReleaseStream,
                  std::move(deps));
}

void PolicyDriver::grow(std::size_t step_count)
{
  const std::size_t old = realized_deps_.size();
  if (step_count <= old)
    return;
  realized_deps_.resize(step_count);
  claimed_.resize(step_count, 0);
  barrier_asked_.resize(step_count, 0);
  paused_s_.resize(step_count, 0);
  held_.resize(step_count);
  started_.resize(step_count, 0);
  skipped_.resize(step_count, 0);
  inherited_.resize(step_count);
  for (std::size_t i = old; i < step_count && i < plan_->steps.size(); ++i)
    realized_deps_[i] = plan_->steps[i].deps;
}

bool PolicyDriver::resident(const TensorSlot& slot) const
{
  return schedule_->ledger().resident(slot.space, slot.instance, slot.tensor);
}

const Machine& PolicyDriver::machine() const
{
  if (!schedule_->machine())
    throw std::logic_error("memory policy: this run has no machine to show");
  return *schedule_->machine();
}

bool PolicyDriver::has_host_copy(int instance, TensorId tensor) const
{
  return schedule_->ledger().resident(MemoryLedger::kHost, instance, tensor);
}

const PolicyDriver::History* PolicyDriver::find_history(const TensorSlot& slot) const
{
  auto found = histories_.find(slot);
  return found == histories_.end() ? nullptr : &found->second;
}

bool PolicyDriver::pinned(const TensorSlot& slot) const
{
  auto pins = pins_.find(slot);
  if (pins != pins_.end() && pins->second > 0)
    return true;
  const History* h = find_history(slot);
  return h && (pending(h->arriving) || pending(h->leaving));
}

std::optional<OpId> PolicyDriver::producer(TensorId tensor) const
{
  return tensor >= 0 && static_cast<std::size_t>(tensor) < producer_.size()
             ? producer_[static_cast<std::size_t>(tensor)]
             : std::nullopt;
}

// Policies manage GPU memory: steps on the host (device -1) read and write nothing they look after.
std::vector<TensorSlot> PolicyDriver::reads(const Step& step) const
{
  std::vector<TensorSlot> slots;
  if (step.device < 0)
    return slots;
  switch (step.kind) {
  case StepKind::compute:
  case StepKind::recompute:
    for (TensorId input : trace_->op(*step.op).inputs)
      slots.push_back(TensorSlot{step.device, step.instance, input});
    break;
  case StepKind::offload:
  case StepKind::send: slots.push_back(TensorSlot{step.device, step.instance, *step.tensor}); break;
  case StepKind::split: slots.push_back(TensorSlot{step.device, step.instance, *step.tensor}); break;
  case StepKind::merge:
    for (TensorId part : step.parts)
      slots.push_back(TensorSlot{step.device, step.instance, part});
    break;
  case StepKind::allreduce:
  case StepKind::allgather:
  case StepKind::reducescatter:
    for (int device : step.group)
      slots.push_back(TensorSlot{device, step.instance, *step.tensor});
    break;
  case StepKind::prefetch: // reads the host copy, which policies do not manage
  case StepKind::free:
  case StepKind::recv: break;
  }
  return slots;
}

std::vector<TensorSlot> PolicyDriver::writes(const Step& step) const
{
  std::vector<TensorSlot> slots;
  if (step.device < 0)
    return slots;
  switch (step.kind) {
  case StepKind::compute:
  case StepKind::recompute:
    for (TensorId output : trace_->op(*step.op).outputs)
      slots.push_back(TensorSlot{step.device, step.instance, output});
    break;
  case StepKind::prefetch: slots.push_back(TensorSlot{step.device, step.instance, *step.tensor}); break;
  case StepKind::send: slots.push_back(TensorSlot{*step.peer, step.instance, *step.tensor}); break;
  case StepKind::split:
    for (TensorId part : step.parts)
      slots.push_back(TensorSlot{step.device, step.instance, part});
    break;
  case StepKind::merge: slots.push_back(TensorSlot{step.device, step.instance, *step.tensor}); break;
  case StepKind::allreduce: // in place: what they write is what they read, already resident
  case StepKind::allgather:
  case StepKind::reducescatter:
  case StepKind::offload:
  case StepKind::free:
  case StepKind::recv: break;
  }
  return slots;
}

void PolicyDriver::pin(const std::vector<TensorSlot>& slots, int delta)
{
  for (const TensorSlot& slot : slots)
    pins_[slot] += delta;
}

void PolicyDriver::depend(StepId step, StepId dep)
{
  std::vector<StepId>& deps = realized_deps_[static_cast<std::size_t>(step)];
  if (std::find(deps.begin(), deps.end(), dep) != deps.end())
    return;
  deps.push_back(dep);
  if (!schedule_->finished(dep))
    schedule_->add_dep(step, dep);
}

void PolicyDriver::note_dep(StepId step, StepId dep)
{
  add_unique(realized_deps_[static_cast<std::size_t>(step)], dep);
}

std::vector<StepId> PolicyDriver::trigger_deps(StepId id) const
{
  std::vector<StepId> deps = realized_deps_[static_cast<std::size_t>(id)];
  if (auto predecessor = schedule_->stream_predecessor(id))
    add_unique(deps, *predecessor);
  return deps;
}

std::vector<StepId> PolicyDriver::removal_deps(const TensorSlot& slot)
{
  std::vector<StepId> deps;
  if (const History* h = find_history(slot)) {
    add_unique(deps, h->maker);
    for (StepId user : h->users)
      add_unique(deps, user);
  }
  return deps;
}

// Allocation sizes per device, in the order the core allocates them.
static std::map<int, std::vector<std::uint64_t>> allocations(const Trace& trace, const Step& step)
{
  std::map<int, std::vector<std::uint64_t>> sizes;
  switch (step.kind) {
  case StepKind::compute:
  case StepKind::recompute: {
    const Op& op = trace.op(*step.op);
    for (TensorId output : op.outputs)
      sizes[step.device].push_back(trace.tensor(output).bytes);
    if (op.workspace_bytes > 0)
      sizes[step.device].push_back(op.workspace_bytes);
    break;
  }
  case StepKind::prefetch: sizes[step.device].push_back(trace.tensor(*step.tensor).bytes); break;
  case StepKind::send: sizes[*step.peer].push_back(trace.tensor(*step.tensor).bytes); break;
  case StepKind::split: // views and in-place collectives allocate nothing
  case StepKind::merge:
  case StepKind::allreduce:
  case StepKind::allgather:
  case StepKind::reducescatter:
  case StepKind::offload: // its host copy: policies manage GPU memory
  case StepKind::free:
  case StepKind::recv: break;
  }
  return sizes;
}

std::optional<PolicyDriver::Admission> PolicyDriver::admit_free_or_offload(const Step& step)
{
  if (is_policy_step(step.id) || (step.kind != StepKind::free && step.kind != StepKind::offload))
    return std::nullopt;
  const TensorSlot slot{step.device, step.instance, *step.tensor};
  const History* h = find_history(slot);
  if (!h)
    return std::nullopt;
  for (StepId pending_step : {h->arriving, h->leaving})
    if (pending(pending_step)) {
      depend(step.id, pending_step);
      return Admission::wait;
    }
  const bool moved_out = h->displaced && !resident(slot);
  if (moved_out && (step.kind == StepKind::free || has_host_copy(step.instance, *step.tensor))) {
    skipped_[static_cast<std::size_t>(step.id)] = 1;
    inherited_[static_cast<std::size_t>(step.id)] = trigger_deps(step.id);
    if (step.kind == StepKind::free) {
      histories_[slot].displaced = false; // the plan is done with it
      std::vector<StepId> deps = trigger_deps(step.id);
      add_unique(deps, h->displaced_by); // after the copy that made the host copy
      release_policy_host_copy(step, std::move(deps));
    }
    return Admission::skip;
  }
  return std::nullopt;
}

PolicyDriver::Admission PolicyDriver::admit(StepId id)
{
  grow(schedule_->step_count());
  const Step& step = schedule_->step(id);
  current_iteration_ = step.iteration;
  current_loop_ = step.loop;
  const std::vector<TensorSlot> step_reads = reads(step);
  // A step pins what it reads (locks it, in DTR's words): what is resident at its first admission at once, what is
  // missing once it is back and the step turns to it, in input order -- so what an earlier input's recovery
  // brought back on the way stays evictable until then, as in DTR.
  auto hold = [&](const TensorSlot& slot) {
    std::vector<TensorSlot>& held = held_[static_cast<std::size_t>(id)];
    if (std::find(held.begin(), held.end(), slot) == held.end()) {
      held.push_back(slot);
      pin({slot}, +1);
    }
  };
  auto& claimed = claimed_[static_cast<std::size_t>(id)];
  if (!barrier_asked_[static_cast<std::size_t>(id)] && !is_policy_step(id)) {
    barrier_asked_[static_cast<std::size_t>(id)] = 1;
    if (const double pause = policy_->pause_before(step, *this); pause > 0) {
      if (step.kind != StepKind::compute && step.kind != StepKind::prefetch && step.kind != StepKind::offload)
        throw std::logic_error(fmt::format("memory policy: cannot pause before step {} ({}): only compute, prefetch "
                                           "and offload steps pause",
                                           id, to_string(step.kind)));
      paused_s_[static_cast<std::size_t>(id)] = pause;
      schedule_->add_service_time(id, pause);
    }
    if (policy_->waits_for_policy(step, *this)) {
      std::erase_if(open_actions_, [&](StepId action) { return schedule_->finished(action); });
      for (StepId action : open_actions_)
        depend(id, action);
      if (!open_actions_.empty())
        return Admission::wait;
    }
  }
  if (!claimed) {
    claimed = 1;
    for (const TensorSlot& slot : step_reads)
      if (resident(slot))
        hold(slot);
  }
  if (auto admission = admit_free_or_offload(step))
    return *admission;

  bool waits = false;
  // A policy offload reads its victim, which is leaving by its own free.
  const bool own_victim = is_policy_step(id) && step.kind == StepKind::offload;
  const std::vector<TensorSlot> checked = own_victim ? std::vector<TensorSlot>{} : step_reads;
  for (const TensorSlot& slot : checked) {
    const History* h = find_history(slot);
    if (h && (pending(h->arriving) || pending(h->leaving))) {
      depend(id, pending(h->arriving) ? h->arriving : h->leaving);
      waits = true;
    }
  }
  if (waits)
    return Admission::wait;
  // One missing tensor at a time, the next when the step is admitted again: what brings one back may bring a later
  // one back too (a recompute that reads it, or makes it as a sibling). Asking about all at once could make an
  // earlier recompute wait for a later one queued behind it on the same stream.
  bool asked = false;
  for (const TensorSlot& slot : checked) {
    if (resident(slot)) {
      hold(slot);
      continue;
    }
    std::vector<PolicyAction> answer = policy_->on_missing_tensor(MissingTensor{id, slot}, *this);
    if (answer.empty())
      return Admission::start; // the core reports the missing tensor
    if (execute(answer, trigger_deps(id), id))
      return Admission::wait;
    asked = true;
  }
  if (asked)
    return Admission::start;
  const MemoryLedger& ledger = schedule_->ledger();
  for (const auto& [device, sizes] : allocations(*trace_, step)) {
    if (device < 0 || ledger.fits(device, sizes))
      continue;
    AllocationDemand demand{
        id, device, 0, ledger.in_use(device), ledger.capacity(device), ledger.largest_free_block(device)};
    for (std::uint64_t bytes : sizes)
      demand.bytes += bytes;
    std::vector<PolicyAction> actions = policy_->on_allocation_denied(demand, *this);
    if (actions.empty())
      return Admission::start; // the core reports the out-of-memory error
    return execute(actions, trigger_deps(id), id) ? Admission::wait : Admission::start;
  }
  return Admission::start;
}

void PolicyDriver::started(StepId id)
{
  const Step& step = schedule_->step(id);
  current_iteration_ = step.iteration;
  current_loop_ = step.loop;
  started_[static_cast<std::size_t>(id)] = 1;
  start_order_.push_back(id);
  if (auto predecessor = schedule_->stream_predecessor(id);
      predecessor && skipped_[static_cast<std::size_t>(*predecessor)])
    note_dep(id, *predecessor); // it waited for the skipped step; the realized plan makes it wait for what that did
  const bool reported = !is_policy_step(id) || step.kind == StepKind::recompute;
  const double time = now();
  for (const TensorSlot& slot : reads(step)) {
    History& h = history(slot);
    if (h.maker >= 0 && is_policy_step(h.maker))
      note_dep(id, h.maker); // under any timing, it reads after the policy brought it back
    h.users.push_back(id);
    if (reported)
      policy_->on_access(TensorAccess{slot, AccessKind::read, id, time}, *this);
  }
  const std::vector<TensorSlot> written = writes(step);
  for (const TensorSlot& slot : written) {
    History& h = history(slot);
    if (h.displaced_by >= 0)
      note_dep(id, h.displaced_by); // under any timing, it allocates after the policy freed it
    h.maker = id;
    h.users.clear();
    h.displaced = false;
    if (reported)
      policy_->on_access(TensorAccess{slot, AccessKind::write, id, time}, *this);
  }
  pin(written, +1);
  if (step.kind == StepKind::free) {
    History& h = history(TensorSlot{step.device, step.instance, *step.tensor});
    if (h.maker >= 0 && is_policy_step(h.maker))
      note_dep(id, h.maker);
    if (is_policy_step(id)) {
      h.displaced = true;
      h.displaced_by = id;
      h.leaving = -1;
    } else {
      h.displaced = false;
    }
    h.maker = -1;
    h.users.clear();
    if (!is_policy_step(id))
      release_policy_host_copy(step, {id});
  }
  if (!is_policy_step(id))
    execute(policy_->on_step_start(step, *this), trigger_deps(id), std::nullopt);
}

void PolicyDriver::finished(StepId id)
{
  grow(schedule_->step_count());
  const Step& step = schedule_->step(id);
  current_iteration_ = step.iteration;
  current_loop_ = step.loop;
  const auto index = static_cast<std::size_t>(id);
  if (claimed_[index]) {
    pin(held_[index], -1);
    held_[index].clear();
  }
  if (started_[index]) {
    const std::vector<TensorSlot> written = writes(step);
    pin(written, -1);
    for (const TensorSlot& slot : written)
      if (History& h = history(slot); h.arriving == id)
        h.arriving = -1;
  }
  if (!is_policy_step(id) && !skipped_[index])
    execute(policy_->on_step_end(step, *this), {id}, std::nullopt);
}

StepId PolicyDriver::add_policy_step(StepKind kind, const TensorSlot& slot, std::string stream,
                                     std::vector<StepId> deps, std::optional<OpId> op, std::optional<StepId> run_before,
                                     double service_s)
{
  Step step;
  step.kind = kind;
  step.service_s = service_s;
  step.device = slot.space;
  step.instance = slot.instance;
  step.iteration = current_iteration_; // the iteration of the step the action serves
  step.loop = current_loop_;
  step.stream = std::move(stream);
  if (op)
    step.op = op;
  else
    step.tensor = slot.tensor;
  std::sort(deps.begin(), deps.end());
  step.deps = deps;
  const StepId id = schedule_->add_step(std::move(step), run_before);
  grow(schedule_->step_count());
  realized_deps_[static_cast<std::size_t>(id)] = std::move(deps);
  return id;
}

bool PolicyDriver::execute(const std::vector<PolicyAction>& actions, const std::vector<StepId>& trigger,
                           std::optional<StepId> waiting)
{
  bool blocks = false;
  auto wait_for = [&](StepId added) {
    if (waiting) {
      depend(*waiting, added);
      blocks = true;
    }
  };
  for (const PolicyAction& action : actions) {
    const TensorSlot& slot = action.tensor;
    auto refuse = [&](const char* why) {
      return std::logic_error(fmt::format("memory policy: cannot {} tensor {} of instance {} on space {}: {}",
                                          to_string(action.kind), slot.tensor, slot.instance, slot.space, why));
    };
    if (slot.space < 0 || static_cast<std::size_t>(slot.space) >= device_count())
      throw refuse("actions name a GPU");
    switch (action.kind) {
    case PolicyAction::Kind::offload:
    case PolicyAction::Kind::evict: {
      if (!resident(slot) || pinned(slot))
        throw refuse("it is not resident there, or it is pinned");
      std::vector<StepId> deps = trigger;
      for (StepId dep : removal_deps(slot))
        add_unique(deps, dep);
      StepId release = -1;
      if (action.kind == PolicyAction::Kind::offload) {
        const StepId copy = add_policy_step(StepKind::offload, slot, kOffloadStream, deps, std::nullopt, std::nullopt,
                                            action.service_s);
        policy_host_copies_.insert({slot.instance, slot.tensor});
        release = add_policy_step(StepKind::free, slot, kOffloadStream, {copy});
      } else {
        release = add_policy_step(StepKind::free, slot, kEvictStream, deps);
      }
      history(slot).leaving = release;
      open_releases_.push_back(release);
      open_actions_.push_back(release);
      wait_for(release);
      break;
    }
    case PolicyAction::Kind::fetch:
    case PolicyAction::Kind::prefetch: {
      const History* h = find_history(slot);
      if (resident(slot) || (h && pending(h->arriving)) || !has_host_copy(slot.instance, slot.tensor))
        throw refuse("it is resident or on its way there, or the host has no copy");
      std::vector<StepId> deps = trigger;
      add_unique(deps, history(slot).displaced_by);
      if (action.after_releases) {
        std::erase_if(open_releases_, [&](StepId release) { return schedule_->finished(release); });
        for (StepId release : open_releases_)
          add_unique(deps, release);
      }
      const StepId copy =
          add_policy_step(StepKind::prefetch, slot, kFetchStream, deps, std::nullopt, std::nullopt, action.service_s);
      history(slot).arriving = copy;
      open_actions_.push_back(copy);
      if (action.kind == PolicyAction::Kind::fetch)
        wait_for(copy);
      break;
    }
    case PolicyAction::Kind::rematerialize: {
      const std::optional<OpId> op = action.op ? action.op : producer(slot.tensor);
      if (!op)
        throw refuse("no op produces it");
      std::vector<StepId> deps = trigger;
      for (TensorId input : trace_->op(*op).inputs)
        if (const History* h = find_history(TensorSlot{slot.space, slot.instance, input}); h && h->maker >= 0)
          add_unique(deps, h->maker);
      for (TensorId output : trace_->op(*op).outputs)
        if (const History* h = find_history(TensorSlot{slot.space, slot.instance, output}))
          add_unique(deps, h->displaced_by);
      const std::string stream = waiting ? schedule_->step(*waiting).stream : std::string("compute");
      const StepId recompute = add_policy_step(StepKind::recompute, slot, stream, deps, op, waiting);
      for (TensorId output : trace_->op(*op).outputs)
        if (const TensorSlot out{slot.space, slot.instance, output}; !resident(out))
          history(out).arriving = recompute;
      wait_for(recompute);
      break;
    }
    }
  }
  return blocks;
}

Plan PolicyDriver::realized_plan(const Plan& original) const
{
  Plan realized = original;
  realized.policy.reset();
  realized.steps.clear();
  std::vector<StepId> renumbered(realized_deps_.size(), -1);
  for (std::size_t i = 0; i < start_order_.size(); ++i)
    renumbered[static_cast<std::size_t>(start_order_[i])] = static_cast<StepId>(i);
  // A dep on a skipped step becomes a dep on what the skipped step waited for.
  std::function<void(StepId, std::vector<StepId>&)> resolve = [&](StepId dep, std::vector<StepId>& into) {
    if (skipped_[static_cast<std::size_t>(dep)]) {
      for (StepId inherited : inherited_[static_cast<std::size_t>(dep)])
        resolve(inherited, into);
      return;
    }
    add_unique(into, renumbered[static_cast<std::size_t>(dep)]);
  };
  for (StepId id : start_order_) {
    Step step = schedule_->step(id);
    step.id = renumbered[static_cast<std::size_t>(id)];
    step.service_s += paused_s_[static_cast<std::size_t>(id)];
    step.deps.clear();
    for (StepId dep : realized_deps_[static_cast<std::size_t>(id)])
      resolve(dep, step.deps);
    std::sort(step.deps.begin(), step.deps.end());
    if (!step.deps.empty() && (step.deps.front() < 0 || step.deps.back() >= step.id))
      throw std::logic_error(fmt::format("realized plan: step {} depends on a step that started after it", step.id));
    realized.steps.push_back(std::move(step));
  }
  return realized;
}

} // namespace memsim
