// The shape-aware kernel model (models/compute/kernel_model.cpp): a GEMM never gets faster when it grows,
// and it costs a whole extra wave when its tiles no longer fit the device's SMs at once.
#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace stepsim;

namespace {

double gemm_seconds(const Device& d, double m, double n, double k, const std::string& dtype = "bf16")
{
  const auto& model = ComputeModelRegistry::get("kernel", "compute_model");
  return model.kernel_seconds(gemm("g", m, n, k, dtype == "fp32" || dtype == "tf32" ? 4 : 2), d, dtype);
}

} // namespace

TEST_CASE("kernel model: a GEMM's time never falls when M, N or K grows", "[kernel_model]")
{
  for (const char* name : {"A100-SXM4-80GB", "H100-SXM", "V100-SXM2-32GB", "T4"}) {
    const Device d = load_device(name, "device");
    for (const char* dtype : {"bf16", "fp32"}) {
      // Sizes from 1 to 16k, ragged ones included (tile edges, split-K thresholds, waves).
      std::vector<double> sizes;
      for (double s = 1; s <= 16384; s = std::ceil(s * 1.07 + 1))
        sizes.push_back(s);
      for (double other : {64.0, 1000.0, 4096.0, 12288.0}) {
        for (int dim = 0; dim < 3; ++dim) {
          double previous = 0;
          for (double s : sizes) {
            const double m = dim == 0 ? s : other, n = dim == 1 ? s : other, k = dim == 2 ? s : other;
            const double t = gemm_seconds(d, m, n, k, dtype);
            INFO(name << " " << dtype << " m=" << m << " n=" << n << " k=" << k);
            REQUIRE(std::isfinite(t));
            REQUIRE(t >= previous * (1 - 1e-12));
            previous = t;
          }
        }
      }
    }
  }
}

TEST_CASE("kernel model: one tile more than the SMs hold costs a second wave", "[kernel_model]")
{
  for (const char* name : {"A100-SXM4-80GB", "H100-SXM", "B200"}) {
    const Device d = load_device(name, "device");
    INFO(name << ", " << d.sm_count << " SMs");
    // 256×128 output tiles (the largest), a × b of them with a × b = the SM count, and a long K
    // so the tiles' math dominates the launch overhead and the memory traffic.
    int a = 1;
    for (int f = 1; f * f <= d.sm_count; ++f)
      if (d.sm_count % f == 0)
        a = f;
    const double b = d.sm_count / a, k = 16384, n = 128.0 * a;
    const double one_less = gemm_seconds(d, 256.0 * (b - 1), n, k);
    const double full     = gemm_seconds(d, 256.0 * b, n, k);
    const double one_more = gemm_seconds(d, 256.0 * b + 1, n, k);
    // Inside a wave, more tiles cost nothing: the SMs run them side by side.
    CHECK(full == Approx(one_less).epsilon(0.01));
    // One row more spills a row of tiles into a second wave: a step, not a 1/(256 b) increase.
    CHECK(one_more / full > 1.25);
    // Two full waves cost twice one (the step is the wave, not a constant).
    const double two_waves = gemm_seconds(d, 256.0 * 2 * b, n, k);
    const double overhead  = d.calibration.kernel_overhead_s; // once per launch, not per wave
    CHECK((two_waves - overhead) / (full - overhead) == Approx(2.0).epsilon(0.02));
  }
}

