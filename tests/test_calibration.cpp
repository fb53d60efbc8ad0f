// The calibration kit's fit (`stepsim calibrate fit`, models/compute/calibration_fit.cpp) on synthetic
// measurements made by the kernel model with known parameters, the shipped calibrations against
// the single-GPU published runs, and communication/compute interference in the replay.
#include "support.hpp"

#include "models/compute/calibration_fit.hpp"
#include "models/collectives/collective.hpp"
#include "models/device.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/collective_bench.hpp"
#include "sim/simulate.hpp"

#include <simgrid/s4u.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

Device device_with_known_parameters()
{
  Device d                          = load_device("H200-SXM", "device");
  auto& c                           = d.calibration;
  c.gemm_efficiency_by_dtype        = {{"fp32", 0.62}, {"tf32", 0.58}, {"fp16", 0.71}, {"bf16", 0.71}, {"fp8", 0.55}};
  c.gemm_efficiency                 = 0.71;
  c.gemm_half_k                     = 520;
  c.attention_efficiency            = 0.43;
  c.attention_backward_ratio        = 0.8;
  c.attention_half_head_dim         = 30;
  c.memory_efficiency               = 0.88;
  c.kernel_overhead_s               = 6.5e-6;
  return d;
}

CalibrationFit fit_file(const std::string& path)
{
  MeasurementFile m = read_measurements(path);
  return fit_calibration(m.kernels, load_device("H200-SXM", "device"));
}

} // namespace

TEST_CASE("calibrate: the fit recovers known parameters and predicts the held-out third within 10%", "[calibration]")
{
  const Device truth = device_with_known_parameters();
  const std::string file =
      testing::write_temp_file("synthetic_h200.json", synthetic_measurements(truth, 7, 0.03).dump());
  const CalibrationFit fit = fit_file(file);
  const auto& c            = fit.calibration;
  INFO("held-out MAPE " << fit.held_out_mape << ", fitted MAPE " << fit.train_mape);
  CHECK(fit.held_out_mape <= 0.10); // the issue's criterion
  CHECK(fit.held_out_mape <= 0.03); // ±3% uniform noise: about 1.5% when the model is recovered
  for (const auto& [dtype, value] : truth.calibration.gemm_efficiency_by_dtype) {
    INFO(dtype);
    REQUIRE(c.gemm_efficiency_by_dtype.count(dtype) == 1);
    CHECK(c.gemm_efficiency_by_dtype.at(dtype) == Approx(value).epsilon(0.03));
  }
  CHECK(c.gemm_half_k == Approx(truth.calibration.gemm_half_k).epsilon(0.15));
  // The efficiency and the head dimension's fill trade against each other over the two head
  // dimensions swept; what the kernels run at is recovered.
  for (double head_dim : {64.0, 128.0})
    for (bool backward : {false, true})
      CHECK(c.attention_efficiency_of("", backward, head_dim) ==
            Approx(truth.calibration.attention_efficiency_of("", backward, head_dim)).epsilon(0.03));
  CHECK(c.attention_backward_ratio == Approx(truth.calibration.attention_backward_ratio).epsilon(0.03));
  CHECK(c.memory_efficiency == Approx(truth.calibration.memory_efficiency).epsilon(0.03));
  CHECK(c.kernel_overhead_s == Approx(truth.calibration.kernel_overhead_s).epsilon(0.1));
  // Every kind is held out and predicted, not only the total.
  for (const auto& s : fit.summary) {
    INFO(s.kind);
    CHECK(s.held_out_rows > 0);
    CHECK(s.held_out_mape <= 0.10);
  }
}

