// UVM migration bandwidth against pinned copies (DyNN-Offload spec §1.8/§2.3: `uvm_bw_fraction`, `fault_batch_s`).
// A standalone microbenchmark, built with nvcc on the GPU machine (run.sh), not part of memsim's build. For each
// size: the pinned host-to-device cudaMemcpy time; the time a kernel reading every element of a managed buffer whose
// pages are on the host takes (on-demand faults, the density prefetcher included) minus the same kernel on device
// memory; an explicit cudaMemPrefetchAsync of the same buffer; and the device-to-host direction (the host reads a
// buffer the GPU wrote). Each is the median of `repeats` runs; the pages go back to the host between runs. CSV out.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                                                    \
  do {                                                                                                                 \
    cudaError_t error_ = (call);                                                                                       \
    if (error_ != cudaSuccess) {                                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(error_));                   \
      std::exit(1);                                                                                                    \
    }                                                                                                                  \
  } while (0)

__global__ void read_all(const float* data, size_t count, float* sink)
{
  float sum = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    sum += data[i];
  if (sum == 1234.5f)
    *sink = sum;
}

__global__ void write_all(float* data, size_t count)
{
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    data[i] = 1.0f;
}

static double median(std::vector<double> values)
{
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Seconds between two events around `launch`.
template <class Launch>
static double timed(Launch launch)
{
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  launch();
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return ms / 1e3;
}

int main(int argc, char** argv)
{
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  const size_t sizes[] = {2ull << 20, 16ull << 20, 128ull << 20, 1ull << 30, 4ull << 30};
  int device = 0;
  CHECK(cudaSetDevice(device));
  cudaDeviceProp properties;
  CHECK(cudaGetDeviceProperties(&properties, device));
  const int blocks = properties.multiProcessorCount * 4;
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, sizeof(float)));
  std::printf("# %s\n", properties.name);
  std::printf("bytes,pinned_h2d_s,device_read_s,uvm_fault_read_s,uvm_prefetch_s,pinned_d2h_s,uvm_host_read_s,"
              "fault_over_pinned,prefetch_over_pinned,host_read_over_pinned\n");
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    float *pinned = nullptr, *on_device = nullptr, *managed = nullptr;
    CHECK(cudaMallocHost(&pinned, bytes));
    CHECK(cudaMalloc(&on_device, bytes));
    CHECK(cudaMallocManaged(&managed, bytes));
    std::memset(pinned, 0, bytes);
    std::vector<double> h2d, d2h, device_read, fault_read, prefetch, host_read;
    for (int r = 0; r < repeats + 1; ++r) { // the first run warms up and is dropped
      const double copy_in = timed([&] { CHECK(cudaMemcpy(on_device, pinned, bytes, cudaMemcpyHostToDevice)); });
      const double copy_out = timed([&] { CHECK(cudaMemcpy(pinned, on_device, bytes, cudaMemcpyDeviceToHost)); });
      const double read = timed([&] { read_all<<<blocks, 256>>>(on_device, count, sink); });
      std::memset(managed, 0, bytes); // the pages are on the host
      const double faulted = timed([&] { read_all<<<blocks, 256>>>(managed, count, sink); });
      std::memset(managed, 0, bytes);
      cudaMemLocation gpu{};
      gpu.type = cudaMemLocationTypeDevice;
      gpu.id = device;
      const double prefetched = timed([&] { CHECK(cudaMemPrefetchAsync(managed, bytes, gpu, 0, 0)); });
      write_all<<<blocks, 256>>>(managed, count); // dirty on the GPU
      CHECK(cudaDeviceSynchronize());
      const auto start = std::chrono::steady_clock::now();
      volatile float total = 0;
      for (size_t i = 0; i < count; i += 1024) // one read per 4 KiB page: every page migrates back
        total = total + managed[i];
      const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (r == 0)
        continue;
      h2d.push_back(copy_in);
      d2h.push_back(copy_out);
      device_read.push_back(read);
      fault_read.push_back(faulted);
      prefetch.push_back(prefetched);
      host_read.push_back(host);
    }
    const double pin_in = median(h2d), pin_out = median(d2h), dev = median(device_read);
    const double fault = median(fault_read), pre = median(prefetch), back = median(host_read);
    std::printf("%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.4f,%.4f,%.4f\n", bytes, pin_in, dev, fault, pre, pin_out, back,
                pin_in / (fault - dev), pin_in / pre, pin_out / back);
    std::fflush(stdout);
    CHECK(cudaFree(managed));
    CHECK(cudaFree(on_device));
    CHECK(cudaFreeHost(pinned));
  }
  return 0;
}
