#pragma once
// The few device kernels memsim-cuda launches (kernels.cu). Plain declarations, so the host code that
// calls them compiles with g++ and only kernels.cu goes through nvcc.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace memsim::runtime::kernels {

// Busy-waits on %globaltimer for `duration_ns` nanoseconds (one thread: it occupies no real resources,
// which is what the trace time stands for when the op ran alone on its stream).
cudaError_t launch_spin(cudaStream_t stream, std::uint64_t duration_ns);
cudaError_t launch_empty(cudaStream_t stream);
// Pseudo-random values in [-1, 1) (never zeros: zeros make GEMMs faster than real data).
// element_bytes: 4 (fp32) or 2 (fp16 when bf16 is false, else bf16).
cudaError_t launch_fill(cudaStream_t stream, void* data, std::size_t elements, int element_bytes, bool bf16,
                        std::uint32_t seed);
// Reads %globaltimer `samples` times in a tight loop into `out` (device memory), for its resolution.
cudaError_t launch_timer_probe(cudaStream_t stream, unsigned long long* out, int samples);

} // namespace memsim::runtime::kernels
