// uvm: CUDA Unified Memory as DyNN-Offload's baseline (spec dynn-offload.md 1.8 and 2.3; NVIDIA's open driver,
// kernel-open/nvidia-uvm). Every tensor lives in one managed VA space: in tensor-id order (the trace's creation order),
// each rounded up to 64 KiB units; tensors under 1 MiB are packed into shared 2 MiB segments (a caching allocator's
// small pool), larger ones start a 2 MiB VA block of their own. A step that reads a tensor that is not on its GPU
// faults: the tensor's units are faulted, grouped by VA block, and the density prefetcher (a binary tree of 64 KiB
// leaves over each 2 MiB block) widens each fault to every subtree more than `prefetch_threshold` % of whose units are
// resident or being fetched. Everything the widened faults cover comes over the host link as copies on the
// `policy-h2d` stream, the step waiting; the first copy carries the fault batches' service time (`fault_batch_s` per
// batch of up to `fault_batch` faults of one VA block), paid before the bytes flow. When an allocation does not fit,
// whole VA blocks are evicted in LRU order (a block's place is renewed when memory is allocated in it, not on every
// access, as the driver's root-chunk list): clean copies are dropped, dirty ones written back to the host first.
// The run may oversubscribe the GPU only up to `oversubscription` x its memory: when an allocation needs an eviction,
// the live managed bytes (on the GPU, wanted, and evicted to or started on the host) must stay within the cap, else
// the step fails out of memory with the cap as the reason (the spec checks keep-all's peak against the cap; this is
// the same footprint, checked where it is reached).
//
// Simplifications, each because memsim moves and frees tensors whole: a fault migrates whole tensors (a tensor partly
// covered by a prefetched subtree migrates whole; the driver moves 64 KiB pages), so the migrated bytes are the
// tensors' bytes, not the 64 KiB-rounded units; a step's missing inputs fault one after the other (one batch set per
// input, not one per step); eviction takes a block's tensors that no running step uses (the driver evicts a chunk
// whole) and a tensor spanning several blocks leaves whole; only what this policy evicted is brought back by a
// neighbour's fault (memory the framework freed is not migrated). Fault migrations and write-backs move at
// `uvm_bw_fraction` x the host link's bandwidth (on-demand migration reaches about half of what a bulk copy does):
// each copy carries, besides any fault batches' time, the extra time B / (f W) - B / W its B bytes take over the
// slower path (W: the slowest link between its GPU and the host), as service time. So a copy alone on the link takes
// exactly B / (f W) on both engines and the realized plan replays it; a copy sharing the link is slowed by the others
// only in its B / W part (the fraction models the fault path, not the wire). 1 (the default) is the link's rate.
#include "memsim/common/policy_registry.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/memory_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace memsim {
namespace {

struct UvmOptions {
  std::int64_t page = 64 * 1024;           // GPU big page, the prefetch tree's leaf
  std::int64_t va_block = 2 * 1024 * 1024; // VA block: fault grouping, prefetch tree, eviction chunk
  std::int64_t small_tensor = 1024 * 1024; // smaller tensors share 2 MiB segments
  std::int64_t fault_batch = 256;          // uvm_perf_fault_batch_count
  double fault_batch_s = 30e-6;            // service time per batch
  double prefetch_threshold = 51;          // uvm_perf_prefetch_threshold, percent
  double oversubscription = 2.0;           // device + host footprint <= this x device memory
  double uvm_bw_fraction = 1.0;            // migrations move at this x the host link's bandwidth
};

// Where a tensor lies in the managed VA space, in units.
struct Extent {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
};

class Uvm final : public MemoryPolicy {
public:
  explicit Uvm(const UvmOptions& options) : options_(options)
  {
    if (options.page <= 0 || options.va_block < options.page || options.va_block % options.page != 0 ||
        !is_power_of_two(static_cast<std::uint64_t>(options.va_block / options.page)))
      throw std::invalid_argument(fmt::format("uvm: va_block ({}) must be a power-of-two multiple of page ({})",
                                              options.va_block, options.page));
    units_per_block_ = static_cast<std::uint64_t>(options.va_block / options.page);
  }

  void on_access(const TensorAccess& access, const PolicyView& view) override
  {
    if (access.kind != AccessKind::write)
      return;
    Space& space = space_of(access.tensor.space, access.tensor.instance, view);
    const TensorId tensor = access.tensor.tensor;
    space.clean.erase(tensor);
    space.on_host.erase(tensor);
    if (space.allocated.insert(tensor).second) // memory allocated in its blocks: their LRU place is renewed
      stamp(space, tensor);
  }

