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

// v2 adds split/merge (zero-time views) and the collectives allreduce/allgather/reducescatter.
enum class StepKind {
  compute,
  recompute,
  offload,
  prefetch,
  free,
  send,
  recv,
  split,
  merge,
  allreduce,
  allgather,
  reducescatter
};
std::string_view to_string(StepKind kind);
std::optional<StepKind> step_kind_from_string(std::string_view text);

// compute/recompute name an op; the others name a tensor.
inline bool step_names_op(StepKind kind) { return kind == StepKind::compute || kind == StepKind::recompute; }
inline bool is_view(StepKind kind) { return kind == StepKind::split || kind == StepKind::merge; }
inline bool is_collective(StepKind kind)
{
  return kind == StepKind::allreduce || kind == StepKind::allgather || kind == StepKind::reducescatter;
}

// The device index of the host CPU in a step (`device: -1`): host compute, and frees/views of host copies.
inline constexpr int kHostDevice = -1;

struct Step {
  StepId id = 0;
  StepKind kind = StepKind::compute;
  int device = 0;
  std::string stream = "compute";
  std::optional<OpId> op;
  std::optional<TensorId> tensor;
  int instance = 0;
  std::vector<StepId> deps;
  std::optional<int> peer;     // send/recv: the other device
  std::vector<TensorId> parts; // split/merge: the parts that replace the parent `tensor` (or are merged into it)
  std::vector<int> group;      // collectives: the devices of the ring, in ring order
  int iteration = 0;
  // The independent training loop the step belongs to (μ-TWO's sequential pairs): loops run one after another and an
  // iteration's time is the sum of every loop's time for it (sim/README.md "Iterations"). 0 for one loop.
  int loop = 0;
  // prefetch/offload: a fixed time paid before the bytes flow, on top of the route's latency (a memory policy's
  // service time: UVM's fault-batch handling); compute: a fixed time its stream waits before the op runs (a
  // policy's CPU-side decision: DyNN-Offload's pilot inference and mapping); 0 for a plain copy or op.
  double service_s = 0;
};

// v2 `initial_placement`: where the tensors an entry matches (by kind or id, optionally one instance) live at
// t = 0. `device` is the v1 rule, `host` a host copy only, `none` nowhere (the plan creates it).
enum class Placement { device, host, none };
struct PlacementRule {
  std::optional<TensorKind> kind;
  std::optional<TensorId> tensor;
  Placement where = Placement::device;
  std::optional<int> instance;
};

// v2 `instance_scopes`: the GPU lifetime of one instance (sim/README.md, "Scoped residency"). The instance's
// initially resident tensors that its steps reference are allocated when step `first_step` starts (an OOM there
// names that step) and everything the instance still holds on the GPUs is released when step `last_step` ends.
// Instances without a scope keep the t = 0 rule. Kinds shared_across_instances are never scoped.
struct InstanceScope {
  int instance = 0;
  StepId first_step = 0;
  StepId last_step = 0;
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
  // v2, optional (empty: v1 behaviour).
  std::vector<PlacementRule> initial_placement;
  std::vector<TensorKind> shared_across_instances; // of weight, weight_grad, optimizer_state
  std::vector<InstanceScope> instance_scopes;
  // Samples one iteration of the plan trains, where a planner knows better than the default (the trace's samples x
  // the plan's instances): hfta's subsets are instances that each train several models.
  std::optional<std::int64_t> samples_per_iteration;
};

// The first v2 feature a plan uses, named for executors that do not support them; nullopt for a
// plan v1 could express.
std::optional<std::string> v2_feature(const Plan& plan);
// Whether tensors of this kind have one slot per device for all instances under this plan.
bool shared_across_instances(const Plan& plan, TensorKind kind);

Plan load_plan(const std::filesystem::path& path);
// Parses JSON text (simdjson); syntax errors name the byte offset. The fast path of load_plan.
Plan plan_from_text(const std::string& text, const std::string& source_name);
Plan plan_from_json(const nlohmann::json& document, const std::string& source_name);
nlohmann::json plan_to_json(const Plan& plan);
void save_plan(const Plan& plan, const std::filesystem::path& path);

// Checks references against the trace (op/tensor ids exist, including extra ones; devices < device_count).
// Throws InputError(source_name + ": at /steps/N", ...).
void validate_plan(const Plan& plan, const Trace& trace, int device_count, const std::string& source_name);

// The v2 checks of validate_plan (plan_checks.cpp): parts that add up, merges of parts no earlier step makes
// resident, collective groups, host steps reading tensors that never reach the host, placement rules, extra ops'
// and tensors' derivations and shapes, instance scopes.
void validate_v2_additions(const Plan& plan, const Trace& trace, int device_count, const std::string& source_name);

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
  // Point-to-point: `tensor` leaves `device` for `peer` (send) or arrives on `device` from `peer` (recv).
  StepId send(TensorId tensor, int peer, std::vector<StepId> deps = {}, int device = 0, int instance = 0,
              const std::string& stream = "p2p_out");
  StepId recv(TensorId tensor, int peer, std::vector<StepId> deps = {}, int device = 0, int instance = 0,
              const std::string& stream = "p2p_in");
  // Views: `tensor` is replaced by `parts` on `device` (split), or its parts are joined back into it (merge).
  StepId split(TensorId tensor, std::vector<TensorId> parts, const std::string& stream, std::vector<StepId> deps = {},
               int device = 0, int instance = 0);
  StepId merge(TensorId tensor, std::vector<TensorId> parts, const std::string& stream, std::vector<StepId> deps = {},
               int device = 0, int instance = 0);
  // A ring collective (allreduce, allgather, reducescatter) of `tensor` over `group` in ring order; the step sits on
  // the group's first device.
  StepId collective(StepKind kind, TensorId tensor, std::vector<int> group, std::vector<StepId> deps,
                    const std::string& stream = "coll");
  StepId add(Step step); // id is assigned
  StepId last() const { return static_cast<StepId>(plan_->steps.size()) - 1; }

private:
  Plan* plan_;
};

} // namespace memsim
