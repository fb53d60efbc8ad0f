#include "tools/stepsim/calibration_override.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace stepsim {

namespace fs = std::filesystem;

namespace {
// The case ids of a calibration file's list of runs a figure was fitted on ("fitted_on" and the
// like); entries that are not names are skipped.
std::vector<std::string> run_ids(const nlohmann::json& list)
{
  std::vector<std::string> ids;
  for (const auto& id : list)
    if (id.is_string())
      ids.push_back(id.get<std::string>());
  return ids;
}

// The calibration the device file ships (a kernel benchmark's figures), which bounds a fit of
// them on runs, as fit_runs.py's search; empty where the file gives none.
nlohmann::json device_calibration(const std::string& device)
{
  const fs::path file = fs::path(config_dir()) / "devices" / (device + ".json");
  std::error_code ec;
  if (!fs::exists(file, ec))
    return nlohmann::json::object();
  const nlohmann::json d = read_json_file(file.string());
  return d.contains("calibration") ? d["calibration"] : nlohmann::json::object();
}

// The device file's own GEMM figure (the best shape of a benchmark); 1 where it gives none.
double device_gemm_bound(const std::string& device)
{
  const nlohmann::json shipped = device_calibration(device);
  return shipped.contains("gemm_efficiency") ? shipped["gemm_efficiency"].get<double>() : 1.0;
}
} // namespace

FittedFigure fitted_figure(const std::string& device)
{
  FittedFigure f;
  f.device          = device;
  const fs::path calibration = fs::path(config_dir()) / "calibration" / (device + ".json");
  std::error_code ec;
  if (!fs::exists(calibration, ec))
    return f;
  const nlohmann::json c = read_json_file(calibration.string());
  if (!c.contains("fitted_on") || !c["fitted_on"].is_array() || !c.contains("gemm_efficiency"))
    return f;
  f.fitted_on       = run_ids(c["fitted_on"]);
  f.gemm_efficiency = c["gemm_efficiency"].get<double>();
  f.upper_bound     = device_gemm_bound(device);
  return f;
}

std::vector<FittedDtypeFigure> fitted_dtype_figures(const std::string& device)
{
  std::vector<FittedDtypeFigure> out;
  const fs::path calibration = fs::path(config_dir()) / "calibration" / (device + ".json");
  std::error_code ec;
  if (!fs::exists(calibration, ec))
    return out;
  const nlohmann::json c = read_json_file(calibration.string());
  if (!c.contains("fitted_on_by_dtype") || !c["fitted_on_by_dtype"].is_object() ||
      !c.contains("gemm_efficiency_by_dtype") || !c["gemm_efficiency_by_dtype"].is_object())
    return out;
  const nlohmann::json shipped = device_calibration(device);
  const double upper            = device_gemm_bound(device);
  for (const auto& [precision, runs] : c["fitted_on_by_dtype"].items()) {
    const auto& by_dtype = c["gemm_efficiency_by_dtype"];
    if (!runs.is_array() || !by_dtype.contains(precision) || !by_dtype[precision].is_number())
      continue;
    FittedDtypeFigure f{device, precision, by_dtype[precision].get<double>(), upper, run_ids(runs), "", 0, 1};
    // The attention kernel fitted beside it: the same runs (fit_runs.py --precision P --attention-kernel K).
    if (c.contains("fitted_on_by_kernel") && c["fitted_on_by_kernel"].is_object() &&
        c.contains("attention_efficiency_by_kernel") && c["attention_efficiency_by_kernel"].is_object())
      for (const auto& [kernel, kernel_runs] : c["fitted_on_by_kernel"].items()) {
        const auto& figures = c["attention_efficiency_by_kernel"];
        if (kernel_runs != runs || !figures.contains(kernel) || !figures[kernel].is_number())
          continue;
        f.kernel        = kernel;
        f.kernel_figure = figures[kernel].get<double>();
        // The device file's figure for the kernel, else its common one, bounds the search.
        if (shipped.contains("attention_efficiency_by_kernel") && shipped["attention_efficiency_by_kernel"].contains(kernel))
          f.kernel_upper_bound = shipped["attention_efficiency_by_kernel"][kernel].get<double>();
        else if (shipped.contains("attention_efficiency"))
          f.kernel_upper_bound = shipped["attention_efficiency"].get<double>();
      }
    out.push_back(std::move(f));
  }
  return out;
}

namespace {
// Calls f(path, contents) on each calibration file (config_dir()/calibration/*.json), by name.
void for_each_calibration_file(const std::function<void(const fs::path&, const nlohmann::json&)>& f)
{
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(config_dir()) / "calibration", ec))
    if (entry.path().extension() == ".json")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files)
    f(path, read_json_file(path.string()));
}
} // namespace

