#include "models/compute/calibration_fit.hpp"

#include "models/compute/compute_model.hpp"
#include "sim/input/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

namespace stepsim {

namespace {

const std::vector<std::string> kDtypes = {"fp32", "tf32", "fp16", "bf16", "fp8"};

double element_bytes(const std::string& dtype)
{
  if (dtype == "fp32" || dtype == "tf32")
    return 4;
  return dtype == "fp8" ? 1 : 2;
}

const ComputeModel& kernel_model() { return ComputeModelRegistry::get("kernel", "compute_model"); }

bool held_out(size_t index) { return index % 3 == 2; }

std::string kind_of(const MeasuredKernel& row)
{
  switch (row.kernel.kind) {
  case KernelKind::Gemm: return "gemm " + row.dtype;
  case KernelKind::Attention: return "attention";
  case KernelKind::Memory: return "memory";
  case KernelKind::Opaque: return "opaque";
  }
  return "";
}

// 4 significant digits: the file reads well and the fit is not that precise anyway.
double rounded(double x)
{
  if (x == 0 || !std::isfinite(x))
    return x;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

// One parameter of the fit, searched in [lo, hi] (on a log scale when `log`).
struct Parameter {
  std::string name;
  double lo, hi;
  bool log;
  std::function<double&(DeviceCalibration&)> value;
};

} // namespace

MeasurementFile read_measurements(const std::string& path)
{
  nlohmann::json doc = read_json_file(path);
  Problems problems;
  JsonReader r(doc, path, problems);
  MeasurementFile file;
  file.path           = path;
  file.gpu_name       = r.text("device");
  file.stepsim_device = r.text("stepsim_device", std::string());
  file.date           = r.text("date", std::string("an unknown date"));
  if (const auto* v = r.raw("versions"); v != nullptr && v->is_object()) {
    for (const auto& [key, value] : v->items())
      file.versions += (file.versions.empty() ? "" : ", ") + key + " " +
                       (value.is_string() ? value.get<std::string>() : value.dump());
  }
  for (const char* key : {"format", "gpus", "sm_count", "notes", "synthetic_calibration", "command"})
    r.raw(key);
  if (r.has("attention_kernel"))
    file.attention_kernel =
        r.text("attention_kernel", std::nullopt,
               std::vector<std::string>(std::begin(kAttentionKernels), std::end(kAttentionKernels)));
  for (auto& row : r.array_of_objects("rows", true)) {
    const std::string kind = row.text("kind", std::nullopt, {"gemm", "attention", "memory", "collective"});
    row.raw("name");
    row.raw("label");
    row.raw("timing");       // "graph" or "eager": how the kit timed the row (tools/calibrate/calibrate.py)
    row.raw("sm_clock_mhz"); // the SM clock NVML read just after the row
    if (kind == "collective") {
      row.text("op");
      row.number("bytes"); // a measurement record: the key names the unit
      row.integer("gpus", std::nullopt, 2);
      row.number("seconds", std::nullopt, 0, true);
      row.reject_unknown_keys();
      ++file.collective_rows;
      continue;
    }
    MeasuredKernel m;
    m.dtype   = row.text("dtype", std::nullopt, kDtypes);
    m.seconds = row.number("seconds", std::nullopt, 0, true);
    const double eb = element_bytes(m.dtype);
    if (kind == "gemm") {
      m.kernel = gemm("gemm", row.number("m", std::nullopt, 1), row.number("n", std::nullopt, 1),
                      row.number("k", std::nullopt, 1), eb, row.number("batch", 1.0, 1));
    } else if (kind == "attention") {
      const double heads = row.number("batch_heads", std::nullopt, 1);
      const double seq   = row.number("seq", std::nullopt, 1);
      const double dim   = row.number("head_dim", std::nullopt, 1);
      m.kernel = attention_kernel("attention", heads, seq, dim, row.boolean("causal", true),
                                  row.boolean("backward", false), eb);
    } else if (kind == "memory") {
      m.kernel = memory_kernel(row.text("name", std::string("memory")), row.number("bytes"));
      if (m.kernel.bytes <= 0)
        row.problems().add(row.path_of("bytes"), "expected the bytes the kernel reads and writes, above 0");
    }
    row.reject_unknown_keys();
    if (!kind.empty())
      file.kernels.push_back(std::move(m));
  }
  r.reject_unknown_keys();
  problems.throw_if_any();
  if (file.kernels.size() < 3)
    throw InputError({fmt::format("{}.rows: {} kernel rows (gemm, attention, memory); a fit needs at least 3 "
                                  "(every third row is held out to test it)",
                                  path, file.kernels.size())});
  return file;
}

double predicted_seconds(const MeasuredKernel& row, const Device& device)
{
  return kernel_model().kernel_seconds(row.kernel, device, row.dtype);
}

CalibrationFit fit_calibration(const std::vector<MeasuredKernel>& rows, const Device& device)
{
  // Start from the model's neutral defaults: the fit must not lean on the shipped calibration.
  Device d = device;
  d.calibration = DeviceCalibration{};
  d.calibration.comm_compute_interference = device.calibration.comm_compute_interference;

  std::map<std::string, int> train_by_kind;
  for (size_t i = 0; i < rows.size(); ++i)
    if (!held_out(i))
      ++train_by_kind[kind_of(rows[i])];

  std::vector<Parameter> parameters;
  bool any_gemm = false;
  for (const auto& dtype : kDtypes)
    if (train_by_kind.count("gemm " + dtype)) {
      any_gemm = true;
      d.calibration.gemm_efficiency_by_dtype[dtype] = d.calibration.gemm_efficiency;
      parameters.push_back({"gemm_efficiency " + dtype, 0.02, 1.0, false,
                            [dtype](DeviceCalibration& c) -> double& { return c.gemm_efficiency_by_dtype[dtype]; }});
    }
  if (any_gemm)
    parameters.push_back({"gemm_half_k", 1, 8192, true, [](DeviceCalibration& c) -> double& { return c.gemm_half_k; }});
  if (train_by_kind.count("attention")) {
    parameters.push_back(
        {"attention_efficiency", 0.02, 1.0, false, [](DeviceCalibration& c) -> double& { return c.attention_efficiency; }});
    // Backward's share and the head dimension's fill, where the rows can tell them apart: both
    // passes measured, more than one head dimension.
    bool forward = false, backward = false;
    std::set<double> head_dims;
    for (size_t i = 0; i < rows.size(); ++i)
      if (!held_out(i) && rows[i].kernel.kind == KernelKind::Attention) {
        (rows[i].kernel.backward ? backward : forward) = true;
        head_dims.insert(rows[i].kernel.k);
      }
    if (forward && backward)
      parameters.push_back({"attention_backward_ratio", 0.2, 2.0, false,
                            [](DeviceCalibration& c) -> double& { return c.attention_backward_ratio; }});
    if (head_dims.size() > 1) {
      d.calibration.attention_half_head_dim = 1; // searched on a log scale from 1
      parameters.push_back({"attention_half_head_dim", 1, 1024, true,
                            [](DeviceCalibration& c) -> double& { return c.attention_half_head_dim; }});
    }
  }
  if (train_by_kind.count("memory") || any_gemm)
    parameters.push_back(
        {"memory_efficiency", 0.02, 1.0, false, [](DeviceCalibration& c) -> double& { return c.memory_efficiency; }});
  parameters.push_back(
      {"kernel_overhead", 1e-8, 2e-4, true, [](DeviceCalibration& c) -> double& { return c.kernel_overhead_s; }});

  auto loss = [&](const DeviceCalibration& c) {
    Device trial      = d;
    trial.calibration = c;
    double sum        = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (held_out(i))
        continue;
      const double e = predicted_seconds(rows[i], trial) / rows[i].seconds - 1;
      sum += e * e;
    }
    return std::isfinite(sum) ? sum : INFINITY;
  };

