#include "memsim/runtime/kernel_sizing.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace memsim::runtime {

std::uint64_t spin_request_ns(double time_s, double spin_overhead_s)
{
  const double ns = (time_s - spin_overhead_s) * 1e9;
  return ns <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(ns));
}

GemmType gemm_type_for(const std::string& trace_dtype)
{
  std::string dtype;
  for (char c : trace_dtype)
    dtype += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (dtype == "fp16" || dtype == "half" || dtype == "float16")
    return GemmType::fp16;
  if (dtype == "bf16" || dtype == "bfloat16")
    return GemmType::bf16;
  if (dtype == "tf32")
    return GemmType::tf32;
  return GemmType::fp32;
}

const char* to_string(GemmType type)
{
  switch (type) {
  case GemmType::fp32: return "fp32";
  case GemmType::tf32: return "tf32";
  case GemmType::fp16: return "fp16";
  case GemmType::bf16: return "bf16";
  }
  return "?";
}

int element_bytes(GemmType type) { return type == GemmType::fp16 || type == GemmType::bf16 ? 2 : 4; }

GemmShape gemm_shape_for(double flops, int max_side)
{
  auto round8 = [](double side) { return std::max(8, static_cast<int>(std::llround(side / 8.0)) * 8); };
  GemmShape shape;
  const double cube_side = std::cbrt(std::max(flops, 0.0) / 2.0);
  if (cube_side <= max_side) {
    shape.m = shape.n = shape.k = round8(cube_side);
    return shape;
  }
  shape.m = shape.n = max_side;
  const double k = flops / (2.0 * max_side * static_cast<double>(max_side));
  shape.repeats = static_cast<int>(std::ceil(k / max_side));
  shape.k = round8(k / shape.repeats);
  return shape;
}

std::uint64_t gemm_scratch_bytes(const GemmShape& shape, GemmType type)
{
  const auto m = static_cast<std::uint64_t>(shape.m), n = static_cast<std::uint64_t>(shape.n),
             k = static_cast<std::uint64_t>(shape.k);
  return (m * k + k * n + m * n) * static_cast<std::uint64_t>(element_bytes(type));
}

} // namespace memsim::runtime
