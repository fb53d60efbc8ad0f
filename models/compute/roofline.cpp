// The roofline: each kernel takes the longer of its FLOPs at the calibrated fraction of the peak
// and its bytes at the calibrated fraction of the memory bandwidth. Blind to shapes; kept as the
// simplest baseline a user can compare the kernel model against.
#include "models/compute/compute_model.hpp"

#include <algorithm>

namespace stepsim {
namespace {

double roofline_seconds(const Kernel& k, const Device& d, const std::string& precision)
{
  const auto& c = d.calibration;
  double math   = k.flops() / (d.peak(precision) * c.gemm_efficiency);
  double memory = k.bytes / (d.memory_bandwidth_Bps * c.memory_efficiency);
  return std::max(math, memory);
}

const bool registered = ComputeModelRegistry::add(
    "roofline", "peak × calibrated efficiency against memory bandwidth, no shape effects",
    ComputeModel{roofline_seconds});

} // namespace
} // namespace stepsim