  // Coordinate descent: each parameter in turn by a grid scan over its range, refined by golden
  // section between the best point's neighbours (the loss is not smooth: tiles and waves step).
  constexpr int kGrid = 48, kGolden = 40, kRounds = 60;
  DeviceCalibration c = d.calibration;
  double best         = loss(c);
  for (int round = 0; round < kRounds; ++round) {
    const double before = best;
    for (const auto& p : parameters) {
      auto to_value = [&](double u) { return p.log ? std::exp(u) : u; };
      const double lo = p.log ? std::log(p.lo) : p.lo, hi = p.log ? std::log(p.hi) : p.hi;
      auto at = [&](double u) {
        DeviceCalibration trial = c;
        p.value(trial)          = to_value(u);
        return loss(trial);
      };
      int best_i       = -1;
      double best_grid = INFINITY;
      for (int i = 0; i <= kGrid; ++i) {
        const double value = at(lo + (hi - lo) * i / kGrid);
        if (value < best_grid) {
          best_grid = value;
          best_i    = i;
        }
      }
      double a = lo + (hi - lo) * std::max(0, best_i - 1) / kGrid;
      double b = lo + (hi - lo) * std::min(kGrid, best_i + 1) / kGrid;
      const double phi = (std::sqrt(5.0) - 1) / 2;
      double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
      double f1 = at(x1), f2 = at(x2);
      for (int it = 0; it < kGolden; ++it) {
        if (f1 <= f2) {
          b = x2, x2 = x1, f2 = f1;
          x1 = b - phi * (b - a), f1 = at(x1);
        } else {
          a = x1, x1 = x2, f1 = f2;
          x2 = a + phi * (b - a), f2 = at(x2);
        }
      }
      const double u  = f1 <= f2 ? x1 : x2;
      const double fu = std::min(f1, f2);
      // Keep the current value unless the search found a strictly better one.
      if (fu < best) {
        p.value(c) = to_value(u);
        best       = fu;
      }
      if (best_grid < best) { // a grid point can beat the refined interval's interior
        p.value(c) = to_value(lo + (hi - lo) * best_i / kGrid);
        best       = best_grid;
      }
    }
    if (before - best <= 1e-12 * std::max(1.0, before))
      break;
  }
  // The round figures written to the file are the ones judged.
  for (auto& [dtype, value] : c.gemm_efficiency_by_dtype)
    value = rounded(value);
  c.gemm_half_k          = rounded(c.gemm_half_k);
  c.attention_efficiency = rounded(c.attention_efficiency);
  c.attention_backward_ratio = rounded(c.attention_backward_ratio);
  c.attention_half_head_dim  = rounded(c.attention_half_head_dim);
  c.memory_efficiency    = rounded(c.memory_efficiency);
  c.kernel_overhead_s    = rounded(c.kernel_overhead_s);
  for (const char* common : {"bf16", "fp16", "tf32", "fp32", "fp8"})
    if (auto it = c.gemm_efficiency_by_dtype.find(common); it != c.gemm_efficiency_by_dtype.end()) {
      c.gemm_efficiency = it->second;
      break;
    }

