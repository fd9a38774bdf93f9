#pragma once
// A trace's ops and tensors in flat arrays: each op's inputs, outputs, phase and workspace, each tensor's bytes.
// Loops over long sequences (mu-two's unrolled rings: 10^5 ops of 312 bytes whose lists live in separate blocks) and
// the MemoryCursor read these, not the ops. It holds nothing about the trace's schedule, so it also serves traces
// whose default schedule means nothing (tsplit's trace extended with its micro-ops).
#include "memsim/sim/flat_lists.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace memsim {

class FlatTrace {
public:
  // Keeps a reference to `trace`: the trace must outlive it.
  explicit FlatTrace(const Trace& trace);

  const Trace& trace() const { return *trace_; }
  // An op's inputs and outputs, as the trace lists them.
  std::span<const TensorId> inputs(OpId op) const { return inputs_[static_cast<std::size_t>(op)]; }
  std::span<const TensorId> outputs(OpId op) const { return outputs_[static_cast<std::size_t>(op)]; }
  Phase phase(OpId op) const { return phases_[static_cast<std::size_t>(op)]; }
  std::uint64_t workspace_bytes(OpId op) const { return workspace_bytes_[static_cast<std::size_t>(op)]; }
  const std::vector<std::uint64_t>& tensor_bytes() const { return tensor_bytes_; }

private:
  const Trace* trace_;
  FlatLists inputs_, outputs_;
  std::vector<Phase> phases_;
  std::vector<std::uint64_t> workspace_bytes_, tensor_bytes_;
};

} // namespace memsim
