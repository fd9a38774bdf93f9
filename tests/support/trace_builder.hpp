#pragma once
// A trace built in a test tensor by tensor and op by op: ids follow the order of the calls, so a test can work out
// its expected answers from the sizes and times it gives. The caller validates the finished trace.
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memsim::test {

struct TraceBuilder {
  Trace trace;

  // A trace named `name` of one model of `batch` samples, recorded (nominally) on "test-gpu" in fp32.
  explicit TraceBuilder(std::string name, std::int64_t batch = 1)
  {
    trace.name = std::move(name);
    trace.source = TraceSource{"test", "test-gpu", "fp32", batch, ""};
  }

  TensorId tensor(std::string name, std::uint64_t bytes, TensorKind kind = TensorKind::activation)
  {
    trace.tensors.push_back(
        Tensor{static_cast<TensorId>(trace.tensors.size()), std::move(name), bytes, kind, {}, {}, {}});
    return trace.tensors.back().id;
  }

  // The new op, to set what else a test needs (layer, split, workspace); valid until the next op is added.
  Op& op(std::string name, std::string type, Phase phase, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
         double time_s)
  {
    Op& added = trace.ops.emplace_back();
    added.id = static_cast<OpId>(trace.ops.size() - 1);
    added.name = std::move(name);
    added.type = std::move(type);
    added.phase = phase;
    added.inputs = std::move(inputs);
    added.outputs = std::move(outputs);
    added.time_s = time_s;
    return added;
  }
};

} // namespace memsim::test
