#include "models/device.hpp"
#include "sim/core/kernel.hpp"
#include "sim/core/scenario_check.hpp"

#include "sim/input/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#ifndef STEPSIM_SOURCE_CONFIG_DIR
#define STEPSIM_SOURCE_CONFIG_DIR "configs"
#endif

namespace stepsim {

namespace {
constexpr const char* kPrecisions[] = {"fp32", "tf32", "fp16", "bf16", "fp8"};
}

bool Device::runs(const std::string& precision) const
{
  return peak_flops.count(precision) > 0 || emulated.count(precision) > 0;
}

std::string Device::precisions_run() const
{
  std::vector<std::string> items;
  for (const char* p : kPrecisions) {
    if (peak_flops.count(p) > 0)
      items.push_back(p);
    else if (auto it = emulated.find(p); it != emulated.end())
      items.push_back(fmt::format("{} (emulated at the {} rate)", p, it->second));
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

double Device::peak(const std::string& precision) const
{
  if (auto it = emulated.find(precision); it != emulated.end() && peak_flops.count(precision) == 0)
    return peak(it->second);
  // A precision the device has no rate for runs at the next one it has: only internal callers
  // reach this (the precision check refuses such a scenario).
  static const std::map<std::string, std::vector<std::string>> fallbacks = {
      {"fp32", {"fp32"}},
      {"tf32", {"tf32", "fp32"}},
      {"fp16", {"fp16", "fp32"}},
      {"bf16", {"bf16", "fp16", "fp32"}},
      {"fp8", {"fp8", "bf16", "fp16", "fp32"}},
  };
  auto chain = fallbacks.find(precision);
  for (const auto& p : chain == fallbacks.end() ? std::vector<std::string>{"fp32"} : chain->second) {
    auto it = peak_flops.find(p);
    if (it != peak_flops.end() && it->second > 0)
      return it->second;
  }
  return 0;
}

std::string config_dir()
{
  if (const char* env = std::getenv("STEPSIM_CONFIG_DIR"); env != nullptr && *env != '\0')
    return env;
  return STEPSIM_SOURCE_CONFIG_DIR;
}

std::vector<std::string> device_names()
{
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(config_dir() + "/devices", ec))
    if (entry.path().extension() == ".json")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string device_name_key(const std::string& name)
{
  // Case, and runs of spaces, hyphens and underscores, do not matter; nor does the vendor or
  // brand word in front (NVML says "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB", "NVIDIA
  // GeForce RTX 4090", ROCm "AMD Instinct MI300X").
  std::string key;
  bool gap = false;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') {
      gap = !key.empty();
      continue;
    }
    if (gap)
      key += ' ';
    gap = false;
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const char* brand : {"nvidia ", "tesla ", "geforce ", "amd ", "instinct "})
      if (key.rfind(brand, 0) == 0 && key.size() > std::strlen(brand)) {
        key.erase(0, std::strlen(brand));
        stripped = true;
      }
  }
  return key;
}

std::string catalogue_device_name(const std::string& name)
{
  const auto names = device_names();
  if (std::find(names.begin(), names.end(), name) != names.end())
    return name;
  // Every catalogue name and product name by its key, read again only when the folder or one of
  // its device files changed (tests write catalogues of their own under one folder in turn).
  std::string signature = config_dir();
  for (const auto& n : names) {
    std::error_code ec;
    const auto file = std::filesystem::path(config_dir()) / "devices" / (n + ".json");
    signature += fmt::format("\n{}:{}:{}", n, std::filesystem::file_size(file, ec),
                             std::filesystem::last_write_time(file, ec).time_since_epoch().count());
  }
  static std::mutex mutex;
  static std::map<std::string, std::map<std::string, std::string>> by_catalogue;
  const std::lock_guard<std::mutex> lock(mutex);
  if (by_catalogue.size() > 16)
    by_catalogue.clear();
  auto [it, fresh] = by_catalogue.try_emplace(signature);
  if (fresh)
    for (const auto& n : names) {
      it->second.emplace(device_name_key(n), n);
      nlohmann::json doc;
      try {
        doc = read_json_file(config_dir() + "/devices/" + n + ".json");
      } catch (const InputError&) {
        continue; // load_device reports the file's problem when it is asked for
      }
      if (doc.is_object() && doc.contains("product_names") && doc["product_names"].is_array())
        for (const auto& p : doc["product_names"])
          if (p.is_string())
            it->second.emplace(device_name_key(p.get<std::string>()), n);
    }
  const auto found = it->second.find(device_name_key(name));
  return found == it->second.end() ? name : found->second;
}

