// The static checks of the v2 plan additions (what can be refused before a run, with the JSON path). Checks that
// depend on timing (a part freed before its merge by a race) are the executor's: not_resident at run time.
#include "memsim/planners/plan.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace memsim {
namespace {

class V2Checks {
public:
  V2Checks(const Plan& plan, const Trace& trace, int device_count, const std::string& source_name)
      : plan_(plan), trace_(trace), device_count_(device_count), source_(source_name)
  {
  }

  void run()
  {
    check_extras();
    check_placement();
    check_scopes();
    // The residency walk is only needed by merges and host steps (v1 plans skip it: loading stays fast).
    bool walk = false;
    for (const Step& step : plan_.steps)
      walk = walk || step.kind == StepKind::merge || step.device == kHostDevice;
    std::vector<std::uint8_t> produced(tensor_count(), 0);
    auto mark = [&](const std::vector<Op>& ops) {
      for (const Op& op : ops)
        for (TensorId id : op.outputs)
          if (id >= 0 && static_cast<std::size_t>(id) < produced.size())
            produced[static_cast<std::size_t>(id)] = 1;
    };
    if (walk) {
      mark(trace_.ops);
      mark(plan_.extra_ops);
      for (std::size_t t = 0; t < tensor_count(); ++t)
        initially_anywhere_.push_back(preexists(tensor(static_cast<TensorId>(t)).kind, produced[t] != 0));
    }
    for (const Step& step : plan_.steps) {
      check_step(step);
      if (walk)
        note_residency(step);
    }
  }

private:
  std::size_t tensor_count() const { return trace_.tensors.size() + plan_.extra_tensors.size(); }
  const Tensor& tensor(TensorId id) const
  {
    const auto index = static_cast<std::size_t>(id);
    return index < trace_.tensors.size() ? trace_.tensors[index] : plan_.extra_tensors[index - trace_.tensors.size()];
  }
  const Op& op(OpId id) const
  {
    const auto index = static_cast<std::size_t>(id);
    return index < trace_.ops.size() ? trace_.ops[index] : plan_.extra_ops[index - trace_.ops.size()];
  }
  [[noreturn]] void fail(const std::string& path, const std::string& message) const
  {
    throw InputError(fmt::format("{}: at {}", source_, path), message);
  }
  bool valid_tensor(TensorId id) const { return id >= 0 && static_cast<std::size_t>(id) < tensor_count(); }

  void check_extras() const
  {
    const auto op_count = static_cast<std::int64_t>(trace_.ops.size() + plan_.extra_ops.size());
    for (std::size_t i = 0; i < plan_.extra_ops.size(); ++i)
      if (auto problem = derived_op_problem(plan_.extra_ops[i], op_count))
        fail(fmt::format("/extra_ops/{}/{}", i, plan_.extra_ops[i].split_of ? "split_of" : "fused_from"), *problem);
    const std::uint64_t element_bytes = dtype_bytes(trace_.source.dtype);
    for (std::size_t i = 0; i < plan_.extra_tensors.size(); ++i)
      if (auto problem = shape_problem(plan_.extra_tensors[i], element_bytes))
        fail(fmt::format("/extra_tensors/{}/shape", i), *problem);
  }

  void check_placement() const
  {
    for (std::size_t i = 0; i < plan_.initial_placement.size(); ++i) {
      const PlacementRule& rule = plan_.initial_placement[i];
      if (rule.tensor && !valid_tensor(*rule.tensor))
        fail(fmt::format("/initial_placement/{}/tensor", i),
             fmt::format("no tensor with id {} in trace '{}'", *rule.tensor, trace_.name));
    }
  }

  // Each scope names an instance that has steps and two of its steps in order; scopes of one instance do not
  // overlap, and every step of a scoped instance lies inside one of its scopes (outside, its tensors are not there).
  void check_scopes() const
  {
    if (plan_.instance_scopes.empty())
      return;
    const auto step_count = static_cast<StepId>(plan_.steps.size());
    std::map<int, std::vector<std::pair<StepId, std::size_t>>> by_instance; // first step, scope index
    std::set<int> instances;
    for (const Step& step : plan_.steps)
      instances.insert(step.instance);
    for (std::size_t i = 0; i < plan_.instance_scopes.size(); ++i) {
      const InstanceScope& scope = plan_.instance_scopes[i];
      auto path = [&](const char* key) { return fmt::format("/instance_scopes/{}/{}", i, key); };
      if (!instances.count(scope.instance))
        fail(path("instance"), fmt::format("no step runs instance {}", scope.instance));
      for (const auto& [key, id] :
           {std::pair{"first_step", scope.first_step}, std::pair{"last_step", scope.last_step}}) {
        if (id < 0 || id >= step_count)
          fail(path(key), fmt::format("step {} does not exist (the plan has steps 0..{})", id, step_count - 1));
        const int owner = plan_.steps[static_cast<std::size_t>(id)].instance;
        if (owner != scope.instance)
          fail(path(key),
               fmt::format("step {} runs instance {}, not the scope's instance {}", id, owner, scope.instance));
      }
      if (scope.last_step < scope.first_step)
        fail(path("last_step"),
             fmt::format("the scope ends at step {}, before its first step {}", scope.last_step, scope.first_step));
      by_instance[scope.instance].emplace_back(scope.first_step, i);
    }
    for (auto& [instance, scopes] : by_instance) {
      std::sort(scopes.begin(), scopes.end());
      for (std::size_t k = 1; k < scopes.size(); ++k) {
        const InstanceScope& before = plan_.instance_scopes[scopes[k - 1].second];
        if (scopes[k].first <= before.last_step)
          fail(fmt::format("/instance_scopes/{}", scopes[k].second),
               fmt::format("scope of instance {} (steps {}..{}) overlaps its scope {} (steps {}..{})", instance,
                           scopes[k].first, plan_.instance_scopes[scopes[k].second].last_step, scopes[k - 1].second,
                           before.first_step, before.last_step));
      }
    }
    for (const Step& step : plan_.steps) {
      auto found = by_instance.find(step.instance);
      if (found == by_instance.end())
        continue;
      const bool inside = std::any_of(found->second.begin(), found->second.end(), [&](const auto& entry) {
        return step.id >= entry.first && step.id <= plan_.instance_scopes[entry.second].last_step;
      });
      if (!inside)
        fail(fmt::format("/steps/{}/instance", step.id),
             fmt::format("step {} of instance {} lies outside every scope of that instance", step.id, step.instance));
    }
  }

