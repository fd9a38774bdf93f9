#pragma once
// Analytic traces: op-level training iterations (forward, loss, backward, Adam update) of a CNN or a transformer
// stack, with flops and bytes per op and times from a roofline of one GPU. traces/ does not depend on hwmodels, so
// the caller passes the GPU's numbers.
#include "memsim/traces/trace.hpp"

#include <string>

namespace memsim {

struct Roofline {
  double peak_flops = 0;    // for the trace's dtype
  double hbm_bandwidth = 0; // bytes/s
  double launch_s = 0;      // per-op launch overhead
  std::string device_model; // recorded as source.device, so the cost model uses time_s as is on that GPU
};

struct CnnSpec {
  int depth = 16;             // conv layers (VGG-style) or residual blocks (ResNet-style)
  double channel_scale = 1.0; // multiplies the 64..512 channel widths
  int image = 224;
  int batch = 64;
  int classes = 1000;
  std::string dtype = "fp32";
  bool residual = false;
};

struct TransformerSpec {
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int seq = 512;
  int batch = 8;
  int vocab = 0; // 0: no embedding / LM head, the loss reads the last layer's output
  std::string dtype = "fp32";
};

std::size_t dtype_bytes(const std::string& dtype); // throws InputError for an unknown dtype

Trace generate_cnn(const CnnSpec& spec, const Roofline& roofline);
Trace generate_transformer(const TransformerSpec& spec, const Roofline& roofline);

} // namespace memsim
