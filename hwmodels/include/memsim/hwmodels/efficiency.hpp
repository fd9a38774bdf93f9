#pragma once
// The efficiency model behind op_time at another size or on another GPU (DESIGN.md "Op cost as a function of
// size", traces/src/RESCALING.md). An op's work is its flops (GEMM-like, convolution) or its bytes_accessed
// (memory-bound); the fraction of the GPU's peak it reaches grows with its work and saturates:
//   efficiency(work) = max * work / (work + half),   so   time(work) = (work + half) / (max * peak),
// a fixed cost plus a rate. Launch-bound ops (no flops and zero bytes: views, metadata) take their recorded time
// at any size; unsized ops (neither flops nor bytes_accessed given: hand-made or imported traces) scale linearly.
#include "memsim/traces/trace.hpp"

#include <string_view>
#include <utility>
#include <vector>

namespace memsim {

enum class OpClass { gemm, convolution, memory, launch, unsized };
std::string_view to_string(OpClass op_class);

// convolution: flops > 0 and "conv" in the op's type or name; gemm: any other op with flops > 0 (mm, addmm, bmm,
// linear, attention); memory: bytes_accessed > 0 and no flops; unsized: neither flops nor bytes_accessed given;
// launch: the rest (flops and bytes given as 0).
OpClass classify_op(const Op& op);
// The work the class's curve is a function of: flops (gemm, convolution), bytes_accessed (memory), else 0.
double op_work(const Op& op, OpClass op_class);

struct EfficiencyCurve {
  double max = 1;  // efficiency approached by large ops, as a fraction of the peak the class is measured against
  double half = 0; // work (flops or bytes) at which the efficiency is max / 2; 0: no small-size penalty
  double efficiency(double work) const { return work > 0 ? max * work / (work + half) : 0; }
  // Seconds for `work` at this curve on a GPU whose reference peak is `peak` (FLOP/s or bytes/s).
  double seconds(double work, double peak) const { return (work + half) / (max * peak); }
};

// One curve per sized class, per GPU (the machine file's optional `efficiency:` block).
struct GpuEfficiency {
  EfficiencyCurve gemm;
  EfficiencyCurve convolution;
  EfficiencyCurve memory;
  const EfficiencyCurve* curve(OpClass op_class) const; // nullptr for launch and unsized
};

// The defaults: fitted to the shipped H100 recordings (traces/data/*-h100, fp32; traces/tools/efficiency_fit.py),
// used for every GPU whose machine file gives no `efficiency:` block.
GpuEfficiency default_efficiency();

// Least-squares fit of a curve to measured (work, seconds) pairs of one class on a GPU of reference peak `peak`,
// minimizing relative error (time = a + b * work, each point weighted by 1 / time). Throws std::invalid_argument
// when fewer than two distinct positive work values are given or the fit is not a saturating curve (b <= 0).
EfficiencyCurve fit_efficiency_curve(const std::vector<std::pair<double, double>>& work_and_seconds, double peak);

} // namespace memsim
