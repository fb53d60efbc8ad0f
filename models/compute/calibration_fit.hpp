// Fitting the kernel cost model (models/compute/kernel_model.cpp) to kernel times measured on a real GPU
// by the calibration kit (tools/calibrate/calibrate.py), and making synthetic measurement files
// from the model itself to test the fit.
//
// A measurement file is JSON: `device` (the GPU's name as torch reports it), optional
// `stepsim_device` (the catalogue name), `date`, `versions`, and `rows`, each a measured kernel:
//   {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "batch": 1, "dtype": "bf16", "seconds": 1.9e-4}
//   {"kind": "attention", "batch_heads": 32, "seq": 2048, "head_dim": 128, "causal": true,
//    "backward": false, "dtype": "bf16", "seconds": 4.1e-4}
//   {"kind": "memory", "name": "copy", "bytes": 268435456, "dtype": "bf16", "seconds": 9.0e-5}
//   {"kind": "collective", "op": "all_reduce", "bytes": 1048576, "gpus": 8, "seconds": 3.1e-5}
// Optional `attention_kernel`: the fused-attention implementation that ran the attention rows
// (one of kAttentionKernels: torch's scaled_dot_product_attention dispatches to cuDNN's or to its
// bundled FlashAttention-2 by version and GPU); the fit then gives that implementation its
// figures instead of the device's common one. `bytes` of a memory kernel counts what it reads and
// writes. Collective rows are read and listed, not fitted: the network's calibration is
// configs/calibration/links.json.
#pragma once

#include "models/device.hpp"
#include "sim/core/kernel.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

struct MeasuredKernel {
  Kernel kernel;
  std::string dtype;
  double seconds = 0;
};

struct MeasurementFile {
  std::string path;
  std::string gpu_name;       // as torch names it ("NVIDIA H200")
  std::string stepsim_device; // the catalogue name when the file gives one
  std::string date;
  std::string versions;       // "torch 2.5.1, CUDA 12.4, NCCL 2.21.5" as far as the file says
  std::string attention_kernel; // the implementation that ran the attention rows; empty: not known
  std::vector<MeasuredKernel> kernels;
  int collective_rows = 0;
};

// Reads and checks a measurement file; every problem names its JSON path (InputError).
MeasurementFile read_measurements(const std::string& path);

// Seconds the kernel model predicts for a measured kernel with a given calibration.
double predicted_seconds(const MeasuredKernel& row, const Device& device);

struct FitSummary {
  std::string kind; // "gemm fp16", "attention", "memory", "all"
  int train_rows = 0, held_out_rows = 0;
  double train_mape = 0, held_out_mape = 0; // mean |predicted - measured| / measured
};

struct CalibrationFit {
  DeviceCalibration calibration; // the fitted parameters (the device's others unchanged)
  std::vector<FitSummary> summary; // by kind, then "all"
  double held_out_mape = 0;
  double train_mape    = 0;
};

// Every third row (index 2, 5, 8, ...) is held out; the others fit the parameters by least
// squares on relative error: coordinate descent, each parameter by a grid scan refined by golden
// section, from the model's neutral defaults (not from the device's shipped calibration), so the
// result depends only on the measurements and the device's datasheet figures.
CalibrationFit fit_calibration(const std::vector<MeasuredKernel>& rows, const Device& device);

// The calibration file configs/calibration/DEVICE.json for a fit, with its source.
nlohmann::json calibration_file(const CalibrationFit& fit, const MeasurementFile& measurements,
                                const std::string& device_name);

// A measurement file the kernel model would produce on `device` with its calibration: the
// shapes the kit sweeps, each time multiplied by 1 + u, u uniform in [-noise, noise] from a
// fixed-seed generator (the same file for the same seed on every machine).
nlohmann::json synthetic_measurements(const Device& device, unsigned long long seed, double noise);

} // namespace stepsim