  std::vector<PolicyAction> on_step_start(const Step& step, const PolicyView& view) override
  {
    if (step.kind == StepKind::free && step.device >= 0 && step.tensor) { // the framework's release
      Space& space = space_of(step.device, step.instance, view);
      space.allocated.erase(*step.tensor);
      space.clean.erase(*step.tensor);
      space.on_host.erase(*step.tensor);
    }
    return {};
  }

  std::vector<PolicyAction> on_missing_tensor(const MissingTensor& missing, const PolicyView& view) override
  {
    refusal_.clear();
    const TensorSlot& slot = missing.tensor;
    if (!view.has_host_copy(slot.instance, slot.tensor))
      return {};
    Space& space = space_of(slot.space, slot.instance, view);
    const Extent faulted = extent(slot.tensor, view);
    std::vector<TensorId> moving{slot.tensor};
    std::uint64_t batches = 0;
    if (faulted.count > 0) {
      const std::uint64_t first_block = faulted.first / units_per_block_;
      const std::uint64_t last_block = (faulted.first + faulted.count - 1) / units_per_block_;
      for (std::uint64_t block = first_block; block <= last_block; ++block) {
        const std::uint64_t faults = prefetch(space, block, faulted, moving, view);
        batches += (faults + static_cast<std::uint64_t>(options_.fault_batch) - 1) /
                   static_cast<std::uint64_t>(options_.fault_batch);
      }
    }
    counters_.fault_batches += batches;
    counters_.fault_missing_bytes += view.trace().tensor(slot.tensor).bytes;
    std::vector<PolicyAction> actions;
    for (TensorId tensor : moving) {
      counters_.fault_migrated_bytes += view.trace().tensor(tensor).bytes;
      PolicyAction fetch = PolicyAction::fetch(TensorSlot{slot.space, slot.instance, tensor});
      fetch.service_s = slow_path_s(tensor, slot.space, view);
      if (actions.empty())
        fetch.service_s += static_cast<double>(batches) * options_.fault_batch_s;
      actions.push_back(fetch);
      space.on_host.erase(tensor);
      space.clean.insert(tensor);
      space.allocated.insert(tensor);
      stamp(space, tensor);
    }
    return actions;
  }

  std::vector<PolicyAction> on_allocation_denied(const AllocationDemand& demand, const PolicyView& view) override
  {
    refusal_.clear();
    const Step& step = view.step(demand.step);
    space_of(demand.device, step.instance, view);
    std::uint64_t host_held = 0; // what this policy evicted from the device: the oversubscribed part
    for (auto& [key, space] : spaces_)
      if (space.device == demand.device)
        for (TensorId tensor : space.on_host)
          host_held += view.trace().tensor(tensor).bytes;
    const std::uint64_t footprint = demand.in_use + demand.bytes + host_held;
    if (static_cast<double>(footprint) > options_.oversubscription * static_cast<double>(demand.capacity)) {
      refusal_ =
          fmt::format("uvm: the footprint would be {} bytes ({} on the GPU, {} more wanted, {} evicted to the "
                      "host), over oversubscription {} x {} bytes of GPU memory",
                      footprint, demand.in_use, demand.bytes, host_held, options_.oversubscription, demand.capacity);
      return {}; // the step fails out of memory
    }
    const std::uint64_t wanted = std::max<std::uint64_t>(demand.shortfall(), 1);
    std::uint64_t freed = 0;
    std::vector<PolicyAction> actions;
    std::set<std::pair<int, TensorId>> leaving; // (instance, tensor)
    auto& order = lru_[demand.device];
    for (auto it = order.begin(); it != order.end() && freed < wanted;) {
      const auto [age, instance, block] = *it;
      Space& space = spaces_.at({demand.device, instance});
      bool left_behind = false; // a tensor in use stays, and so does the block's place
      for (TensorId tensor : blocks_[block]) {
        const TensorSlot victim{demand.device, instance, tensor};
        if (!view.resident(victim) || leaving.count({instance, tensor}))
          continue;
        if (view.pinned(victim)) {
          left_behind = true;
          continue;
        }
        leaving.insert({instance, tensor});
        const bool clean = space.clean.count(tensor) && view.has_host_copy(instance, tensor);
        PolicyAction release = clean ? PolicyAction::evict(victim) : PolicyAction::offload(victim);
        if (!clean)
          release.service_s = slow_path_s(tensor, demand.device, view);
        actions.push_back(release);
        freed += view.trace().tensor(tensor).bytes;
        space.allocated.erase(tensor);
        space.clean.erase(tensor);
        space.on_host.insert(tensor);
      }
      if (left_behind) {
        ++it;
      } else {
        space.stamp.erase(block);
        it = order.erase(it);
      }
    }
    return actions;
  }

