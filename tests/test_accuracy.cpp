// Accuracy regression: every published case in configs/validation/ is simulated and compared with
// its measurement (`stepsim accuracy`). The 19 cases the calibration was fitted on (Megatron-LM
// 2020 README, SC'21 Table 1, torchgpipe) must stay within one point of the MAPE they reached and
// within 20% each; all 38 within one point of the MAPE they reach now, and none worse than the 12%
// issue 16 allows (README, "Accuracy").
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

// `stepsim accuracy` with the shipped calibrations: 3.2% over the fitted cases (the bound keeps the
// 3.4% they were fitted to), 4.1% over all 38 since DeepSpeed's blocking sends, gradient
// accumulation and tensor-by-tensor ZeRO-3 gathers, Megatron-Core's tensor-parallel overlap, the
// H100 figure fitted on its runs, llm-foundry's figures fitted on MosaicML's tables,
// DeepSpeed-Megatron's on its two A100 runs and Korthikanti's 530B runs interleaved as Calculon's
// validation ran them, and MegaScale's Megatron-LM of January 2023 reducing gradients after
// backward; 3.5% since Megatron-Core's host time between steps was fitted on its and NeMo's H100
// runs (configs/calibration/H100-SXM.megatron-core.json), worst -10.2% (torchgpipe's 4-stage
// pipeline; Megatron-Core's 1.7B on 48 H100 was +20.8% before).
constexpr double kReachedMapePct    = 3.4;
constexpr double kWorstCaseLimitPct = 20.0;
constexpr double kReachedAllMapePct = 3.5;
constexpr double kWorstAllLimitPct  = 12.0;

bool fitted(const std::string& id)
{
  for (const char* prefix : {"megatron_readme2020_", "megatron_sc21_table1_", "torchgpipe_"})
    if (id.rfind(prefix, 0) == 0)
      return true;
  return false;
}

// `stepsim accuracy --quiet --json` over the shipped cases, with `options` before the output.
nlohmann::json accuracy_report(const std::string& options = "")
{
  std::string out = stepsim::testing::write_temp_file("accuracy.json", "");
  auto result     = stepsim::testing::run_stepsim("accuracy --quiet " + options + " --json " + out);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// A folder of the tests' own holding copies of published cases, named by their paths under
// configs/validation (without ".json"), for `stepsim accuracy` over just those.
std::string cases_folder(const std::string& name, const std::vector<std::string>& cases)
{
  namespace fs       = std::filesystem;
  const fs::path in  = fs::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  const fs::path dir = fs::path(stepsim::testing::write_temp_file(name + ".keep", "")).parent_path() / name;
  fs::create_directories(dir);
  for (const std::string& c : cases)
    fs::copy_file(in / (c + ".json"), dir / (fs::path(c).filename().string() + ".json"),
                  fs::copy_options::overwrite_existing);
  return dir.string();
}

// The refit of a framework's host time `figure` in a --leave-out report's "left_out" (null if none).
nlohmann::json host_time_refit(const nlohmann::json& left_out, const char* figure)
{
  if (!left_out.contains("refits")) // nothing refitted
    return nlohmann::json();
  for (const auto& refit : left_out["refits"])
    if (refit["figure"] == figure)
      return refit;
  return nlohmann::json();
}

} // namespace