  CalibrationFit fit;
  fit.calibration   = c;
  Device fitted     = d;
  fitted.calibration = c;
  std::map<std::string, FitSummary> by_kind;
  FitSummary all{"all"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const double error = std::fabs(predicted_seconds(rows[i], fitted) / rows[i].seconds - 1);
    for (FitSummary* s : {&by_kind[kind_of(rows[i])], &all}) {
      if (held_out(i)) {
        ++s->held_out_rows;
        s->held_out_mape += error;
      } else {
        ++s->train_rows;
        s->train_mape += error;
      }
    }
  }
  by_kind.emplace("all", all);
  for (auto& [kind, s] : by_kind) {
    s.kind = kind;
    s.train_mape /= std::max(1, s.train_rows);
    s.held_out_mape /= std::max(1, s.held_out_rows);
    if (kind != "all")
      fit.summary.push_back(s);
  }
  fit.summary.push_back(by_kind["all"]);
  fit.held_out_mape = by_kind["all"].held_out_mape;
  fit.train_mape    = by_kind["all"].train_mape;
  return fit;
}

nlohmann::json calibration_file(const CalibrationFit& fit, const MeasurementFile& measurements,
                                const std::string& device_name)
{
  const auto& c = fit.calibration;
  bool gemm = false, attention = false, memory = false;
  for (const auto& s : fit.summary) {
    gemm      = gemm || s.kind.rfind("gemm", 0) == 0;
    attention = attention || s.kind == "attention";
    memory    = memory || s.kind == "memory";
  }
  nlohmann::json out = nlohmann::json::object();
  out["device"]      = device_name;
  if (gemm) {
    out["gemm_efficiency"]          = c.gemm_efficiency;
    out["gemm_efficiency_by_dtype"] = c.gemm_efficiency_by_dtype;
    out["gemm_half_k"]              = c.gemm_half_k;
  }
  // Rows of a named implementation give that implementation its figures; the common figure then
  // stays the device file's, for the kernels the measurement did not run.
  if (attention && measurements.attention_kernel.empty()) {
    out["attention_efficiency"]     = c.attention_efficiency;
    out["attention_backward_ratio"] = c.attention_backward_ratio;
    out["attention_half_head_dim"]  = c.attention_half_head_dim;
  } else if (attention) {
    const std::string& k                           = measurements.attention_kernel;
    out["attention_efficiency_by_kernel"][k]       = c.attention_efficiency;
    out["attention_shape_by_kernel"][k]            = {{"backward_ratio", c.attention_backward_ratio},
                                                      {"half_head_dim", c.attention_half_head_dim}};
  }
  if (gemm || memory)
    out["memory_efficiency"] = c.memory_efficiency;
  out["kernel_overhead"] = fmt::format("{:.4g}us", c.kernel_overhead_s * 1e6);
  out["source"]          = fmt::format(
      "fitted by 'stepsim calibrate fit' on {} (GPU \"{}\", measured {}{}): {} kernel rows, two thirds fitted by least "
      "squares on relative error, every third row held out: held-out MAPE {:.1f}%.{} Parameters without rows keep the "
      "device file's values.",
      measurements.path, measurements.gpu_name, measurements.date,
      measurements.versions.empty() ? "" : ", " + measurements.versions, measurements.kernels.size(),
      fit.held_out_mape * 100,
      measurements.attention_kernel.empty() || !attention
          ? ""
          : fmt::format(" The attention rows ran {}: its figures are attention_efficiency_by_kernel.{} and "
                        "attention_shape_by_kernel.{}.",
                        measurements.attention_kernel, measurements.attention_kernel, measurements.attention_kernel));
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& s : fit.summary)
    kinds.push_back({{"kind", s.kind},
                     {"train_rows", s.train_rows},
                     {"held_out_rows", s.held_out_rows},
                     {"train_mape", rounded(s.train_mape)},
                     {"held_out_mape", rounded(s.held_out_mape)}});
  out["fit"] = {{"measurements", measurements.path}, {"gpu", measurements.gpu_name}, {"date", measurements.date},
                {"by_kind", kinds}};
  return out;
}

