#pragma once
// cuBLAS loaded with dlopen at run time, so memsim-cuda links only the static CUDA runtime and runs on a
// GPU box without cuBLAS (--kernels spin and calibrate's transfer figures need none). Searched: the
// MEMSIM_CUBLAS file, then libcublas.so.13 / libcublas.so on the loader path, then the CUDA toolkit and
// the pip wheel folders (nvidia-cublas) under /usr/local/cuda, /usr/lib and /opt.
#include "memsim/runtime/kernel_sizing.hpp"

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace memsim::runtime {

class CublasLibrary {
public:
  // nullptr and a reason when no library could be loaded.
  static std::unique_ptr<CublasLibrary> open(std::string& why_not);
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  const std::string& path() const { return path_; }
  cublasHandle_t create_handle(cudaStream_t stream) const; // throws CudaError
  void destroy_handle(cublasHandle_t handle) const;
  // C = A * B with column-major A (m x k), B (k x n), C (m x n); throws CudaError on a cuBLAS error.
  void gemm(cublasHandle_t handle, GemmType type, const GemmShape& shape, const void* a, const void* b, void* c) const;

private:
  CublasLibrary() = default;
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                      const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                                      void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  void* library_ = nullptr;
  std::string path_;
  CreateFn create_ = nullptr;
  DestroyFn destroy_ = nullptr;
  SetStreamFn set_stream_ = nullptr;
  GemmExFn gemm_ex_ = nullptr;
};

} // namespace memsim::runtime
