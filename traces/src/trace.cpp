#include "memsim/traces/trace.hpp"

#include "memsim/traces/compressed_file.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/fast_json.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/huge_pages.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

namespace memsim {
namespace {

constexpr std::array<std::pair<TensorKind, std::string_view>, 7> kTensorKinds{{
    {TensorKind::input, "input"},
    {TensorKind::weight, "weight"},
    {TensorKind::activation, "activation"},
    {TensorKind::gradient, "gradient"},
    {TensorKind::weight_grad, "weight_grad"},
    {TensorKind::optimizer_state, "optimizer_state"},
    {TensorKind::other, "other"},
}};
constexpr std::array<std::pair<Phase, std::string_view>, 4> kPhases{{
    {Phase::forward, "forward"},
    {Phase::loss, "loss"},
    {Phase::backward, "backward"},
    {Phase::update, "update"},
}};

// Layers, iterations, split parts and axes are ints in memory: larger values are refused, not wrapped.
constexpr std::int64_t kMinIndex = std::numeric_limits<int>::min();
constexpr std::int64_t kMaxIndex = std::numeric_limits<int>::max();

// The limit on a trace's summed op times (README, Limits): about 31 years, with a resolution of 0.2 us.
constexpr double kMaxTotalSeconds = 1e9;

template <typename Table>
std::string valid_names(const Table& table)
{
  std::string names;
  for (const auto& [value, name] : table)
    names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

} // namespace

std::string_view to_string(TensorKind kind)
{
  for (const auto& [value, name] : kTensorKinds)
    if (value == kind)
      return name;
  return "other";
}

std::string_view to_string(Phase phase)
{
  for (const auto& [value, name] : kPhases)
    if (value == phase)
      return name;
  return "forward";
}

std::optional<TensorKind> tensor_kind_from_string(std::string_view text)
{
  for (const auto& [value, name] : kTensorKinds)
    if (name == text)
      return value;
  return std::nullopt;
}

std::optional<Phase> phase_from_string(std::string_view text)
{
  for (const auto& [value, name] : kPhases)
    if (name == text)
      return value;
  return std::nullopt;
}

double Trace::total_time_s() const
{
  return std::accumulate(ops.begin(), ops.end(), 0.0, [](double sum, const Op& op) { return sum + op.time_s; });
}

namespace {

struct TensorKeys {
  static constexpr std::array<std::string_view, 7> names{"id",         "name",  "bytes",     "kind",
                                                         "free_after", "shape", "batch_axis"};
};

Tensor read_tensor(const fast_json::Node& node, std::int64_t index)
{
  // One pass over the members (traces have 10^4..10^5 tensors): unknown and repeated keys are refused here.
  const fast_json::Members<TensorKeys> members(node);
  Tensor tensor;
  tensor.id = members.at("id").as_int();
  if (tensor.id != index)
    members.at("id").fail(fmt::format("tensor ids must be dense and in order: expected {}, found {}", index,
                                      tensor.id));
  // The default name is formatted only when the name is missing.
  tensor.name = members.has("name") ? members.at("name").as_string() : fmt::format("t{}", index);
  tensor.bytes = members.at("bytes").as_uint();
  std::string kind = members.at("kind").as_string();
  auto parsed = tensor_kind_from_string(kind);
  if (!parsed)
    members.at("kind").fail(fmt::format("unknown tensor kind '{}' (valid: {})", kind, valid_names(kTensorKinds)));
  tensor.kind = *parsed;
  if (members.has("free_after"))
    tensor.free_after = members.at("free_after").as_int();
  if (members.has("shape")) {
    auto shape = members.at("shape");
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::int64_t extent = shape.item(i).as_int();
      if (extent < 0)
        shape.item(i).fail("a shape extent must not be negative");
      tensor.shape.push_back(extent);
    }
  }
  if (members.has("batch_axis")) {
    const std::int64_t axis = members.at("batch_axis").as_int_in(kMinIndex, kMaxIndex);
    if (axis < 0 || (members.has("shape") && axis >= static_cast<std::int64_t>(tensor.shape.size())))
      members.at("batch_axis")
          .fail(fmt::format("batch_axis {} is not an axis of the shape ({} axes)", axis, tensor.shape.size()));
    tensor.batch_axis = static_cast<int>(axis);
  }
  return tensor;
}

struct OpKeys {
  static constexpr std::array<std::string_view, 16> names{
      "id",     "name",  "type",           "phase", "layer",      "inputs",    "outputs",  "workspace_bytes",
      "time_s", "flops", "bytes_accessed", "split", "cpu_time_s", "iteration", "split_of", "fused_from"};
};

Op read_op(const fast_json::Node& node, std::int64_t index)
{
  // One pass over the members, as for tensors.
  const fast_json::Members<OpKeys> members(node);
  Op op;
  op.id = members.at("id").as_int();
  if (op.id != index)
    members.at("id").fail(fmt::format("op ids must be dense and in order: expected {}, found {}", index, op.id));
  op.name = members.has("name") ? members.at("name").as_string() : fmt::format("op{}", index);
  op.type = members.get_string("type", "other");
  std::string phase = members.at("phase").as_string();
  auto parsed = phase_from_string(phase);
  if (!parsed)
    members.at("phase").fail(fmt::format("unknown phase '{}' (valid: {})", phase, valid_names(kPhases)));
  op.phase = *parsed;
  op.layer = static_cast<int>(members.get_int_in("layer", 0, kMinIndex, kMaxIndex));
  op.inputs = members.at("inputs").int_items();
  op.outputs = members.at("outputs").int_items();
  op.workspace_bytes = members.get_uint("workspace_bytes", 0);
  if (members.has("split_of")) {
    auto from = members.at("split_of");
    from.only_keys({"op", "index", "parts", "dim"});
    SplitOf split_of{from.at("op").as_int(), static_cast<int>(from.at("index").as_int_in(kMinIndex, kMaxIndex)),
                     static_cast<int>(from.at("parts").as_int_in(kMinIndex, kMaxIndex)),
                     from.get_string("dim", "batch")};
    if (split_of.parts < 1)
      from.at("parts").fail(fmt::format("parts must be at least 1, found {}", split_of.parts));
    if (split_of.index < 0 || split_of.index >= split_of.parts)
      from.at("index").fail(fmt::format("index {} is not below parts {}", split_of.index, split_of.parts));
    op.split_of = split_of;
  }
  if (members.has("fused_from")) {
    auto from = members.at("fused_from");
    from.only_keys({"op", "models"});
    FusedFrom fused{from.at("op").as_int(), static_cast<int>(from.at("models").as_int_in(kMinIndex, kMaxIndex))};
    if (fused.models < 1)
      from.at("models").fail(fmt::format("models must be at least 1, found {}", fused.models));
    op.fused_from = fused;
  }
  if (op.split_of && op.fused_from)
    node.fail("an op is either split_of or fused_from another, not both");
  // A derived op may leave its time to trace_with_extras (from its source op).
  op.has_time = members.has("time_s") || !(op.split_of || op.fused_from);
  op.time_s = op.has_time ? members.at("time_s").as_number() : 0.0;
  if (op.time_s < 0)
    members.at("time_s").fail("time_s must not be negative");
  if (members.has("cpu_time_s")) {
    op.cpu_time_s = members.at("cpu_time_s").as_number();
    if (*op.cpu_time_s < 0)
      members.at("cpu_time_s").fail("cpu_time_s must not be negative");
  }
  op.iteration = static_cast<int>(members.get_int_in("iteration", 0, kMinIndex, kMaxIndex));
  if (op.iteration < 0)
    members.at("iteration").fail("iteration must not be negative");
  if (members.has("flops"))
    op.flops = members.at("flops").as_non_negative();
  if (members.has("bytes_accessed"))
    op.bytes_accessed = members.at("bytes_accessed").as_non_negative();
  if (members.has("split")) {
    auto split = members.at("split");
    for (std::size_t i = 0; i < split.size(); ++i)
      op.split.push_back(split.item(i).as_string());
  }
  return op;
}

} // namespace

std::uint64_t dtype_bytes(std::string_view dtype)
{
  if (dtype == "fp64" || dtype == "int64")
    return 8;
  if (dtype == "fp32" || dtype == "tf32" || dtype == "int32")
    return 4;
  if (dtype == "fp16" || dtype == "bf16" || dtype == "int16")
    return 2;
  if (dtype == "int8" || dtype == "uint8" || dtype == "fp8")
    return 1;
  return 0;
}

namespace {

// `decisions`, when present: one entry per iteration of the ops, each choice id named once in its iteration.
template <typename Where>
void check_decisions(const Trace& trace, Where where)
{
  if (trace.decisions.empty())
    return;
  int last_iteration = 0;
  for (const Op& op : trace.ops)
    last_iteration = std::max(last_iteration, op.iteration);
  const auto iterations = static_cast<std::size_t>(last_iteration) + 1;
  if (trace.decisions.size() != iterations)
    throw InputError(where("/decisions"),
                     fmt::format("{} entries, but the ops run {} iteration{} (one entry per iteration)",
                                 trace.decisions.size(), iterations, iterations == 1 ? "" : "s"));
  for (std::size_t k = 0; k < trace.decisions.size(); ++k) {
    std::set<std::string_view> seen;
    for (std::size_t i = 0; i < trace.decisions[k].size(); ++i) {
      const std::string& choice = trace.decisions[k][i];
      if (choice.empty())
        throw InputError(where(fmt::format("/decisions/{}/{}", k, i)), "a decision must not be empty");
      if (!seen.insert(choice).second)
        throw InputError(where(fmt::format("/decisions/{}/{}", k, i)),
                         fmt::format("decision '{}' appears twice in iteration {}", choice, k));
    }
  }
}

// Semantic checks that need the whole document; `where(path)` formats the location of an element.
template <typename Where>
void check_trace(const Trace& trace, Where where)
{
  const auto tensor_count = static_cast<std::int64_t>(trace.tensors.size());
  const auto op_count = static_cast<std::int64_t>(trace.ops.size());
  // Peaks and totals are sums of sizes: every sum of the trace's sizes must fit in 64 bits.
  std::uint64_t total_bytes = 0;
  for (const Tensor& tensor : trace.tensors)
    if (__builtin_add_overflow(total_bytes, tensor.bytes, &total_bytes))
      throw InputError(where(fmt::format("/tensors/{}/bytes", tensor.id)),
                       "the tensors' sizes add up to more than 2^64 - 1 bytes");
  for (const Op& op : trace.ops)
    if (__builtin_add_overflow(total_bytes, op.workspace_bytes, &total_bytes))
      throw InputError(where(fmt::format("/ops/{}/workspace_bytes", op.id)),
                       "the tensors' and workspaces' sizes add up to more than 2^64 - 1 bytes");
  // Simulated clocks must keep sub-microsecond steps: an iteration's op times add up to at most kMaxTotalSeconds.
  double total_seconds = 0;
  for (const Op& op : trace.ops) {
    // As the loader reads them (an importer's trace is checked here too): finite and not negative.
    if (!(op.time_s >= 0) || !std::isfinite(op.time_s))
      throw InputError(where(fmt::format("/ops/{}/time_s", op.id)), "time_s must not be negative");
    if (op.cpu_time_s && (!(*op.cpu_time_s >= 0) || !std::isfinite(*op.cpu_time_s)))
      throw InputError(where(fmt::format("/ops/{}/cpu_time_s", op.id)), "cpu_time_s must not be negative");
    total_seconds += op.time_s + op.cpu_time_s.value_or(0.0);
    if (total_seconds > kMaxTotalSeconds)
      throw InputError(where(fmt::format("/ops/{}/time_s", op.id)),
                       fmt::format("the ops' times (time_s + cpu_time_s) add up to more than {:g} s",
                                   kMaxTotalSeconds));
  }
  std::vector<std::int64_t> producer(trace.tensors.size(), -1);
  for (const Op& op : trace.ops) {
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      TensorId id = op.inputs[i];
      if (id < 0 || id >= tensor_count)
        throw InputError(where(fmt::format("/ops/{}/inputs/{}", op.id, i)), fmt::format("no tensor with id {}", id));
      const Tensor& tensor = trace.tensor(id);
      if (!is_initially_resident(tensor.kind) && producer[static_cast<std::size_t>(id)] < 0)
        throw InputError(where(fmt::format("/ops/{}/inputs/{}", op.id, i)),
                         fmt::format("op {} ('{}') reads tensor {} ('{}', {}) before any op produces it", op.id,
                                     op.name, id, tensor.name, to_string(tensor.kind)));
    }
    for (std::size_t i = 0; i < op.outputs.size(); ++i) {
      TensorId id = op.outputs[i];
      if (id < 0 || id >= tensor_count)
        throw InputError(where(fmt::format("/ops/{}/outputs/{}", op.id, i)), fmt::format("no tensor with id {}", id));
      const Tensor& tensor = trace.tensor(id);
      if (is_initially_resident(tensor.kind))
        throw InputError(where(fmt::format("/ops/{}/outputs/{}", op.id, i)),
                         fmt::format("tensor {} ('{}') is a {} and exists before the iteration; ops cannot produce it",
                                     id, tensor.name, to_string(tensor.kind)));
      auto& first = producer[static_cast<std::size_t>(id)];
      // A multi-iteration trace produces a tensor shared by name (a weight gradient) once per iteration.
      if (first >= 0 && trace.op(first).iteration == op.iteration)
        throw InputError(where(fmt::format("/ops/{}/outputs/{}", op.id, i)),
                         fmt::format("tensor {} ('{}') is produced twice (also by op {})", id, tensor.name, first));
      first = op.id;
    }
  }
  check_decisions(trace, where);
  for (const Op& op : trace.ops)
    if (auto problem = derived_op_problem(op, op_count))
      throw InputError(where(fmt::format("/ops/{}/{}", op.id, op.split_of ? "split_of" : "fused_from")), *problem);
  const std::uint64_t element_bytes = dtype_bytes(trace.source.dtype);
  for (const Tensor& tensor : trace.tensors)
    if (auto problem = shape_problem(tensor, element_bytes))
      throw InputError(where(fmt::format("/tensors/{}/shape", tensor.id)), *problem);
  for (const Tensor& tensor : trace.tensors) {
    if (!tensor.free_after)
      continue;
    std::int64_t after = *tensor.free_after;
    if (after < 0 || after >= op_count)
      throw InputError(where(fmt::format("/tensors/{}/free_after", tensor.id)), fmt::format("no op with id {}", after));
    auto produced = producer[static_cast<std::size_t>(tensor.id)];
    if (produced > after)
      throw InputError(where(fmt::format("/tensors/{}/free_after", tensor.id)),
                       fmt::format("tensor {} is released after op {} but produced later, by op {}", tensor.id, after,
                                   produced));
  }
}

} // namespace

