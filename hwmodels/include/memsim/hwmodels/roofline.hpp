#pragma once
// The roofline of one GPU for one dtype, as the trace generators take it.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/traces/generators.hpp"

#include <optional>
#include <string>

namespace memsim {

// nullopt when the GPU has no peak_flops for `dtype` (the caller says where that was asked for).
inline std::optional<Roofline> roofline_of(const Gpu& gpu, const std::string& dtype)
{
  auto peak = gpu.peak_flops.find(dtype);
  if (peak == gpu.peak_flops.end())
    return std::nullopt;
  return Roofline{peak->second, gpu.hbm_bandwidth, gpu.kernel_launch_s, gpu.model};
}

} // namespace memsim
