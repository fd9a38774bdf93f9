#include "nlohmann_baseline.hpp"

#include "memsim/common/files.hpp"
#include "memsim/common/json_io.hpp"

#include <fmt/format.h>

namespace memsim::bench {
namespace {

using json_io::Node;

std::vector<std::int64_t> read_id_list(const Node& node)
{
  std::vector<std::int64_t> ids;
  const std::size_t count = node.size();
  ids.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    ids.push_back(node.item(i).as_int());
  return ids;
}

Tensor read_tensor(const Node& node, std::int64_t index)
{
  node.only_keys({"id", "name", "bytes", "kind", "free_after"});
  Tensor tensor;
  tensor.id = node.at("id").as_int();
  if (tensor.id != index)
    node.at("id").fail("tensor ids must be dense and in order");
  tensor.name = node.get_string("name", fmt::format("t{}", index));
  tensor.bytes = node.at("bytes").as_uint();
  const std::string kind = node.at("kind").as_string();
  const auto parsed = tensor_kind_from_string(kind);
  if (!parsed)
    node.at("kind").fail("unknown tensor kind");
  tensor.kind = *parsed;
  if (node.has("free_after"))
    tensor.free_after = node.at("free_after").as_int();
  return tensor;
}

Op read_op(const Node& node, std::int64_t index)
{
  node.only_keys({"id", "name", "type", "phase", "layer", "inputs", "outputs", "workspace_bytes", "time_s", "flops",
                  "bytes_accessed", "split"});
  Op op;
  op.id = node.at("id").as_int();
  if (op.id != index)
    node.at("id").fail("op ids must be dense and in order");
  op.name = node.get_string("name", fmt::format("op{}", index));
  op.type = node.get_string("type", "other");
  const std::string phase = node.at("phase").as_string();
  const auto parsed = phase_from_string(phase);
  if (!parsed)
    node.at("phase").fail("unknown phase");
  op.phase = *parsed;
  op.layer = static_cast<int>(node.get_int("layer", 0));
  op.inputs = read_id_list(node.at("inputs"));
  op.outputs = read_id_list(node.at("outputs"));
  op.workspace_bytes = node.get_uint("workspace_bytes", 0);
  op.time_s = node.at("time_s").as_number();
  if (op.time_s < 0)
    node.at("time_s").fail("time_s must not be negative");
  if (node.has("flops"))
    op.flops = node.at("flops").as_number();
  if (node.has("bytes_accessed"))
    op.bytes_accessed = node.at("bytes_accessed").as_number();
  if (node.has("split")) {
    const Node split = node.at("split");
    for (std::size_t i = 0; i < split.size(); ++i)
      op.split.push_back(split.item(i).as_string());
  }
  return op;
}

Step read_step(const Node& node, std::size_t index)
{
  node.only_keys({"id", "kind", "device", "stream", "op", "tensor", "instance", "deps", "peer"});
  Step step;
  step.id = node.at("id").as_int();
  if (step.id != static_cast<std::int64_t>(index))
    node.at("id").fail("step ids must be dense and in order");
  const std::string kind = node.at("kind").as_string();
  const auto parsed = step_kind_from_string(kind);
  if (!parsed)
    node.at("kind").fail("unknown step kind");
  step.kind = *parsed;
  step.device = static_cast<int>(node.get_int("device", 0));
  if (step.device < 0)
    node.at("device").fail("device must not be negative");
  step.stream = node.get_string("stream", step_names_op(step.kind) ? "compute" : "");
  if (step.stream.empty())
    step.stream = step.kind == StepKind::offload ? "d2h" : step.kind == StepKind::prefetch ? "h2d" : "compute";
  step.instance = static_cast<int>(node.get_int("instance", 0));
  if (step.instance < 0)
    node.at("instance").fail("instance must not be negative");
  if (step_names_op(step.kind)) {
    step.op = node.at("op").as_int();
    if (node.has("tensor"))
      node.at("tensor").fail("a step that names an op names no tensor");
  } else {
    step.tensor = node.at("tensor").as_int();
    if (node.has("op"))
      node.at("op").fail("a step that names a tensor names no op");
  }
  if (node.has("peer"))
    step.peer = static_cast<int>(node.at("peer").as_int());
  const Node deps = node.at("deps");
  for (std::size_t i = 0; i < deps.size(); ++i) {
    const StepId dep = deps.item(i).as_int();
    if (dep < 0 || dep >= step.id)
      deps.item(i).fail("a dep must name an earlier step");
    step.deps.push_back(dep);
  }
  return step;
}

} // namespace

Trace nlohmann_load_trace(const std::filesystem::path& path)
{
  const json_io::Json document = json_io::read_file(path);
  const Node root(document, path.string());
  root.expect_format("memsim-trace", 1);
  root.only_keys({"format", "version", "name", "source", "tensors", "ops", "notes"});
  Trace trace;
  trace.name = root.get_string("name", "unnamed");
  if (root.has("source")) {
    const Node source = root.at("source");
    source.only_keys({"tool", "device", "dtype", "batch", "date", "model", "notes"});
    trace.source.tool = source.get_string("tool", "");
    trace.source.device = source.get_string("device", "");
    trace.source.dtype = source.get_string("dtype", "fp32");
    trace.source.batch = source.get_int("batch", 0);
    trace.source.date = source.get_string("date", "");
  }
  const Node tensors = root.at("tensors");
  trace.tensors.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i)
    trace.tensors.push_back(read_tensor(tensors.item(i), static_cast<std::int64_t>(i)));
  const Node ops = root.at("ops");
  trace.ops.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i)
    trace.ops.push_back(read_op(ops.item(i), static_cast<std::int64_t>(i)));
  validate_trace(trace, path.string()); // the semantic checks v1 ran after reading
  return trace;
}

Plan nlohmann_load_plan(const std::filesystem::path& path)
{
  const json_io::Json document = json_io::read_file(path);
  const Node root(document, path.string());
  root.expect_format("memsim-plan", 1);
  root.only_keys({"format", "version", "trace", "machine", "planner", "params", "budget_bytes", "steps", "estimate",
                  "extra_ops", "extra_tensors", "notes"});
  Plan plan;
  plan.trace = root.get_string("trace", "");
  plan.machine = root.get_string("machine", "");
  plan.planner = root.get_string("planner", "");
  if (root.has("params"))
    plan.params = root.at("params").value();
  plan.budget_bytes = root.get_uint("budget_bytes", 0);
  const Node steps = root.at("steps");
  plan.steps.reserve(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i)
    plan.steps.push_back(read_step(steps.item(i), i));
  return plan;
}

} // namespace memsim::bench