Trace trace_from_text(const std::string& text, const std::string& source_name)
{
  const fast_json::Document document(text, source_name);
  const fast_json::Node root = document.root();
  root.expect_format("memsim-trace", 1);
  root.only_keys({"format", "version", "name", "source", "tensors", "ops", "decisions", "notes"});
  Trace trace;
  trace.name = root.get_string("name", "unnamed");
  if (root.has("source")) {
    auto source = root.at("source");
    source.only_keys({"tool", "device", "dtype", "batch", "date", "model", "notes", "models"});
    trace.source.tool = source.get_string("tool", "");
    trace.source.device = source.get_string("device", "");
    trace.source.dtype = source.get_string("dtype", "fp32");
    trace.source.batch = source.get_int("batch", 0);
    trace.source.date = source.get_string("date", "");
    trace.source.models = source.get_int_in("models", 1, 1, std::int64_t{1} << 20);
  }
  if (trace.source.dtype.empty())
    trace.source.dtype = "fp32";
  auto tensors = root.at("tensors");
  reserve_huge(trace.tensors, tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i)
    trace.tensors.push_back(read_tensor(tensors.item(i), static_cast<std::int64_t>(i)));
  auto ops = root.at("ops");
  reserve_huge(trace.ops, ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i)
    trace.ops.push_back(read_op(ops.item(i), static_cast<std::int64_t>(i)));
  if (root.has("decisions")) {
    auto decisions = root.at("decisions");
    for (std::size_t k = 0; k < decisions.size(); ++k) {
      auto taken = decisions.item(k);
      std::vector<std::string>& choices = trace.decisions.emplace_back();
      for (std::size_t i = 0; i < taken.size(); ++i)
        choices.push_back(taken.item(i).as_string());
    }
  }
  check_trace(trace, [&](const std::string& path) { return fmt::format("{}: at {}", source_name, path); });
  time_derived_ops(trace.ops);
  return trace;
}

