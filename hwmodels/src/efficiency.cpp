#include "memsim/hwmodels/efficiency.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace memsim {

std::string_view to_string(OpClass op_class)
{
  switch (op_class) {
  case OpClass::gemm: return "gemm";
  case OpClass::convolution: return "convolution";
  case OpClass::memory: return "memory";
  case OpClass::launch: return "launch";
  case OpClass::unsized: return "unsized";
  }
  return "launch";
}

OpClass classify_op(const Op& op)
{
  if (op.flops && *op.flops > 0) {
    const bool conv = op.type.find("conv") != std::string::npos || op.name.find("conv") != std::string::npos;
    return conv ? OpClass::convolution : OpClass::gemm;
  }
  if (op.bytes_accessed && *op.bytes_accessed > 0)
    return OpClass::memory;
  return !op.flops && !op.bytes_accessed ? OpClass::unsized : OpClass::launch;
}

double op_work(const Op& op, OpClass op_class)
{
  switch (op_class) {
  case OpClass::gemm:
  case OpClass::convolution: return op.flops.value_or(0);
  case OpClass::memory: return op.bytes_accessed.value_or(0);
  case OpClass::launch:
  case OpClass::unsized: return 0;
  }
  return 0;
}

const EfficiencyCurve* GpuEfficiency::curve(OpClass op_class) const
{
  switch (op_class) {
  case OpClass::gemm: return &gemm;
  case OpClass::convolution: return &convolution;
  case OpClass::memory: return &memory;
  case OpClass::launch:
  case OpClass::unsized: return nullptr;
  }
  return nullptr;
}

GpuEfficiency default_efficiency()
{
  // Fitted to the seven shipped H100 recordings (fp32, 366 GEMM-like ops, 768 convolutions, 10609 memory-bound ops
  // with a plausible byte count) by fit_efficiency_curve; see traces/src/RESCALING.md for the fit and its error.
  // Convolutions are measured against the fp32 peak, but cuDNN ran them in TF32 on tensor cores, hence max > 1.
  GpuEfficiency defaults;
  defaults.gemm = {.max = 0.725, .half = 7.06e8};       // 14.5 us fixed cost at 67 TFLOP/s
  defaults.convolution = {.max = 2.44, .half = 6.35e9}; // 38.9 us fixed cost
  defaults.memory = {.max = 0.874, .half = 1.06e7};     // 3.6 us fixed cost at 3.35 TB/s
  return defaults;
}

EfficiencyCurve fit_efficiency_curve(const std::vector<std::pair<double, double>>& work_and_seconds, double peak)
{
  if (!(peak > 0))
    throw std::invalid_argument("the peak must be positive");
  // Weighted least squares for seconds = a + b * work with weight 1/seconds: minimizes the relative error.
  double s_ww = 0, s_wwx = 0, s_wwxx = 0, s_wwy = 0, s_wwxy = 0;
  std::set<double> distinct;
  for (const auto& [work, seconds] : work_and_seconds) {
    if (!(work > 0) || !(seconds > 0) || !std::isfinite(work) || !std::isfinite(seconds))
      continue;
    distinct.insert(work);
    const double w2 = 1.0 / (seconds * seconds);
    s_ww += w2;
    s_wwx += w2 * work;
    s_wwxx += w2 * work * work;
    s_wwy += w2 * seconds;
    s_wwxy += w2 * work * seconds;
  }
  if (distinct.size() < 2)
    throw std::invalid_argument("a fit needs measurements at two or more distinct positive sizes");
  const double determinant = s_ww * s_wwxx - s_wwx * s_wwx;
  const double b = (s_ww * s_wwxy - s_wwx * s_wwy) / determinant;
  const double a = (s_wwxx * s_wwy - s_wwx * s_wwxy) / determinant;
  if (!(b > 0))
    throw std::invalid_argument("the measured times do not grow with size: no saturating curve fits them");
  return {.max = 1.0 / (b * peak), .half = std::max(0.0, a / b)};
}

} // namespace memsim