TEST_CASE("calibrate: the fit does not start from the answer", "[calibration]")
{
  // Parameters far from the fit's starting point (the model's defaults) and from the device file.
  Device truth                              = device_with_known_parameters();
  truth.calibration.gemm_efficiency_by_dtype = {};
  truth.calibration.gemm_efficiency          = 0.35;
  truth.calibration.memory_efficiency        = 0.4;
  truth.calibration.kernel_overhead_s        = 2e-5;
  const std::string file = testing::write_temp_file("synthetic_slow.json", synthetic_measurements(truth, 3, 0.03).dump());
  const CalibrationFit fit = fit_file(file);
  CHECK(fit.held_out_mape <= 0.05);
  CHECK(fit.calibration.gemm_efficiency == Approx(0.35).epsilon(0.05));
  CHECK(fit.calibration.memory_efficiency == Approx(0.4).epsilon(0.05));
  CHECK(fit.calibration.kernel_overhead_s == Approx(2e-5).epsilon(0.1));
}

TEST_CASE("calibrate: synth and fit are deterministic, through the command line", "[calibration]")
{
  const std::string a = testing::write_temp_file("synth_a.json", ""), b = testing::write_temp_file("synth_b.json", "");
  for (const auto& out : {a, b}) {
    auto r = testing::run_stepsim("calibrate synth --device A100-SXM4-80GB --gemm-efficiency 0.66 --seed 5 -o " + out);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  CHECK(testing::read_text_file(a) == testing::read_text_file(b));
  const std::string cal_a = testing::write_temp_file("cal_a.json", ""), cal_b = testing::write_temp_file("cal_b.json", "");
  for (const auto& out : {cal_a, cal_b}) {
    auto r = testing::run_stepsim("calibrate fit " + a + " -o " + out);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("held-out MAPE") != std::string::npos);
  }
  CHECK(testing::read_text_file(cal_a) == testing::read_text_file(cal_b));
  const auto cal = nlohmann::json::parse(testing::read_text_file(cal_a));
  CHECK(cal["device"] == "A100-SXM4-80GB");
  CHECK(cal["gemm_efficiency"].get<double>() == Approx(0.66).epsilon(0.03));
  CHECK(cal["source"].get<std::string>().find(a) != std::string::npos);
  CHECK(cal["fit"]["date"] == "synthetic");

  // A calibration file next to the device file is what a scenario then uses.
  const fs::path dir = fs::temp_directory_path() / "stepsim_calibration_configs";
  fs::remove_all(dir);
  fs::create_directories(dir / "calibration");
  fs::copy(fs::path(STEPSIM_SOURCE_DIR) / "configs" / "devices", dir / "devices");
  fs::copy_file(cal_a, dir / "calibration" / "A100-SXM4-80GB.json");
  setenv("STEPSIM_CONFIG_DIR", dir.c_str(), 1);
  const Device d = load_device("A100-SXM4-80GB", "device");
  unsetenv("STEPSIM_CONFIG_DIR");
  CHECK(d.calibration.gemm_efficiency == cal["gemm_efficiency"].get<double>());
  CHECK(d.calibration.gemm_efficiency_at("fp32") == cal["gemm_efficiency_by_dtype"]["fp32"].get<double>());
  CHECK(d.calibration.source == cal["source"].get<std::string>());
}

TEST_CASE("calibrate: a bad measurement file is an input error naming the path", "[calibration]")
{
  const std::string file = testing::write_temp_file(
      "bad_measurements.json",
      R"({"device": "NVIDIA H200", "rows": [{"kind": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "bf17", "seconds": 1e-5},
          {"kind": "memory", "bytes": 1024, "dtype": "bf16", "seconds": -1}, {"kind": "gem"}]})");
  auto r = testing::run_stepsim("calibrate fit " + file + " --device H200-SXM");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("rows[0].dtype") != std::string::npos);
  CHECK(r.output.find("rows[1].seconds") != std::string::npos);
  CHECK(r.output.find("rows[2].kind") != std::string::npos);
  // No --device and no stepsim_device: the GPU as torch names it, when the catalogue knows that
  // name (configs/devices/H200-SXM.json, product_names); else the error says how to name it.
  const std::string nameless = testing::write_temp_file(
      "nameless_measurements.json", synthetic_measurements(load_device("H200-SXM", "d"), 1, 0).dump());
  auto doc = nlohmann::json::parse(testing::read_text_file(nameless));
  doc.erase("stepsim_device");
  doc["device"] = "NVIDIA H200";
  std::ofstream(nameless) << doc.dump();
  r = testing::run_stepsim("calibrate fit " + nameless);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("fit of H200-SXM") != std::string::npos);
  doc["device"] = "NVIDIA RTX PRO 9000";
  std::ofstream(nameless) << doc.dump();
  r = testing::run_stepsim("calibrate fit " + nameless);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("stepsim_device") != std::string::npos);
  CHECK(r.output.find("--device") != std::string::npos);
}

