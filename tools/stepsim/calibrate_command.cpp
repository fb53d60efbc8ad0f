// `stepsim calibrate fit MEASUREMENTS.json [-o configs/calibration/DEVICE.json] [--device NAME]`:
// fits the kernel cost model to kernel times measured by the calibration kit
// (tools/calibrate/calibrate.py) and writes the device's calibration, which every scenario on that
// device then uses. `stepsim calibrate synth --device NAME -o FILE`: a measurement file made by
// the model itself with known parameters and fixed-seed noise, to check the fit.
#include "models/compute/calibration_fit.hpp"
#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <memory>
#include <optional>

namespace stepsim {
namespace {

struct FitOptions {
  std::string measurements, out, device;
};

struct SynthOptions {
  std::string device, out;
  unsigned long long seed = 1;
  double noise            = 0.03;
  std::optional<double> gemm_efficiency, gemm_half_k, attention_efficiency, memory_efficiency, kernel_overhead_us;
};

std::string device_for(const MeasurementFile& m, const std::string& flag)
{
  if (!flag.empty())
    return flag;
  if (!m.stepsim_device.empty())
    return m.stepsim_device;
  // The GPU as torch names it ("NVIDIA H100 80GB HBM3") where the catalogue knows that name.
  const std::string known = catalogue_device_name(m.gpu_name);
  if (const auto names = device_names(); std::find(names.begin(), names.end(), known) != names.end())
    return known;
  std::string near = closest_name(m.gpu_name, device_names());
  throw InputError({fmt::format("{}.stepsim_device: missing, and the GPU \"{}\" is not a catalogue name; pass --device "
                                "NAME{} (stepsim devices lists them)",
                                m.path, m.gpu_name, near.empty() ? "" : fmt::format(" (perhaps \"{}\")", near))});
}

int run_fit(const FitOptions& o)
{
  MeasurementFile m       = read_measurements(o.measurements);
  const std::string name  = device_for(m, o.device);
  const Device device     = load_device(name, o.device.empty() ? o.measurements + ".stepsim_device" : "--device");
  CalibrationFit fit      = fit_calibration(m.kernels, device);
  const auto& c           = fit.calibration;
  const auto& shipped     = device.calibration;

  fmt::print("fit of {} on {} (GPU \"{}\", measured {}): {} kernel rows{}\n\n", name, m.path, m.gpu_name, m.date,
             m.kernels.size(),
             m.collective_rows > 0 ? fmt::format(", {} collective rows listed but not fitted", m.collective_rows) : "");
  fmt::print("{:<32}{:>12}{:>12}\n", "parameter", "fitted", "in use now");
  for (const auto& [dtype, value] : c.gemm_efficiency_by_dtype)
    fmt::print("{:<32}{:>12.4f}{:>12.4f}\n", "gemm_efficiency " + dtype, value, shipped.gemm_efficiency_at(dtype));
  fmt::print("{:<32}{:>12.4g}{:>12.4g}\n", "gemm_half_k", c.gemm_half_k, shipped.gemm_half_k);
  // Rows of a named attention kernel are fitted as that kernel's figures (calibration_file).
  const std::string& kernel = m.attention_kernel;
  const std::string suffix  = kernel.empty() ? "" : " " + kernel;
  fmt::print("{:<32}{:>12.4f}{:>12.4f}\n", "attention_efficiency" + suffix, c.attention_efficiency,
             shipped.attention_efficiency_of(kernel));
  const auto in_use = shipped.attention_shape_of(kernel);
  fmt::print("{:<32}{:>12.4f}{:>12.4f}\n", "attention_backward_ratio" + suffix, c.attention_backward_ratio,
             in_use.backward_ratio);
  fmt::print("{:<32}{:>12.4g}{:>12.4g}\n", "attention_half_head_dim" + suffix, c.attention_half_head_dim,
             in_use.half_head_dim);
  fmt::print("{:<32}{:>12.4f}{:>12.4f}\n", "memory_efficiency", c.memory_efficiency, shipped.memory_efficiency);
  fmt::print("{:<32}{:>10.2f}us{:>10.2f}us\n\n", "kernel_overhead", c.kernel_overhead_s * 1e6,
             shipped.kernel_overhead_s * 1e6);
  fmt::print("{:<16}{:>8}{:>10}{:>13}{:>16}\n", "kernels", "fitted", "held out", "fitted MAPE", "held-out MAPE");
  for (const auto& s : fit.summary)
    fmt::print("{:<16}{:>8}{:>10}{:>12.2f}%{:>15.2f}%\n", s.kind, s.train_rows, s.held_out_rows, s.train_mape * 100,
               s.held_out_mape * 100);
  if (o.out.empty()) {
    fmt::print("\n(no -o given: nothing written; configs/calibration/{}.json is where a scenario looks)\n", name);
    return 0;
  }
  write_text_file(o.out, calibration_file(fit, m, name).dump(2) + "\n");
  fmt::print("\nwrote {}\n", o.out);
  return 0;
}

int run_synth(const SynthOptions& o)
{
  Device device = load_device(o.device, "--device");
  auto& c       = device.calibration;
  Problems problems;
  auto fraction = [&](const std::optional<double>& v, const char* flag, double& field) {
    if (!v)
      return;
    if (!(*v > 0 && *v <= 1))
      problems.add(flag, fmt::format("expected a fraction in (0, 1], got {}", *v));
    field = *v;
  };
  if (o.gemm_efficiency) {
    fraction(o.gemm_efficiency, "--gemm-efficiency", c.gemm_efficiency);
    c.gemm_efficiency_by_dtype.clear();
  }
  fraction(o.attention_efficiency, "--attention-efficiency", c.attention_efficiency);
  fraction(o.memory_efficiency, "--memory-efficiency", c.memory_efficiency);
  if (o.gemm_half_k) {
    if (!(*o.gemm_half_k > 0 && *o.gemm_half_k < 1e6))
      problems.add("--gemm-half-k", fmt::format("expected a K from 1 to 1e6, got {}", *o.gemm_half_k));
    c.gemm_half_k = *o.gemm_half_k;
  }
  if (o.kernel_overhead_us) {
    if (!(*o.kernel_overhead_us >= 0 && *o.kernel_overhead_us < 1e4))
      problems.add("--kernel-overhead-us", fmt::format("expected microseconds from 0 to 1e4, got {}", *o.kernel_overhead_us));
    c.kernel_overhead_s = *o.kernel_overhead_us * 1e-6;
  }
  if (!(o.noise >= 0 && o.noise < 1))
    problems.add("--noise", fmt::format("expected a relative spread from 0 to 1, got {}", o.noise));
  problems.throw_if_any();
  write_text_file(o.out, synthetic_measurements(device, o.seed, o.noise).dump(1) + "\n");
  fmt::print("wrote {}: kernel times of {} from the model, ±{:g}% noise (seed {})\n", o.out, device.name,
             o.noise * 100, o.seed);
  return 0;
}

} // namespace

std::function<int()> setup_calibrate_network(CLI::App& calibrate); // calibrate_network_command.cpp

namespace {

std::function<int()> setup(CLI::App& sub)
{
  sub.require_subcommand(1);
  auto fit = std::make_shared<FitOptions>();
  CLI::App* f = sub.add_subcommand("fit", "fit the kernel model to a measurement file and write the calibration");
  f->add_option("MEASUREMENTS", fit->measurements, "measurement JSON written by tools/calibrate/calibrate.py")
      ->required();
  f->add_option("-o,--out", fit->out, "calibration file to write, normally configs/calibration/DEVICE.json");
  f->add_option("--device", fit->device, "catalogue name of the measured GPU (default: the file's stepsim_device)");

  auto synth = std::make_shared<SynthOptions>();
  CLI::App* s = sub.add_subcommand("synth", "write a measurement file made by the kernel model with known parameters");
  s->add_option("--device", synth->device, "catalogue name of the device")->required();
  s->add_option("-o,--out", synth->out, "measurement file to write")->required();
  s->add_option("--seed", synth->seed, "seed of the noise (default 1)");
  s->add_option("--noise", synth->noise, "relative noise: each time times 1+u, u uniform in [-noise, noise] (0.03)");
  s->add_option("--gemm-efficiency", synth->gemm_efficiency, "known gemm_efficiency (every dtype)");
  s->add_option("--gemm-half-k", synth->gemm_half_k, "known gemm_half_k");
  s->add_option("--attention-efficiency", synth->attention_efficiency, "known attention_efficiency");
  s->add_option("--memory-efficiency", synth->memory_efficiency, "known memory_efficiency");
  s->add_option("--kernel-overhead-us", synth->kernel_overhead_us, "known kernel_overhead in microseconds");
  sub.footer("Examples:\n  stepsim calibrate fit h200.json -o configs/calibration/H200-SXM.json\n"
             "  stepsim calibrate synth --device H200-SXM --gemm-efficiency 0.7 -o synth.json && stepsim calibrate fit "
             "synth.json");
  auto network = setup_calibrate_network(sub);
  return [f, s, fit, synth, network] { return f->parsed() ? run_fit(*fit) : s->parsed() ? run_synth(*synth) : network(); };
}

const bool registered = CommandRegistry::add(
    "calibrate", "fit the kernel cost model to measured kernel times (fit), make a synthetic measurement file (synth), "
                 "or fit the network to nccl-tests logs (network)",
    Command{setup});

} // namespace
} // namespace stepsim
