#include "kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace memsim::runtime::kernels {

namespace {

__device__ __forceinline__ unsigned long long global_timer_ns()
{
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void spin_kernel(unsigned long long duration_ns)
{
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < duration_ns) {
  }
}

__global__ void empty_kernel() {}

__device__ __forceinline__ float hash_to_unit(std::uint32_t x)
{
  // xorshift-multiply hash -> [-1, 1)
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return static_cast<float>(x) * (2.0f / 4294967296.0f) - 1.0f;
}

__global__ void fill_kernel(void* data, std::size_t elements, int element_bytes, bool bf16, std::uint32_t seed)
{
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += stride) {
    const float value = hash_to_unit(static_cast<std::uint32_t>(i) * 2654435761U + seed);
    if (element_bytes == 4)
      static_cast<float*>(data)[i] = value;
    else if (bf16)
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16(value);
    else
      static_cast<__half*>(data)[i] = __float2half(value);
  }
}

__global__ void timer_probe_kernel(unsigned long long* out, int samples)
{
  for (int i = 0; i < samples; ++i)
    out[i] = global_timer_ns();
}

} // namespace

cudaError_t launch_spin(cudaStream_t stream, std::uint64_t duration_ns)
{
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(duration_ns));
  return cudaGetLastError();
}

cudaError_t launch_empty(cudaStream_t stream)
{
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_fill(cudaStream_t stream, void* data, std::size_t elements, int element_bytes, bool bf16,
                        std::uint32_t seed)
{
  if (elements == 0)
    return cudaSuccess;
  fill_kernel<<<1024, 256, 0, stream>>>(data, elements, element_bytes, bf16, seed);
  return cudaGetLastError();
}

cudaError_t launch_timer_probe(cudaStream_t stream, unsigned long long* out, int samples)
{
  timer_probe_kernel<<<1, 1, 0, stream>>>(out, samples);
  return cudaGetLastError();
}

} // namespace memsim::runtime::kernels