TEST_CASE("accuracy: predictions stay within one point of the calibrated MAPE over the published cases", "[accuracy]")
{
  const nlohmann::json r = accuracy_report();
  const auto& cases      = r["cases"];
  // Megatron SC'21 Table 1 (10), the 2020 README tables (6), torchgpipe ResNet-101 (3), and the 19
  // added later (SC'21 Table 2, Korthikanti 2022, Megatron-Core H100, MPT, MegaScale, MT-NLG,
  // BLOOM, Llama 3).
  REQUIRE(cases.size() == 38);
  std::set<std::string> metrics, not_fitting;
  double sum = 0, fitted_sum = 0;
  int fitted_cases = 0;
  for (const auto& c : cases) {
    const std::string id = c["case"].get<std::string>();
    INFO(id);
    const double measured = c["measured"], predicted = c["predicted"];
    CHECK(std::isfinite(predicted));
    CHECK(predicted > 0);
    CHECK(c["error_pct"].get<double>() == Approx((predicted - measured) / measured * 100).margin(1e-9));
    CHECK(std::abs(c["error_pct"].get<double>()) <= (fitted(id) ? kWorstCaseLimitPct : kWorstAllLimitPct));
    CHECK_FALSE(c["source"].get<std::string>().empty());
    CHECK_FALSE(c["framework"].get<std::string>().empty());
    metrics.insert(c["metric"].get<std::string>());
    sum += std::abs(c["error_pct"].get<double>());
    if (fitted(id)) {
      fitted_sum += std::abs(c["error_pct"].get<double>());
      ++fitted_cases;
    }
    if (!c["fits_in_memory"].get<bool>())
      not_fitting.insert(id);
  }
  REQUIRE(fitted_cases == 19);
  CHECK(r["mape_pct"].get<double>() == Approx(sum / cases.size()));
  CHECK(fitted_sum / fitted_cases <= kReachedMapePct + 1.0);
  CHECK(r["mape_pct"].get<double>() <= kReachedAllMapePct + 1.0);
  // Each source's own unit: TFLOP/s per GPU, seconds per iteration, samples or tokens per second.
  CHECK(metrics == std::set<std::string>{"tflops_per_gpu", "seconds_per_iteration", "samples_per_s", "tokens_per_s"});
  // The per-profile and per-device errors cover every case once, and the cases predicted not to
  // fit are those the cases say.
  for (const char* key : {"by_framework", "by_device"}) {
    int covered = 0;
    for (const auto& [name, g] : r[key].items())
      covered += g["cases"].get<int>();
    CHECK(covered == 38);
  }
  CHECK(r["not_fitting"].get<std::set<std::string>>() == not_fitting);
}

TEST_CASE("accuracy: a case without a measurement is an input error naming the path", "[accuracy]")
{
  auto folder = std::filesystem::path(stepsim::testing::write_temp_file("unused", "")).parent_path() / "validation-bad";
  std::filesystem::create_directories(folder);
  nlohmann::json s = stepsim::testing::small_scenario(1, 1, 1);
  s["validation"]  = {{"metric", "samples_per_s"}, {"unit", "samples/s"}, {"source", {{"citation", "nowhere"}}}};
  std::ofstream(folder / "case.json") << s.dump();
  auto result = stepsim::testing::run_stepsim("accuracy --quiet " + folder.string());
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("validation.measured") != std::string::npos);
  // A measurement no run made (a misprint): refused, not scored as the model's error.
  s["validation"]["metric"]   = "seconds_per_iteration";
  s["validation"]["unit"]     = "s";
  s["validation"]["measured"] = 1e300;
  std::ofstream(folder / "case.json") << s.dump();
  result = stepsim::testing::run_stepsim("accuracy --quiet " + folder.string());
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("validation.measured: 1e+300 s: expected at most 604800 for seconds_per_iteration") !=
        std::string::npos);
  // Two cases of one id: the ranking and --leave-out go by it.
  s["validation"]["measured"] = 1.0;
  s["validation"]["case"]     = "same";
  std::ofstream(folder / "case.json") << s.dump();
  std::ofstream(folder / "case2.json") << s.dump();
  result = stepsim::testing::run_stepsim("accuracy --quiet " + folder.string());
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("case2.json: validation.case: \"same\" again, as in") != std::string::npos);
}

