#pragma once
// What planners and the default schedule need to know about a trace, computed once: who produces and reads each
// tensor, its default lifetime (traces/views.hpp's default_lifetimes, the one implementation of the framework's
// release rules), the tensors released after each op, and the default schedule's memory profile (priced by the
// MemoryCursor, the one sequential memory account). Build it once per trace (`analyze`) and pass it around.
#include "memsim/sim/flat_lists.hpp"
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

  const Trace& trace() const { return *trace_; }
  const std::vector<TensorLifetime>& lifetimes() const { return lifetimes_; }
  const TensorLifetime& lifetime(TensorId id) const { return lifetimes_[static_cast<std::size_t>(id)]; }
  std::optional<OpId> producer(TensorId id) const { return lifetime(id).produced_by; }
  std::optional<OpId> last_read(TensorId id) const { return lifetime(id).last_use; }
  std::optional<OpId> first_read(TensorId id) const;
  // An op's inputs and outputs, as the trace lists them, from two flat arrays: loops over long sequences (mu-two's
  // unrolled rings, 10^5 ops of 312 bytes whose lists live in separate blocks) read these, not the ops.
  std::span<const TensorId> inputs(OpId op) const { return inputs_[static_cast<std::size_t>(op)]; }
  std::span<const TensorId> outputs(OpId op) const { return outputs_[static_cast<std::size_t>(op)]; }
  // An op's phase and workspace, and each tensor's bytes, from flat arrays, for the same loops.
  Phase phase(OpId op) const { return phases_[static_cast<std::size_t>(op)]; }
  std::uint64_t workspace_bytes(OpId op) const { return workspace_bytes_[static_cast<std::size_t>(op)]; }
  const std::vector<std::uint64_t>& tensor_bytes() const { return tensor_bytes_; }
  // The ops that read `id`, in trace order, each once.
  const std::vector<OpId>& readers(TensorId id) const { return readers_[static_cast<std::size_t>(id)]; }
  // Produced and never released by the default schedule (weight gradients): it lives to the end of the iteration.
  bool kept_to_end(TensorId id) const { return producer(id) && !lifetime(id).released_after; }
  // Produced tensors the default schedule releases after `op`, by tensor id.
  const std::vector<TensorId>& released_after(OpId op) const { return released_after_[static_cast<std::size_t>(op)]; }

  // Inputs, weights and optimizer state that no op produces (traces/trace.hpp's `preexists`): on the device when the
  // iteration starts, and until a plan moves them.
  bool preexisting(TensorId id) const { return preexists(trace_->tensor(id).kind, producer(id).has_value()); }
  const std::vector<TensorId>& resident_tensors() const { return resident_tensors_; }
  std::uint64_t resident_bytes() const { return default_profile_.resident_bytes; }
  // The default schedule (ops in trace order, releases after `released_after`).
  const MemoryProfile& default_profile() const { return default_profile_; }

private:
  const Trace* trace_;
  FlatLists inputs_, outputs_;
  std::vector<Phase> phases_;
  std::vector<std::uint64_t> workspace_bytes_, tensor_bytes_;
  std::vector<TensorLifetime> lifetimes_;
  std::vector<std::vector<OpId>> readers_;
  std::vector<std::vector<TensorId>> released_after_;
  std::vector<TensorId> resident_tensors_;
  MemoryProfile default_profile_;
};

std::shared_ptr<const TraceAnalysis> analyze(const Trace& trace);

// The default schedule's memory profile of `trace` (for callers that need nothing else of the analysis).
MemoryProfile default_memory_profile(const Trace& trace);

} // namespace memsim
