#include "cublas_loader.hpp"

#include "cuda_check.hpp"

#include <fmt/format.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace memsim::runtime {

namespace {

// The first libcublas.so.13 below `root` (pip's nvidia-cublas wheel puts it in .../nvidia/cu13/lib or
// .../nvidia/cublas/lib), depth-limited so a large tree costs little.
std::string find_below(const std::filesystem::path& root)
{
  std::error_code error;
  if (!std::filesystem::is_directory(root, error))
    return {};
  std::filesystem::recursive_directory_iterator it(root, std::filesystem::directory_options::skip_permission_denied,
                                                   error);
  for (; !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it.depth() > 9) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() == "libcublas.so.13")
      return it->path().string();
  }
  return {};
}

const char* status_name(cublasStatus_t status)
{
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "cuBLAS error";
  }
}

void check_cublas(cublasStatus_t status, const char* call)
{
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(fmt::format("{} failed: {} ({})", call, status_name(status), static_cast<int>(status)));
}

} // namespace

std::unique_ptr<CublasLibrary> CublasLibrary::open(std::string& why_not)
{
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("MEMSIM_CUBLAS"))
    candidates.emplace_back(path);
  candidates.insert(candidates.end(), {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"});
  void* library = nullptr;
  std::string opened;
  std::string errors;
  auto try_open = [&](const std::string& name) {
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library)
      opened = name;
    else if (const char* error = dlerror())
      errors += fmt::format("\n  {}", error);
    return library != nullptr;
  };
  for (const std::string& name : candidates)
    if (try_open(name))
      break;
  if (!library)
    for (const char* root : {"/usr/local/lib", "/usr/lib/python3", "/opt"}) {
      std::string found = find_below(root);
      if (!found.empty() && try_open(found))
        break;
    }
  if (!library) {
    why_not = "cuBLAS (libcublas.so.13) not found; set MEMSIM_CUBLAS to its path" + errors;
    return nullptr;
  }
  std::unique_ptr<CublasLibrary> cublas(new CublasLibrary());
  cublas->library_ = library;
  cublas->path_ = opened;
  cublas->create_ = reinterpret_cast<CreateFn>(dlsym(library, "cublasCreate_v2"));
  cublas->destroy_ = reinterpret_cast<DestroyFn>(dlsym(library, "cublasDestroy_v2"));
  cublas->set_stream_ = reinterpret_cast<SetStreamFn>(dlsym(library, "cublasSetStream_v2"));
  cublas->gemm_ex_ = reinterpret_cast<GemmExFn>(dlsym(library, "cublasGemmEx"));
  if (!cublas->create_ || !cublas->destroy_ || !cublas->set_stream_ || !cublas->gemm_ex_) {
    why_not = fmt::format("{} lacks cublasCreate_v2/cublasDestroy_v2/cublasSetStream_v2/cublasGemmEx", opened);
    return nullptr;
  }
  return cublas;
}

CublasLibrary::~CublasLibrary()
{
  if (library_)
    dlclose(library_);
}

cublasHandle_t CublasLibrary::create_handle(cudaStream_t stream) const
{
  cublasHandle_t handle = nullptr;
  check_cublas(create_(&handle), "cublasCreate");
  check_cublas(set_stream_(handle, stream), "cublasSetStream");
  return handle;
}

void CublasLibrary::destroy_handle(cublasHandle_t handle) const
{
  if (handle)
    destroy_(handle);
}

void CublasLibrary::gemm(cublasHandle_t handle, GemmType type, const GemmShape& shape, const void* a, const void* b,
                         void* c) const
{
  const float alpha = 1.0f;
  const float beta = 0.0f;
  cudaDataType data_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (type) {
  case GemmType::fp32: break;
  case GemmType::tf32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
  case GemmType::fp16: data_type = CUDA_R_16F; break;
  case GemmType::bf16: data_type = CUDA_R_16BF; break;
  }
  for (int i = 0; i < shape.repeats; ++i)
    check_cublas(gemm_ex_(handle, CUBLAS_OP_N, CUBLAS_OP_N, shape.m, shape.n, shape.k, &alpha, a, data_type, shape.m, b,
                          data_type, shape.k, &beta, c, data_type, shape.m, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
}

} // namespace memsim::runtime
