#include "memsim/planners/plan.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/fast_json.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/huge_pages.hpp"
#include "memsim/common/json_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

namespace memsim {
namespace {

constexpr std::array<std::pair<StepKind, std::string_view>, 12> kStepKinds{{
    {StepKind::compute, "compute"},
    {StepKind::recompute, "recompute"},
    {StepKind::offload, "offload"},
    {StepKind::prefetch, "prefetch"},
    {StepKind::free, "free"},
    {StepKind::send, "send"},
    {StepKind::recv, "recv"},
    {StepKind::split, "split"},
    {StepKind::merge, "merge"},
    {StepKind::allreduce, "allreduce"},
    {StepKind::allgather, "allgather"},
    {StepKind::reducescatter, "reducescatter"},
}};

constexpr std::array<std::pair<Placement, std::string_view>, 3> kPlacements{{
    {Placement::device, "device"},
    {Placement::host, "host"},
    {Placement::none, "none"},
}};

// Devices, instances, peers and iterations are ints in memory: larger values are refused, not wrapped.
constexpr std::int64_t kMinIndex = std::numeric_limits<int>::min();
constexpr std::int64_t kMaxIndex = std::numeric_limits<int>::max();

// The executor keeps a residency slot per (instance, tensor) on every GPU and the host: at most 2^28 (README, Limits).
constexpr double kMaxResidencySlots = 0x1p28;

// Steps that may run on the host (device -1).
bool may_run_on_host(StepKind kind) { return step_names_op(kind) || kind == StepKind::free || is_view(kind); }

bool may_be_shared(TensorKind kind)
{
  return kind == TensorKind::weight || kind == TensorKind::weight_grad || kind == TensorKind::optimizer_state;
}

std::string step_kind_names()
{
  std::string names;
  for (const auto& [kind, name] : kStepKinds)
    names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

struct StepKeys {
  static constexpr std::array<std::string_view, 14> names{"id",     "kind",      "device", "stream",   "op",
                                                          "tensor", "instance",  "deps",   "peer",     "parts",
                                                          "group",  "iteration", "loop",   "service_s"};
};

Step read_step(const fast_json::Node& node, std::size_t index)
{
  // One pass over the step's members (a plan has 10^5 steps): unknown and repeated keys are refused here.
  const fast_json::Members<StepKeys> members(node);
  Step step;
  step.id = members.at("id").as_int();
  if (step.id != static_cast<std::int64_t>(index))
    members.at("id").fail(fmt::format("step ids must be dense and in order: expected {}, found {}", index, step.id));
  std::string kind = members.at("kind").as_string();
  auto parsed = step_kind_from_string(kind);
  if (!parsed)
    members.at("kind").fail(fmt::format("unknown step kind '{}' (valid: {})", kind, step_kind_names()));
  step.kind = *parsed;
  step.device = static_cast<int>(members.get_int_in("device", 0, kMinIndex, kMaxIndex));
  if (step.device < kHostDevice)
    members.at("device").fail("device must be a GPU index or -1 (the host)");
  if (step.device == kHostDevice && !may_run_on_host(step.kind))
    members.at("device").fail(
        fmt::format("a {} step cannot run on the host (device -1): only compute, recompute, free, "
                    "split and merge can",
                    kind));
  step.stream = members.get_string("stream", step_names_op(step.kind) ? "compute" : "");
  if (step.stream.empty()) {
    switch (step.kind) {
    case StepKind::offload: step.stream = "d2h"; break;
    case StepKind::prefetch: step.stream = "h2d"; break;
    case StepKind::send:
    case StepKind::recv: step.stream = "p2p"; break;
    case StepKind::allreduce:
    case StepKind::allgather:
    case StepKind::reducescatter: step.stream = "coll"; break;
    default: step.stream = "compute"; break;
    }
  }
  step.instance = static_cast<int>(members.get_int_in("instance", 0, kMinIndex, kMaxIndex));
  if (step.instance < 0)
    members.at("instance").fail("instance must not be negative");
  if (step_names_op(step.kind)) {
    step.op = members.at("op").as_int();
    if (members.has("tensor"))
      members.at("tensor").fail(fmt::format("a {} step names an op, not a tensor", kind));
  } else {
    step.tensor = members.at("tensor").as_int();
    if (members.has("op"))
      members.at("op").fail(fmt::format("a {} step names a tensor, not an op", kind));
  }
  if (members.has("peer"))
    step.peer = static_cast<int>(members.at("peer").as_int_in(kMinIndex, kMaxIndex));
  if ((step.kind == StepKind::send || step.kind == StepKind::recv) && !step.peer)
    node.fail(fmt::format("a {} step needs 'peer' (the other device)", kind));
  step.iteration = static_cast<int>(members.get_int_in("iteration", 0, kMinIndex, kMaxIndex));
  if (step.iteration < 0)
    members.at("iteration").fail("iteration must not be negative");
  step.loop = static_cast<int>(members.get_int_in("loop", 0, kMinIndex, kMaxIndex));
  if (step.loop < 0)
    members.at("loop").fail("loop must not be negative");
  if (members.has("service_s")) {
    if (step.kind != StepKind::prefetch && step.kind != StepKind::offload && step.kind != StepKind::compute)
      members.at("service_s")
          .fail(fmt::format("only compute, prefetch and offload steps have a service time, not {}", kind));
    step.service_s = members.at("service_s").as_non_negative();
  }
  if (is_view(step.kind)) {
    auto parts = members.at("parts");
    if (parts.size() == 0)
      parts.fail(fmt::format("a {} step needs at least one part", kind));
    for (std::size_t i = 0; i < parts.size(); ++i)
      step.parts.push_back(parts.item(i).as_int());
  } else if (members.has("parts")) {
    members.at("parts").fail(fmt::format("only split and merge steps have parts, not {}", kind));
  }
  if (is_collective(step.kind)) {
    auto group = members.at("group");
    if (group.size() == 0)
      group.fail(fmt::format("a {} step needs a group of at least one device", kind));
    for (std::size_t i = 0; i < group.size(); ++i) {
      const auto device = static_cast<int>(group.item(i).as_int_in(kMinIndex, kMaxIndex));
      if (std::find(step.group.begin(), step.group.end(), device) != step.group.end())
        group.item(i).fail(fmt::format("device {} appears twice in the group", device));
      step.group.push_back(device);
    }
    if (std::find(step.group.begin(), step.group.end(), step.device) == step.group.end())
      members.at("group").fail(fmt::format("the group must contain the step's device {}", step.device));
  } else if (members.has("group")) {
    members.at("group").fail(fmt::format("only collectives have a group, not {}", kind));
  }
  const auto deps = members.at("deps");
  step.deps = deps.int_items([&](std::size_t i, StepId dep) {
    if (dep < 0 || dep >= step.id)
      deps.item(i).fail(fmt::format("dep {} must name an earlier step (0..{})", dep, step.id - 1));
  });
  return step;
}

PlacementRule read_placement_rule(const fast_json::Node& node)
{
  node.only_keys({"kind", "tensor", "where", "instance"});
  PlacementRule rule;
  if (node.has("kind") == node.has("tensor"))
    node.fail("an initial_placement entry names either a tensor 'kind' or a 'tensor' id");
  if (node.has("kind")) {
    const std::string name = node.at("kind").as_string();
    rule.kind = tensor_kind_from_string(name);
    if (!rule.kind)
      node.at("kind").fail(fmt::format("unknown tensor kind '{}'", name));
  } else {
    rule.tensor = node.at("tensor").as_int();
  }
  const std::string where = node.at("where").as_string();
  auto found =
      std::find_if(kPlacements.begin(), kPlacements.end(), [&](const auto& entry) { return entry.second == where; });
  if (found == kPlacements.end())
    node.at("where").fail(fmt::format("unknown placement '{}' (valid: device, host, none)", where));
  rule.where = found->first;
  if (node.has("instance")) {
    rule.instance = static_cast<int>(node.at("instance").as_int_in(kMinIndex, kMaxIndex));
    if (*rule.instance < 0)
      node.at("instance").fail("instance must not be negative");
  }
  return rule;
}

InstanceScope read_instance_scope(const fast_json::Node& node)
{
  node.only_keys({"instance", "first_step", "last_step"});
  InstanceScope scope;
  scope.instance = static_cast<int>(node.at("instance").as_int_in(kMinIndex, kMaxIndex));
  if (scope.instance < 0)
    node.at("instance").fail("instance must not be negative");
  scope.first_step = node.at("first_step").as_int();
  scope.last_step = node.at("last_step").as_int();
  return scope;
}

} // namespace

std::optional<std::string> v2_feature(const Plan& plan)
{
  if (!plan.instance_scopes.empty())
    return std::string("instance_scopes");
  if (!plan.initial_placement.empty())
    return std::string("initial_placement");
  if (!plan.shared_across_instances.empty())
    return std::string("shared_across_instances");
  for (const Step& step : plan.steps) {
    if (is_view(step.kind) || is_collective(step.kind))
      return fmt::format("{} steps", to_string(step.kind));
    if (step.device == kHostDevice)
      return std::string("host steps (device -1)");
    if (step.iteration != 0)
      return std::string("iterations");
    if (step.loop != 0)
      return std::string("loops");
  }
  return std::nullopt;
}

bool shared_across_instances(const Plan& plan, TensorKind kind)
{
  return std::find(plan.shared_across_instances.begin(), plan.shared_across_instances.end(), kind) !=
         plan.shared_across_instances.end();
}

std::string_view to_string(StepKind kind)
{
  for (const auto& [value, name] : kStepKinds)
    if (value == kind)
      return name;
  return "compute";
}

std::optional<StepKind> step_kind_from_string(std::string_view text)
{
  for (const auto& [value, name] : kStepKinds)
    if (name == text)
      return value;
  return std::nullopt;
}

Plan plan_from_text(const std::string& text, const std::string& source_name)
{
  const fast_json::Document document(text, source_name);
  const fast_json::Node root = document.root();
  root.expect_format("memsim-plan", 1);
  root.only_keys({"format", "version", "trace", "machine", "planner", "params", "budget_bytes", "steps", "estimate",
                  "extra_ops", "extra_tensors", "notes", "policy", "initial_placement", "shared_across_instances",
                  "instance_scopes", "samples_per_iteration"});
  Plan plan;
  plan.trace = root.get_string("trace", "");
  plan.machine = root.get_string("machine", "");
  plan.planner = root.get_string("planner", "");
  if (root.has("params")) {
    root.at("params").expect_object();
    plan.params = root.at("params").to_json();
  }
  plan.budget_bytes = root.get_uint("budget_bytes", 0);
  if (root.has("estimate")) {
    auto estimate = root.at("estimate");
    estimate.expect_object();
    if (estimate.has("iteration_time_s"))
      plan.estimate.iteration_time_s = estimate.at("iteration_time_s").as_non_negative();
    if (estimate.has("peak_bytes"))
      plan.estimate.peak_bytes = estimate.at("peak_bytes").as_uint();
  }
  // Extra ops/tensors continue the trace's ids; their first id is only known against the trace, so they
  // are read here with their own positions and checked in validate_plan.
  if (root.has("extra_tensors")) {
    auto extra = root.at("extra_tensors");
    for (std::size_t i = 0; i < extra.size(); ++i) {
      auto element = extra.item(i);
      element.expect_object();
      TensorId id = element.at("id").as_int();
      plan.extra_tensors.push_back(tensor_from_node(element, id));
    }
  }
  if (root.has("extra_ops")) {
    auto extra = root.at("extra_ops");
    for (std::size_t i = 0; i < extra.size(); ++i) {
      auto element = extra.item(i);
      element.expect_object();
      OpId id = element.at("id").as_int();
      plan.extra_ops.push_back(op_from_node(element, id));
    }
  }
  if (root.has("policy")) {
    auto policy = root.at("policy");
    policy.expect_object();
    policy.only_keys({"name", "params"});
    PolicyChoice choice;
    choice.name = policy.at("name").as_string();
    if (policy.has("params")) {
      policy.at("params").expect_object();
      choice.params = policy.at("params").to_json();
    }
    plan.policy = std::move(choice);
  }
  if (root.has("initial_placement")) {
    auto rules = root.at("initial_placement");
    for (std::size_t i = 0; i < rules.size(); ++i)
      plan.initial_placement.push_back(read_placement_rule(rules.item(i)));
  }
  if (root.has("shared_across_instances")) {
    auto kinds = root.at("shared_across_instances");
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      const std::string name = kinds.item(i).as_string();
      auto kind = tensor_kind_from_string(name);
      if (!kind || !may_be_shared(*kind))
        kinds.item(i).fail(fmt::format("tensor kind '{}' cannot be shared across instances (valid: weight, "
                                       "weight_grad, optimizer_state)",
                                       name));
      plan.shared_across_instances.push_back(*kind);
    }
  }
  if (root.has("instance_scopes")) {
    auto scopes = root.at("instance_scopes");
    for (std::size_t i = 0; i < scopes.size(); ++i)
      plan.instance_scopes.push_back(read_instance_scope(scopes.item(i)));
  }
  if (root.has("samples_per_iteration"))
    plan.samples_per_iteration = root.get_int_in("samples_per_iteration", 1, 1, std::int64_t{1} << 50);
  auto steps = root.at("steps");
  reserve_huge(plan.steps, steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i)
    plan.steps.push_back(read_step(steps.item(i), i));
  return plan;
}

Plan plan_from_json(const nlohmann::json& document, const std::string& source_name)
{
  return plan_from_text(document.dump(), source_name);
}

nlohmann::json plan_to_json(const Plan& plan)
{
  using nlohmann::json;
  json steps = json::array();
  for (const Step& step : plan.steps) {
    json entry = {{"id", step.id}, {"kind", to_string(step.kind)}};
    if (step.op)
      entry["op"] = *step.op;
    if (step.tensor)
      entry["tensor"] = *step.tensor;
    entry["device"] = step.device;
    entry["stream"] = step.stream;
    if (step.instance != 0)
      entry["instance"] = step.instance;
    if (step.peer)
      entry["peer"] = *step.peer;
    if (!step.parts.empty())
      entry["parts"] = step.parts;
    if (!step.group.empty())
      entry["group"] = step.group;
    if (step.iteration != 0)
      entry["iteration"] = step.iteration;
    if (step.loop != 0)
      entry["loop"] = step.loop;
    if (step.service_s > 0)
      entry["service_s"] = step.service_s;
    entry["deps"] = step.deps;
    steps.push_back(std::move(entry));
  }
  json document = {{"format", "memsim-plan"},
                   {"version", 1},
                   {"trace", plan.trace},
                   {"machine", plan.machine},
                   {"planner", plan.planner},
                   {"params", plan.params},
                   {"budget_bytes", plan.budget_bytes}};
  if (plan.estimate.iteration_time_s || plan.estimate.peak_bytes) {
    json estimate = json::object();
    if (plan.estimate.iteration_time_s)
      estimate["iteration_time_s"] = *plan.estimate.iteration_time_s;
    if (plan.estimate.peak_bytes)
      estimate["peak_bytes"] = *plan.estimate.peak_bytes;
    document["estimate"] = std::move(estimate);
  }
  if (!plan.extra_tensors.empty()) {
    json extra = json::array();
    for (const Tensor& tensor : plan.extra_tensors)
      extra.push_back(tensor_to_json(tensor));
    document["extra_tensors"] = std::move(extra);
  }
  if (!plan.extra_ops.empty()) {
    json extra = json::array();
    for (const Op& op : plan.extra_ops)
      extra.push_back(op_to_json(op));
    document["extra_ops"] = std::move(extra);
  }
  if (plan.policy)
    document["policy"] = {{"name", plan.policy->name}, {"params", plan.policy->params}};
  if (!plan.initial_placement.empty()) {
    json rules = json::array();
    for (const PlacementRule& rule : plan.initial_placement) {
      json entry = json::object();
      if (rule.kind)
        entry["kind"] = to_string(*rule.kind);
      if (rule.tensor)
        entry["tensor"] = *rule.tensor;
      for (const auto& [value, name] : kPlacements)
        if (value == rule.where)
          entry["where"] = name;
      if (rule.instance)
        entry["instance"] = *rule.instance;
      rules.push_back(std::move(entry));
    }
    document["initial_placement"] = std::move(rules);
  }
  if (!plan.shared_across_instances.empty()) {
    json kinds = json::array();
    for (TensorKind kind : plan.shared_across_instances)
      kinds.push_back(to_string(kind));
    document["shared_across_instances"] = std::move(kinds);
  }
  if (!plan.instance_scopes.empty()) {
    json scopes = json::array();
    for (const InstanceScope& scope : plan.instance_scopes)
      scopes.push_back(
          {{"instance", scope.instance}, {"first_step", scope.first_step}, {"last_step", scope.last_step}});
    document["instance_scopes"] = std::move(scopes);
  }
  if (plan.samples_per_iteration)
    document["samples_per_iteration"] = *plan.samples_per_iteration;
  document["steps"] = std::move(steps);
  return document;
}

Plan load_plan(const std::filesystem::path& path)
{
  std::string text = read_text_file(path);
  Plan plan = plan_from_text(text, path.string());
  recycle_text(std::move(text));
  return plan;
}

void save_plan(const Plan& plan, const std::filesystem::path& path) { json_io::write_file(path, plan_to_json(plan)); }

void validate_plan(const Plan& plan, const Trace& trace, int device_count, const std::string& source_name)
{
  const auto op_count = static_cast<std::int64_t>(trace.ops.size() + plan.extra_ops.size());
  const auto tensor_count = static_cast<std::int64_t>(trace.tensors.size() + plan.extra_tensors.size());
  const auto step_count = static_cast<std::int64_t>(plan.steps.size());
  for (std::size_t i = 0; i < plan.extra_tensors.size(); ++i)
    if (plan.extra_tensors[i].id != static_cast<std::int64_t>(trace.tensors.size() + i))
      throw InputError(fmt::format("{}: at /extra_tensors/{}/id", source_name, i),
                       fmt::format("extra tensor ids continue the trace's: expected {}", trace.tensors.size() + i));
  for (std::size_t i = 0; i < plan.extra_ops.size(); ++i)
    if (plan.extra_ops[i].id != static_cast<std::int64_t>(trace.ops.size() + i))
      throw InputError(fmt::format("{}: at /extra_ops/{}/id", source_name, i),
                       fmt::format("extra op ids continue the trace's: expected {}", trace.ops.size() + i));
  // Extra ops read and write the trace's tensors and the extra ones: nothing else exists to the executor.
  for (std::size_t i = 0; i < plan.extra_ops.size(); ++i)
    for (const auto& [key, ids] :
         {std::pair{"inputs", &plan.extra_ops[i].inputs}, std::pair{"outputs", &plan.extra_ops[i].outputs}})
      for (std::size_t k = 0; k < ids->size(); ++k)
        if ((*ids)[k] < 0 || (*ids)[k] >= tensor_count)
          throw InputError(fmt::format("{}: at /extra_ops/{}/{}/{}", source_name, i, key, k),
                           fmt::format("no tensor with id {} in trace '{}' or the plan's extra_tensors", (*ids)[k],
                                       trace.name));
  // Residency is kept per memory the plan can touch: its GPUs (at most the machine's; memsim-cuda passes no machine,
  // device_count = INT_MAX) and the host.
  std::int64_t devices_used = 0;
  for (const Step& step : plan.steps)
    devices_used = std::max<std::int64_t>(devices_used, std::int64_t{step.device} + 1);
  const std::int64_t memories = std::min<std::int64_t>(device_count, devices_used) + 1;
  for (const Step& step : plan.steps) {
    auto where = [&](const char* key) { return fmt::format("{}: at /steps/{}/{}", source_name, step.id, key); };
    if (step.device >= device_count)
      throw InputError(where("device"),
                       fmt::format("device {} does not exist (the machine has {} GPU(s))", step.device, device_count));
    if (step.instance >= step_count)
      throw InputError(where("instance"),
                       fmt::format("instance {} is not below the plan's step count {}", step.instance, step_count));
    if ((step.instance + 1.0) * static_cast<double>(tensor_count) * static_cast<double>(memories) > kMaxResidencySlots)
      throw InputError(
          where("instance"),
          fmt::format("{} instances × {} tensors × {} memories (GPUs and the host) exceed the limit of {:g} "
                      "residency slots",
                      std::int64_t{step.instance} + 1, tensor_count, memories, kMaxResidencySlots));
    if (step.peer && (*step.peer < 0 || *step.peer >= device_count || *step.peer == step.device))
      throw InputError(where("peer"), fmt::format("peer {} is not another GPU of the machine", *step.peer));
    if (step.op && (*step.op < 0 || *step.op >= op_count))
      throw InputError(where("op"), fmt::format("no op with id {} in trace '{}'", *step.op, trace.name));
    if (step.tensor && (*step.tensor < 0 || *step.tensor >= tensor_count))
      throw InputError(where("tensor"), fmt::format("no tensor with id {} in trace '{}'", *step.tensor, trace.name));
  }
  validate_v2_additions(plan, trace, device_count, source_name);
}

Trace trace_with_extras(const Trace& trace, const Plan& plan)
{
  if (plan.extra_ops.empty() && plan.extra_tensors.empty())
    return trace;
  Trace extended = trace;
  extended.ops.insert(extended.ops.end(), plan.extra_ops.begin(), plan.extra_ops.end());
  extended.tensors.insert(extended.tensors.end(), plan.extra_tensors.begin(), plan.extra_tensors.end());
  time_derived_ops(extended.ops);
  return extended;
}

StepId PlanBuilder::add(Step step)
{
  step.id = static_cast<StepId>(plan_->steps.size());
  plan_->steps.push_back(std::move(step));
  return plan_->steps.back().id;
}

namespace {
Step make_step(StepKind kind, std::optional<OpId> op, std::optional<TensorId> tensor, std::vector<StepId> deps,
               int device, int instance, const std::string& stream)
{
  Step step;
  step.kind = kind;
  step.op = op;
  step.tensor = tensor;
  step.deps = std::move(deps);
  step.device = device;
  step.instance = instance;
  step.stream = stream;
  return step;
}
} // namespace

StepId PlanBuilder::compute(OpId op, std::vector<StepId> deps, int device, int instance, const std::string& stream)
{
  return add(make_step(StepKind::compute, op, std::nullopt, std::move(deps), device, instance, stream));
}
StepId PlanBuilder::recompute(OpId op, std::vector<StepId> deps, int device, int instance, const std::string& stream)
{
  return add(make_step(StepKind::recompute, op, std::nullopt, std::move(deps), device, instance, stream));
}
StepId PlanBuilder::offload(TensorId tensor, std::vector<StepId> deps, int device, int instance,
                            const std::string& stream)
{
  return add(make_step(StepKind::offload, std::nullopt, tensor, std::move(deps), device, instance, stream));
}
StepId PlanBuilder::prefetch(TensorId tensor, std::vector<StepId> deps, int device, int instance,
                             const std::string& stream)
{
  return add(make_step(StepKind::prefetch, std::nullopt, tensor, std::move(deps), device, instance, stream));
}
StepId PlanBuilder::free(TensorId tensor, std::vector<StepId> deps, const std::string& stream, int device, int instance)
{
  return add(make_step(StepKind::free, std::nullopt, tensor, std::move(deps), device, instance, stream));
}
StepId PlanBuilder::send(TensorId tensor, int peer, std::vector<StepId> deps, int device, int instance,
                         const std::string& stream)
{
  Step step = make_step(StepKind::send, std::nullopt, tensor, std::move(deps), device, instance, stream);
  step.peer = peer;
  return add(std::move(step));
}
StepId PlanBuilder::split(TensorId tensor, std::vector<TensorId> parts, const std::string& stream,
                          std::vector<StepId> deps, int device, int instance)
{
  Step step = make_step(StepKind::split, std::nullopt, tensor, std::move(deps), device, instance, stream);
  step.parts = std::move(parts);
  return add(std::move(step));
}
StepId PlanBuilder::merge(TensorId tensor, std::vector<TensorId> parts, const std::string& stream,
                          std::vector<StepId> deps, int device, int instance)
{
  Step step = make_step(StepKind::merge, std::nullopt, tensor, std::move(deps), device, instance, stream);
  step.parts = std::move(parts);
  return add(std::move(step));
}
StepId PlanBuilder::collective(StepKind kind, TensorId tensor, std::vector<int> group, std::vector<StepId> deps,
                               const std::string& stream)
{
  if (kind != StepKind::allreduce && kind != StepKind::allgather && kind != StepKind::reducescatter)
    throw std::logic_error("PlanBuilder::collective: not a collective step kind");
  if (group.empty())
    throw std::logic_error("PlanBuilder::collective: an empty group");
  const int device = group.front();
  Step step = make_step(kind, std::nullopt, tensor, std::move(deps), device, 0, stream);
  step.group = std::move(group);
  return add(std::move(step));
}
StepId PlanBuilder::recv(TensorId tensor, int peer, std::vector<StepId> deps, int device, int instance,
                         const std::string& stream)
{
  Step step = make_step(StepKind::recv, std::nullopt, tensor, std::move(deps), device, instance, stream);
  step.peer = peer;
  return add(std::move(step));
}

} // namespace memsim