TEST_CASE("accuracy: --leave-out reports a source's cases as held out, and refuses a source no case names",
          "[accuracy]")
{
  // No figure is fitted on Korthikanti's or MegaScale's runs: they are held out as shipped.
  const nlohmann::json r = accuracy_report("--leave-out korthikanti --leave-out megascale");
  double held = 0, kept = 0;
  int held_cases = 0;
  for (const auto& c : r["cases"]) {
    const std::string id = c["case"].get<std::string>();
    const bool out_of_fit = id.rfind("korthikanti2022_", 0) == 0 || id.rfind("megascale", 0) == 0;
    (out_of_fit ? held : kept) += std::abs(c["error_pct"].get<double>());
    held_cases += out_of_fit ? 1 : 0;
  }
  REQUIRE(held_cases == 6);
  CHECK(r["left_out"]["cases"].get<int>() == 6);
  CHECK(r["left_out"]["kept_cases"].get<int>() == 32);
  CHECK(r["left_out"]["mape_pct"].get<double>() == Approx(held / 6));
  CHECK(r["left_out"]["kept_mape_pct"].get<double>() == Approx(kept / 32));
  CHECK_FALSE(r["left_out"]["refitted"].get<bool>());
  auto bad = stepsim::testing::run_stepsim("accuracy --quiet --leave-out no-such-source");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("no-such-source") != std::string::npos);
}

TEST_CASE("accuracy: --leave-out refits a figure fitted on the held-out runs without them", "[accuracy]")
{
  // Four of the A100 runs the A100 GEMM figure is fitted on (configs/calibration/A100-SXM4-80GB.json
  // and -40GB.json share it, "fitted_on"): holding out SC'21's 3.6B refits the figure on the three
  // runs left, for both devices at once. (The H100 figure sits at its bound on every subset of its
  // runs since Megatron-Core's host time between steps: a refit there does not move.)
  namespace fs      = std::filesystem;
  const fs::path in = fs::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  const fs::path dir = fs::path(stepsim::testing::write_temp_file("refit.keep", "")).parent_path() / "refit";
  fs::create_directories(dir);
  for (const char* id : {"megatron_readme2020_a100_1B_1gpu", "megatron_readme2020_a100_8B_8gpu_tp8",
                         "megatron_sc21_table1_1.7B", "megatron_sc21_table1_3.6B"})
    fs::copy_file(in / (std::string(id) + ".json"), dir / (std::string(id) + ".json"),
                  fs::copy_options::overwrite_existing);
  const nlohmann::json shipped = accuracy_report(dir.string());
  const nlohmann::json r       = accuracy_report(dir.string() + " --leave-out sc21_table1_3.6B");
  const auto& l                = r["left_out"];
  REQUIRE(l["refitted"].get<bool>());
  REQUIRE(l["refits"].size() == 1);
  const auto devices = l["refits"][0]["devices"].get<std::vector<std::string>>();
  CHECK(devices == std::vector<std::string>{"A100-SXM4-40GB", "A100-SXM4-80GB"});
  CHECK(l["refits"][0]["fitted_on_runs"].get<int>() == 3);
  const double refitted = l["refits"][0]["refitted"].get<double>();
  CHECK(refitted >= 0.4);
  CHECK(refitted <= 0.869); // the device file's figure bounds the search
  CHECK(refitted != Approx(l["refits"][0]["shipped"].get<double>()).margin(0.003));
  // The held-out run is predicted with the refitted figure: not as shipped.
  double shipped_error = 0;
  for (const auto& c : shipped["cases"])
    if (c["case"] == "megatron_sc21_table1_3.6B")
      shipped_error = c["error_pct"].get<double>();
  REQUIRE(l["predicted"].size() == 1);
  CHECK(l["predicted"][0]["error_pct"].get<double>() != Approx(shipped_error).margin(0.1));
  CHECK(l["kept_cases"].get<int>() == 3);
}