  std::string refusal() const override { return refusal_; }
  PolicyCounters counters() const override { return counters_; }

private:
  struct Space { // one device of one instance
    int device = 0;
    int instance = 0;
    std::map<std::uint64_t, std::uint64_t> stamp; // block -> its place in the device's LRU order
    std::set<TensorId> allocated;                 // on the device, as far as this policy has seen
    std::set<TensorId> clean;                     // on the device, its host copy current (fetched, not written)
    std::set<TensorId> on_host;                   // evicted by this policy: a neighbour's fault brings it back
  };

  static bool is_power_of_two(std::uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

  // What moving `tensor` between GPU `device` and the host at uvm_bw_fraction of the link's rate takes beyond moving
  // it at the full rate: B / (f W) - B / W.
  double slow_path_s(TensorId tensor, int device, const PolicyView& view) const
  {
    if (options_.uvm_bw_fraction >= 1)
      return 0;
    const double bytes = static_cast<double>(view.trace().tensor(tensor).bytes);
    const double bandwidth = view.machine().host_link_bandwidth(static_cast<std::size_t>(device));
    return bytes / (options_.uvm_bw_fraction * bandwidth) - bytes / bandwidth;
  }
  std::uint64_t units_of(std::uint64_t bytes) const
  {
    const auto page = static_cast<std::uint64_t>(options_.page);
    return (bytes + page - 1) / page;
  }

  // The VA layout, made once: tensor-id order, small tensors packed into shared segments.
  void lay_out(const PolicyView& view)
  {
    const Trace& trace = view.trace();
    extents_.assign(trace.tensors.size(), Extent{});
    std::uint64_t next_block = 0;
    std::uint64_t small_cursor = 0, small_end = 0; // the open small segment, in units
    for (const Tensor& tensor : trace.tensors) {
      const std::uint64_t units = units_of(tensor.bytes);
      if (units == 0)
        continue;
      Extent& at = extents_[static_cast<std::size_t>(tensor.id)];
      at.count = units;
      if (tensor.bytes < static_cast<std::uint64_t>(options_.small_tensor) && units <= units_per_block_) {
        if (small_cursor + units > small_end) {
          small_cursor = next_block++ * units_per_block_;
          small_end = small_cursor + units_per_block_;
        }
        at.first = small_cursor;
        small_cursor += units;
      } else {
        at.first = next_block * units_per_block_;
        next_block += (units + units_per_block_ - 1) / units_per_block_;
      }
    }
    blocks_.assign(next_block, {});
    owner_.assign(next_block * units_per_block_, -1);
    for (const Tensor& tensor : trace.tensors) {
      const Extent& at = extents_[static_cast<std::size_t>(tensor.id)];
      if (at.count == 0)
        continue;
      for (std::uint64_t unit = at.first; unit < at.first + at.count; ++unit)
        owner_[unit] = tensor.id;
      for (std::uint64_t block = at.first / units_per_block_; block <= (at.first + at.count - 1) / units_per_block_;
           ++block)
        blocks_[block].push_back(tensor.id);
    }
  }

  const Extent& extent(TensorId tensor, const PolicyView& view)
  {
    if (extents_.empty())
      lay_out(view);
    return extents_[static_cast<std::size_t>(tensor)];
  }

  Space& space_of(int device, int instance, const PolicyView& view)
  {
    if (extents_.empty())
      lay_out(view);
    auto [found, added] = spaces_.try_emplace({device, instance});
    Space& space = found->second;
    if (added) {
      space.device = device;
      space.instance = instance;
      for (const Tensor& tensor : view.trace().tensors) { // resident from the start: allocated first, in layout order
        if (view.resident(TensorSlot{device, instance, tensor.id})) {
          space.allocated.insert(tensor.id);
          stamp(space, tensor.id);
        } else if (view.has_host_copy(instance, tensor.id)) {
          space.on_host.insert(tensor.id); // managed memory that starts on the host
        }
      }
    }
    return space;
  }

  // The blocks of `tensor` move to the LRU order's recent end.
  void stamp(Space& space, TensorId tensor)
  {
    const Extent& at = extents_[static_cast<std::size_t>(tensor)];
    if (at.count == 0)
      return;
    auto& order = lru_[space.device];
    for (std::uint64_t block = at.first / units_per_block_; block <= (at.first + at.count - 1) / units_per_block_;
         ++block) {
      auto [found, added] = space.stamp.try_emplace(block, 0);
      if (!added)
        order.erase({found->second, space.instance, block});
      found->second = ++clock_;
      order.insert({found->second, space.instance, block});
    }
  }

  // The density prefetcher on one VA block: the faulted units, then every subtree (bottom-up, 2, 4, ... units) that
  // holds a faulted unit and in which more than the threshold of units are resident or selected is selected whole.
  // Appends the tensors the selection covers that must come over; returns the block's fault count.
  std::uint64_t prefetch(const Space& space, std::uint64_t block, const Extent& faulted, std::vector<TensorId>& moving,
                         const PolicyView& view)
  {
    const std::uint64_t base = block * units_per_block_;
    std::vector<std::uint8_t> present(units_per_block_, 0), selected(units_per_block_, 0), fault(units_per_block_, 0);
    std::uint64_t faults = 0;
    for (std::uint64_t unit = 0; unit < units_per_block_; ++unit) {
      const TensorId owner = owner_[base + unit];
      present[unit] = owner >= 0 && view.resident(TensorSlot{space.device, space.instance, owner});
      if (base + unit >= faulted.first && base + unit < faulted.first + faulted.count) {
        fault[unit] = selected[unit] = 1;
        ++faults;
      }
    }
    for (std::uint64_t size = 2; size <= units_per_block_; size *= 2)
      for (std::uint64_t start = 0; start < units_per_block_; start += size) {
        std::uint64_t covered = 0;
        bool faulting = false;
        for (std::uint64_t unit = start; unit < start + size; ++unit) {
          covered += present[unit] || selected[unit];
          faulting = faulting || fault[unit];
        }
        if (faulting && static_cast<double>(covered) * 100 > options_.prefetch_threshold * static_cast<double>(size))
          std::fill(selected.begin() + static_cast<std::ptrdiff_t>(start),
                    selected.begin() + static_cast<std::ptrdiff_t>(start + size), 1);
      }
    for (std::uint64_t unit = 0; unit < units_per_block_; ++unit) {
      const TensorId owner = owner_[base + unit];
      if (!selected[unit] || owner < 0 || std::find(moving.begin(), moving.end(), owner) != moving.end())
        continue;
      const TensorSlot slot{space.device, space.instance, owner};
      if (space.on_host.count(owner) && !view.resident(slot) && !view.pinned(slot) &&
          view.has_host_copy(space.instance, owner))
        moving.push_back(owner);
    }
    return faults;
  }

  UvmOptions options_;
  std::uint64_t units_per_block_ = 1;
  std::vector<Extent> extents_;                 // per tensor
  std::vector<std::vector<TensorId>> blocks_;   // per VA block: the tensors in it, in layout order
  std::vector<TensorId> owner_;                 // per unit: its tensor, -1 if none
  std::map<std::pair<int, int>, Space> spaces_; // (device, instance)
  std::map<int, std::set<std::tuple<std::uint64_t, int, std::uint64_t>>> lru_; // device -> (stamp, instance, block)
  std::uint64_t clock_ = 0;
  std::string refusal_; // why the last allocation was refused (the oversubscription cap)
  PolicyCounters counters_;
};

} // namespace

MEMSIM_REGISTER_POLICY(
    uvm, "uvm",
    "CUDA Unified Memory (DyNN-Offload's baseline): tensors in a managed VA space of 2 MiB blocks and 64 KiB units; a "
    "read of a tensor not on the GPU faults it in (per-batch service time, then the bytes over the host link) with "
    "the driver's density prefetcher; LRU eviction of whole VA blocks (dirty data written back); oversubscription "
    "capped",
    {param("page", &UvmOptions::page, "bytes of a unit: the GPU big page and prefetch-tree leaf (driver: 64 KiB)",
           {.min = 1}),
     param("va_block", &UvmOptions::va_block,
           "bytes of a VA block: fault grouping, prefetch tree and eviction chunk (driver: 2 MiB)", {.min = 1}),
     param("small_tensor", &UvmOptions::small_tensor,
           "tensors smaller than this share VA blocks (PyTorch's caching allocator: 1 MiB, packed in 2 MiB segments)",
           {.min = 0}),
     param("fault_batch", &UvmOptions::fault_batch,
           "faults serviced per batch (driver's uvm_perf_fault_batch_count: 256)", {.min = 1}),
     param("fault_batch_s", &UvmOptions::fault_batch_s,
           "service time of one fault batch, seconds (not a driver constant; commonly reported 20-50 us: 30 us)",
           {.min = 0}),
     param("prefetch_threshold", &UvmOptions::prefetch_threshold,
           "a prefetch subtree comes whole when more than this percent of it is resident or faulting (driver's "
           "uvm_perf_prefetch_threshold: 51; 100 turns the prefetcher off)",
           {.min = 0, .max = 100}),
     param("oversubscription", &UvmOptions::oversubscription,
           "device + host footprint may reach this x device memory (DyNN-Offload VI-A: at most 2)", {.min = 1}),
     param("uvm_bw_fraction", &UvmOptions::uvm_bw_fraction,
           "fault migrations and write-backs move at this fraction of the host link's bandwidth (the spec: about 0.5 "
           "for on-demand migration; 1 keeps the link's rate)",
           {.min = 0.01, .max = 1})},
    [](const UvmOptions& options) { return std::make_unique<Uvm>(options); });

} // namespace memsim
