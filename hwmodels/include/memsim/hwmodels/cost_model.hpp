#pragma once
// How long an op takes on a GPU, at its recorded size or another (traces/src/RESCALING.md, efficiency.hpp).
// The recorded time fixes the op's efficiency at its size; at `scale` x its work the time follows its class's
// efficiency curve; on another GPU model the op keeps its measured efficiency relative to the recording GPU's
// curve. Derived ops (split_of, fused_from) without their own time are their source op at 1/parts or x models.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/traces/trace.hpp"

#include <optional>

namespace memsim {

class CostModel {
public:
  CostModel(const Trace& trace, const Machine& machine);
  // Seconds for op `op` on gpu `gpu` with `scale` x its work (kernel launch overhead included, once).
  double op_time(const Op& op, std::size_t gpu, double scale = 1.0) const;
  // The same without the launch overhead, on any GPU spec (memsim trace rescale writes these as time_s).
  double kernel_time(const Op& op, const Gpu& target, double scale = 1.0) const;
  // Seconds for op `op` on the host CPU (v2 host compute): the op's cpu_time_s when it has one, else the roofline
  // max(flops / host.flops, bytes / host.memory_bandwidth) over the terms the machine and the op give (bytes:
  // bytes_accessed, else the op's inputs and outputs); with no term at all, its recorded (GPU) time_s.
  double host_op_time(const Op& op) const;
  // Time of all compute of the trace on gpu 0 with no memory traffic: the ideal iteration time.
  double ideal_time(std::size_t gpu = 0) const;
  // The recording GPU's spec (a GPU of this machine or a preset whose model is the trace's source.device), if known.
  const std::optional<Gpu>& recording_gpu() const { return recording_gpu_; }

private:
  double kernel_time_at_depth(const Op& op, const Gpu& target, double scale, int depth) const;

  const Trace* trace_;
  const Machine* machine_;
  std::optional<Gpu> recording_gpu_;
};

// The peak a class's efficiency is measured against: peak_flops[dtype] (else fp32) for gemm and convolution,
// hbm_bandwidth for memory; 0 when the GPU lists none.
double reference_peak(const Gpu& gpu, OpClass op_class, const std::string& dtype);
// A GPU spec with this model name among the machine presets (configs/machines), if any.
std::optional<Gpu> find_preset_gpu(const std::string& model);

} // namespace memsim