namespace {
void read_calibration(JsonReader r, DeviceCalibration& c)
{
  c.gemm_efficiency      = r.number("gemm_efficiency", c.gemm_efficiency, 0, true);
  c.gemm_half_k          = r.number("gemm_half_k", c.gemm_half_k, 0);
  c.attention_efficiency = r.number("attention_efficiency", c.attention_efficiency, 0, true);
  c.attention_backward_ratio = r.number("attention_backward_ratio", c.attention_backward_ratio, 0, true);
  c.attention_half_head_dim  = r.number("attention_half_head_dim", c.attention_half_head_dim, 0);
  c.memory_efficiency    = r.number("memory_efficiency", c.memory_efficiency, 0, true);
  c.kernel_overhead_s    = r.time("kernel_overhead", c.kernel_overhead_s);
  c.host_launch_s        = r.time("host_launch_overhead", c.host_launch_s);
  c.step_host_s          = r.time("step_host_overhead", c.step_host_s);
  if (c.step_host_s >= 10.0)
    r.problems().add(r.path_of("step_host_overhead"),
                     fmt::format("expected a host time per step below 10 s, got {:g} s", c.step_host_s));
  if (r.has("gemm_efficiency_by_dtype")) {
    JsonReader by_dtype = r.object("gemm_efficiency_by_dtype");
    for (const char* p : {"fp32", "tf32", "fp16", "bf16", "fp8"})
      if (by_dtype.has(p)) {
        c.gemm_efficiency_by_dtype[p] = by_dtype.number(p, std::nullopt, 0, true);
        if (c.gemm_efficiency_by_dtype[p] > 1.0)
          by_dtype.problems().add(by_dtype.path_of(p), "expected a fraction no larger than 1");
      }
    by_dtype.reject_unknown_keys();
  }
  if (r.has("attention_efficiency_by_kernel")) {
    JsonReader by_kernel = r.object("attention_efficiency_by_kernel");
    for (const char* k : kAttentionKernels)
      if (by_kernel.has(k)) {
        c.attention_efficiency_by_kernel[k] = by_kernel.number(k, std::nullopt, 0, true);
        if (c.attention_efficiency_by_kernel[k] > 1.0)
          by_kernel.problems().add(by_kernel.path_of(k), "expected a fraction no larger than 1");
      }
    by_kernel.reject_unknown_keys();
  }
  if (r.has("attention_shape_by_kernel")) {
    JsonReader by_kernel = r.object("attention_shape_by_kernel");
    for (const char* k : kAttentionKernels)
      if (by_kernel.has(k)) {
        JsonReader shape = by_kernel.object(k, true);
        auto& s          = c.attention_shape_by_kernel[k];
        s.backward_ratio = shape.number("backward_ratio", std::nullopt, 0, true);
        s.half_head_dim  = shape.number("half_head_dim", std::nullopt, 0);
        shape.reject_unknown_keys();
      }
    by_kernel.reject_unknown_keys();
  }
  c.comm_compute_interference = r.number("comm_compute_interference", c.comm_compute_interference, 0);
  if (c.comm_compute_interference >= 1.0)
    r.problems().add(r.path_of("comm_compute_interference"),
                     "expected a fraction below 1 (compute takes 1/(1-f) times as long beside a collective)");
  c.source               = r.text("source", c.source);
  r.raw("fit");
  r.raw("fitted_on"); // the published runs a figure was fitted on (stepsim accuracy --leave-out refits it)
  r.raw("fitted_on_by_dtype"); // the same, for a precision's own figure (tools/calibrate/fit_runs.py --precision)
  r.raw("source_by_dtype");
  r.raw("fitted_on_by_kernel"); // the runs an attention kernel's figure was fitted on (fit_runs.py --attention-kernel)
  r.raw("source_by_kernel");
  r.raw("held_out");  // runs of the same source kept out of the fit, to show its error (fit_framework.py)
  // The runs step_host_overhead and host_launch_overhead were fitted on and held out from, and
  // how (fit_step_overhead.py).
  for (const char* figure : {"step_host_overhead", "host_launch_overhead"})
    for (const char* about : {"_fitted_on", "_held_out", "_source"})
      r.raw(std::string(figure) + about);
  r.raw("framework");
  r.raw("comm_compute_interference_source");
  r.raw("notes");
  r.raw("device");
  r.reject_unknown_keys();
  for (const char* key : {"gemm_efficiency", "attention_efficiency", "memory_efficiency"})
    if (r.has(key) && r.raw(key)->is_number() && r.raw(key)->get<double>() > 1.0)
      r.problems().add(r.path_of(key), "expected a fraction no larger than 1");
}
} // namespace