TEST_CASE("calibrate: the shipped calibrations predict the single-GPU Megatron 2020 runs within 10%", "[calibration]")
{
  // Megatron-LM's 2020 README: the 1.16B GPT-2 on one V100 of a DGX-2 (71.9 TFLOP/s) and on one A100
  // (149.8 TFLOP/s); configs/validation/ holds each with its source.
  const fs::path dir = fs::temp_directory_path() / "stepsim_single_gpu_cases";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"megatron_readme2020_v100_1B_1gpu.json", "megatron_readme2020_a100_1B_1gpu.json"})
    fs::copy_file(fs::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / name, dir / name);
  const std::string out = testing::write_temp_file("single_gpu_accuracy.json", "");
  auto r                = testing::run_stepsim("accuracy " + dir.string() + " --quiet --json " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto report = nlohmann::json::parse(testing::read_text_file(out));
  REQUIRE(report["cases"].size() == 2);
  for (const auto& c : report["cases"]) {
    INFO(c["case"].get<std::string>() << ": " << c["error_pct"].get<double>() << "%");
    CHECK(std::abs(c["error_pct"].get<double>()) <= 10.0);
  }
}

namespace {

// Two single-GPU nodes: each rank runs compute tasks of `compute_s` seconds, one after the other
// on its compute stream, beside an all-reduce of `bytes` on its data stream (nothing orders the
// two). Returns rank 0's timings: task 0 the all-reduce, then the compute tasks in order.
std::vector<TaskTiming> compute_beside_collective(const std::vector<double>& compute_s, double bytes, double interference)
{
  auto timings = testing::in_child([&] {
    auto engine            = testing::start_engine();
    PlatformSpec spec      = testing::single_gpu_nodes(2, 10e9, 1e-6);
    BuiltPlatform platform = build_platform(spec);
    Workload w             = collective_workload(spec, {0, 1}, CollectiveOp::AllReduce, bytes);
    for (double seconds : compute_s) {
      Work layer;
      layer.name    = "layer";
      layer.seconds = seconds;
      w.works.push_back(layer);
    }
    for (auto& program : w.ranks) {
      program.comm_compute_interference = interference;
      // One builder for them all: each compute task follows the previous one on the compute
      // stream, and nothing orders them with the all-reduce (another builder's).
      ProgramBuilder b(program);
      for (size_t i = 0; i < compute_s.size(); ++i)
        b.add(compute_task(static_cast<int>(i), Pass::Other));
    }
    ReplayResult result = replay(w, platform.gpus, CollectiveRegistry::get("ring", ""));
    nlohmann::json out  = nlohmann::json::array();
    for (const auto& t : result.ranks[0].tasks)
      out.push_back({t.start, t.end});
    return out;
  });
  std::vector<TaskTiming> out;
  for (const auto& t : timings)
    out.push_back(TaskTiming{t[0].get<double>(), t[1].get<double>()});
  return out;
}

// One compute task beside the all-reduce: how long the compute took, and when the all-reduce ended.
std::pair<double, double> compute_beside_collective(double compute_s, double bytes, double interference)
{
  const auto tasks = compute_beside_collective(std::vector<double>{compute_s}, bytes, interference);
  return {tasks[1].end - tasks[1].start, tasks[0].end};
}

} // namespace

