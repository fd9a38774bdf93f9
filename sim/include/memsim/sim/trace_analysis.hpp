#pragma once
// What planners and the default schedule need to know about a trace, computed once: who produces and reads each
// tensor, its default lifetime (traces/views.hpp's default_lifetimes, the one implementation of the framework's
// release rules), the tensors released after each op, and the default schedule's memory profile (priced by the
// MemoryCursor, the one sequential memory account). Build it once per trace (`analyze`) and pass it around.
#include "memsim/sim/flat_lists.hpp"
#include "memsim/sim/flat_trace.hpp"
#include "memsim/traces/trace.hpp"
#include "memsim/traces/views.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace memsim {

class TraceAnalysis {
public:
  // Keeps a reference to `trace`: the trace must outlive the analysis.
  explicit TraceAnalysis(const Trace& trace);

  const Trace& trace() const { return flat_.trace(); }
  // The trace's per-op lists and per-tensor bytes in flat arrays (what the MemoryCursor reads).
  const FlatTrace& flat() const { return flat_; }
  const std::vector<TensorLifetime>& lifetimes() const { return lifetimes_; }
  const TensorLifetime& lifetime(TensorId id) const { return lifetimes_[static_cast<std::size_t>(id)]; }
  std::optional<OpId> producer(TensorId id) const { return lifetime(id).produced_by; }
  std::optional<OpId> last_read(TensorId id) const { return lifetime(id).last_use; }
  std::optional<OpId> first_read(TensorId id) const;
  // The flat arrays' reads (FlatTrace), for loops over long sequences.
  std::span<const TensorId> inputs(OpId op) const { return flat_.inputs(op); }
  std::span<const TensorId> outputs(OpId op) const { return flat_.outputs(op); }
  Phase phase(OpId op) const { return flat_.phase(op); }
  std::uint64_t workspace_bytes(OpId op) const { return flat_.workspace_bytes(op); }
  const std::vector<std::uint64_t>& tensor_bytes() const { return flat_.tensor_bytes(); }
  // The ops that read `id`, in trace order, each once.
  std::span<const OpId> readers(TensorId id) const { return readers_[static_cast<std::size_t>(id)]; }
  // Produced and never released by the default schedule (weight gradients): it lives to the end of the iteration.
  bool kept_to_end(TensorId id) const { return producer(id) && !lifetime(id).released_after; }
  // Produced tensors the default schedule releases after `op`, by tensor id.
  std::span<const TensorId> released_after(OpId op) const { return released_after_[static_cast<std::size_t>(op)]; }

  // Inputs, weights and optimizer state that no op produces (traces/trace.hpp's `preexists`): on the device when the
  // iteration starts, and until a plan moves them.
  bool preexisting(TensorId id) const { return preexists(trace().tensor(id).kind, producer(id).has_value()); }
  const std::vector<TensorId>& resident_tensors() const { return resident_tensors_; }
  std::uint64_t resident_bytes() const { return default_profile_.resident_bytes; }
  // The default schedule (ops in trace order, releases after `released_after`).
  const MemoryProfile& default_profile() const { return default_profile_; }

private:
  FlatTrace flat_;
  std::vector<TensorLifetime> lifetimes_;
  // Flat: mu-two analyses rings of 10^5 ops per probed placement, and a vector per tensor was most of the cost.
  FlatLists readers_;        // per tensor: the ops that read it (OpId and TensorId are one integer type)
  FlatLists released_after_; // per op
  std::vector<TensorId> resident_tensors_;
  MemoryProfile default_profile_;
};

std::shared_ptr<const TraceAnalysis> analyze(const Trace& trace);

// The default schedule's memory profile of `trace` (for callers that need nothing else of the analysis).
MemoryProfile default_memory_profile(const Trace& trace);

} // namespace memsim