TEST_CASE("accuracy: --leave-out refits a framework's host time between steps on the kept runs it was fitted on, "
          "and drops it where none is kept",
          "[accuracy]")
{
  // configs/calibration/H100-SXM.megatron-core.json: step_host_overhead fitted on Megatron-Core's
  // and NeMo's H100 runs (tools/calibrate/fit_step_overhead.py), its runs listed in
  // "step_host_overhead_fitted_on". The 1.7B, 16B and 70B runs are among them.
  const std::string dir = cases_folder("step-refit", {"megatron_core_h100_weak_1.7B", "megatron_core_h100_weak_16B",
                                                      "megatron_core_h100_weak_70B", "llama3_405b_8192gpu_cp1_seq8192"});
  auto step_refit = [](const nlohmann::json& l) { return host_time_refit(l, "step_host_overhead"); };
  // The 70B held out: refitted on the 1.7B and 16B runs, and the 70B predicted with it.
  const nlohmann::json r = accuracy_report(dir + " --leave-out weak_70B");
  const nlohmann::json refit = step_refit(r["left_out"]);
  REQUIRE_FALSE(refit.is_null());
  CHECK(refit["framework_figure"] == "H100-SXM.megatron-core.json");
  CHECK(refit["fitted_on_runs"].get<int>() == 2);
  CHECK(refit["refitted"].get<double>() >= 0.0);
  CHECK(refit["refitted"].get<double>() <= 1.0);
  CHECK(refit["shipped"].get<double>() > 0.0);
  // Megatron-Core's runs held out: no run it was fitted on is kept (Llama 3's framework has
  // none), so it is dropped and the held-out runs are predicted without it.
  const nlohmann::json d = accuracy_report(dir + " --leave-out megatron_core");
  CHECK(step_refit(d["left_out"]).is_null());
  const auto dropped = d["left_out"]["dropped"].get<std::vector<std::string>>();
  CHECK(std::find(dropped.begin(), dropped.end(), "H100-SXM.megatron-core.json's step_host_overhead") != dropped.end());
}

TEST_CASE("accuracy: --leave-out refits a framework's host time per launch on the kept runs it was fitted on, "
          "and drops it where none is kept",
          "[accuracy]")
{
  // configs/calibration/GB200.megatron-core.json: host_launch_overhead fitted on Megatron-Bridge's
  // GB200 runs (tools/calibrate/fit_step_overhead.py --figure host_launch_overhead), the Llama 3
  // 8B and Qwen3 30B-A3B runs among them.
  const std::string dir = cases_folder("launch-refit", {"megatron-bridge/mbridge2511_llama3_8b_8xgb200_fp8cs",
                                                        "megatron-bridge-moe/mbridge2511_qwen3_30b_a3b_8xgb200_fp8mx"});
  auto launch_refit = [](const nlohmann::json& l) { return host_time_refit(l, "host_launch_overhead"); };
  // The MoE run held out: refitted on the 8B run alone, and the MoE run predicted with it.
  const nlohmann::json r     = accuracy_report(dir + " --leave-out qwen3_30b");
  const nlohmann::json refit = launch_refit(r["left_out"]);
  REQUIRE_FALSE(refit.is_null());
  CHECK(refit["framework_figure"] == "GB200.megatron-core.json");
  CHECK(refit["fitted_on_runs"].get<int>() == 1);
  CHECK(refit["refitted"].get<double>() >= 0.0);
  CHECK(refit["refitted"].get<double>() <= 1e-3);
  CHECK(refit["shipped"].get<double>() == Approx(104e-6));
  // Both held out: none of its runs is kept, so it is dropped.
  const nlohmann::json d = accuracy_report(dir + " --leave-out 8xgb200");
  CHECK(launch_refit(d["left_out"]).is_null());
  const auto dropped = d["left_out"]["dropped"].get<std::vector<std::string>>();
  CHECK(std::find(dropped.begin(), dropped.end(), "GB200.megatron-core.json's host_launch_overhead") != dropped.end());
}

