#pragma once
// How long an op takes on a GPU: its measured time when the trace was recorded on this GPU model,
// otherwise a roofline rescale max(flops / peak_flops[dtype], bytes_accessed / hbm_bandwidth) + launch.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/traces/trace.hpp"

namespace memsim {

class CostModel {
public:
  CostModel(const Trace& trace, const Machine& machine);
  // Seconds for op `op` on gpu `gpu` (kernel launch overhead included).
  double op_time(const Op& op, std::size_t gpu) const;
  // Seconds for op `op` on the host CPU (v2 host compute): the op's cpu_time_s when it has one, else the roofline
  // max(flops / host.flops, bytes / host.memory_bandwidth) over the terms the machine and the op give (bytes:
  // bytes_accessed, else the op's inputs and outputs); with no term at all, its recorded (GPU) time_s.
  double host_op_time(const Op& op) const;
  // Time of all compute of the trace on gpu 0 with no memory traffic: the ideal iteration time.
  double ideal_time(std::size_t gpu = 0) const;

private:
  const Trace* trace_;
  const Machine* machine_;
};

} // namespace memsim