TEST_CASE("interference: compute beside a collective takes 1/(1-f) as long, and f = 0 changes nothing",
          "[calibration][interference]")
{
  const double f = 0.16, bytes = 1e9; // the all-reduce takes about 0.1 s at 10 GB/s
  auto [alone, collective_alone] = compute_beside_collective(0.05, bytes, 0.0);
  CHECK(alone == Approx(0.05).epsilon(1e-9));
  // Wholly inside the collective: stretched by 1/(1-f).
  auto [inside, collective] = compute_beside_collective(0.05, bytes, f);
  CHECK(inside == Approx(0.05 / (1 - f)).epsilon(1e-6));
  // The collective itself is not slowed.
  CHECK(collective == Approx(collective_alone).epsilon(1e-9));
  // Longer than the collective: slowed only while it runs, full speed after.
  REQUIRE(collective_alone < 0.3);
  auto [longer, unused] = compute_beside_collective(0.3, bytes, f);
  (void)unused;
  CHECK(longer == Approx(0.3 + collective_alone * f).epsilon(1e-6));
}

TEST_CASE("interference: each task of a compute chain is slowed only for its own overlap", "[calibration][interference]")
{
  const double f = 0.16, bytes = 1e9;
  // Two kernels in a row: the first wholly inside the all-reduce, the second outlasting it. They
  // run as one chain, restarted at the all-reduce's end; each must end where its own work did.
  const auto off = compute_beside_collective({0.05, 0.3}, bytes, 0.0);
  const double collective = off[0].end;
  REQUIRE(collective > 0.05 / (1 - f));
  REQUIRE(collective < 0.35);
  const auto on = compute_beside_collective({0.05, 0.3}, bytes, f);
  CHECK(on[0].end == Approx(collective).epsilon(1e-9));
  CHECK(on[1].start == Approx(0).margin(1e-12));
  CHECK(on[1].end == Approx(0.05 / (1 - f)).epsilon(1e-6)); // not 0.05 x the chain's average stretch
  CHECK(on[2].start == Approx(on[1].end).epsilon(1e-12));
  // Slowed until the all-reduce ends, at full speed after: 0.35 + C·f in all.
  CHECK(on[2].end == Approx(0.35 + collective * f).epsilon(1e-6));
}

TEST_CASE("interference: on by default, and the report says with which factor", "[calibration][interference]")
{
  nlohmann::json doc = testing::small_scenario(1, 4, 2);
  doc["platform"]["node_groups"][0]["nic"]["bandwidth"] = "1600Gbps";
  doc["parallelism"]["bucket_size"]                    = "10MB";
  doc["parallelism"]["overlap_grad_reduce"]            = true;
  doc["model"]["num_layers"]                           = 16;
  if (doc.contains("simulation"))
    doc["simulation"].erase("comm_compute_interference");
  const Scenario s = scenario_from_json(doc);
  CHECK(s.simulation.comm_compute_interference);
  nlohmann::json off                             = doc;
  off["simulation"]["comm_compute_interference"] = false;
  Report by_default = simulate_isolated(s);
  Report without    = simulate_isolated(scenario_from_json(off));
  CHECK(by_default.comm_compute_interference == Approx(0.16));
  CHECK(without.comm_compute_interference == 0);
  CHECK(by_default.step_time_s > without.step_time_s);
  CHECK(to_json(by_default)["comm_compute_interference"].get<double>() == Approx(0.16));
  CHECK(to_table(by_default).find("f = 0.16") != std::string::npos);
  CHECK(to_table(without).find("interference") != std::string::npos);
  CHECK(report_from_json(to_json(by_default)).comm_compute_interference == Approx(0.16));
}

TEST_CASE("interference: a data-parallel step is slower with it, and simulation.comm_compute_interference turns it off",
          "[calibration][interference]")
{
  nlohmann::json doc = testing::small_scenario(1, 4, 2);
  // A network fast enough for backward compute, not the all-reduces, to set the step time.
  doc["platform"]["node_groups"][0]["nic"]["bandwidth"] = "1600Gbps";
  doc["parallelism"]["bucket_size"]                    = "10MB";
  doc["parallelism"]["overlap_grad_reduce"]            = true;
  doc["model"]["num_layers"]                           = 16;
  doc["simulation"]["comm_compute_interference"]       = true;
  nlohmann::json off                                   = doc;
  off["simulation"]["comm_compute_interference"]       = false;
  Report with    = simulate_isolated(scenario_from_json(doc));
  Report without = simulate_isolated(scenario_from_json(off));
  REQUIRE(without.overlap > 0.1); // there is overlapped communication to interfere with
  CHECK(with.step_time_s > without.step_time_s);
  CHECK(with.stages[0].compute_s > without.stages[0].compute_s);
  // At most every overlapped second costs f/(1-f) more compute (f = 0.16 in the device file).
  const double overlapped = without.comm_s - without.exposed_comm_s;
  CHECK(with.stages[0].compute_s - without.stages[0].compute_s <= overlapped * 0.16 / 0.84 * 1.5 + 1e-9);
}

