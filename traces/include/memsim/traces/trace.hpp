#pragma once
// The Trace document (`memsim-trace`, JSON): one profiled training iteration of one model instance.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace memsim {

namespace fast_json {
class Node;
}

using TensorId = std::int64_t;
using OpId = std::int64_t;

enum class TensorKind { input, weight, activation, gradient, weight_grad, optimizer_state, other };
enum class Phase { forward, loss, backward, update };

std::string_view to_string(TensorKind kind);
std::string_view to_string(Phase phase);
std::optional<TensorKind> tensor_kind_from_string(std::string_view text);
std::optional<Phase> phase_from_string(std::string_view text);

// Tensors that exist before the iteration starts and stay unless a plan moves them.
inline bool is_initially_resident(TensorKind kind)
{
  return kind == TensorKind::input || kind == TensorKind::weight || kind == TensorKind::optimizer_state;
}

// The initial-residency rule's test (DESIGN.md v2): a tensor exists on the device at t = 0, without a placement rule,
// when its kind is initially resident and no op produces it. A validated trace never produces such a kind; traces
// built in code may, and every account (engines, plan checks, trace analysis, memory floor) reads them alike.
inline bool preexists(TensorKind kind, bool produced) { return is_initially_resident(kind) && !produced; }

struct Tensor {
  TensorId id = 0;
  std::string name;
  std::uint64_t bytes = 0;
  TensorKind kind = TensorKind::other;
  std::optional<OpId> free_after; // op after which the profiled framework released it
  // v2, optional: the logical shape (elements per axis) and which axis is the batch. When both shape and the
  // trace's dtype size are known, product(shape) x dtype size must equal bytes (checked by the loader).
  std::vector<std::int64_t> shape;
  std::optional<int> batch_axis;
};

// v2: where a derived op (a plan's extra op) comes from.
struct SplitOf { // micro-op `index` of `parts` of op `op`, split along `dim`
  OpId op = 0;
  int index = 0;
  int parts = 1;
  std::string dim;
};
struct FusedFrom { // op `op` of `models` horizontally fused models
  OpId op = 0;
  int models = 1;
};

struct Op {
  OpId id = 0;
  std::string name;
  std::string type;
  Phase phase = Phase::forward;
  int layer = 0;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::uint64_t workspace_bytes = 0;
  double time_s = 0;
  std::optional<double> flops;
  std::optional<double> bytes_accessed;
  std::vector<std::string> split; // dimensions along which the op may be split
  // v2, optional: the op's time on the host CPU (a host compute step uses it instead of the roofline).
  std::optional<double> cpu_time_s;
  int iteration = 0; // which training iteration of a multi-iteration trace
  std::optional<SplitOf> split_of;
  std::optional<FusedFrom> fused_from;
  // False when the document gave no time_s (allowed only for derived ops: trace_with_extras times them).
  bool has_time = true;
};

// Bytes per element of a dtype name ("fp32" -> 4), or 0 when unknown.
std::uint64_t dtype_bytes(std::string_view dtype);

// v2 checks shared by the trace loader and validate_plan (a plan's extra tensors and ops); nullopt when fine.
// A shape is consistent when bytes = product(shape) x an element size: the trace dtype's (`element_bytes`, 0 when
// unknown) or, for mixed precision, any of 1, 2, 4, 8.
std::optional<std::string> shape_problem(const Tensor& tensor, std::uint64_t element_bytes);
// split_of / fused_from name an existing op (id < op_count) other than the op itself.
std::optional<std::string> derived_op_problem(const Op& op, std::int64_t op_count);
// Gives derived ops without time_s (has_time stays false) a placeholder time_s from their source op, in id order:
// time/parts for a micro-op, time x models for a fused op (what summaries show). The cost model (hwmodels
// CostModel::op_time) times them instead from the source op's efficiency curve at 1/parts or x models the work.
void time_derived_ops(std::vector<Op>& ops);

struct TraceSource {
  std::string tool;
  std::string device;
  std::string dtype;
  std::int64_t batch = 0;
  std::string date;
  // Models trained side by side by every op (memsim gen fuse); each trains `batch` samples per iteration.
  std::int64_t models = 1;
};

// Ids are dense: tensors[i].id == i and ops[i].id == i (the loader enforces it).
struct Trace {
  std::string name;
  TraceSource source;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  // v2, optional (dynamic networks): per iteration, the control-flow decisions it took, each a distinct choice id
  // ("step3", "node[0,2)", "l1.g0.e5"). Empty, or one entry per iteration 0..max(ops[].iteration); the loader
  // keeps it so that `memsim trace decisions` can compare iterations (Jaccard distance, DyNN-Offload's Table I).
  std::vector<std::vector<std::string>> decisions;

  const Tensor& tensor(TensorId id) const { return tensors.at(static_cast<std::size_t>(id)); }
  const Op& op(OpId id) const { return ops.at(static_cast<std::size_t>(id)); }
  double total_time_s() const;
};

// Loading validates everything: dense ids, references, kinds, phases, a tensor produced at most once and
// never read before it is produced (unless initially resident). Errors are InputError with the JSON path.
Trace load_trace(const std::filesystem::path& path);
// Parses JSON text (simdjson); syntax errors name the byte offset. The fast path of load_trace.
Trace trace_from_text(const std::string& text, const std::string& source_name);
Trace trace_from_json(const nlohmann::json& document, const std::string& source_name);
nlohmann::json trace_to_json(const Trace& trace);
void save_trace(const Trace& trace, const std::filesystem::path& path);

// One tensor / op element (also used for a plan's extra_tensors / extra_ops). `path` is the element's JSON
// path for messages; `expected_id` enforces dense ids.
Tensor tensor_from_json(const nlohmann::json& value, const std::string& source_name, const std::string& path,
                        TensorId expected_id);
Op op_from_json(const nlohmann::json& value, const std::string& source_name, const std::string& path, OpId expected_id);
// The same from a node of a parsed document (its path is the node's).
Tensor tensor_from_node(const fast_json::Node& node, TensorId expected_id);
Op op_from_node(const fast_json::Node& node, OpId expected_id);
nlohmann::json tensor_to_json(const Tensor& tensor);
nlohmann::json op_to_json(const Op& op);

// Samples in one iteration of the trace: source.batch when positive, else the batch extent of the first input
// tensor with a shape and a batch_axis, else nullopt (unknown).
std::optional<std::int64_t> trace_batch_size(const Trace& trace);
// Samples one iteration of the trace trains: its batch x the models fused into it; nullopt without a batch.
std::optional<std::int64_t> trace_samples_per_iteration(const Trace& trace);

// Re-checks a trace built in memory (generators, importers); throws InputError(source_name, ...).
void validate_trace(const Trace& trace, const std::string& source_name);

} // namespace memsim
