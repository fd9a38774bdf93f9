#pragma once
// `memsim-cuda calibrate`: the measurements (GPU needed). Writing the Machine file is calibration.cpp.
#include "cublas_loader.hpp"

#include "memsim/runtime/calibration.hpp"

namespace memsim::runtime {

struct CalibrateOptions {
  int gpu = 0;
  std::uint64_t max_transfer_bytes = 1ull << 30; // sizes 4 KiB, x4, ... up to this
  bool verbose = true;                           // progress on stderr
};

CalibrationData calibrate_device(const CalibrateOptions& options, const CublasLibrary* cublas,
                                 const std::string& cublas_note);

} // namespace memsim::runtime