TEST_CASE("interference: a device file's factor must leave compute some speed", "[calibration][interference]")
{
  const fs::path dir = fs::temp_directory_path() / "stepsim_interference_configs";
  fs::remove_all(dir);
  fs::create_directories(dir / "devices");
  auto doc = nlohmann::json::parse(
      testing::read_text_file((fs::path(STEPSIM_SOURCE_DIR) / "configs" / "devices" / "H100-SXM.json").string()));
  REQUIRE(doc["calibration"]["comm_compute_interference"].get<double>() > 0);
  REQUIRE_FALSE(doc["calibration"]["comm_compute_interference_source"].get<std::string>().empty());
  doc["calibration"]["comm_compute_interference"] = 1.0;
  std::ofstream(dir / "devices" / "H100-SXM.json") << doc.dump();
  setenv("STEPSIM_CONFIG_DIR", dir.c_str(), 1);
  std::string message;
  try {
    load_device("H100-SXM", "device");
  } catch (const InputError& e) {
    message = e.what();
  }
  unsetenv("STEPSIM_CONFIG_DIR");
  INFO(message);
  CHECK(message.find("calibration.comm_compute_interference") != std::string::npos);
  CHECK(message.find("below 1") != std::string::npos);
}

TEST_CASE("A framework's figures on a device are laid over the device's calibration for that framework only",
          "[calibration]")
{
  // configs/calibration/H100-SXM.llm-foundry.json (tools/calibrate/fit_framework.py).
  std::ifstream in(std::string(STEPSIM_SOURCE_DIR) + "/configs/calibration/H100-SXM.llm-foundry.json");
  const nlohmann::json figure = nlohmann::json::parse(in);
  const Device plain          = load_device("H100-SXM", "device");
  const Device foundry        = load_device("H100-SXM", "llm-foundry", "device");
  const Device core           = load_device("H100-SXM", "megatron-core", "device");
  CHECK(foundry.calibration.gemm_efficiency == figure["gemm_efficiency"].get<double>());
  CHECK(foundry.calibration.attention_efficiency_of("flash-attention-1") ==
        figure["attention_efficiency_by_kernel"]["flash-attention-1"].get<double>());
  CHECK(foundry.calibration.gemm_efficiency != plain.calibration.gemm_efficiency);
  // Another framework, and every figure the file does not name, keep the device's.
  CHECK(core.calibration.gemm_efficiency == plain.calibration.gemm_efficiency);
  CHECK(foundry.calibration.memory_efficiency == plain.calibration.memory_efficiency);
  CHECK(foundry.calibration.attention_efficiency_of("cudnn") == plain.calibration.attention_efficiency_of("cudnn"));
}

