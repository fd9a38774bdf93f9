// Where tensors live at t = 0: the v1 initial-residency rule, adjusted by a v2 plan's initial_placement rules and
// shared_across_instances kinds (sim/README.md, "Initial residency").
#include "memsim/sim/execution.hpp"

#include <algorithm>
#include <map>

namespace memsim {

std::size_t plan_instance_count(const Plan& plan)
{
  int instances = 1;
  for (const Step& step : plan.steps)
    instances = std::max(instances, step.instance + 1);
  return static_cast<std::size_t>(instances);
}

std::vector<std::uint8_t> shared_tensors(const Trace& trace, const Plan& plan)
{
  if (plan.shared_across_instances.empty())
    return {};
  std::vector<std::uint8_t> shared(trace.tensors.size(), 0);
  for (const Tensor& tensor : trace.tensors)
    shared[static_cast<std::size_t>(tensor.id)] = shared_across_instances(plan, tensor.kind) ? 1 : 0;
  return shared;
}

std::vector<std::uint8_t> scoped_instances(const Plan& plan)
{
  std::vector<std::uint8_t> scoped(plan_instance_count(plan), 0);
  for (const InstanceScope& scope : plan.instance_scopes)
    if (scope.instance >= 0 && static_cast<std::size_t>(scope.instance) < scoped.size())
      scoped[static_cast<std::size_t>(scope.instance)] = 1;
  return scoped;
}

namespace {

// Where (instance, tensor) lives at t = 0. A rule naming the tensor beats one naming its kind; among rules of the
// same kind of match the last one wins. Without a rule: the v1 rule (device) for tensors of kind input, weight or
// optimizer_state that no op produces, nowhere for the rest.
class InitialPlacement {
public:
  InitialPlacement(const Trace& trace, const Plan& plan)
      : trace_(trace), plan_(plan), produced_(trace.tensors.size(), 0)
  {
    for (const Op& op : trace.ops)
      for (TensorId id : op.outputs)
        produced_[static_cast<std::size_t>(id)] = 1;
  }

  Placement where(int instance, TensorId id) const
  {
    std::optional<Placement> by_kind;
    std::optional<Placement> by_tensor;
    const TensorKind kind = trace_.tensor(id).kind;
    for (const PlacementRule& rule : plan_.initial_placement) {
      if (rule.instance && *rule.instance != instance)
        continue;
      if (rule.tensor && *rule.tensor == id)
        by_tensor = rule.where;
      else if (rule.kind && *rule.kind == kind)
        by_kind = rule.where;
    }
    if (by_tensor)
      return *by_tensor;
    if (by_kind)
      return *by_kind;
    return preexists(kind, produced_[static_cast<std::size_t>(id)] != 0) ? Placement::device : Placement::none;
  }

  // The fast answer for plans without rules.
  bool on_device(int instance, TensorId id) const
  {
    if (plan_.initial_placement.empty())
      return preexists(trace_.tensor(id).kind, produced_[static_cast<std::size_t>(id)] != 0);
    return where(instance, id) == Placement::device;
  }

private:
  const Trace& trace_;
  const Plan& plan_;
  std::vector<std::uint8_t> produced_;
};

} // namespace

std::vector<std::vector<ResidentTensor>> initial_residents(const Trace& trace, const Plan& plan,
                                                           std::size_t device_count)
{
  const InitialPlacement placement(trace, plan);
  const std::vector<std::uint8_t> shared = shared_tensors(trace, plan);
  auto is_shared = [&](TensorId id) { return !shared.empty() && shared[static_cast<std::size_t>(id)]; };
  const std::size_t instances = plan_instance_count(plan);
  const std::vector<std::uint8_t> scoped = scoped_instances(plan);
  const std::size_t tensors = trace.tensors.size();
  // Per (instance, tensor): bit d set when a step of that instance on device d references it (instance 0 for a
  // shared tensor: every instance's references count).
  std::map<std::pair<int, TensorId>, std::vector<std::uint8_t>> referenced;
  std::vector<int> lowest_device(instances, -1);
  int lowest_overall = -1;
  for (const Step& step : plan.steps) {
    if (step.device < 0 || static_cast<std::size_t>(step.device) >= device_count)
      continue;
    int& lowest = lowest_device[static_cast<std::size_t>(step.instance)];
    lowest = lowest < 0 ? step.device : std::min(lowest, step.device);
    lowest_overall = lowest_overall < 0 ? step.device : std::min(lowest_overall, step.device);
    auto mark = [&](TensorId id, int device) {
      if (!placement.on_device(step.instance, id))
        return;
      auto& devices = referenced[{is_shared(id) ? 0 : step.instance, id}];
      devices.resize(device_count, 0);
      devices[static_cast<std::size_t>(device)] = 1;
    };
    if (step.op)
      for (TensorId id : trace.op(*step.op).inputs)
        mark(id, step.device);
    if (step.tensor) {
      if (is_collective(step.kind)) {
        for (int device : step.group)
          if (device >= 0 && static_cast<std::size_t>(device) < device_count)
            mark(*step.tensor, device);
      } else {
        mark(*step.tensor, step.device);
      }
    }
  }
  std::vector<std::vector<ResidentTensor>> residents(device_count);
  for (std::size_t instance = 0; instance < instances; ++instance) {
    for (std::size_t t = 0; t < tensors; ++t) {
      const auto id = static_cast<TensorId>(t);
      const bool shared_here = is_shared(id);
      if (shared_here && instance > 0)
        continue; // one slot for every instance
      const int lowest = shared_here ? lowest_overall : lowest_device[instance];
      if (lowest < 0 || !placement.on_device(static_cast<int>(instance), id))
        continue; // no step runs this instance, or the tensor does not start on a GPU
      // A scoped instance holds only what its steps reference (its scope allocates them; sim/README.md).
      const bool only_referenced = scoped[instance] && !shared_here;
      auto found = referenced.find({static_cast<int>(instance), id});
      for (std::size_t d = 0; d < device_count; ++d) {
        const bool here =
            found != referenced.end() ? found->second[d] != 0 : !only_referenced && static_cast<int>(d) == lowest;
        if (here)
          residents[d].push_back(ResidentTensor{static_cast<int>(instance), id});
      }
    }
  }
  return residents;
}

std::vector<ResidentTensor> initial_host_residents(const Trace& trace, const Plan& plan)
{
  std::vector<ResidentTensor> residents;
  if (plan.initial_placement.empty())
    return residents;
  const InitialPlacement placement(trace, plan);
  const std::vector<std::uint8_t> shared = shared_tensors(trace, plan);
  std::vector<std::uint8_t> has_steps(plan_instance_count(plan), 0);
  for (const Step& step : plan.steps)
    has_steps[static_cast<std::size_t>(step.instance)] = 1;
  for (std::size_t instance = 0; instance < has_steps.size(); ++instance) {
    if (!has_steps[instance])
      continue;
    for (const Tensor& tensor : trace.tensors) {
      const bool shared_here = !shared.empty() && shared[static_cast<std::size_t>(tensor.id)];
      if (shared_here && instance > 0)
        continue;
      if (placement.where(static_cast<int>(instance), tensor.id) == Placement::host)
        residents.push_back(ResidentTensor{static_cast<int>(instance), tensor.id});
    }
  }
  return residents;
}

} // namespace memsim