TEST_CASE("accuracy: the H100's fp8 GEMM and cuDNN attention figures, fitted on NeMo's FP8 runs, are refitted "
          "together without a left-out family, which they then predict",
          "[accuracy]")
{
  // configs/calibration/H100-SXM.json: gemm_efficiency_by_dtype.fp8 and
  // attention_efficiency_by_kernel.cudnn fitted together on the 20 rows of configs/validation/nemo
  // (tools/calibrate/fit_runs.py --precision fp8 --attention-kernel cudnn): NeMo 24.07's
  // pre-training table (2K-8K tokens) and NeMo 24.03's Llama 2 7B from 8K to 1M tokens, where
  // attention is most of the step. With the kernel benchmark's cuDNN figure (0.545) the long
  // rows were 9 to 67% fast.
  const std::string nemo = (std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "nemo").string();
  const nlohmann::json shipped = accuracy_report(nemo);
  REQUIRE(shipped["cases"].size() == 20);
  CHECK(shipped["mape_pct"].get<double>() <= 3.5);
  for (const auto& c : shipped["cases"])
    CHECK(std::abs(c["error_pct"].get<double>()) <= 10.0);
  // Held out, long-sequence rows are predicted by the pair refitted on pre-training rows alone:
  // their short sequences leave attention a smaller share, yet fix it. Six of the twelve
  // pre-training rows (the small models, quick to simulate) and four of the eight long rows, as
  // `stepsim accuracy --leave-out nemo2403` runs over the whole folder (10.9%, 0.272, in minutes).
  const std::filesystem::path some =
      std::filesystem::path(stepsim::testing::write_temp_file("nemo-some.keep", "")).parent_path() / "nemo-some";
  std::filesystem::create_directories(some);
  for (const char* name : {"nemo2407_gpt3_5b_64xh100_fp8", "nemo2407_gpt3_20b_64xh100_fp8", "nemo2407_llama2_7b_8xh100_fp8",
                           "nemo2407_llama2_13b_16xh100_fp8", "nemo2407_llama3_8b_8xh100_fp8",
                           "nemo2407_nemotron_8b_64xh100_fp8", "nemo2403_llama2_7b_seq16k_16xh100_fp8_tp2_pp1_cp1",
                           "nemo2403_llama2_7b_seq64k_64xh100_fp8_tp4_pp1_cp2",
                           "nemo2403_llama2_7b_seq256k_256xh100_fp8_tp4_pp1_cp8",
                           "nemo2403_llama2_7b_seq1024k_1024xh100_fp8_tp8_pp1_cp32"})
    std::filesystem::copy_file(std::filesystem::path(nemo) / (std::string(name) + ".json"), some / (std::string(name) + ".json"),
                               std::filesystem::copy_options::overwrite_existing);
  const nlohmann::json r = accuracy_report(some.string() + " --leave-out nemo2403");
  const auto& l          = r["left_out"];
  // The fp8 pair, and Megatron-Core's host time between steps (fitted on these tables' runs too),
  // refitted after it on the kept runs it was fitted on.
  REQUIRE(l["refits"].size() == 2);
  CHECK(l["refits"][1]["figure"] == "step_host_overhead");
  CHECK(l["refits"][1]["framework_figure"] == "H100-SXM.megatron-core.json");
  const auto& refit = l["refits"][0];
  CHECK(refit["figure"] == "gemm_efficiency");
  CHECK(refit["precision"] == "fp8");
  CHECK(refit["devices"][0] == "H100-SXM");
  CHECK(refit["fitted_on_runs"].get<int>() == 6);
  REQUIRE(refit.contains("attention_kernel"));
  CHECK(refit["attention_kernel"]["kernel"] == "cudnn");
  const double attention = refit["attention_kernel"]["refitted"].get<double>();
  CHECK(attention != Approx(refit["attention_kernel"]["shipped"].get<double>()).margin(0.001));
  CHECK(attention >= 0.1);
  CHECK(attention < 0.545); // the device file's cuDNN figure (a kernel benchmark's) bounds it
  CHECK(l["cases"].get<int>() == 4);
  // 11.4% here, worst -15.2% at 1M tokens (the whole folder's --leave-out nemo2403: 10.9%). It
  // was 6.8% and within 12% each before Megatron-Core's host time between steps: with it the
  // short pre-training steps ask for a faster fp8 GEMM (0.594) and, the pair being weakly told
  // apart by those rows alone, a slower cuDNN attention (0.272, against 0.291 before and 0.323
  // fitted on all twenty), which the long rows, mostly attention, then show.
  CHECK(l["mape_pct"].get<double>() <= 12.0);
  for (const auto& c : l["predicted"])
    CHECK(std::abs(c["error_pct"].get<double>()) <= 16.0);
}