TEST_CASE("calibrate: the H100 runs its other precisions at the ratios the H200's kernels measured on the same "
          "silicon",
          "[calibration]")
{
  // configs/calibration/H100-SXM.json: bf16 fitted on the published H100 runs (tools/calibrate/fit_runs.py),
  // the other precisions by --dtype-ratios-from configs/calibration/H200-SXM.json (`stepsim calibrate fit`
  // on an H200's kernel rows). The same GH100 SMs and clocks: tf32 below fp16.
  const Device h100 = load_device("H100-SXM", "device");
  const Device h200 = load_device("H200-SXM", "device");
  auto ratio        = [](const Device& d, const char* dtype) {
    return d.calibration.gemm_efficiency_at(dtype) / d.calibration.gemm_efficiency_at("bf16");
  };
  for (const char* dtype : {"fp32", "tf32", "fp16", "fp8"}) {
    INFO(dtype);
    REQUIRE(h200.calibration.gemm_efficiency_by_dtype.count(dtype) == 1);
    if (std::string(dtype) != "fp8")
      CHECK(ratio(h100, dtype) == Approx(ratio(h200, dtype)).epsilon(0.002));
  }
  // fp8 has a figure of its own, fitted on NeMo's FP8 training runs (fit_runs.py --precision fp8):
  // below what the kernel benchmark's ratio gives (a run sustains less of FP8's doubled Tensor
  // Core rate than a GEMM loop), yet an fp8 GEMM still outruns a bf16 one.
  CHECK(ratio(h100, "fp8") < 0.9 * ratio(h200, "fp8"));
  CHECK(h100.calibration.gemm_efficiency_at("fp8") * h100.peak("fp8") >
        1.1 * h100.calibration.gemm_efficiency_at("bf16") * h100.peak("bf16"));
  // A run in bf16 takes the common figure, which a framework's own figure may replace.
  CHECK(h100.calibration.gemm_efficiency_by_dtype.count("bf16") == 0);
}