std::vector<FrameworkFigure> framework_figures()
{
  std::vector<FrameworkFigure> out;
  for_each_calibration_file([&](const fs::path& path, const nlohmann::json& c) {
    if (!c.contains("framework") || !c.contains("fitted_on") || !c["fitted_on"].is_array())
      return;
    FrameworkFigure f;
    f.file      = path.filename().string();
    f.fitted_on = run_ids(c["fitted_on"]);
    if (c.contains("device") && c["device"].is_string() && c.contains("gemm_efficiency") &&
        c["gemm_efficiency"].is_number()) {
      f.device          = c["device"].get<std::string>();
      f.gemm_efficiency = c["gemm_efficiency"].get<double>();
      f.upper_bound     = device_gemm_bound(f.device);
    }
    out.push_back(std::move(f));
  });
  return out;
}

std::vector<HostTimeFigure> host_time_figures()
{
  std::vector<HostTimeFigure> out;
  for_each_calibration_file([&](const fs::path& path, const nlohmann::json& c) {
    for (const HostTimeRange& range : kHostTimeRanges) {
      const std::string runs = std::string(range.figure) + "_fitted_on";
      if (!c.contains(runs) || !c[runs].is_array())
        continue;
      HostTimeFigure f;
      f.file      = path.filename().string();
      f.figure    = range.figure;
      f.fitted_on = run_ids(c[runs]);
      // The figure as the device reader takes it (a time with its unit).
      Problems problems;
      f.seconds = JsonReader(c, path.string(), problems).time(range.figure, 0.0);
      problems.throw_if_any();
      out.push_back(std::move(f));
    }
  });
  return out;
}

CalibrationOverride::CalibrationOverride() : shipped_(config_dir())
{
  if (const char* env = std::getenv("STEPSIM_CONFIG_DIR"); env != nullptr) {
    had_env_      = true;
    previous_env_ = env;
  }
  std::string pattern = (fs::temp_directory_path() / "stepsim-refit-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw InputError({fmt::format("--leave-out: cannot make a temporary folder under {}",
                                  fs::temp_directory_path().string())});
  dir_ = pattern;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(shipped_, ec))
    if (entry.path().filename() != "calibration")
      fs::create_directory_symlink(fs::absolute(entry.path()), fs::path(dir_) / entry.path().filename(), ec);
  fs::copy(fs::path(shipped_) / "calibration", fs::path(dir_) / "calibration", fs::copy_options::recursive, ec);
  if (ec)
    throw InputError({fmt::format("--leave-out: cannot copy {}/calibration: {}", shipped_, ec.message())});
  setenv("STEPSIM_CONFIG_DIR", dir_.c_str(), 1);
}

CalibrationOverride::~CalibrationOverride()
{
  if (had_env_)
    setenv("STEPSIM_CONFIG_DIR", previous_env_.c_str(), 1);
  else
    unsetenv("STEPSIM_CONFIG_DIR");
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

namespace {
// The setters below start from the copy's file (the shipped one until a figure is set), so that a
// device's common figure, a precision's own and an attention kernel's can be refitted together.
void edit_calibration(const std::string& dir, const std::string& device, const std::function<void(nlohmann::json&)>& change)
{
  const fs::path file = fs::path(dir) / "calibration" / (device + ".json");
  nlohmann::json c    = read_json_file(file.string());
  change(c);
  std::ofstream out(file);
  out << c.dump(2) << "\n";
}
} // namespace

void CalibrationOverride::set(const std::string& device, double gemm_efficiency)
{
  edit_calibration(dir_, device, [&](nlohmann::json& c) { c["gemm_efficiency"] = gemm_efficiency; });
}

void CalibrationOverride::set_dtype(const std::string& device, const std::string& precision, double gemm_efficiency)
{
  edit_calibration(dir_, device, [&](nlohmann::json& c) { c["gemm_efficiency_by_dtype"][precision] = gemm_efficiency; });
}

void CalibrationOverride::set_kernel(const std::string& device, const std::string& kernel, double efficiency)
{
  edit_calibration(dir_, device, [&](nlohmann::json& c) { c["attention_efficiency_by_kernel"][kernel] = efficiency; });
}

void CalibrationOverride::set_framework(const std::string& name, double gemm_efficiency)
{
  nlohmann::json c     = read_json_file((fs::path(shipped_) / "calibration" / name).string());
  c["gemm_efficiency"] = gemm_efficiency;
  std::ofstream out(fs::path(dir_) / "calibration" / name);
  out << c.dump(2) << "\n";
}

void CalibrationOverride::set_host_time(const std::string& name, const std::string& figure, double seconds)
{
  const fs::path file = fs::path(dir_) / "calibration" / name;
  nlohmann::json c    = read_json_file(file.string());
  c[figure]           = fmt::format("{:.6f}ms", seconds * 1e3);
  std::ofstream out(file);
  out << c.dump(2) << "\n";
}

void CalibrationOverride::remove(const std::string& name)
{
  std::error_code ec;
  fs::remove(fs::path(dir_) / "calibration" / name, ec);
}

double golden_section_minimum(const std::function<double(double)>& f, double lo, double hi, double tolerance)
{
  const double g = (std::sqrt(5.0) - 1) / 2;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = f(x1), f2 = f(x2);
  while (hi - lo > tolerance) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - g * (hi - lo);
      f1 = f(x1);
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + g * (hi - lo);
      f2 = f(x2);
    }
  }
  return std::round((lo + hi) / 2 * 1000) / 1000;
}

} // namespace stepsim