nlohmann::json synthetic_measurements(const Device& device, unsigned long long seed, double noise)
{
  // mt19937_64's sequence is fixed by the standard; the conversion to [0, 1) is spelled out
  // because std::uniform_real_distribution's is not.
  std::mt19937_64 generator(seed);
  auto jitter = [&] {
    const double u = static_cast<double>(generator() >> 11) * 0x1.0p-53;
    return 1 + noise * (2 * u - 1);
  };
  nlohmann::json rows = nlohmann::json::array();
  auto add = [&](nlohmann::json row, const MeasuredKernel& m) {
    row["seconds"] = predicted_seconds(m, device) * jitter();
    rows.push_back(std::move(row));
  };
  std::vector<std::array<double, 3>> gemm_shapes;
  for (double s : {256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0})
    gemm_shapes.push_back({s, s, s});
  for (double k : {64.0, 128.0, 256.0, 512.0, 1024.0})
    gemm_shapes.push_back({4096, 4096, k});
  for (double h : {1024.0, 4096.0, 8192.0}) // a transformer layer's GEMMs at 4096 tokens
    for (auto [n, k] : {std::pair{3 * h, h}, {h, h}, {4 * h, h}, {h, 4 * h}})
      gemm_shapes.push_back({4096, n, k});
  for (auto shape : {std::array<double, 3>{1000, 1000, 1000}, {3000, 5000, 700}, {128, 8192, 8192}, {8192, 128, 8192},
                     {16384, 1024, 64}})
    gemm_shapes.push_back(shape);
  for (const auto& dtype : kDtypes) {
    if (device.peak_flops.count(dtype) == 0)
      continue;
    for (auto [m, n, k] : gemm_shapes) {
      MeasuredKernel row{gemm("gemm", m, n, k, element_bytes(dtype)), dtype, 0};
      add({{"kind", "gemm"}, {"m", m}, {"n", n}, {"k", k}, {"batch", 1}, {"dtype", dtype}}, row);
    }
  }
  const std::string attention_dtype = device.peak_flops.count("bf16") ? "bf16" : "fp16";
  for (double seq : {512.0, 1024.0, 2048.0, 4096.0, 8192.0})
    for (double dim : {64.0, 128.0})
      for (bool backward : {false, true}) {
        const double heads = 16 * 8192 / seq;
        MeasuredKernel row{attention_kernel("attention", heads, seq, dim, true, backward, 2), attention_dtype, 0};
        add({{"kind", "attention"}, {"batch_heads", heads}, {"seq", seq}, {"head_dim", dim}, {"causal", true},
             {"backward", backward}, {"dtype", attention_dtype}},
            row);
      }
  for (const char* name : {"copy", "add", "gelu", "layernorm", "softmax"})
    for (double bytes = 1 << 16; bytes <= double(1 << 30); bytes *= 4) {
      MeasuredKernel row{memory_kernel(name, bytes), "bf16", 0};
      add({{"kind", "memory"}, {"name", name}, {"bytes", bytes}, {"dtype", "bf16"}}, row);
    }
  const auto& c = device.calibration;
  return {{"format", "stepsim-kernel-measurements/1"},
          {"device", device.name},
          {"stepsim_device", device.name},
          {"date", "synthetic"},
          {"versions", {{"generator", "stepsim calibrate synth"}, {"seed", std::to_string(seed)},
                        {"noise", fmt::format("{}", noise)}}},
          {"synthetic_calibration",
           {{"gemm_efficiency", c.gemm_efficiency},
            {"gemm_efficiency_by_dtype", c.gemm_efficiency_by_dtype},
            {"gemm_half_k", c.gemm_half_k},
            {"attention_efficiency", c.attention_efficiency},
            {"memory_efficiency", c.memory_efficiency},
            {"kernel_overhead_s", c.kernel_overhead_s}}},
          {"rows", rows}};
}

} // namespace stepsim