Device load_device(const std::string& asked, const std::string& path)
{
  // A device is a name of the catalogue, never a path: looked up among the files listed, a name
  // with "../" cannot reach other configuration files, nor a long one make the file name too long.
  // A product name as NVML prints it stands for its catalogue entry.
  const std::string name = catalogue_device_name(asked);
  const auto names = device_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    constexpr size_t kShown = 80;
    std::string shown = name.size() > kShown ? name.substr(0, kShown) + fmt::format("... ({} characters)", name.size())
                                             : name;
    std::string near = name.size() > kShown ? "" : closest_name(name, names);
    std::string list;
    for (const auto& n : names)
      list += (list.empty() ? "" : ", ") + n;
    throw InputError({fmt::format("{}: unknown device \"{}\"{}; known devices: {}", path, shown,
                                  near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near), list)});
  }
  std::string file = config_dir() + "/devices/" + name + ".json";
  nlohmann::json doc = read_json_file(file);
  Problems problems;
  JsonReader r(doc, file, problems);
  Device d;
  d.name       = r.text("name");
  auto peaks   = r.object("peak_tflops", true);
  for (const char* p : kPrecisions)
    if (peaks.has(p) && !peaks.raw(p)->is_null())
      d.peak_flops[p] = peaks.number(p, std::nullopt, 0, true) * 1e12;
  peaks.reject_unknown_keys();
  // "emulated_precisions": {"bf16": "fp32"}: a precision without a peak of its own, and the
  // native precision whose rate it runs at.
  if (r.has("emulated_precisions")) {
    JsonReader em = r.object("emulated_precisions");
    for (const char* p : kPrecisions) {
      if (!em.has(p))
        continue;
      std::string at = em.text(p, std::nullopt, {"fp32", "tf32", "fp16", "bf16", "fp8"});
      if (d.peak_flops.count(p) > 0)
        problems.add(em.path_of(p), fmt::format("expected only precisions without a peak; {} has one", p));
      else if (d.peak_flops.count(at) == 0)
        problems.add(em.path_of(p), fmt::format("expected a precision the device has a peak for, not \"{}\"", at));
      else
        d.emulated[p] = at;
    }
    em.reject_unknown_keys();
  }
  // The capacity NVML reports (memory_mib, MiB as nvidia-smi prints it) where the device file
  // gives it; else the datasheet's GB (10^9 bytes), which undercounts HBM parts sold in GiB.
  d.memory_bytes            = r.number("memory_gb", std::nullopt, 0, true) * 1e9;
  if (r.has("memory_mib"))
    d.memory_bytes = r.number("memory_mib", std::nullopt, 0, true) * 1024.0 * 1024.0;
  d.memory_bandwidth_Bps    = r.bandwidth("memory_bandwidth");
  d.sm_count                = static_cast<int>(r.integer("sm_count"));
  d.l2_bytes                = r.number("l2_mb", 0.0) * 1e6;
  d.nvlink_bandwidth_Bps    = r.bandwidth("nvlink_bandwidth", 0.0);
  d.host_link_bandwidth_Bps = r.bandwidth("host_link_bandwidth", 16e9);
  d.nvls                    = r.boolean("nvls", false);
  d.tdp_w                   = r.number("tdp_w", 0.0);
  d.idle_w                  = r.number("idle_w", 0.0);
  // A variant of another device's silicon (A800 and H800: the A100's and H100's dies with fewer
  // NVLinks) runs its kernels as that device does: it takes that device's calibration, the
  // shipped one and every fitted one, instead of having its own.
  if (r.has("calibration_of")) {
    d.calibration_of = r.text("calibration_of", std::nullopt, names);
    if (d.calibration_of == name)
      problems.add(r.path_of("calibration_of"), "expected another device than this one");
    else if (r.has("calibration"))
      problems.add(r.path_of("calibration"), "expected no calibration of its own beside calibration_of");
    else if (problems.empty()) {
      // One level only: the device named has a calibration of its own (this also ends a cycle).
      thread_local int nesting = 0;
      if (nesting > 0)
        throw InputError({fmt::format("{}: expected a device with a calibration of its own", path)});
      struct Nest {
        Nest() { ++nesting; }
        ~Nest() { --nesting; }
      };
      const Device same = [&] {
        Nest n;
        return load_device(d.calibration_of, r.path_of("calibration_of"));
      }();
      d.calibration = same.calibration;
    }
  } else {
    read_calibration(r.object("calibration"), d.calibration);
  }
  if (const nlohmann::json* products = r.raw("product_names")) {
    if (!products->is_array())
      problems.add(r.path_of("product_names"), "expected an array of names");
    else
      for (size_t i = 0; i < products->size(); ++i) {
        const auto& p = (*products)[i];
        const std::string at = fmt::format("{}[{}]", r.path_of("product_names"), i);
        if (!p.is_string() || p.get<std::string>().empty())
          problems.add(at, "expected a name");
        else if (catalogue_device_name(p.get<std::string>()) != name)
          problems.add(at, fmt::format("expected a name of this device only; \"{}\" is {}", p.get<std::string>(),
                                       catalogue_device_name(p.get<std::string>())));
      }
  }
  for (const char* key : {"vendor", "sources", "notes", "kind"})
    r.raw(key);
  r.reject_unknown_keys();
  // A measured calibration, when one was fitted for this device, replaces the shipped one (or the
  // one it took).
  std::string fitted = config_dir() + "/calibration/" + name + ".json";
  if (std::filesystem::exists(fitted)) {
    nlohmann::json cal = read_json_file(fitted);
    read_calibration(JsonReader(cal, fitted, problems), d.calibration);
  }
  if (d.peak_flops.empty())
    problems.add(file + ".peak_tflops", "expected at least one precision's peak");
  problems.throw_if_any();
  return d;
}