Trace trace_from_json(const nlohmann::json& document, const std::string& source_name)
{
  return trace_from_text(document.dump(), source_name);
}

void validate_trace(const Trace& trace, const std::string& source_name)
{
  for (std::size_t i = 0; i < trace.tensors.size(); ++i)
    if (trace.tensors[i].id != static_cast<std::int64_t>(i))
      throw InputError(fmt::format("{}: at /tensors/{}/id", source_name, i), "tensor ids must be dense and in order");
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    if (trace.ops[i].id != static_cast<std::int64_t>(i))
      throw InputError(fmt::format("{}: at /ops/{}/id", source_name, i), "op ids must be dense and in order");
  check_trace(trace, [&](const std::string& path) { return fmt::format("{}: at {}", source_name, path); });
}

nlohmann::json tensor_to_json(const Tensor& tensor)
{
  nlohmann::json entry = {
      {"id", tensor.id}, {"name", tensor.name}, {"bytes", tensor.bytes}, {"kind", to_string(tensor.kind)}};
  if (tensor.free_after)
    entry["free_after"] = *tensor.free_after;
  if (!tensor.shape.empty())
    entry["shape"] = tensor.shape;
  if (tensor.batch_axis)
    entry["batch_axis"] = *tensor.batch_axis;
  return entry;
}

