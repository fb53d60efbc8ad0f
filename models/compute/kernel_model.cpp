// The shape-aware kernel model. A GEMM is cut into output tiles; the tiles run in waves over the
// device's SMs, so a GEMM one tile larger than a full wave costs a whole extra wave (wave
// quantisation), and a ragged edge costs a whole tile (tile quantisation). Each tile runs at the
// device's calibrated best efficiency, less a pipeline fill that matters when K is small. The
// best tile shape is chosen as cuBLAS's heuristics would. Fused attention runs at its own
// calibrated efficiency (backward at its own share of it, short heads at a fill); everything else
// is bytes over the achieved memory bandwidth. A kernel known only by its FLOPs (a layer-list
// layer given by figures) runs at the calibrated GEMM efficiency.
#include "models/compute/compute_model.hpp"

#include <algorithm>
#include <cmath>

namespace stepsim {
namespace {

struct Tile {
  double m, n;
  double relative_efficiency; // smaller tiles reuse less data per load
};
constexpr Tile kTiles[] = {{256, 128, 1.0}, {128, 256, 1.0}, {128, 128, 0.92}, {128, 64, 0.8}, {64, 64, 0.6}};
constexpr double kMaxSplitK = 64; // the largest K split considered

double gemm_seconds(const Kernel& k, const Device& d, const std::string& precision)
{
  const auto& c       = d.calibration;
  const double per_sm = d.peak(precision) / d.sm_count * c.gemm_efficiency_at(precision);
  const double bandwidth = d.memory_bandwidth_Bps * c.memory_efficiency;
  double best         = INFINITY;
  for (const Tile& t : kTiles) {
    const double tiles = std::ceil(k.m / t.m) * std::ceil(k.n / t.n) * k.batch;
    // A GEMM with too few output tiles to fill the SMs but a long K (a convolution's weight
    // gradient reduces over batch × pixels) is split along K, as cuBLAS and cuDNN do: each part
    // runs on its own SM and the partial sums are added in fp32 afterwards.
    // A part is never shorter than 4 gemm_half_k of K; a shorter K runs that part length
    // (padded), so that a GEMM's time never falls when K grows past a split's threshold.
    for (double split = 1; split <= kMaxSplitK; split *= 2) {
      if (split > 1 && tiles * split > d.sm_count * 2.0)
        break;
      const double part = split > 1 ? std::max(k.k / split, 4 * c.gemm_half_k) : k.k;
      double waves      = std::ceil(tiles * split / d.sm_count);
      // The fill and drain of the K loop cost about gemm_half_k worth of K per tile.
      double tile_seconds = 2.0 * t.m * t.n * (part + c.gemm_half_k) / (per_sm * t.relative_efficiency);
      double reduction    = split > 1 ? (split + 1) * k.m * k.n * k.batch * 4.0 / bandwidth : 0.0;
      best                = std::min(best, waves * tile_seconds + reduction);
    }
  }
  double memory = k.bytes / bandwidth;
  return std::max(best, memory) + c.kernel_overhead_s * k.launches;
}

double attention_seconds(const Kernel& k, const Device& d, const std::string& precision)
{
  const auto& c = d.calibration;
  // Short sequences leave the kernel's tiles under-filled.
  double fill   = k.n / (k.n + 256.0);
  double peak   = d.peak(precision == "fp8" ? "bf16" : precision);
  double math   = k.flops() / (peak * c.attention_efficiency_of(k.implementation, k.backward, k.k) * fill);
  double memory = k.bytes / (d.memory_bandwidth_Bps * c.memory_efficiency);
  return std::max(math, memory) + c.kernel_overhead_s;
}

// FLOPs from a profiler or a paper are almost all a layer's matrix products (convolutions, linear
// layers, attention), so they run at the efficiency the device's calibration measured for large,
// well-shaped GEMMs. Without a shape there are no wave or tile effects: for small layers this is
// the best case, and the kernels form of a layer gives them. (The layer's bandwidth-bound bytes
// are a Memory kernel of their own.)
double opaque_seconds(const Kernel& k, const Device& d, const std::string& precision)
{
  return k.flops() / (d.peak(precision) * d.calibration.gemm_efficiency_at(precision)) + d.calibration.kernel_overhead_s;
}

double kernel_seconds(const Kernel& k, const Device& d, const std::string& precision)
{
  switch (k.kind) {
  case KernelKind::Gemm: return gemm_seconds(k, d, precision);
  case KernelKind::Attention: return attention_seconds(k, d, precision);
  case KernelKind::Opaque: return opaque_seconds(k, d, precision);
  case KernelKind::Memory:
    return k.bytes / (d.memory_bandwidth_Bps * d.calibration.memory_efficiency) +
           d.calibration.kernel_overhead_s * k.launches;
  }
  return 0;
}

const bool registered = ComputeModelRegistry::add(
    "kernel", "shape-aware: GEMM tile and wave quantisation, fused attention, bandwidth-bound kernels",
    ComputeModel{kernel_seconds});

} // namespace
} // namespace stepsim