  // Whether the tensor may be on the host when a host step reads it: placed there at t = 0, or an earlier step
  // puts it there (an offload, a host step producing it, a host split/merge).
  bool may_be_on_host(TensorId id) const
  {
    if (on_host_.count(id))
      return true;
    for (const PlacementRule& rule : plan_.initial_placement)
      if (rule.where == Placement::host &&
          ((rule.tensor && *rule.tensor == id) || (rule.kind && *rule.kind == tensor(id).kind)))
        return true;
    return false;
  }

  void check_step(const Step& step) const
  {
    auto path = [&](const std::string& key) { return fmt::format("/steps/{}/{}", step.id, key); };
    if (is_collective(step.kind)) {
      for (std::size_t i = 0; i < step.group.size(); ++i)
        if (step.group[i] < 0 || step.group[i] >= device_count_)
          fail(path(fmt::format("group/{}", i)),
               fmt::format("device {} does not exist (the machine has {} GPU(s))", step.group[i], device_count_));
    }
    if (is_view(step.kind))
      check_view(step, path);
    if (step.device == kHostDevice && step.op) {
      const Op& host_op = op(*step.op);
      for (std::size_t i = 0; i < host_op.inputs.size(); ++i) {
        const TensorId input = host_op.inputs[i];
        if (!may_be_on_host(input))
          fail(path("op"), fmt::format("host step {} reads tensor {} '{}', which no initial placement, offload or "
                                       "earlier host step puts on the host (it lives on GPUs only)",
                                       step.id, input, tensor(input).name));
      }
    }
  }

  template <typename Path>
  void check_view(const Step& step, Path path) const
  {
    std::uint64_t total = 0;
    std::set<TensorId> seen;
    for (std::size_t i = 0; i < step.parts.size(); ++i) {
      const TensorId part = step.parts[i];
      const std::string where = path(fmt::format("parts/{}", i));
      if (!valid_tensor(part))
        fail(where, fmt::format("no tensor with id {} in trace '{}'", part, trace_.name));
      if (part == *step.tensor || !seen.insert(part).second)
        fail(where, fmt::format("tensor {} appears twice among the parent and its parts", part));
      total += tensor(part).bytes;
      if (step.kind == StepKind::merge && !made_resident_.count({step.device, part}) &&
          !initially_anywhere_[static_cast<std::size_t>(part)])
        fail(where, fmt::format("merge at step {} needs part {} '{}' resident on {}, but no earlier step makes it "
                                "resident there",
                                step.id, part, tensor(part).name,
                                step.device == kHostDevice ? "the host" : fmt::format("gpu{}", step.device)));
    }
    const Tensor& parent = tensor(*step.tensor);
    if (total != parent.bytes)
      fail(path("parts"), fmt::format("the parts add up to {} bytes, but tensor {} '{}' has {} bytes", total, parent.id,
                                      parent.name, parent.bytes));
  }

  // What the step may make resident where (for the merge and host-read checks; list order, timing ignored).
  void note_residency(const Step& step)
  {
    auto resident = [&](int device, TensorId id) {
      made_resident_.insert({device, id});
      if (device == kHostDevice)
        on_host_.insert(id);
    };
    switch (step.kind) {
    case StepKind::compute:
    case StepKind::recompute:
      for (TensorId id : op(*step.op).outputs)
        resident(step.device, id);
      break;
    case StepKind::offload: resident(kHostDevice, *step.tensor); break;
    case StepKind::prefetch: resident(step.device, *step.tensor); break;
    case StepKind::send:
    case StepKind::recv: resident(*step.peer, *step.tensor); break;
    case StepKind::split:
      for (TensorId part : step.parts)
        resident(step.device, part);
      break;
    case StepKind::merge: resident(step.device, *step.tensor); break;
    case StepKind::free:
    case StepKind::allreduce:
    case StepKind::allgather:
    case StepKind::reducescatter: break;
    }
  }

  const Plan& plan_;
  const Trace& trace_;
  int device_count_;
  const std::string& source_;
  std::vector<bool> initially_anywhere_;
  std::set<std::pair<int, TensorId>> made_resident_;
  std::set<TensorId> on_host_;
};

} // namespace

void validate_v2_additions(const Plan& plan, const Trace& trace, int device_count, const std::string& source_name)
{
  V2Checks(plan, trace, device_count, source_name).run();
}

} // namespace memsim