TEST_CASE("accuracy: llm-foundry's figures, fitted on two thirds of MosaicML's published MPT rows, predict the third "
          "held out",
          "[accuracy]")
{
  // configs/validation/llm-foundry/: the rows of the H100 and A100 tables as published, and the
  // figures tools/calibrate/fit_framework.py fitted on them (configs/calibration/DEVICE.llm-foundry.json),
  // each listing the runs it held out.
  namespace fs = std::filesystem;
  const fs::path source = fs::path(STEPSIM_SOURCE_DIR) / "configs";
  const nlohmann::json r = accuracy_report((source / "validation" / "llm-foundry").string());
  std::map<std::string, double> error;
  for (const auto& c : r["cases"])
    error[c["case"].get<std::string>()] = c["error_pct"].get<double>();
  for (const char* device : {"H100-SXM", "A100-SXM4-80GB"}) {
    INFO(device);
    std::ifstream in(source / "calibration" / (std::string(device) + ".llm-foundry.json"));
    const nlohmann::json figure = nlohmann::json::parse(in);
    const auto held_out         = figure["held_out"].get<std::vector<std::string>>();
    const auto fitted_on        = figure["fitted_on"].get<std::vector<std::string>>();
    REQUIRE(held_out.size() >= 15);
    REQUIRE(fitted_on.size() >= 2 * held_out.size() - 2);
    double held = 0;
    for (const auto& id : held_out) {
      INFO(id);
      REQUIRE(error.count(id) == 1);
      REQUIRE(std::find(fitted_on.begin(), fitted_on.end(), id) == fitted_on.end());
      held += std::abs(error[id]);
    }
    // 5.3% (H100) and 3.9% (A100) when fitted; 33% and 19% over the same tables with the device's
    // own figures, which those runs' software stack did not reach.
    CHECK(held / static_cast<double>(held_out.size()) <= 6.5);
  }
}

TEST_CASE("accuracy: leaving out a source drops the framework figures fitted on its runs", "[accuracy]")
{
  const nlohmann::json shipped = accuracy_report();
  const nlohmann::json r       = accuracy_report("--leave-out mpt");
  const auto dropped           = r["left_out"]["dropped"].get<std::set<std::string>>();
  CHECK(dropped == std::set<std::string>{"A100-SXM4-80GB.llm-foundry.json", "H100-SXM.llm-foundry.json"});
  double shipped_h100 = 0;
  for (const auto& c : shipped["cases"])
    if (c["case"] == "mpt_llmfoundry_7b_8xh100_80gb")
      shipped_h100 = c["error_pct"].get<double>();
  bool found = false;
  for (const auto& c : r["left_out"]["predicted"])
    if (c["case"] == "mpt_llmfoundry_7b_8xh100_80gb") {
      found = true;
      CHECK(c["error_pct"].get<double>() != Approx(shipped_h100).margin(1.0)); // the device's figures instead
    }
  CHECK(found);
}

TEST_CASE("accuracy: leaving out one of a framework figure's sources refits it on the other's runs", "[accuracy]")
{
  // configs/calibration/A100-SXM4-80GB.deepspeed-megatron.json is fitted on MT-NLG and BLOOM:
  // holding MT-NLG out refits it on BLOOM alone, and MT-NLG is predicted with that figure.
  const nlohmann::json shipped = accuracy_report();
  const nlohmann::json r       = accuracy_report("--leave-out mtnlg");
  const auto& l                = r["left_out"];
  REQUIRE(l["refitted"].get<bool>());
  REQUIRE(l["refits"].size() == 1);
  CHECK(l["refits"][0]["framework_figure"] == "A100-SXM4-80GB.deepspeed-megatron.json");
  CHECK(l["refits"][0]["fitted_on_runs"].get<int>() == 1);
  CHECK(l["refits"][0]["refitted"].get<double>() >= 0.3);
  CHECK(l["refits"][0]["refitted"].get<double>() <= 0.869); // the device file's figure bounds the search
  CHECK(l["dropped"].empty());
  REQUIRE(l["predicted"].size() == 1);
  CHECK(l["predicted"][0]["case"] == "mtnlg530b_2240gpu");
  double shipped_mtnlg = 0;
  for (const auto& c : shipped["cases"])
    if (c["case"] == "mtnlg530b_2240gpu")
      shipped_mtnlg = c["error_pct"].get<double>();
  // Fitted on both, MT-NLG is within 6%; predicted from BLOOM's figure alone, within 8% (issue 16
  // asks 12% of a left-out source).
  CHECK(std::abs(shipped_mtnlg) <= 6.0);
  CHECK(std::abs(l["predicted"][0]["error_pct"].get<double>()) <= 8.0);
}

