#pragma once
// A trace rescaled to another batch size and/or GPU (`memsim trace rescale`, traces/src/RESCALING.md).
#include "memsim/hwmodels/machine.hpp"
#include "memsim/traces/trace.hpp"

#include <optional>

namespace memsim {

// Whether a tensor's bytes grow with the batch: with a shape, when it names a batch_axis; without one, by kind
// (input, activation and gradient do; weight, weight_grad, optimizer_state and other do not).
bool is_batch_proportional(const Tensor& tensor);

// The trace at `batch` (its source.batch must be known) on `target` (nullopt: the recording GPU).
// Batch-proportional tensors scale exactly (the batch axis of the shape, else bytes x batch / source.batch,
// rounded); ops touching one scale flops and workspace by the batch ratio and bytes_accessed by their tensors'
// new bytes; times come from the cost model at the new work (`CostModel::kernel_time`). Weights and optimizer
// state are unchanged. Throws InputError(source_name, ...) when the trace has no source.batch.
Trace rescale_trace(const Trace& trace, std::int64_t batch, const std::optional<Gpu>& target,
                    const std::string& source_name);

} // namespace memsim