TEST_CASE("kernel model: a large GEMM runs at the calibrated efficiency; a small-K one below it", "[kernel_model]")
{
  Device d                         = load_device("H100-SXM", "device");
  d.calibration.gemm_efficiency_by_dtype.clear();
  d.calibration.gemm_efficiency    = 0.7;
  const double m = 256.0 * d.sm_count, n = 1024, k = 65536; // 256×128 tiles: exactly eight full waves
  const double achieved = 2 * m * n * k / gemm_seconds(d, m, n, k);
  CHECK(achieved / d.peak("bf16") == Approx(0.7 * k / (k + d.calibration.gemm_half_k)).epsilon(0.01));
  // Small K: the pipeline fill (gemm_half_k) halves the efficiency at K = gemm_half_k.
  d.calibration.kernel_overhead_s = 0;
  const double small_k = d.calibration.gemm_half_k;
  const double rate    = 2 * m * n * small_k / gemm_seconds(d, m, n, small_k);
  CHECK(rate / achieved == Approx(0.5).epsilon(0.05));
  // A per-dtype figure overrides the common one at that dtype only.
  const double fp32_common = gemm_seconds(d, m, n, k, "fp32"), tf32_common = gemm_seconds(d, m, n, k, "tf32");
  d.calibration.gemm_efficiency_by_dtype["fp32"] = 0.35;
  CHECK(gemm_seconds(d, m, n, k, "fp32") / fp32_common == Approx(2.0).epsilon(0.01));
  CHECK(gemm_seconds(d, m, n, k, "tf32") == tf32_common);
}

TEST_CASE("A device runs the precisions its file gives a peak for, and the emulations it states", "[device]")
{
  // bf16 on Volta runs on the CUDA cores, at the fp32 rate, as configs/devices/V100-SXM2-32GB.json states.
  const Device v100 = load_device("V100-SXM2-32GB", "gpu");
  CHECK(v100.runs("bf16"));
  CHECK(v100.peak("bf16") == v100.peak("fp32"));
  CHECK(v100.peak("fp16") > v100.peak("bf16"));
  CHECK_FALSE(v100.runs("fp8"));
  CHECK_FALSE(v100.runs("tf32"));
  CHECK(v100.precisions_run() == "fp32, fp16 and bf16 (emulated at the fp32 rate)");
  const Device a100 = load_device("A100-SXM4-80GB", "gpu");
  CHECK_FALSE(a100.runs("fp8"));
  CHECK(a100.emulated.empty());
  const Device h100 = load_device("H100-SXM", "gpu");
  for (const char* p : {"fp32", "tf32", "fp16", "bf16", "fp8"})
    CHECK(h100.runs(p));
}

TEST_CASE("kernel model: fused attention runs at the figure of the implementation that runs it", "[kernel_model]")
{
  // H100's file gives FlashAttention-2 (its common figure), cuDNN and FlashAttention-3 their own
  // (a kernel benchmark's: cuDNN about 1.6 times as fast as FlashAttention-2); its calibration
  // replaces cuDNN's with what NeMo's runs sustain (configs/calibration/H100-SXM.json).
  const Device h100 = load_device("H100-SXM", "gpu");
  const auto& model = ComputeModelRegistry::get("kernel", "compute_model");
  auto seconds      = [&](const Device& d, const std::string& implementation) {
    Kernel k         = attention_kernel("a", 32, 8192, 128, true, false, 2);
    k.implementation = implementation;
    return model.kernel_seconds(k, d, "bf16");
  };
  const double fa2 = seconds(h100, "flash-attention-2"), cudnn = seconds(h100, "cudnn"),
               fa3 = seconds(h100, "flash-attention-3");
  CHECK(seconds(h100, "") == Approx(fa2)); // the common figure is FlashAttention-2's
  const auto& figure = h100.calibration;
  CHECK(figure.attention_efficiency_of("cudnn") != Approx(figure.attention_efficiency));
  CHECK(fa2 / cudnn == Approx(figure.attention_efficiency_of("cudnn") / figure.attention_efficiency).epsilon(0.02));
  CHECK(fa3 < cudnn);
  CHECK(fa3 < fa2);
  // A device without a figure for an implementation runs it at its common one.
  const Device a100 = load_device("A100-SXM4-80GB", "gpu");
  CHECK(seconds(a100, "cudnn") == Approx(seconds(a100, "")));
}
