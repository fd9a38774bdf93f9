#pragma once
// A sequential account of one device's memory: steps on one stream, no time. Compute follows the simulator's rules
// (outputs allocated when the op starts, its workspace held while it runs, an output already on the device is a
// double allocation), so the peak of a single-stream sequence is the peak the simulator will see. Planners use it to
// price a sequence of compute / recompute / prefetch / free steps instead of keeping their own byte counts.
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace memsim {

class FlatTrace;

class MemoryCursor {
public:
  // An account of `ops`'s trace (a TraceAnalysis gives it: `analysis.flat()`), read from its flat arrays, which
  // must outlive the cursor. Starts with `on_device` resident (for an iteration: the trace's initially resident
  // tensors). Tensors in `counted_elsewhere` are tracked but weigh nothing here (the chain model counts weight
  // gradients in its fixed memory).
  MemoryCursor(const FlatTrace& ops, std::span<const TensorId> on_device,
               std::span<const TensorId> counted_elsewhere = {});

  // Runs `op`: allocates its outputs, holds its workspace while it runs and releases it after. Returns the bytes in
  // use while it runs. Throws std::logic_error when an output is already on the device (a planner bug).
  std::uint64_t run(OpId op);
  // Brings a copy of `tensor` onto the device (a prefetch): its bytes count from here.
  void bring(TensorId tensor);
  // Throws std::logic_error when `tensor` is not on the device.
  void free(TensorId tensor);

  bool on_device(TensorId tensor) const { return on_device_[static_cast<std::size_t>(tensor)] != 0; }
  std::uint64_t in_use() const { return in_use_; }
  std::uint64_t start_bytes() const { return start_bytes_; }
  // The most bytes in use so far (at least the start bytes).
  std::uint64_t peak() const { return peak_; }
  // The op during which the peak was first reached; absent when it was reached outside any op (at the start, or
  // by a prefetch).
  std::optional<OpId> peak_op() const { return peak_op_; }

private:
  void allocate(TensorId tensor);
  void note(std::uint64_t bytes, std::optional<OpId> op);

  const FlatTrace* ops_;
  std::vector<std::uint64_t> bytes_; // per tensor, 0 when counted elsewhere
  std::vector<std::uint8_t> on_device_;
  std::uint64_t in_use_ = 0;
  std::uint64_t start_bytes_ = 0;
  std::uint64_t peak_ = 0;
  std::optional<OpId> peak_op_;
};

} // namespace memsim