TEST_CASE("calibrate: the H100 runs cuDNN attention at the speed NeMo's runs sustain, below the kernel "
          "benchmark's; the other kernels keep theirs",
          "[calibration]")
{
  // configs/calibration/H100-SXM.json: attention_efficiency_by_kernel.cudnn fitted on NeMo's FP8
  // runs beside their fp8 GEMM figure (tools/calibrate/fit_runs.py --attention-kernel cudnn), with
  // the runs it was fitted on (fitted_on_by_kernel) and its source (source_by_kernel).
  const nlohmann::json fitted = nlohmann::json::parse(
      testing::read_text_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/calibration/H100-SXM.json"));
  const nlohmann::json device = nlohmann::json::parse(
      testing::read_text_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/devices/H100-SXM.json"));
  const Device h100 = load_device("H100-SXM", "device");
  const double cudnn = fitted["attention_efficiency_by_kernel"]["cudnn"].get<double>();
  CHECK(h100.calibration.attention_efficiency_of("cudnn") == cudnn);
  CHECK(cudnn < device["calibration"]["attention_efficiency_by_kernel"]["cudnn"].get<double>());
  CHECK(fitted["fitted_on_by_kernel"]["cudnn"] == fitted["fitted_on_by_dtype"]["fp8"]);
  CHECK(fitted["source_by_kernel"]["cudnn"].get<std::string>().find("fit_runs.py") != std::string::npos);
  for (const char* kernel : {"flash-attention-1", "flash-attention-3"})
    CHECK(h100.calibration.attention_efficiency_of(kernel) ==
          device["calibration"]["attention_efficiency_by_kernel"][kernel].get<double>());
  CHECK(h100.calibration.attention_efficiency == device["calibration"]["attention_efficiency"].get<double>());
  // The devices of the same silicon take it with the rest of the H100's calibration.
  CHECK(load_device("H800-SXM", "device").calibration.attention_efficiency_of("cudnn") == cudnn);
}

TEST_CASE("calibrate: the shipped H200 measurement is read, and a row's timing and clock are taken; a misspelt "
          "key is not",
          "[calibration]")
{
  const std::string path =
      (std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "calibration" / "measurements" / "H200-SXM.json").string();
  const MeasurementFile shipped = read_measurements(path);
  CHECK(shipped.stepsim_device == "H200-SXM");
  CHECK(shipped.kernels.size() == 338);
  auto doc = nlohmann::json::parse(testing::read_text_file(path));
  doc["rows"][0]["timing"]       = "graph"; // what tools/calibrate/calibrate.py writes now
  doc["rows"][0]["sm_clock_mhz"] = 1980;
  const std::string with_clock = testing::write_temp_file("h200_clock.json", doc.dump());
  CHECK(read_measurements(with_clock).kernels.size() == 338);
  doc["rows"][1]["sm_clock"] = 1980;
  const std::string misspelt = testing::write_temp_file("h200_misspelt.json", doc.dump());
  CHECK_THROWS_WITH(read_measurements(misspelt), Catch::Contains("rows[1].sm_clock"));
}

TEST_CASE("calibrate: attention rows of a named kernel give that kernel its figures, and the common figure stays the "
          "device file's",
          "[calibration]")
{
  // Synthetic rows from known figures, once without a kernel named and once as cuDNN's.
  const Device truth = device_with_known_parameters();
  auto doc           = synthetic_measurements(truth, 7, 0.0);
  const std::string plain_file = testing::write_temp_file("attention_plain.json", doc.dump());
  doc["attention_kernel"]      = "cudnn";
  const std::string cudnn_file = testing::write_temp_file("attention_cudnn.json", doc.dump());

  const MeasurementFile plain = read_measurements(plain_file);
  const MeasurementFile cudnn = read_measurements(cudnn_file);
  CHECK(plain.attention_kernel.empty());
  CHECK(cudnn.attention_kernel == "cudnn");
  const Device base = load_device("H200-SXM", "device");
  const CalibrationFit fit = fit_calibration(cudnn.kernels, base);
  const nlohmann::json named  = calibration_file(fit, cudnn, "H200-SXM");
  const nlohmann::json common = calibration_file(fit, plain, "H200-SXM");
  CHECK(common.contains("attention_efficiency"));
  CHECK(!common.contains("attention_shape_by_kernel"));
  CHECK(!named.contains("attention_efficiency"));
  CHECK(!named.contains("attention_backward_ratio"));
  CHECK(named["attention_efficiency_by_kernel"]["cudnn"].get<double>() == fit.calibration.attention_efficiency);
  CHECK(named["attention_shape_by_kernel"]["cudnn"]["backward_ratio"].get<double>() ==
        fit.calibration.attention_backward_ratio);

  // Laid over the device (a calibration directory of its own): cuDNN's attention runs at the
  // fitted figures, forward and backward at every head size; the device's common figure, which
  // FlashAttention-2 takes, and its shape are untouched.
  const fs::path dir = fs::temp_directory_path() / "stepsim_named_attention_configs";
  fs::remove_all(dir);
  fs::create_directories(dir / "calibration");
  fs::copy(fs::path(STEPSIM_SOURCE_DIR) / "configs" / "devices", dir / "devices");
  std::ofstream(dir / "calibration" / "H200-SXM.json") << named.dump();
  setenv("STEPSIM_CONFIG_DIR", dir.c_str(), 1);
  const Device laid = load_device("H200-SXM", "device");
  unsetenv("STEPSIM_CONFIG_DIR");
  for (bool backward : {false, true})
    for (double head_dim : {64.0, 128.0}) {
      INFO((backward ? "backward" : "forward") << ", head_dim " << head_dim);
      CHECK(laid.calibration.attention_efficiency_of("cudnn", backward, head_dim) ==
            Approx(truth.calibration.attention_efficiency_of("", backward, head_dim)).epsilon(0.02));
    }
  const auto file = nlohmann::json::parse(
      testing::read_text_file((fs::path(STEPSIM_SOURCE_DIR) / "configs" / "devices" / "H200-SXM.json").string()));
  CHECK(laid.calibration.attention_efficiency == file["calibration"]["attention_efficiency"].get<double>());
  CHECK(laid.calibration.attention_efficiency_of("flash-attention-2", true, 128) ==
        laid.calibration.attention_efficiency);
}

TEST_CASE("calibrate: the shipped H200 kernel rows ran cuDNN's attention, so a run on FlashAttention-2 does not take "
          "their figure",
          "[calibration]")
{
  // torch 2.11 with cuDNN 9.19 on an sm90 GPU dispatches scaled_dot_product_attention to cuDNN
  // (sdp_utils.cpp check_prefer_cudnn_attention); torchtitan's runs of mid-2025 (torch 2.8) ran
  // its flash backend, FlashAttention-2, whose figure on Hopper is the device file's common one.
  const auto configs = fs::path(STEPSIM_SOURCE_DIR) / "configs";
  const MeasurementFile shipped = read_measurements((configs / "calibration" / "measurements" / "H200-SXM.json").string());
  CHECK(shipped.attention_kernel == "cudnn");
  const auto fitted = nlohmann::json::parse(testing::read_text_file((configs / "calibration" / "H200-SXM.json").string()));
  const auto file   = nlohmann::json::parse(testing::read_text_file((configs / "devices" / "H200-SXM.json").string()));
  const Device h200 = load_device("H200-SXM", "device");
  CHECK(h200.calibration.attention_efficiency_of("cudnn") ==
        fitted["attention_efficiency_by_kernel"]["cudnn"].get<double>());
  CHECK(h200.calibration.attention_efficiency == file["calibration"]["attention_efficiency"].get<double>());
  // At a Llama head (128) cuDNN's measured forward is well above FlashAttention-2's figure.
  CHECK(h200.calibration.attention_efficiency_of("cudnn", false, 128) >
        1.4 * h200.calibration.attention_efficiency_of("", false, 128));
  // A misspelt kernel is refused with its path.
  auto doc                = nlohmann::json::parse(testing::read_text_file((configs / "calibration" / "measurements" /
                                                                           "H200-SXM.json").string()));
  doc["attention_kernel"] = "cudnn9";
  const std::string bad   = testing::write_temp_file("h200_bad_kernel.json", doc.dump());
  auto r                  = testing::run_stepsim("calibrate fit " + bad);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("attention_kernel") != std::string::npos);
  CHECK(r.output.find("flash-attention-2") != std::string::npos);
}

TEST_CASE("calibrate: the published B200 rows are read and fitted, and the fit runs the long GEMMs fast, which is why "
          "it is not shipped",
          "[calibration]")
{
  // README, Calibrating on your GPU: "Published: B200 (fitted, not shipped)".
  const auto configs = fs::path(STEPSIM_SOURCE_DIR) / "configs";
  const MeasurementFile rows =
      read_measurements((configs / "calibration" / "measurements" / "B200.published.json").string());
  CHECK(rows.stepsim_device == "B200");
  CHECK(rows.attention_kernel == "flash-attention-2");
  REQUIRE(rows.kernels.size() == 31);
  const Device b200       = load_device("B200", "device");
  const CalibrationFit fit = fit_calibration(rows.kernels, b200);
  CHECK(fit.held_out_mape < 0.15);
  // 8192³ bf16 (pytorch/ao PR #2427: 7.74e-4 s, 1,421 TFLOP/s): the model with the fitted figures
  // takes it at least 10 % faster, as it cannot keep 4096³ and 8192³ at the same speed.
  const auto big = std::find_if(rows.kernels.begin(), rows.kernels.end(), [](const MeasuredKernel& r) {
    return r.dtype == "bf16" && r.kernel.m == 8192 && r.kernel.n == 8192 && r.kernel.k == 8192;
  });
  REQUIRE(big != rows.kernels.end());
  Device fitted      = b200;
  fitted.calibration = fit.calibration;
  CHECK(predicted_seconds(*big, fitted) < 0.9 * big->seconds);
  // So the B200 keeps its device file's kernel figures: its calibration file holds only the FP8
  // figure fitted on Megatron-Bridge's B200 training runs (tools/calibrate/fit_runs.py).
  const auto shipped = nlohmann::json::parse(testing::read_text_file((configs / "calibration" / "B200.json").string()));
  CHECK_FALSE(shipped.contains("fit"));
  CHECK_FALSE(shipped.contains("gemm_half_k"));
  CHECK_FALSE(shipped.contains("gemm_efficiency"));
  CHECK(shipped.contains("fitted_on_by_dtype"));
  CHECK(load_device("B200", "device").calibration.gemm_efficiency ==
        nlohmann::json::parse(testing::read_text_file((configs / "devices" / "B200.json").string()))["calibration"]
                                                     ["gemm_efficiency"]
                                                         .get<double>());
}