TEST_CASE("accuracy: training steps measured on an H200 in plain PyTorch, never fitted on, are predicted from the "
          "kernels measured on the same GPU",
          "[accuracy]")
{
  // configs/validation/h200-pytorch/: 12 whole training steps (GPT 125M to 6.7B, one GPU, eager
  // PyTorch under torch.autocast) timed by tools/calibrate/train_step.py, predicted with the
  // pytorch-autocast profile and configs/calibration/H200-SXM.json, which `stepsim calibrate fit`
  // fitted on that GPU's kernel rows alone. 3.8% when recorded, every step predicted 1-7% short;
  // 14.9% with the generic profile (fused kernels, the residual stream in bf16).
  namespace fs = std::filesystem;
  const fs::path source = fs::path(STEPSIM_SOURCE_DIR) / "configs";
  std::ifstream in(source / "calibration" / "H200-SXM.json");
  const nlohmann::json calibration = nlohmann::json::parse(in);
  REQUIRE(calibration["fit"]["measurements"] == "configs/calibration/measurements/H200-SXM.json");
  const nlohmann::json r = accuracy_report((source / "validation" / "h200-pytorch").string());
  REQUIRE(r["cases"].size() == 12);
  for (const auto& c : r["cases"]) {
    INFO(c["case"].get<std::string>());
    CHECK(c["framework"] == "pytorch-autocast");
    CHECK(c["fits_in_memory"] == true);
    CHECK(std::abs(c["error_pct"].get<double>()) <= 10.0);
  }
  CHECK(r["mape_pct"].get<double>() <= 6.0);

  // Issue 16: the ranking of one model's configurations is preserved. Tokens per second of each
  // model's runs (micro-batch × sequence per step), measured and predicted, in the same order.
  std::map<std::string, std::vector<std::pair<double, double>>> by_model; // measured, predicted
  for (const auto& c : r["cases"]) {
    const std::string id = c["case"].get<std::string>(); // h200_pytorch_gpt1.3B_seq2048_mb8
    const auto seq = id.find("_seq"), mb = id.find("_mb");
    REQUIRE((seq != std::string::npos && mb != std::string::npos));
    const double tokens = std::stod(id.substr(seq + 4, mb - seq - 4)) * std::stod(id.substr(mb + 3));
    by_model[id.substr(0, seq)].emplace_back(tokens / c["measured"].get<double>(),
                                             tokens / c["predicted"].get<double>());
  }
  int compared = 0;
  for (auto& [model, runs] : by_model) {
    INFO(model);
    std::sort(runs.begin(), runs.end());
    for (size_t i = 1; i < runs.size(); ++i, ++compared)
      CHECK(runs[i].second > runs[i - 1].second);
  }
  CHECK(compared >= 5);
}

