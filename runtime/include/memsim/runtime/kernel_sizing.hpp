#pragma once
// How a compute step's kernel is sized: spin kernels for the trace time, GEMMs for the op's flops.
#include <cstdint>
#include <string>

namespace memsim::runtime {

// Nanoseconds to ask the spin kernel for, so that event-to-event it takes `time_s`: the fixed cost of an
// empty spin (launch + event gap, measured at start) is subtracted; never negative.
std::uint64_t spin_request_ns(double time_s, double spin_overhead_s);

enum class GemmType { fp32, tf32, fp16, bf16 };
GemmType gemm_type_for(const std::string& trace_dtype); // fp16/half/float16, bf16/bfloat16, tf32, else fp32
const char* to_string(GemmType type);
int element_bytes(GemmType type);

struct GemmShape {
  int m = 0, n = 0, k = 0;
  int repeats = 1; // 2*m*n*k*repeats ~ the requested flops
  double flops() const { return 2.0 * m * n * k * repeats; }
};
// Cube-ish shape (sides multiples of 8, at least 8) for `flops`, no side above `max_side`: above that, k is
// split into `repeats` equal GEMMs.
GemmShape gemm_shape_for(double flops, int max_side = 8192);
// Bytes of A, B and C for a shape (one copy, reused by the repeats).
std::uint64_t gemm_scratch_bytes(const GemmShape& shape, GemmType type);

} // namespace memsim::runtime