nlohmann::json op_to_json(const Op& op)
{
  nlohmann::json entry = {{"id", op.id},           {"name", op.name},
                          {"type", op.type},       {"phase", to_string(op.phase)},
                          {"layer", op.layer},     {"inputs", op.inputs},
                          {"outputs", op.outputs}, {"workspace_bytes", op.workspace_bytes},
                          {"time_s", op.time_s}};
  if (op.flops)
    entry["flops"] = *op.flops;
  if (op.bytes_accessed)
    entry["bytes_accessed"] = *op.bytes_accessed;
  if (!op.split.empty())
    entry["split"] = op.split;
  if (!op.has_time)
    entry.erase("time_s"); // a derived op timed from its source
  if (op.cpu_time_s)
    entry["cpu_time_s"] = *op.cpu_time_s;
  if (op.iteration != 0)
    entry["iteration"] = op.iteration;
  if (op.split_of)
    entry["split_of"] = {{"op", op.split_of->op},
                         {"index", op.split_of->index},
                         {"parts", op.split_of->parts},
                         {"dim", op.split_of->dim}};
  if (op.fused_from)
    entry["fused_from"] = {{"op", op.fused_from->op}, {"models", op.fused_from->models}};
  return entry;
}

Tensor tensor_from_node(const fast_json::Node& node, TensorId expected_id) { return read_tensor(node, expected_id); }