Device load_device(const std::string& asked, const std::string& framework, const std::string& path)
{
  Device d = load_device(asked, path);
  // Fitted on this device's runs, else on those of the device whose calibration it takes.
  std::string fitted = config_dir() + "/calibration/" + d.name + "." + framework + ".json";
  if (!d.calibration_of.empty() && !std::filesystem::exists(fitted))
    fitted = config_dir() + "/calibration/" + d.calibration_of + "." + framework + ".json";
  if (!framework.empty() && std::filesystem::exists(fitted)) {
    Problems problems;
    nlohmann::json cal = read_json_file(fitted);
    read_calibration(JsonReader(cal, fitted, problems), d.calibration);
    problems.throw_if_any();
  }
  return d;
}

namespace {

// Every node group's GPU is in the catalogue (configs/devices/), or the closest names are listed;
// and it runs the training precision, natively or by an emulation its file states (issue 23: an
// fp8 run on an A100 fell back to the bf16 peak without a word).
void check_devices(const Scenario& s)
{
  Problems problems;
  for (size_t i = 0; i < s.platform.node_groups.size(); ++i) {
    try {
      const auto path = fmt::format("platform.node_groups[{}].gpu", i);
      Device d = load_device(s.platform.node_groups[i].gpu, path);
      if (!d.runs(s.training.precision))
        problems.add("training.precision",
                     fmt::format("{} ({}) does not run \"{}\"; it runs {}", d.name, path, s.training.precision,
                                 d.precisions_run()));
    } catch (const InputError& e) {
      for (const auto& p : e.problems())
        problems.add("", p);
    }
  }
  problems.throw_if_any();
}

const bool checked = ScenarioCheckRegistry::add("devices",
                                                "every node group's GPU is a known device that runs the training precision",
                                                ScenarioCheck{check_devices});

} // namespace

} // namespace stepsim