TEST_CASE("accuracy: the configurations of one model are ranked as their measurements rank them", "[accuracy]")
{
  // Korthikanti's 22B with full and with selective recompute (selective measured faster and
  // predicted faster), and a copy of the selective run whose measurement says it was the slowest:
  // its prediction cannot keep that order against either.
  namespace fs       = std::filesystem;
  const fs::path in  = fs::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  const fs::path dir = fs::path(stepsim::testing::write_temp_file("rank.keep", "")).parent_path() / "rank";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* id : {"korthikanti2022_22B_full_recompute", "korthikanti2022_22B_sp_selective"})
    fs::copy_file(in / (std::string(id) + ".json"), dir / (std::string(id) + ".json"));
  std::ifstream selective(in / "korthikanti2022_22B_sp_selective.json");
  nlohmann::json slow           = nlohmann::json::parse(selective);
  slow["validation"]["case"]     = "korthikanti2022_22B_slow_copy";
  slow["validation"]["measured"] = 2.0; // seconds per iteration: slower than full recompute's 1.42
  std::ofstream(dir / "slow_copy.json") << slow.dump();
  // Another model (its own shape) is not ranked against them.
  std::ifstream other_file(in / "megatron_sc21_table1_1.7B.json");
  nlohmann::json other = nlohmann::json::parse(other_file);
  std::ofstream(dir / "other.json") << other.dump();

  const nlohmann::json r = accuracy_report(dir.string());
  const auto& k          = r["ranking"];
  CHECK(k["models"].get<int>() == 1);
  REQUIRE(k["pairs"].get<int>() == 3);
  CHECK(k["in_order"].get<int>() == 1); // full against selective
  CHECK(k["kendall_tau"].get<double>() == Approx(-1.0 / 3));
  REQUIRE(k["out_of_order"].size() == 2);
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& p : k["out_of_order"])
    out.insert({p["measured_faster"].get<std::string>(), p["measured_slower"].get<std::string>()});
  CHECK(out.count({"korthikanti2022_22B_full_recompute", "korthikanti2022_22B_slow_copy"}) == 1);
  CHECK(out.count({"korthikanti2022_22B_sp_selective", "korthikanti2022_22B_slow_copy"}) == 1);
  auto text = stepsim::testing::run_stepsim("accuracy " + dir.string());
  CHECK(text.output.find("ranking: 1 of 3 pairs") != std::string::npos);
}

TEST_CASE("accuracy: the B200's FP8 figure, fitted on Megatron-Bridge's two B200 runs, predicts each from the other",
          "[accuracy]")
{
  // configs/calibration/B200.json: gemm_efficiency_by_dtype.fp8 fitted by tools/calibrate/fit_runs.py
  // --precision fp8 on the DGX-B200 rows of Megatron-Bridge's 25.11 table; the DGX-H100 rows of
  // the same table are fitted on nothing (the H100's FP8 figures come from NeMo 24.07's runs).
  const std::string dir =
      (std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "megatron-bridge").string();
  const nlohmann::json shipped = accuracy_report(dir);
  REQUIRE(shipped["cases"].size() == 7);
  for (const auto& c : shipped["cases"]) {
    const auto name = c["case"].get<std::string>();
    INFO(name);
    // The two GB200 rows are predicted from the B200's figure at the GB200's peaks (+18.4 and
    // +3.8 % when recorded); the others within 13 % (the H100's 8B, fitted on nothing, −12.7 %).
    CHECK(std::abs(c["error_pct"].get<double>()) <= (name.find("gb200") != std::string::npos ? 20.0 : 13.0));
  }
  // Across the devices, each model's rows keep their measured order.
  CHECK(shipped["ranking"]["out_of_order"].empty());
  CHECK(shipped["ranking"]["in_order"].get<int>() == 6);
  for (const char* left : {"llama3_8b_8xb200", "llama31_405b_128xb200"}) {
    INFO(left);
    const nlohmann::json r = accuracy_report(dir + " --leave-out " + left);
    const auto& l          = r["left_out"];
    REQUIRE(l["refitted"].get<bool>());
    // The FP8 figure, and Megatron-Core's host time per launch on the B200, fitted on both runs
    // (and Qwen3-30B-A3B's, not in this folder): each refitted on the other run.
    REQUIRE(l["refits"].size() == 2);
    CHECK(l["refits"][0]["devices"][0] == "B200");
    CHECK(l["refits"][0]["precision"] == "fp8");
    CHECK(l["refits"][0]["fitted_on_runs"].get<int>() == 1);
    const nlohmann::json launch = host_time_refit(l, "host_launch_overhead");
    REQUIRE_FALSE(launch.is_null());
    CHECK(launch["framework_figure"] == "B200.megatron-core.json");
    CHECK(launch["fitted_on_runs"].get<int>() == 1);
    REQUIRE(l["predicted"].size() == 1);
    // Each run predicted from the other's figure: 11.2 and 11.3 % when recorded; issue 16 asks
    // 12 % of a left-out source.
    CHECK(std::abs(l["predicted"][0]["error_pct"].get<double>()) <= 12.0);
  }
}
