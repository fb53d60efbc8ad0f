// A device's GEMM figure set to another value for the cases simulated while the override lives:
// `stepsim accuracy --leave-out` refits the figures fitted on published runs without the held-out
// runs (the C++ form of tools/calibrate/fit_runs.py). The override is a temporary copy of the
// configuration folder, every entry linked as shipped but calibration/, whose DEVICE.json has
// the new gemm_efficiency, and STEPSIM_CONFIG_DIR points at it until the override ends.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace stepsim {

// A calibration file's figure fitted on published runs: its "fitted_on" list of case ids.
struct FittedFigure {
  std::string device;
  double gemm_efficiency = 0;
  double upper_bound     = 1; // the device file's own figure (the best shape of a benchmark)
  std::vector<std::string> fitted_on;
};

// The fitted figure of `device` in config_dir()/calibration, or none (an empty fitted_on) where
// its calibration file names no runs it was fitted on.
FittedFigure fitted_figure(const std::string& device);

// A precision's own figure of `device` fitted on published runs in that precision
// (gemm_efficiency_by_dtype with its "fitted_on_by_dtype" list, tools/calibrate/fit_runs.py
// --precision): one per precision the calibration file fitted so.
struct FittedDtypeFigure {
  std::string device, precision;
  double gemm_efficiency = 0;
  double upper_bound     = 1;
  std::vector<std::string> fitted_on;
  // A fused attention kernel's figure fitted beside it on the same runs (fit_runs.py
  // --attention-kernel: attention_efficiency_by_kernel with its "fitted_on_by_kernel" list);
  // empty: none, the GEMM figure was fitted alone.
  std::string kernel;
  double kernel_figure      = 0;
  double kernel_upper_bound = 1; // the device file's figure for the kernel (a kernel benchmark's)
};
std::vector<FittedDtypeFigure> fitted_dtype_figures(const std::string& device);

// The figures fitted for one framework on one device (calibration/DEVICE.FRAMEWORK.json, by
// tools/calibrate/fit_framework.py): the file's name and the runs they were fitted on.
struct FrameworkFigure {
  std::string file;
  std::vector<std::string> fitted_on;
  std::string device;
  double gemm_efficiency = 0;
  double upper_bound     = 1; // the device file's own figure
};
std::vector<FrameworkFigure> framework_figures();

// A framework's host time fitted on published runs (calibration/DEVICE.FRAMEWORK.json's
// step_host_overhead or host_launch_overhead with its "<figure>_fitted_on" list,
// tools/calibrate/fit_step_overhead.py): the file, the figure's name, its runs and value.
struct HostTimeFigure {
  std::string file;
  std::string figure;
  std::vector<std::string> fitted_on;
  double seconds = 0;
};
// The host time figures a fit may hold, with the range fit_step_overhead.py searches: its unit
// (seconds; the search rounds to three decimals of it), its upper end and tolerance in that unit.
struct HostTimeRange {
  const char* figure;
  double unit, upper, tolerance;
};
inline constexpr HostTimeRange kHostTimeRanges[] = {{"step_host_overhead", 1.0, 1.0, 0.002},
                                                    {"host_launch_overhead", 1e-6, 1000.0, 1.0}};
std::vector<HostTimeFigure> host_time_figures();

class CalibrationOverride {
public:
  CalibrationOverride();
  ~CalibrationOverride();
  CalibrationOverride(const CalibrationOverride&)            = delete;
  CalibrationOverride& operator=(const CalibrationOverride&) = delete;
  // From now on, `device` runs at `gemm_efficiency` (its other calibration figures as shipped, or
  // as set_dtype set them).
  void set(const std::string& device, double gemm_efficiency);
  // From now on, `device` runs `precision`'s GEMMs at `gemm_efficiency` (gemm_efficiency_by_dtype),
  // its other figures as they were.
  void set_dtype(const std::string& device, const std::string& precision, double gemm_efficiency);
  // From now on, `device` runs the fused attention `kernel` at `efficiency`
  // (attention_efficiency_by_kernel), its other figures as they were.
  void set_kernel(const std::string& device, const std::string& kernel, double efficiency);
  // From now on, the framework figure `name` (calibration/DEVICE.FRAMEWORK.json) has this
  // gemm_efficiency (its other figures as shipped).
  void set_framework(const std::string& name, double gemm_efficiency);
  // From now on, the framework file `name` has this host time figure (step_host_overhead or
  // host_launch_overhead; its other figures as they were).
  void set_host_time(const std::string& name, const std::string& figure, double seconds);
  // From now on, the calibration file `name` (in calibration/) is as if never fitted.
  void remove(const std::string& name);

private:
  std::string shipped_; // the configuration folder the override copies
  std::string dir_;     // the temporary copy
  std::string previous_env_;
  bool had_env_ = false;
};

// The x in [lo, hi] that minimises a unimodal f, to within `tolerance` (golden-section search, as
// fit_runs.py runs it), rounded to three decimals.
double golden_section_minimum(const std::function<double(double)>& f, double lo, double hi, double tolerance);

} // namespace stepsim
