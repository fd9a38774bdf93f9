#pragma once
// Online memory policies (DESIGN.md v2, "Online memory policies"): a MemoryPolicy decides at run time, not before.
// The execution core calls it on both engines through one interface:
//   on_access           every read and write of a tensor by a running step (LRU / staleness clocks);
//   on_step_start/end   every step (a policy may prefetch or offload ahead, as DyNN-Offload does);
//   on_allocation_denied a step's allocations do not fit on a device;
//   on_missing_tensor   a step reads a tensor that is not resident on its device (one at a time, in input order:
//                       the next when what the answer added has finished, so it may have come back on the way).
// A policy answers with actions. The core turns each action into ordinary plan steps run as real work on the
// physics -- transfers over the host link, recomputation as compute -- so they are costed and timed exactly like
// a planner's steps, and the run can be written back as a static plan (the realized plan).
//
// The action vocabulary, and which systems need which:
//   offload        copy the tensor to the host (a transfer on the device's `policy-d2h` stream), then free it
//                  on the device (lru-swap, SuperNeurons' LRU cache, DyNN-Offload, UVM write-back of dirty pages);
//   evict          free it on the device without a copy (DTR's drop; UVM dropping a clean page whose host copy is
//                  current);
//   fetch          copy it back from the host (a transfer on `policy-h2d`) (UVM's page fault, on-demand swap-in);
//   rematerialize  recompute the op that produces it (DTR), as a `recompute` step on the waiting step's stream;
//   prefetch       like fetch, but nothing waits for it (DyNN-Offload's run-time prefetch).
// A copy may carry a service time (PolicyAction::service_s, the plan step's `service_s`): paid on the copy's stream
// before its bytes flow, so that the realized plan replays it (UVM's per-batch fault handling). A policy may also
// make a plan step's stream pause before the step (pause_before: CPU-side work the GPU waits for), charged the same
// way as that step's service time.
// Actions answering on_allocation_denied / on_missing_tensor make the step that asked wait for them (except
// prefetch); actions from the step hooks make nothing wait. A policy object serves one run.
#include "memsim/planners/plan.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

struct Machine; // hwmodels/, which memsim_exec does not link: a policy that looks at it includes machine.hpp

// A tensor of one instance in one memory space (a GPU index, or -1 for the host).
struct TensorSlot {
  int space = 0;
  int instance = 0;
  TensorId tensor = 0;
  auto operator<=>(const TensorSlot&) const = default;
};

struct PolicyAction {
  enum class Kind { offload, evict, fetch, rematerialize, prefetch };
  Kind kind = Kind::offload;
  TensorSlot tensor;      // the tensor on the device the action is about
  std::optional<OpId> op; // rematerialize: the op to recompute (default: the tensor's producer)
  double service_s = 0;   // fetch/prefetch/offload: fixed time before the copy's bytes flow (UVM fault handling)
  // fetch/prefetch: start only once every offload and eviction the policy asked for so far has freed its tensor
  // (DyNN-Offload's migration evicts, then prefetches, so that what it brings in fits).
  bool after_releases = false;

  static PolicyAction offload(TensorSlot slot) { return {Kind::offload, slot, std::nullopt}; }
  static PolicyAction evict(TensorSlot slot) { return {Kind::evict, slot, std::nullopt}; }
  static PolicyAction fetch(TensorSlot slot) { return {Kind::fetch, slot, std::nullopt}; }
  static PolicyAction prefetch(TensorSlot slot) { return {Kind::prefetch, slot, std::nullopt}; }
  static PolicyAction rematerialize(TensorSlot slot, std::optional<OpId> op = std::nullopt)
  {
    return {Kind::rematerialize, slot, op};
  }
};
std::string_view to_string(PolicyAction::Kind kind);

enum class AccessKind { read, write };

struct TensorAccess {
  TensorSlot tensor;
  AccessKind kind = AccessKind::read;
  StepId step = 0;
  double time_s = 0;
};

// A step's allocations on `device` (its outputs and workspace, a prefetched or received tensor) do not fit.
struct AllocationDemand {
  StepId step = 0;
  int device = 0;
  std::uint64_t bytes = 0; // everything the step allocates there
  std::uint64_t in_use = 0;
  std::uint64_t capacity = 0;
  std::uint64_t largest_free_block = 0; // --allocator pool only
  // Bytes to free before the step fits by count (with the pool, fragmentation may need more).
  std::uint64_t shortfall() const { return in_use + bytes > capacity ? in_use + bytes - capacity : 0; }
};

struct MissingTensor {
  StepId step = 0;
  TensorSlot tensor;
};

// What a policy may look at while it decides.
class PolicyView {
public:
  virtual ~PolicyView() = default;
  virtual const Trace& trace() const = 0;
  virtual double now() const = 0;
  virtual std::size_t device_count() const = 0;
  virtual bool resident(const TensorSlot& slot) const = 0;
  virtual bool has_host_copy(int instance, TensorId tensor) const = 0;
  // In use now: read or written by a running step, read by a step waiting for policy actions (what it had at its
  // first admission, then each missing input once it is back and the step turns to it, in input order), or
  // already being moved by an earlier action. A pinned tensor cannot be offloaded or evicted.
  virtual bool pinned(const TensorSlot& slot) const = 0;
  virtual std::uint64_t in_use(int space) const = 0;
  virtual std::uint64_t capacity(int space) const = 0;
  virtual std::optional<OpId> producer(TensorId tensor) const = 0;
  // The step a hook names (a plan step or one the policy added), and what an op costs on a device: DTR prices a
  // victim by the time to recompute it and touches the inputs of the step that asks before it is rematerialized.
  virtual const Step& step(StepId id) const = 0;
  virtual double op_time(OpId op, int device) const = 0;
  // The machine the run is on (its links: a policy that plans its transfers, as DyNN-Offload's partitioner does).
  virtual const Machine& machine() const = 0;
};

class MemoryPolicy {
public:
  virtual ~MemoryPolicy() = default;
  virtual void on_access(const TensorAccess&, const PolicyView&) {}
  virtual std::vector<PolicyAction> on_step_start(const Step&, const PolicyView&) { return {}; }
  virtual std::vector<PolicyAction> on_step_end(const Step&, const PolicyView&) { return {}; }
  // Asked once per plan step, before anything else: true makes it wait until every copy and release the policy asked
  // for so far has finished (DyNN-Offload's block barrier: a block starts once its migration is done).
  virtual bool waits_for_policy(const Step&, const PolicyView&) { return false; }
  // Asked once per plan step, with waits_for_policy: seconds the step's stream waits once the step may start and
  // before its work (DyNN-Offload's pilot inference and mapping before an iteration's first op). Only compute,
  // prefetch and offload steps may pause; the realized plan keeps it as the step's service_s.
  virtual double pause_before(const Step&, const PolicyView&) { return 0; }
  // No action: the step fails with the usual out-of-memory error.
  virtual std::vector<PolicyAction> on_allocation_denied(const AllocationDemand&, const PolicyView&) { return {}; }
  // No action: the step fails with the usual not-resident error.
  virtual std::vector<PolicyAction> on_missing_tensor(const MissingTensor&, const PolicyView&) { return {}; }
  // Why the last hook that answered nothing refused, when it is the policy's own limit (UVM's oversubscription
  // cap); empty when there is nothing to add. The core appends it to the failure message.
  virtual std::string refusal() const { return {}; }
  // What the policy counts of its own (on-demand fetches, mispredicted iterations), reported in Metrics::policy.
  virtual PolicyCounters counters() const { return {}; }
};

} // namespace memsim