Op op_from_node(const fast_json::Node& node, OpId expected_id) { return read_op(node, expected_id); }

Tensor tensor_from_json(const nlohmann::json& value, const std::string& source_name, const std::string& path,
                        TensorId expected_id)
{
  const fast_json::Document document(value.dump(), source_name, path);
  return read_tensor(document.root(), expected_id);
}

Op op_from_json(const nlohmann::json& value, const std::string& source_name, const std::string& path, OpId expected_id)
{
  const fast_json::Document document(value.dump(), source_name, path);
  return read_op(document.root(), expected_id);
}

nlohmann::json trace_to_json(const Trace& trace)
{
  using nlohmann::json;
  json source = {{"tool", trace.source.tool},
                 {"device", trace.source.device},
                 {"dtype", trace.source.dtype},
                 {"batch", trace.source.batch}};
  if (!trace.source.date.empty())
    source["date"] = trace.source.date;
  if (trace.source.models != 1)
    source["models"] = trace.source.models;
  json tensors = json::array();
  for (const Tensor& tensor : trace.tensors)
    tensors.push_back(tensor_to_json(tensor));
  json ops = json::array();
  for (const Op& op : trace.ops)
    ops.push_back(op_to_json(op));
  json document{
      {"format", "memsim-trace"},      {"version", 1},         {"name", trace.name}, {"source", std::move(source)},
      {"tensors", std::move(tensors)}, {"ops", std::move(ops)}};
  if (!trace.decisions.empty())
    document["decisions"] = trace.decisions;
  return document;
}

Trace load_trace(const std::filesystem::path& path)
{
  // `.json.gz` traces (the shipped recordings) are decompressed first; parse errors still name the byte.
  std::string text = read_possibly_gzipped(path);
  Trace trace = trace_from_text(text, path.string());
  recycle_text(std::move(text)); // its pages serve the next file read (the plan)
  return trace;
}

void save_trace(const Trace& trace, const std::filesystem::path& path)
{
  write_possibly_gzipped(path, trace_to_json(trace).dump(1) + "\n");
}

} // namespace memsim
