#include "memsim/runtime/calibration.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace memsim::runtime {

LinearFit fit_transfer_times(const std::vector<TransferPoint>& points)
{
  LinearFit fit;
  if (points.empty())
    return fit;
  // Least squares t = a + b * bytes over the large transfers, where the latency is a small part.
  double n = 0, sum_x = 0, sum_y = 0, sum_xx = 0, sum_xy = 0;
  for (const TransferPoint& point : points) {
    if (point.bytes < 1000000 || point.median_s <= 0)
      continue;
    const double x = static_cast<double>(point.bytes);
    n += 1;
    sum_x += x;
    sum_y += point.median_s;
    sum_xx += x * x;
    sum_xy += x * point.median_s;
  }
  double slope = 0;
  if (n >= 2 && n * sum_xx - sum_x * sum_x > 0)
    slope = (n * sum_xy - sum_x * sum_y) / (n * sum_xx - sum_x * sum_x);
  if (slope <= 0) {
    // Too few large points: the largest transfer's rate.
    const TransferPoint& largest =
        *std::max_element(points.begin(), points.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
    slope = largest.median_s / static_cast<double>(largest.bytes);
  }
  fit.bandwidth_bytes_per_s = 1.0 / slope;
  const TransferPoint& smallest =
      *std::min_element(points.begin(), points.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
  fit.latency_s = std::max(0.0, smallest.median_s - static_cast<double>(smallest.bytes) * slope);
  return fit;
}

HostLinkModel derive_host_link(const CalibrationData& data, double split_threshold)
{
  HostLinkModel link;
  LinearFit h2d = fit_transfer_times(data.h2d);
  LinearFit d2h = fit_transfer_times(data.d2h);
  link.h2d_bytes_per_s = h2d.bandwidth_bytes_per_s;
  link.d2h_bytes_per_s = d2h.bandwidth_bytes_per_s;
  link.bandwidth_bytes_per_s = std::min(h2d.bandwidth_bytes_per_s, d2h.bandwidth_bytes_per_s);
  link.latency_s = std::max(h2d.latency_s, d2h.latency_s);
  const double one_way = (h2d.bandwidth_bytes_per_s + d2h.bandwidth_bytes_per_s) / 2;
  link.overlap_factor = one_way > 0 ? data.bidirectional_total_bytes_per_s / one_way : 0;
  link.duplex_split = link.overlap_factor >= split_threshold;
  return link;
}

namespace {

std::string yaml_quoted(const std::string& text)
{
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

std::string gb_per_s(double bytes_per_s) { return fmt::format("{:.3f}GB/s", bytes_per_s / 1e9); }
std::string microseconds(double seconds) { return fmt::format("{:.3f}us", seconds * 1e6); }

void append_transfer_table(std::string& text, const char* direction, const std::vector<TransferPoint>& points)
{
  text += fmt::format("#   {} (pinned, one cudaMemcpyAsync between events; median of N):\n", direction);
  for (const TransferPoint& point : points)
    text += fmt::format("#     {:>10}  {:>12}  {:>9.3f} GB/s  (N={})\n",
                        units::format_bytes(static_cast<double>(point.bytes)), units::format_duration(point.median_s),
                        point.median_s > 0 ? static_cast<double>(point.bytes) / point.median_s / 1e9 : 0.0,
                        point.repetitions);
}

} // namespace

GpuEfficiency fit_sweeps(const CalibrationData& data, std::vector<std::string>* notes)
{
  GpuEfficiency efficiency = default_efficiency();
  const auto fp32 = data.peak_flops.find("fp32");
  const double flops_peak = fp32 == data.peak_flops.end() ? 0.0 : fp32->second;
  auto fit = [&](const char* what, const std::vector<SweepPoint>& sweep, double peak, EfficiencyCurve& curve) {
    std::vector<std::pair<double, double>> points;
    for (const SweepPoint& point : sweep)
      points.emplace_back(point.work, point.seconds);
    try {
      curve = fit_efficiency_curve(points, peak);
    } catch (const std::invalid_argument& error) {
      if (notes)
        notes->push_back(fmt::format("{}: default curve kept ({})", what, error.what()));
    }
  };
  fit("gemm", data.gemm_sweep, flops_peak, efficiency.gemm);
  fit("convolution", data.convolution_sweep, flops_peak, efficiency.convolution);
  fit("memory", data.memory_sweep, data.hbm_bytes_per_s, efficiency.memory);
  return efficiency;
}

std::string machine_yaml(const CalibrationData& data, const std::string& name)
{
  const HostLinkModel link = derive_host_link(data);
  std::string text;
  text += fmt::format("# memsim-machine measured by `memsim-cuda calibrate` on {} (sm_{}{}, {} SMs, driver {})\n",
                      data.gpu_name, data.compute_capability_major, data.compute_capability_minor, data.multiprocessors,
                      data.driver_version);
  text += "# Raw measurements (all CUDA-event timed):\n";
  append_transfer_table(text, "H2D", data.h2d);
  append_transfer_table(text, "D2H", data.d2h);
  text += fmt::format("#   bidirectional, {} each way at once: H2D {:.3f} GB/s, D2H {:.3f} GB/s, total {:.3f} GB/s\n",
                      units::format_bytes(static_cast<double>(data.bidirectional_bytes)),
                      data.bidirectional_h2d_bytes_per_s / 1e9, data.bidirectional_d2h_bytes_per_s / 1e9,
                      data.bidirectional_total_bytes_per_s / 1e9);
  text += fmt::format("#   kernel launch: empty kernel between events {}, back-to-back {} per kernel, host call {}\n",
                      microseconds(data.empty_kernel_s), microseconds(data.back_to_back_kernel_s),
                      microseconds(data.host_launch_call_s));
  text += fmt::format("#   globaltimer resolution {}; spin kernel requested -> measured:",
                      microseconds(data.globaltimer_resolution_s));
  for (const SpinAccuracyPoint& point : data.spin_accuracy)
    text +=
        fmt::format(" {} -> {};", units::format_duration(point.requested_s), units::format_duration(point.measured_s));
  text += "\n";
  for (const auto& [dtype, rate] : data.peak_flops)
    text += fmt::format("#   GEMM {}: {:.1f} TFLOP/s (cuBLAS, 8192^3, random data)\n", dtype, rate / 1e12);
  if (!data.gemm_note.empty())
    text += fmt::format("#   GEMM: {}\n", data.gemm_note);
  text += fmt::format("#   device-to-device copy: {:.1f} GB/s (bytes read + written)\n", data.hbm_bytes_per_s / 1e9);
  text += "format: memsim-machine\nversion: 1\n";
  text += fmt::format("name: {}\n", yaml_quoted(name));
  text += "gpus:\n";
  text += "  - name: gpu0\n";
  text += fmt::format("    model: {}\n", yaml_quoted(data.gpu_name));
  text += fmt::format("    memory: {}\n", data.device_memory_bytes);
  if (data.peak_flops.empty()) {
    text += "    peak_flops: {fp32: 1e12}  # not measured (no cuBLAS): a placeholder\n";
  } else {
    text += "    peak_flops: {";
    bool first = true;
    for (const auto& [dtype, rate] : data.peak_flops) {
      text += fmt::format("{}{}: {:.4g}", first ? "" : ", ", dtype, rate);
      first = false;
    }
    text += "}\n";
  }
  text += fmt::format("    hbm_bandwidth: {}\n", gb_per_s(data.hbm_bytes_per_s));
  text += fmt::format("    kernel_launch: {}  # per kernel, empty kernels back to back on one stream\n",
                      microseconds(data.back_to_back_kernel_s));
  std::vector<std::string> fit_notes;
  const GpuEfficiency efficiency = fit_sweeps(data, &fit_notes);
  // Raw files from before the efficiency sweeps have none: they keep the loader's defaults by leaving the block out,
  // so a refit reproduces the machine file they made.
  const bool swept = !data.gemm_sweep.empty() || !data.convolution_sweep.empty() || !data.memory_sweep.empty();
  if (swept) {
    text += fmt::format(
        "    # efficiency(work) = max x work / (work + half), fitted to {} fp32 GEMMs, {} TF32 GEMMs of 3x3\n"
        "    # convolution im2col shapes and {} device-to-device copies (traces/src/RESCALING.md)\n",
        data.gemm_sweep.size(), data.convolution_sweep.size(), data.memory_sweep.size());
    for (const std::string& note : fit_notes)
      text += fmt::format("    # {}\n", note);
    text += "    efficiency:\n";
    text += fmt::format("      gemm: {{max: {:.4g}, half_flops: {:.4g}}}\n", efficiency.gemm.max, efficiency.gemm.half);
    text += fmt::format("      convolution: {{max: {:.4g}, half_flops: {:.4g}}}\n", efficiency.convolution.max,
                        efficiency.convolution.half);
    text += fmt::format("      memory: {{max: {:.4g}, half_bytes: {:.0f}}}\n", efficiency.memory.max,
                        efficiency.memory.half);
  }
  text += fmt::format("host: {{memory: {}}}\n", data.host_memory_bytes);
  text += "links:\n";
  text += fmt::format("  # H2D {} and D2H {} (least-squares fit over transfers >= 1 MB): the Machine has one\n"
                      "  # per-direction figure, so the min is used. Both directions at once reached {:.2f}x the\n"
                      "  # one-way mean: duplex {} (split needs >= 1.6x).\n",
                      gb_per_s(link.h2d_bytes_per_s), gb_per_s(link.d2h_bytes_per_s), link.overlap_factor,
                      link.duplex_split ? "split" : "shared");
  text += fmt::format("  - {{name: gpu0-host, endpoints: [gpu0, host], bandwidth: {}, latency: {}, duplex: {}}}\n",
                      gb_per_s(link.bandwidth_bytes_per_s), microseconds(link.latency_s),
                      link.duplex_split ? "split" : "shared");
  return text;
}

nlohmann::json calibration_to_json(const CalibrationData& data)
{
  using nlohmann::json;
  auto transfers = [](const std::vector<TransferPoint>& points) {
    json list = json::array();
    for (const TransferPoint& point : points)
      list.push_back({{"bytes", point.bytes},
                      {"median_s", point.median_s},
                      {"min_s", point.min_s},
                      {"repetitions", point.repetitions},
                      {"bytes_per_s", point.median_s > 0 ? static_cast<double>(point.bytes) / point.median_s : 0.0}});
    return list;
  };
  const HostLinkModel link = derive_host_link(data);
  auto sweep = [](const std::vector<SweepPoint>& points) {
    json list = json::array();
    for (const SweepPoint& point : points)
      list.push_back({{"work", point.work}, {"seconds", point.seconds}});
    return list;
  };
  json spin = json::array();
  for (const SpinAccuracyPoint& point : data.spin_accuracy)
    spin.push_back({{"requested_s", point.requested_s}, {"measured_s", point.measured_s}});
  return {{"format", "memsim-calibration"},
          {"version", 1},
          {"gpu",
           {{"name", data.gpu_name},
            {"memory_bytes", data.device_memory_bytes},
            {"multiprocessors", data.multiprocessors},
            {"compute_capability", fmt::format("{}.{}", data.compute_capability_major, data.compute_capability_minor)},
            {"driver", data.driver_version}}},
          {"host_memory_bytes", data.host_memory_bytes},
          {"h2d", transfers(data.h2d)},
          {"d2h", transfers(data.d2h)},
          {"bidirectional",
           {{"bytes_each_way", data.bidirectional_bytes},
            {"h2d_bytes_per_s", data.bidirectional_h2d_bytes_per_s},
            {"d2h_bytes_per_s", data.bidirectional_d2h_bytes_per_s},
            {"total_bytes_per_s", data.bidirectional_total_bytes_per_s}}},
          {"host_link",
           {{"bandwidth_bytes_per_s", link.bandwidth_bytes_per_s},
            {"h2d_bytes_per_s", link.h2d_bytes_per_s},
            {"d2h_bytes_per_s", link.d2h_bytes_per_s},
            {"latency_s", link.latency_s},
            {"overlap_factor", link.overlap_factor},
            {"duplex", link.duplex_split ? "split" : "shared"}}},
          {"kernel_launch",
           {{"empty_kernel_s", data.empty_kernel_s},
            {"back_to_back_s", data.back_to_back_kernel_s},
            {"host_call_s", data.host_launch_call_s}}},
          {"globaltimer_resolution_s", data.globaltimer_resolution_s},
          {"spin_accuracy", spin},
          {"peak_flops", data.peak_flops},
          {"gemm_note", data.gemm_note},
          {"hbm_bytes_per_s", data.hbm_bytes_per_s},
          {"efficiency_sweeps",
           {{"gemm", sweep(data.gemm_sweep)},
            {"convolution", sweep(data.convolution_sweep)},
            {"memory", sweep(data.memory_sweep)}}}};
}

CalibrationData calibration_from_json(const nlohmann::json& document, const std::string& source_name)
{
  try {
    if (document.at("format") != "memsim-calibration" || document.at("version") != 1)
      throw InputError(source_name + ": at /format", "expected format 'memsim-calibration', version 1");
    CalibrationData data;
    const auto& gpu = document.at("gpu");
    data.gpu_name = gpu.at("name").get<std::string>();
    data.device_memory_bytes = gpu.at("memory_bytes").get<std::uint64_t>();
    data.multiprocessors = gpu.at("multiprocessors").get<int>();
    const std::string capability = gpu.at("compute_capability").get<std::string>();
    if (std::sscanf(capability.c_str(), "%d.%d", &data.compute_capability_major, &data.compute_capability_minor) != 2)
      throw InputError(source_name + ": at /gpu/compute_capability", "expected MAJOR.MINOR");
    data.driver_version = gpu.at("driver").get<std::string>();
    data.host_memory_bytes = document.at("host_memory_bytes").get<std::uint64_t>();
    auto transfers = [](const nlohmann::json& list) {
      std::vector<TransferPoint> points;
      for (const auto& point : list)
        points.push_back({point.at("bytes").get<std::uint64_t>(), point.at("median_s").get<double>(),
                          point.at("min_s").get<double>(), point.at("repetitions").get<std::size_t>()});
      return points;
    };
    data.h2d = transfers(document.at("h2d"));
    data.d2h = transfers(document.at("d2h"));
    const auto& bidirectional = document.at("bidirectional");
    data.bidirectional_bytes = bidirectional.at("bytes_each_way").get<std::uint64_t>();
    data.bidirectional_h2d_bytes_per_s = bidirectional.at("h2d_bytes_per_s").get<double>();
    data.bidirectional_d2h_bytes_per_s = bidirectional.at("d2h_bytes_per_s").get<double>();
    data.bidirectional_total_bytes_per_s = bidirectional.at("total_bytes_per_s").get<double>();
    const auto& launch = document.at("kernel_launch");
    data.empty_kernel_s = launch.at("empty_kernel_s").get<double>();
    data.back_to_back_kernel_s = launch.at("back_to_back_s").get<double>();
    data.host_launch_call_s = launch.at("host_call_s").get<double>();
    data.globaltimer_resolution_s = document.at("globaltimer_resolution_s").get<double>();
    for (const auto& point : document.at("spin_accuracy"))
      data.spin_accuracy.push_back({point.at("requested_s").get<double>(), point.at("measured_s").get<double>()});
    data.peak_flops = document.at("peak_flops").get<std::map<std::string, double>>();
    data.gemm_note = document.at("gemm_note").get<std::string>();
    data.hbm_bytes_per_s = document.at("hbm_bytes_per_s").get<double>();
    if (document.contains("efficiency_sweeps")) { // absent in files written before the sweeps existed
      const auto& sweeps = document.at("efficiency_sweeps");
      auto read_sweep = [&](const char* key, std::vector<SweepPoint>& points) {
        for (const auto& point : sweeps.at(key))
          points.push_back({point.at("work").get<double>(), point.at("seconds").get<double>()});
      };
      read_sweep("gemm", data.gemm_sweep);
      read_sweep("convolution", data.convolution_sweep);
      read_sweep("memory", data.memory_sweep);
    }
    return data;
  } catch (const nlohmann::json::exception& error) {
    throw InputError(source_name, fmt::format("not a memsim-calibration document: {}", error.what()));
  }
}

} // namespace memsim::runtime
