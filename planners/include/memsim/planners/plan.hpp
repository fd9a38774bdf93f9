#pragma once
// The Plan document (`memsim-plan`, JSON): a CUDA-stream program over a Trace.
// This header and plan.cpp form the target memsim_plan, which needs only traces, nlohmann-json and simdjson so the
// CUDA runtime can read plans without SimGrid or yaml-cpp.
#include "memsim/traces/trace.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim {

using StepId = std::int64_t;

enum class StepKind { compute, recompute, offload, prefetch, free, send, recv };
std::string_view to_string(StepKind kind);
std::optional<StepKind> step_kind_from_string(std::string_view text);

// compute/recompute name an op; the others name a tensor.
inline bool step_names_op(StepKind kind) { return kind == StepKind::compute || kind == StepKind::recompute; }

struct Step {
  StepId id = 0;
  StepKind kind = StepKind::compute;
  int device = 0;
  std::string stream = "compute";
  std::optional<OpId> op;
  std::optional<TensorId> tensor;
  int instance = 0;
  std::vector<StepId> deps;
  std::optional<int> peer; // send/recv: the other device
};

struct PlanEstimate {
  std::optional<double> iteration_time_s;
  std::optional<std::uint64_t> peak_bytes;
};

// The online memory policy a plan runs under (`policy: {name, params}`, DESIGN.md v2): the simulator looks the
// name up in the policy registry and checks the params there.
struct PolicyChoice {
  std::string name;
  nlohmann::json params = nlohmann::json::object();
};

// Ids are dense: steps[i].id == i. Deps must name earlier steps (a plan is a DAG in list order).
struct Plan {
  std::string trace;
  std::string machine;
  std::string planner;
  nlohmann::json params = nlohmann::json::object();
  std::uint64_t budget_bytes = 0; // per device; 0 = the GPU's memory
  std::vector<Step> steps;
  PlanEstimate estimate;
  // Ops and tensors a planner derives (split micro-ops, fused ops): ids continue after the trace's.
  std::vector<Op> extra_ops;
  std::vector<Tensor> extra_tensors;
  std::optional<PolicyChoice> policy;
};

Plan load_plan(const std::filesystem::path& path);
// Parses JSON text (simdjson); syntax errors name the byte offset. The fast path of load_plan.
Plan plan_from_text(const std::string& text, const std::string& source_name);
Plan plan_from_json(const nlohmann::json& document, const std::string& source_name);
nlohmann::json plan_to_json(const Plan& plan);
void save_plan(const Plan& plan, const std::filesystem::path& path);

// Checks references against the trace (op/tensor ids exist, including extra ones; devices < device_count).
// Throws InputError(source_name + ": at /steps/N", ...).
void validate_plan(const Plan& plan, const Trace& trace, int device_count, const std::string& source_name);

// The trace with the plan's extra ops/tensors appended (what executors actually run).
Trace trace_with_extras(const Trace& trace, const Plan& plan);

// Builds steps with dense ids; planners use it instead of filling Step by hand.
class PlanBuilder {
public:
  explicit PlanBuilder(Plan& plan) : plan_(&plan) {}
  StepId compute(OpId op, std::vector<StepId> deps = {}, int device = 0, int instance = 0,
                 const std::string& stream = "compute");
  StepId recompute(OpId op, std::vector<StepId> deps = {}, int device = 0, int instance = 0,
                   const std::string& stream = "compute");
  StepId offload(TensorId tensor, std::vector<StepId> deps = {}, int device = 0, int instance = 0,
                 const std::string& stream = "d2h");
  StepId prefetch(TensorId tensor, std::vector<StepId> deps = {}, int device = 0, int instance = 0,
                  const std::string& stream = "h2d");
  StepId free(TensorId tensor, std::vector<StepId> deps = {}, const std::string& stream = "compute", int device = 0,
              int instance = 0);
  StepId add(Step step); // id is assigned
  StepId last() const { return static_cast<StepId>(plan_->steps.size()) - 1; }

private:
  Plan* plan_;
};

} // namespace memsim
