#include "calibrate_device.hpp"

#include "cuda_check.hpp"
#include "cuda_executor.hpp"
#include "kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace memsim::runtime {

namespace {

double median_of(std::vector<double> values)
{
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[(values.size() - 1) / 2];
}

struct Event {
  cudaEvent_t event = nullptr;
  Event() { MEMSIM_CUDA(cudaEventCreate(&event)); }
  ~Event() { cudaEventDestroy(event); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct Stream {
  cudaStream_t stream = nullptr;
  Stream() { MEMSIM_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Device {
  void* data = nullptr;
  explicit Device(std::uint64_t bytes) { MEMSIM_CUDA(cudaMalloc(&data, bytes)); }
  ~Device() { cudaFree(data); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

struct Pinned {
  void* data = nullptr;
  explicit Pinned(std::uint64_t bytes) { MEMSIM_CUDA(cudaHostAlloc(&data, bytes, cudaHostAllocDefault)); }
  ~Pinned() { cudaFreeHost(data); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

double elapsed_s(const Event& from, const Event& to)
{
  float ms = 0;
  MEMSIM_CUDA(cudaEventElapsedTime(&ms, from.event, to.event));
  return static_cast<double>(ms) * 1e-3;
}

std::uint64_t host_memory_bytes()
{
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemTotal:")
      return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

// Median time of one copy (event, copy, event), each copy alone.
TransferPoint time_copy(void* to, const void* from, std::uint64_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
  const std::size_t repetitions = std::clamp<std::uint64_t>((4ull << 30) / bytes, 5, 100);
  Event before, after;
  MEMSIM_CUDA(cudaMemcpyAsync(to, from, bytes, kind, stream)); // warm-up
  MEMSIM_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (std::size_t i = 0; i < repetitions; ++i) {
    MEMSIM_CUDA(cudaEventRecord(before.event, stream));
    MEMSIM_CUDA(cudaMemcpyAsync(to, from, bytes, kind, stream));
    MEMSIM_CUDA(cudaEventRecord(after.event, stream));
    MEMSIM_CUDA(cudaEventSynchronize(after.event));
    times.push_back(elapsed_s(before, after));
  }
  return {bytes, median_of(times), *std::min_element(times.begin(), times.end()), repetitions};
}

} // namespace

CalibrationData calibrate_device(const CalibrateOptions& options, const CublasLibrary* cublas,
                                 const std::string& cublas_note)
{
  auto progress = [&](const std::string& text) {
    if (options.verbose)
      std::fprintf(stderr, "memsim-cuda calibrate: %s\n", text.c_str());
  };
  const DeviceInfo device = open_device(options.gpu);
  CalibrationData data;
  data.gpu_name = device.name;
  data.device_memory_bytes = device.total_bytes;
  data.multiprocessors = device.multiprocessors;
  data.compute_capability_major = device.major;
  data.compute_capability_minor = device.minor;
  int driver = 0;
  MEMSIM_CUDA(cudaDriverGetVersion(&driver));
  data.driver_version = fmt::format("CUDA {}.{}", driver / 1000, (driver % 1000) / 10);
  data.host_memory_bytes = host_memory_bytes();
  progress(fmt::format("{} ({} SMs, {} bytes), {}", device.name, device.multiprocessors, device.total_bytes,
                       data.driver_version));

  Stream stream_a, stream_b, root;
  const std::uint64_t max_bytes = options.max_transfer_bytes;
  {
    Pinned host_a(max_bytes), host_b(max_bytes);
    Device device_a(max_bytes), device_b(max_bytes);
    MEMSIM_CUDA(cudaMemset(device_a.data, 1, max_bytes));
    MEMSIM_CUDA(cudaMemset(device_b.data, 2, max_bytes));
    std::fill_n(static_cast<char*>(host_a.data), max_bytes, char{3});
    for (std::uint64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      data.h2d.push_back(time_copy(device_a.data, host_a.data, bytes, cudaMemcpyHostToDevice, stream_a.stream));
      data.d2h.push_back(time_copy(host_b.data, device_b.data, bytes, cudaMemcpyDeviceToHost, stream_a.stream));
      progress(fmt::format("{:>10} bytes: H2D {:.2f} GB/s, D2H {:.2f} GB/s", bytes,
                           static_cast<double>(bytes) / data.h2d.back().median_s / 1e9,
                           static_cast<double>(bytes) / data.d2h.back().median_s / 1e9));
    }

    // Both directions at once on two streams, released together by one gate event.
    data.bidirectional_bytes = std::min<std::uint64_t>(max_bytes, 256ull << 20);
    std::vector<double> totals, h2d_rates, d2h_rates;
    for (int i = 0; i < 6; ++i) {
      Event gate, a0, a1, b0, b1;
      MEMSIM_CUDA(kernels::launch_spin(root.stream, 1000000));
      MEMSIM_CUDA(cudaEventRecord(gate.event, root.stream));
      MEMSIM_CUDA(cudaStreamWaitEvent(stream_a.stream, gate.event, 0));
      MEMSIM_CUDA(cudaStreamWaitEvent(stream_b.stream, gate.event, 0));
      MEMSIM_CUDA(cudaEventRecord(a0.event, stream_a.stream));
      MEMSIM_CUDA(cudaMemcpyAsync(device_a.data, host_a.data, data.bidirectional_bytes, cudaMemcpyHostToDevice,
                                  stream_a.stream));
      MEMSIM_CUDA(cudaEventRecord(a1.event, stream_a.stream));
      MEMSIM_CUDA(cudaEventRecord(b0.event, stream_b.stream));
      MEMSIM_CUDA(cudaMemcpyAsync(host_b.data, device_b.data, data.bidirectional_bytes, cudaMemcpyDeviceToHost,
                                  stream_b.stream));
      MEMSIM_CUDA(cudaEventRecord(b1.event, stream_b.stream));
      MEMSIM_CUDA(cudaDeviceSynchronize());
      if (i == 0)
        continue; // warm-up
      const double bytes = static_cast<double>(data.bidirectional_bytes);
      const double begin = std::min(elapsed_s(gate, a0), elapsed_s(gate, b0));
      const double end = std::max(elapsed_s(gate, a1), elapsed_s(gate, b1));
      totals.push_back(2 * bytes / (end - begin));
      h2d_rates.push_back(bytes / elapsed_s(a0, a1));
      d2h_rates.push_back(bytes / elapsed_s(b0, b1));
    }
    data.bidirectional_total_bytes_per_s = median_of(totals);
    data.bidirectional_h2d_bytes_per_s = median_of(h2d_rates);
    data.bidirectional_d2h_bytes_per_s = median_of(d2h_rates);
    progress(fmt::format("bidirectional: H2D {:.2f} GB/s + D2H {:.2f} GB/s, total {:.2f} GB/s",
                         data.bidirectional_h2d_bytes_per_s / 1e9, data.bidirectional_d2h_bytes_per_s / 1e9,
                         data.bidirectional_total_bytes_per_s / 1e9));

    // HBM: device-to-device copy, bytes read + written.
    std::vector<double> rates;
    for (int i = 0; i < 11; ++i) {
      Event before, after;
      MEMSIM_CUDA(cudaEventRecord(before.event, stream_a.stream));
      MEMSIM_CUDA(cudaMemcpyAsync(device_b.data, device_a.data, max_bytes, cudaMemcpyDeviceToDevice, stream_a.stream));
      MEMSIM_CUDA(cudaEventRecord(after.event, stream_a.stream));
      MEMSIM_CUDA(cudaEventSynchronize(after.event));
      if (i > 0)
        rates.push_back(2.0 * static_cast<double>(max_bytes) / elapsed_s(before, after));
    }
    data.hbm_bytes_per_s = median_of(rates);
    progress(fmt::format("device-to-device copy: {:.1f} GB/s", data.hbm_bytes_per_s / 1e9));

    // Memory-bound efficiency sweep: copies of 4 KiB x4 ... max_bytes, bytes read + written.
    for (std::uint64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const TransferPoint copy =
          time_copy(device_b.data, device_a.data, bytes, cudaMemcpyDeviceToDevice, stream_a.stream);
      data.memory_sweep.push_back({2.0 * static_cast<double>(bytes), copy.median_s});
    }
    progress(fmt::format("memory sweep: {} device-to-device copies", data.memory_sweep.size()));
  }

  // Kernel launch: one empty kernel between events (sync after each), back-to-back, and the host call.
  {
    std::vector<double> singles;
    for (int i = 0; i < 101; ++i) {
      Event before, after;
      MEMSIM_CUDA(cudaEventRecord(before.event, stream_a.stream));
      MEMSIM_CUDA(kernels::launch_empty(stream_a.stream));
      MEMSIM_CUDA(cudaEventRecord(after.event, stream_a.stream));
      MEMSIM_CUDA(cudaEventSynchronize(after.event));
      if (i > 0)
        singles.push_back(elapsed_s(before, after));
    }
    data.empty_kernel_s = median_of(singles);
    const int count = 1000;
    Event before, after;
    MEMSIM_CUDA(kernels::launch_spin(stream_a.stream, 20000000)); // the host enqueues while the GPU waits
    MEMSIM_CUDA(cudaEventRecord(before.event, stream_a.stream));
    const auto host_begin = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i)
      MEMSIM_CUDA(kernels::launch_empty(stream_a.stream));
    const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - host_begin).count();
    MEMSIM_CUDA(cudaEventRecord(after.event, stream_a.stream));
    MEMSIM_CUDA(cudaEventSynchronize(after.event));
    data.back_to_back_kernel_s = elapsed_s(before, after) / count;
    data.host_launch_call_s = host_s / count;
    progress(fmt::format("kernel launch: single {:.2f} us, back-to-back {:.2f} us, host call {:.2f} us",
                         data.empty_kernel_s * 1e6, data.back_to_back_kernel_s * 1e6, data.host_launch_call_s * 1e6));
  }

  // %globaltimer resolution and the spin kernel's accuracy (what `run --kernels spin` relies on).
  {
    const int samples = 4096;
    Device probe(samples * sizeof(unsigned long long));
    MEMSIM_CUDA(kernels::launch_timer_probe(stream_a.stream, static_cast<unsigned long long*>(probe.data), samples));
    std::vector<unsigned long long> values(samples);
    MEMSIM_CUDA(cudaMemcpy(values.data(), probe.data, samples * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::vector<double> steps;
    for (int i = 1; i < samples; ++i)
      if (values[static_cast<std::size_t>(i)] > values[static_cast<std::size_t>(i - 1)])
        steps.push_back(
            static_cast<double>(values[static_cast<std::size_t>(i)] - values[static_cast<std::size_t>(i - 1)]) * 1e-9);
    data.globaltimer_resolution_s = median_of(steps);
    const double overhead = measure_spin_overhead(stream_a.stream);
    for (double requested : {0.0, 5e-6, 20e-6, 100e-6, 1e-3, 10e-3}) {
      std::vector<double> measured;
      for (int i = 0; i < 11; ++i) {
        Event before, after;
        MEMSIM_CUDA(kernels::launch_spin(stream_a.stream, 200000));
        MEMSIM_CUDA(cudaEventRecord(before.event, stream_a.stream));
        MEMSIM_CUDA(kernels::launch_spin(stream_a.stream, spin_request_ns(requested, overhead)));
        MEMSIM_CUDA(cudaEventRecord(after.event, stream_a.stream));
        MEMSIM_CUDA(cudaEventSynchronize(after.event));
        measured.push_back(elapsed_s(before, after));
      }
      data.spin_accuracy.push_back({requested, median_of(measured)});
    }
    std::string line = fmt::format("globaltimer step {:.3f} us; spin overhead {:.2f} us; requested -> measured:",
                                   data.globaltimer_resolution_s * 1e6, overhead * 1e6);
    for (const SpinAccuracyPoint& point : data.spin_accuracy)
      line += fmt::format(" {:.1f}->{:.2f}us", point.requested_s * 1e6, point.measured_s * 1e6);
    progress(line);
  }

  // Peak FLOP/s: cuBLAS GEMM 8192^3 on random data, per dtype.
  if (!cublas) {
    data.gemm_note = cublas_note;
  } else {
    const int side = 8192;
    const GemmShape shape{side, side, side, 1};
    Device a(static_cast<std::uint64_t>(side) * side * 4), b(static_cast<std::uint64_t>(side) * side * 4),
        c(static_cast<std::uint64_t>(side) * side * 4);
    cublasHandle_t handle = cublas->create_handle(stream_a.stream);
    try {
      for (GemmType type : {GemmType::fp32, GemmType::tf32, GemmType::fp16, GemmType::bf16}) {
        const std::size_t elements = static_cast<std::size_t>(side) * side;
        const int element = element_bytes(type);
        const bool bf16 = type == GemmType::bf16;
        MEMSIM_CUDA(kernels::launch_fill(stream_a.stream, a.data, elements, element, bf16, 11));
        MEMSIM_CUDA(kernels::launch_fill(stream_a.stream, b.data, elements, element, bf16, 12));
        for (int i = 0; i < 2; ++i)
          cublas->gemm(handle, type, shape, a.data, b.data, c.data);
        const int repetitions = 10;
        Event before, after;
        MEMSIM_CUDA(cudaEventRecord(before.event, stream_a.stream));
        for (int i = 0; i < repetitions; ++i)
          cublas->gemm(handle, type, shape, a.data, b.data, c.data);
        MEMSIM_CUDA(cudaEventRecord(after.event, stream_a.stream));
        MEMSIM_CUDA(cudaEventSynchronize(after.event));
        data.peak_flops[to_string(type)] = shape.flops() * repetitions / elapsed_s(before, after);
        progress(fmt::format("GEMM {}: {:.1f} TFLOP/s", to_string(type), data.peak_flops[to_string(type)] / 1e12));
      }
    } catch (...) {
      cublas->destroy_handle(handle);
      throw;
    }
    // Efficiency sweeps: fp32 GEMMs of side 128 ... 8192, and TF32 GEMMs of the im2col shapes of 3x3
    // convolutions (M = 32 images x H x W, N = C out, K = 9 x C in) from late to early CNN stages.
    auto time_gemm = [&](GemmType type, const GemmShape& gemm) {
      for (int i = 0; i < 2; ++i)
        cublas->gemm(handle, type, gemm, a.data, b.data, c.data);
      std::vector<double> times;
      for (int i = 0; i < 7; ++i) {
        Event before, after;
        MEMSIM_CUDA(cudaEventRecord(before.event, stream_a.stream));
        cublas->gemm(handle, type, gemm, a.data, b.data, c.data);
        MEMSIM_CUDA(cudaEventRecord(after.event, stream_a.stream));
        MEMSIM_CUDA(cudaEventSynchronize(after.event));
        times.push_back(elapsed_s(before, after));
      }
      return SweepPoint{gemm.flops(), median_of(times)};
    };
    const std::size_t elements = static_cast<std::size_t>(side) * side;
    MEMSIM_CUDA(kernels::launch_fill(stream_a.stream, a.data, elements, 4, false, 11)); // fp32 data again
    MEMSIM_CUDA(kernels::launch_fill(stream_a.stream, b.data, elements, 4, false, 12));
    try {
      for (int n = 128; n <= side; n *= 2)
        data.gemm_sweep.push_back(time_gemm(GemmType::fp32, GemmShape{n, n, n, 1}));
      for (const auto& [pixels, channels] : std::vector<std::pair<int, int>>{{7 * 7, 512},
                                                                             {14 * 14, 256},
                                                                             {14 * 14, 512},
                                                                             {28 * 28, 128},
                                                                             {28 * 28, 256},
                                                                             {56 * 56, 64},
                                                                             {56 * 56, 128},
                                                                             {112 * 112, 64}}) {
        const int m = 32 * pixels;
        const int k = 9 * channels;
        // A is m x k, B k x n, C m x n: stay within the 8192^2 scratch buffers.
        if (static_cast<double>(m) * k > static_cast<double>(side) * side ||
            static_cast<double>(m) * channels > static_cast<double>(side) * side)
          continue;
        data.convolution_sweep.push_back(time_gemm(GemmType::tf32, GemmShape{m, channels, k, 1}));
      }
    } catch (...) {
      cublas->destroy_handle(handle);
      throw;
    }
    progress(fmt::format("efficiency sweeps: {} GEMMs, {} convolution-shaped TF32 GEMMs", data.gemm_sweep.size(),
                         data.convolution_sweep.size()));
    cublas->destroy_handle(handle);
    data.gemm_note = "cuBLAS from " + cublas->path();
  }
  MEMSIM_CUDA(cudaDeviceSynchronize());
  return data;
}

} // namespace memsim::runtime
