#pragma once
// CUDA errors as exceptions that name the call and where it was made; main() turns them into exit 4.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace memsim::runtime {

class CudaError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// No usable device (no driver, no GPU): main() exits 3 with this message.
class NoCudaDevice : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line)
{
  if (status != cudaSuccess)
    throw CudaError(fmt::format("{} failed: {} ({}) at {}:{}", call, cudaGetErrorName(status),
                                cudaGetErrorString(status), file, line));
}

} // namespace memsim::runtime

#define MEMSIM_CUDA(call) ::memsim::runtime::check_cuda((call), #call, __FILE__, __LINE__)
