// `stepsim accuracy [DIR]`: simulates every published case in DIR (configs/validation/ by default)
// and compares each prediction with the measurement, in the unit the source printed it: TFLOP/s
// per GPU (converted with the source's own FLOP formula), seconds per iteration or samples per
// second, tokens per second. Prints a table, the mean absolute percentage error overall, per
// framework profile and per device, the worst case, the cases predicted not to fit in memory, and
// whether the configurations of one model come out in the order their measurements put them;
// writes the same as Markdown (for the README) or JSON (for tests and plots).
#include "models/device.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "tools/stepsim/calibration_override.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace stepsim {
namespace {

struct AccuracyOptions {
  std::string dir; // configs/validation/ when not given
  std::string markdown_out, json_out;
  std::vector<std::string> leave_out; // sources whose cases are held out of what is fitted
  bool quiet = false;
};

struct CaseResult {
  std::string id, file, metric, unit, citation, url;
  std::string framework, device; // the profile the case names, and its GPU
  std::string model;             // the model's name and shape: its configurations are ranked together
  bool fits = true;              // predicted to fit in memory (every published run ran)
  int gpus         = 0;
  double measured  = 0;
  double predicted = 0;
  double error_pct = 0; // (predicted - measured) / measured
  // Seconds per iteration become tokens per second (the step's tokens over them), so that higher
  // is better for every metric and runs of different batches compare: this factor, 0 otherwise.
  double tokens_per_step = 0;
};

// FLOPs of one iteration by the formula the source used to print its TFLOP/s.
double source_flops(const std::string& formula, const Scenario& s, const std::string& path)
{
  if (formula == "megatron_recompute") {
    // Narayanan et al. 2021, eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)); counts the recomputed
    // forward, not the attention's causal half.
    const double B = double(s.training.global_batch_size), seq = s.model.seq_length, l = s.model.num_layers,
                 h = s.model.hidden_size, V = s.model.vocab_size;
    return 96.0 * B * seq * l * h * h * (1.0 + seq / (6.0 * h) + V / (16.0 * l * h));
  }
  if (formula == "megatron_model") {
    // The same count without the recomputed forward: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)), the
    // model FLOPs behind Megatron-Core's printed TFLOP/s and MFU (MFU = TFLOP/s over the peak).
    const double B = double(s.training.global_batch_size), seq = s.model.seq_length, l = s.model.num_layers,
                 h = s.model.hidden_size, V = s.model.vocab_size;
    return 72.0 * B * seq * l * h * h * (1.0 + seq / (6.0 * h) + V / (12.0 * l * h));
  }
  throw InputError({fmt::format("{}.flop_formula: unknown formula \"{}\"; known: megatron_recompute, megatron_model",
                                path, formula)});
}

CaseResult run_case(const std::string& file)
{
  nlohmann::json document = read_json_file(file);
  Problems problems;
  JsonReader top(document, file, problems);
  JsonReader v = top.object("validation", true);
  CaseResult c;
  c.file     = file;
  c.id       = v.text("case", std::filesystem::path(file).stem().string());
  c.metric   = v.text("metric", std::nullopt, {"tflops_per_gpu", "seconds_per_iteration", "samples_per_s", "tokens_per_s"});
  c.unit     = v.text("unit");
  c.measured = v.number("measured", std::nullopt, 0, true);
  // What no published run measured, by metric: a GPU at 100 PFLOP/s (a B200 peaks at 2.25 in
  // bf16), an iteration of a week, or a rate above check's bound of 1e13 per second. Beyond it
  // the figure is a misprint, and its error would be read as the model's.
  const double most = c.metric == "tflops_per_gpu" ? 1e5 : c.metric == "seconds_per_iteration" ? 7 * 24 * 3600.0 : 1e13;
  if (c.measured > most)
    problems.add(v.path_of("measured"),
                 fmt::format("{:g} {}: expected at most {:g} for {}", c.measured, c.unit.empty() ? "" : c.unit, most, c.metric));
  std::string formula = c.metric == "tflops_per_gpu" ? v.text("flop_formula") : "";
  JsonReader source   = v.object("source", true);
  c.citation          = source.text("citation");
  c.url               = source.text("url", std::string());
  problems.throw_if_any();

  Scenario s = load_scenario(file);
  // Every published run ran: one predicted not to fit is reported as such, and still timed.
  s.simulation.allow_oom = true;
  Report r    = simulate_isolated(s);
  c.gpus      = r.gpus;
  c.framework = r.framework;
  c.device    = r.device;
  c.fits      = r.fits_in_memory;
  if (c.metric == "tflops_per_gpu")
    c.predicted = source_flops(formula, s, v.path()) / r.step_time_s / r.gpus / 1e12;
  else if (c.metric == "seconds_per_iteration")
    c.predicted = r.step_time_s;
  else if (c.metric == "tokens_per_s")
    c.predicted = r.tokens_per_s;
  else
    c.predicted = r.samples_per_s;
  c.error_pct = (c.predicted - c.measured) / c.measured * 100.0;
  // Configurations of one model: its name and the shape that makes it that model (a sequence
  // length, a batch or a parallel plan is a configuration of it; two sources' "GPT 1.7B" are not
  // one model).
  c.model = fmt::format("{} ({} layers, hidden {}, ffn {}, vocabulary {})", s.model.name, s.model.num_layers,
                        s.model.hidden_size, s.model.ffn_hidden_size, s.model.vocab_size);
  if (c.metric == "seconds_per_iteration")
    c.tokens_per_step = double(s.training.global_batch_size) * s.model.seq_length;
  return c;
}

// Whether the configurations of one model keep their measured order: every pair of cases of the
// same model and metric whose measurements differ, compared by throughput (higher is better). This
// is what a sweep or the planner relies on when it ranks a model's configurations.
struct Ranking {
  int models = 0;  // models with two configurations or more
  int pairs  = 0;  // pairs compared
  int in_order = 0;
  double kendall_tau = 1; // (in order - out of order) / pairs
  std::vector<std::pair<const CaseResult*, const CaseResult*>> out_of_order; // the measured faster first
};

double throughput(const CaseResult& c, double value)
{
  return c.tokens_per_step > 0 ? c.tokens_per_step / value : value;
}

Ranking rank(const std::vector<CaseResult>& cases)
{
  std::map<std::pair<std::string, std::string>, std::vector<const CaseResult*>> by_model;
  for (const auto& c : cases)
    by_model[{c.model, c.metric}].push_back(&c);
  Ranking r;
  for (const auto& [key, group] : by_model) {
    if (group.size() < 2)
      continue;
    ++r.models;
    for (size_t i = 0; i < group.size(); ++i)
      for (size_t j = i + 1; j < group.size(); ++j) {
        const CaseResult* a = group[i];
        const CaseResult* b = group[j];
        const double measured = throughput(*a, a->measured) - throughput(*b, b->measured);
        if (measured == 0)
          continue; // a tie measured has no order to keep
        const double predicted = throughput(*a, a->predicted) - throughput(*b, b->predicted);
        ++r.pairs;
        if ((measured > 0) == (predicted > 0) && predicted != 0)
          ++r.in_order;
        else
          r.out_of_order.emplace_back(measured > 0 ? a : b, measured > 0 ? b : a);
      }
  }
  if (r.pairs > 0)
    r.kendall_tau = double(2 * r.in_order - r.pairs) / r.pairs;
  return r;
}

std::string ranking_line(const Ranking& r)
{
  if (r.pairs == 0)
    return "no model has two configurations with different measurements to rank";
  std::string out = fmt::format("ranking: {} of {} pairs of configurations of one model in their measured order "
                                "(Kendall's tau {:.2f}, {} models)",
                                r.in_order, r.pairs, r.kendall_tau, r.models);
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < std::min(kShown, r.out_of_order.size()); ++i)
    out += fmt::format("{}{} measured faster than {}", i == 0 ? "; out of order: " : ", ", r.out_of_order[i].first->id,
                       r.out_of_order[i].second->id);
  if (r.out_of_order.size() > kShown)
    out += fmt::format(" and {} more", r.out_of_order.size() - kShown);
  return out;
}

struct Group {
  double mape = 0;
  int cases   = 0;
};

struct Summary {
  double mape = 0;
  const CaseResult* worst = nullptr;
  std::map<std::string, Group> by_framework, by_device;
  std::vector<std::string> not_fitting;
};

Summary summarise(const std::vector<CaseResult>& cases)
{
  Summary s;
  for (const auto& c : cases) {
    s.mape += std::abs(c.error_pct) / static_cast<double>(cases.size());
    if (s.worst == nullptr || std::abs(c.error_pct) > std::abs(s.worst->error_pct))
      s.worst = &c;
    for (auto* group : {&s.by_framework[c.framework], &s.by_device[c.device]}) {
      group->mape += std::abs(c.error_pct);
      ++group->cases;
    }
    if (!c.fits)
      s.not_fitting.push_back(c.id);
  }
  for (auto* groups : {&s.by_framework, &s.by_device})
    for (auto& [name, g] : *groups)
      g.mape /= g.cases;
  return s;
}

// "name 3.2% (n)" for each group, in name order.
std::string groups_line(const std::map<std::string, Group>& groups, const char* separator)
{
  std::string out;
  for (const auto& [name, g] : groups)
    out += fmt::format("{}{} {:.1f}% ({})", out.empty() ? "" : separator, name, g.mape, g.cases);
  return out;
}

std::string not_fitting_line(const Summary& sum)
{
  std::string ids;
  for (const auto& id : sum.not_fitting)
    ids += (ids.empty() ? "" : ", ") + id;
  return ids.empty() ? "every case is predicted to fit in memory" : "predicted not to fit in memory: " + ids;
}

std::string text_table(const std::vector<CaseResult>& cases, const Summary& sum, const Ranking& ranking)
{
  std::string out = fmt::format("{:<46} {:>5}  {:<16} {:>10} {:>10} {:>8}\n", "case", "GPUs", "metric", "measured",
                                "predicted", "error");
  for (const auto& c : cases)
    out += fmt::format("{:<46} {:>5}  {:<16} {:>10.4g} {:>10.4g} {:>+7.1f}%\n", c.id, c.gpus, c.unit, c.measured,
                       c.predicted, c.error_pct);
  out += fmt::format("\nmean absolute percentage error {:.1f}% over {} cases; worst {} ({:+.1f}%)\n", sum.mape,
                     cases.size(), sum.worst->id, sum.worst->error_pct);
  out += fmt::format("  per framework: {}\n  per device:    {}\n  {}\n  {}\n", groups_line(sum.by_framework, ", "),
                     groups_line(sum.by_device, ", "), not_fitting_line(sum), ranking_line(ranking));
  return out;
}

// A line of the text table as the start of a sentence in Markdown.
std::string sentence(std::string line)
{
  if (!line.empty())
    line[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(line[0])));
  return line;
}

std::string markdown_table(const std::vector<CaseResult>& cases, const Summary& sum, const Ranking& ranking)
{
  std::string out = "| case | GPUs | metric | measured | predicted | error | source |\n"
                    "| --- | ---: | --- | ---: | ---: | ---: | --- |\n";
  for (const auto& c : cases)
    out += fmt::format("| {} | {} | {} | {:.4g} | {:.4g} | {:+.1f}% | [{}]({}) |\n", c.id, c.gpus, c.unit, c.measured,
                       c.predicted, c.error_pct, c.citation, c.url);
  out += fmt::format("\nMean absolute percentage error **{:.1f}%** over {} cases; worst case {} ({:+.1f}%).\n", sum.mape,
                     cases.size(), sum.worst->id, sum.worst->error_pct);
  out += fmt::format("Per framework: {}. Per device: {}. {}.\n{}.\n", groups_line(sum.by_framework, ", "),
                     groups_line(sum.by_device, ", "), sentence(not_fitting_line(sum)), sentence(ranking_line(ranking)));
  return out;
}

nlohmann::json json_report(const std::vector<CaseResult>& cases, const Summary& sum, const Ranking& ranking)
{
  nlohmann::json j;
  j["cases"] = nlohmann::json::array();
  for (const auto& c : cases)
    j["cases"].push_back({{"case", c.id},
                          {"file", std::filesystem::path(c.file).filename().string()},
                          {"gpus", c.gpus},
                          {"metric", c.metric},
                          {"unit", c.unit},
                          {"measured", c.measured},
                          {"predicted", c.predicted},
                          {"error_pct", c.error_pct},
                          {"source", c.citation},
                          {"url", c.url},
                          {"framework", c.framework},
                          {"device", c.device},
                          {"model", c.model},
                          {"fits_in_memory", c.fits}});
  for (const auto& [key, groups] : {std::pair{"by_framework", &sum.by_framework}, std::pair{"by_device", &sum.by_device}})
    for (const auto& [name, g] : *groups)
      j[key][name] = {{"mape_pct", g.mape}, {"cases", g.cases}};
  j["not_fitting"]     = sum.not_fitting;
  j["mape_pct"]        = sum.mape;
  j["worst_case"]      = sum.worst->id;
  j["worst_error_pct"] = sum.worst->error_pct;
  j["ranking"]         = {{"models", ranking.models},
                          {"pairs", ranking.pairs},
                          {"in_order", ranking.in_order},
                          {"kendall_tau", ranking.kendall_tau},
                          {"out_of_order", nlohmann::json::array()}};
  for (const auto& [faster, slower] : ranking.out_of_order)
    j["ranking"]["out_of_order"].push_back({{"measured_faster", faster->id}, {"measured_slower", slower->id}});
  return j;
}

// Whether a case belongs to a source named on the command line: the name, case-insensitively, is
// part of the case's id or of its citation ("korthikanti", "mtnlg", "megatron_core", "sc21_table2").
bool from_source(const CaseResult& c, const std::string& source)
{
  auto lower = [](std::string t) {
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return t;
  };
  const std::string name = lower(source);
  return lower(c.id).find(name) != std::string::npos || lower(c.citation).find(name) != std::string::npos;
}

// --leave-out: the cases of the named sources, held out and reported apart. A figure fitted on
// published runs (a calibration file's "fitted_on" list: the GEMM efficiencies of
// configs/calibration/) is refitted without the held-out runs it was fitted on, by the search
// tools/calibrate/fit_runs.py runs, and the held-out runs are predicted with the refitted figure.
// Devices whose files list the same runs share one figure (the A100's two memory sizes) and are
// refitted together. A held-out run no figure was fitted on is predicted as shipped.
struct Refit {
  std::vector<std::string> devices;
  std::string framework_file; // a framework figure (calibration/DEVICE.FRAMEWORK.json); empty: a device's
  std::string precision;      // a precision's own figure of the device (gemm_efficiency_by_dtype); empty: the common one
  double shipped = 0, refitted = 0;
  int fitted_on = 0; // runs the refitted figure is fitted on
  std::string kernel; // an attention kernel's figure refitted beside the precision's (fit_runs.py --attention-kernel)
  double kernel_shipped = 0, kernel_refitted = 0;
  // The figure refitted: a GEMM efficiency, or a framework's step_host_overhead or
  // host_launch_overhead (seconds).
  std::string figure = "gemm_efficiency";
};

struct LeaveOut {
  std::vector<std::string> sources;
  double held_out_mape = 0, kept_mape = 0;
  int held_out = 0, kept = 0;
  std::vector<Refit> refits;
  // Framework figures (calibration/DEVICE.FRAMEWORK.json) fitted on a held-out source's runs
  // alone (llm-foundry's, on MosaicML's tables): none is left to refit them on, and their
  // framework's runs are predicted with the device's figures instead. A framework figure fitted
  // on runs of other sources too is refitted on those (its GEMM figure; the rest as shipped).
  std::vector<std::string> dropped;
  std::vector<CaseResult> predicted; // the held-out cases, with the refitted figures
};

double mape_of(const std::vector<CaseResult>& cases)
{
  double sum = 0;
  for (const auto& c : cases)
    sum += std::abs(c.error_pct);
  return cases.empty() ? 0 : sum / static_cast<double>(cases.size());
}

// The files of the kept cases that a figure was fitted on (its runs, by case id).
std::vector<std::string> kept_files(const std::vector<CaseResult>& kept, const std::vector<std::string>& runs)
{
  std::vector<std::string> files;
  for (const auto& c : kept)
    if (std::find(runs.begin(), runs.end(), c.id) != runs.end())
      files.push_back(c.file);
  return files;
}

// The MAPE over these cases, each simulated with the calibration as it now stands.
double mape_of_files(const std::vector<std::string>& files)
{
  std::vector<CaseResult> fit;
  for (const auto& file : files)
    fit.push_back(run_case(file));
  return mape_of(fit);
}

LeaveOut leave_out(const std::vector<CaseResult>& cases, const std::vector<std::string>& sources, bool quiet)
{
  LeaveOut l{sources, 0, 0, 0, 0, {}, {}, {}};
  for (const auto& source : sources)
    if (std::none_of(cases.begin(), cases.end(), [&](const CaseResult& c) { return from_source(c, source); }))
      throw InputError({fmt::format("--leave-out: no case's id or citation names \"{}\"", source)});
  std::set<std::string> held;
  std::vector<CaseResult> kept;
  for (const auto& c : cases) {
    const bool out = std::any_of(sources.begin(), sources.end(), [&](const std::string& s) { return from_source(c, s); });
    if (out) {
      held.insert(c.id);
      l.predicted.push_back(c);
    } else
      kept.push_back(c);
  }
  // The fitted figures, one per list of runs, with the devices that share it.
  std::map<std::vector<std::string>, Refit> figures;
  std::map<std::vector<std::string>, double> upper;
  for (const auto& name : device_names()) {
    const FittedFigure f = fitted_figure(name);
    if (f.fitted_on.empty())
      continue;
    Refit& r   = figures[f.fitted_on];
    r.shipped  = f.gemm_efficiency;
    r.devices.push_back(name);
    upper[f.fitted_on] = f.upper_bound;
  }
  std::optional<CalibrationOverride> override_calibration; // made at the first figure to drop or refit
  for (const auto& f : framework_figures()) {
    const bool from_held = std::any_of(f.fitted_on.begin(), f.fitted_on.end(), [&](const std::string& id) {
      return std::any_of(sources.begin(), sources.end(), [&](const std::string& s) {
        CaseResult c;
        c.id = id;
        return from_source(c, s);
      });
    });
    if (!from_held)
      continue;
    if (!override_calibration)
      override_calibration.emplace();
    const std::vector<std::string> files = kept_files(kept, f.fitted_on);
    if (files.empty() || f.device.empty()) {
      override_calibration->remove(f.file);
      l.dropped.push_back(f.file);
      continue;
    }
    auto mape_at = [&](double efficiency) {
      override_calibration->set_framework(f.file, efficiency);
      return mape_of_files(files);
    };
    // The search fit_framework.py runs for a GEMM figure alone.
    Refit refit{{f.device}, f.file, "", f.gemm_efficiency, 0, static_cast<int>(files.size()), "", 0, 0};
    refit.refitted = golden_section_minimum(mape_at, 0.3, f.upper_bound, 0.004);
    override_calibration->set_framework(f.file, refit.refitted);
    if (!quiet)
      fmt::print(stderr, "refitted {} gemm_efficiency without the held-out runs: {} (shipped {}) on {} runs\n", f.file,
                 refit.refitted, refit.shipped, refit.fitted_on);
    l.refits.push_back(refit);
  }
  if (!l.dropped.empty() || !l.refits.empty()) {
    for (auto& c : l.predicted)
      c = run_case(c.file);
    if (!quiet)
      for (const auto& f : l.dropped)
        fmt::print(stderr, "dropped {}: fitted on runs of a held-out source\n", f);
  }
  for (auto& [runs, refit] : figures) {
    if (std::none_of(runs.begin(), runs.end(), [&](const std::string& id) { return held.count(id) > 0; }))
      continue; // fitted on none of the held-out runs
    const std::vector<std::string> files = kept_files(kept, runs);
    if (files.empty())
      throw InputError({fmt::format("--leave-out: every run the {} figure is fitted on is held out; nothing is left "
                                    "to fit it on",
                                    refit.devices.front())});
    if (!override_calibration)
      override_calibration.emplace();
    auto set = [&](double efficiency) {
      for (const auto& d : refit.devices)
        override_calibration->set(d, efficiency);
    };
    auto mape_at = [&](double efficiency) {
      set(efficiency);
      return mape_of_files(files);
    };
    refit.refitted  = golden_section_minimum(mape_at, 0.4, upper[runs], 0.002);
    refit.fitted_on = static_cast<int>(files.size());
    set(refit.refitted);
    for (auto& c : l.predicted)
      if (std::find(refit.devices.begin(), refit.devices.end(), c.device) != refit.devices.end())
        c = run_case(c.file);
    if (!quiet)
      fmt::print(stderr, "refitted {} gemm_efficiency without the held-out runs: {} (shipped {}) on {} runs\n",
                 refit.devices.front(), refit.refitted, refit.shipped, refit.fitted_on);
    l.refits.push_back(refit);
  }
  // A precision's own figure (fitted on the device's runs in that precision alone) is refitted
  // on those of its runs that are kept, as fit_runs.py --precision searches it.
  for (const auto& name : device_names())
    for (const auto& f : fitted_dtype_figures(name)) {
      if (std::none_of(f.fitted_on.begin(), f.fitted_on.end(), [&](const std::string& id) { return held.count(id) > 0; }))
        continue;
      const std::vector<std::string> files = kept_files(kept, f.fitted_on);
      if (files.empty())
        throw InputError({fmt::format("--leave-out: every run the {} {} figure is fitted on is held out; nothing is "
                                      "left to fit it on",
                                      f.device, f.precision)});
      if (!override_calibration)
        override_calibration.emplace();
      auto mape_at = [&](double efficiency) {
        override_calibration->set_dtype(f.device, f.precision, efficiency);
        return mape_of_files(files);
      };
      Refit refit{{f.device}, "", f.precision, f.gemm_efficiency, 0, static_cast<int>(files.size()), "", 0, 0};
      if (f.kernel.empty())
        refit.refitted = golden_section_minimum(mape_at, 0.3, f.upper_bound, 0.002);
      else {
        // The attention kernel fitted beside it is refitted with it, as fit_runs.py
        // --attention-kernel searches the pair: for each attention figure, the GEMM figure that
        // fits best (searched to fit_framework.py's tolerance: each try runs every kept run).
        // The GEMM figure moves little between neighbouring attention figures, so each search
        // starts in a bracket around the last one found, and widens to the whole range when its
        // minimum falls on the bracket's edge.
        std::map<double, double> gemm_at;
        double last = f.gemm_efficiency;
        auto mape_at_kernel = [&](double figure) {
          override_calibration->set_kernel(f.device, f.kernel, figure);
          const double lo = std::max(0.3, last - 0.06), hi = std::min(f.upper_bound, last + 0.06);
          double gemm     = golden_section_minimum(mape_at, lo, hi, 0.004);
          if ((gemm - lo < 0.005 && lo > 0.3) || (hi - gemm < 0.005 && hi < f.upper_bound))
            gemm = golden_section_minimum(mape_at, 0.3, f.upper_bound, 0.004);
          gemm_at[figure] = last = gemm;
          return mape_at(gemm);
        };
        refit.kernel          = f.kernel;
        refit.kernel_shipped  = f.kernel_figure;
        refit.kernel_refitted = golden_section_minimum(mape_at_kernel, 0.1, f.kernel_upper_bound, 0.004);
        if (!gemm_at.count(refit.kernel_refitted))
          mape_at_kernel(refit.kernel_refitted);
        override_calibration->set_kernel(f.device, f.kernel, refit.kernel_refitted);
        refit.refitted = gemm_at[refit.kernel_refitted];
      }
      override_calibration->set_dtype(f.device, f.precision, refit.refitted);
      for (auto& c : l.predicted)
        if (c.device == f.device)
          c = run_case(c.file);
      if (!quiet)
        fmt::print(stderr, "refitted {} gemm_efficiency_by_dtype.{} without the held-out runs: {} (shipped {}){} on {} runs\n",
                   f.device, f.precision, refit.refitted, refit.shipped,
                   refit.kernel.empty() ? std::string()
                                        : fmt::format(", attention_efficiency_by_kernel.{} {} (shipped {})", refit.kernel,
                                                      refit.kernel_refitted, refit.kernel_shipped),
                   refit.fitted_on);
      l.refits.push_back(refit);
    }
  // A framework's host times (fit_step_overhead.py: per step, per launch) are refitted last, on
  // the kept runs each was fitted on, with the GEMM figures as refitted above; fitted on held-out
  // runs alone, one is dropped (0).
  for (const auto& f : host_time_figures()) {
    if (std::none_of(f.fitted_on.begin(), f.fitted_on.end(), [&](const std::string& id) { return held.count(id) > 0; }))
      continue;
    if (!override_calibration)
      override_calibration.emplace();
    const std::vector<std::string> files = kept_files(kept, f.fitted_on);
    if (files.empty()) {
      override_calibration->set_host_time(f.file, f.figure, 0);
      l.dropped.push_back(f.file + "'s " + f.figure);
      if (!quiet)
        fmt::print(stderr, "dropped {}'s {}: fitted on runs of a held-out source\n", f.file, f.figure);
    } else {
      const HostTimeRange& range = *std::find_if(std::begin(kHostTimeRanges), std::end(kHostTimeRanges),
                                                 [&](const HostTimeRange& r) { return f.figure == r.figure; });
      // The search fit_step_overhead.py runs, over the same range, in the figure's unit.
      auto mape_at = [&](double units) {
        override_calibration->set_host_time(f.file, f.figure, units * range.unit);
        return mape_of_files(files);
      };
      Refit refit{{}, f.file, "", f.seconds, 0, static_cast<int>(files.size()), "", 0, 0, f.figure};
      refit.refitted = golden_section_minimum(mape_at, 0.0, range.upper, range.tolerance) * range.unit;
      override_calibration->set_host_time(f.file, f.figure, refit.refitted);
      if (!quiet)
        fmt::print(stderr, "refitted {} {} without the held-out runs: {} s (shipped {} s) on {} runs\n", f.file,
                   f.figure, refit.refitted, refit.shipped, refit.fitted_on);
      l.refits.push_back(refit);
    }
    for (auto& c : l.predicted)
      c = run_case(c.file);
  }
  l.held_out      = static_cast<int>(l.predicted.size());
  l.kept          = static_cast<int>(kept.size());
  l.held_out_mape = mape_of(l.predicted);
  l.kept_mape     = mape_of(kept);
  return l;
}

std::string leave_out_line(const LeaveOut& l)
{
  std::string names, refits;
  for (const auto& s : l.sources)
    names += (names.empty() ? "" : ", ") + s;
  for (const auto& r : l.refits) {
    std::string devices;
    for (const auto& d : r.devices)
      devices += (devices.empty() ? "" : "/") + d;
    const std::string kernel = r.kernel.empty() ? std::string()
                                                : fmt::format(" and attention_efficiency_by_kernel.{} {} (shipped {})",
                                                              r.kernel, r.kernel_refitted, r.kernel_shipped);
    if (r.figure != "gemm_efficiency")
      refits += fmt::format("{}{} {} {} s (shipped {} s), refitted on {} runs", refits.empty() ? "" : "; ",
                            r.framework_file, r.figure, r.refitted, r.shipped, r.fitted_on);
    else
      refits += fmt::format("{}{} gemm_efficiency{} {} (shipped {}){}, refitted on {} runs", refits.empty() ? "" : "; ",
                            r.framework_file.empty() ? devices : r.framework_file,
                            r.precision.empty() ? "" : "_by_dtype." + r.precision, r.refitted, r.shipped, kernel,
                            r.fitted_on);
  }
  std::string how = l.refits.empty() && l.dropped.empty() ? "as shipped (no fitted figure was fitted on them)"
                    : l.refits.empty()                    ? "predicted"
                                                          : "predicted with " + refits;
  for (const auto& f : l.dropped)
    how += fmt::format("{} without {} (fitted on them)", how == "predicted" ? "" : ",", f);
  std::string out = fmt::format("  left out {}: {:.1f}% over {} cases, {}; the other {} cases {:.1f}%\n", names,
                                l.held_out_mape, l.held_out, how, l.kept, l.kept_mape);
  for (const auto& c : l.predicted)
    out += fmt::format("    predicted {:<46} {:+6.1f}%\n", c.id, c.error_pct);
  return out;
}

int accuracy(const AccuracyOptions& o)
{
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(o.dir, ec))
    throw InputError({fmt::format("{}: not a folder of validation cases", o.dir)});
  for (const auto& entry : std::filesystem::directory_iterator(o.dir, ec))
    if (entry.path().extension() == ".json")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw InputError({fmt::format("{}: no .json validation cases in it", o.dir)});

  std::vector<CaseResult> cases;
  std::map<std::string, std::string> file_of_id; // each case id once: the ranking and --leave-out go by it
  for (const auto& f : files) {
    cases.push_back(run_case(f));
    if (const auto [at, fresh] = file_of_id.emplace(cases.back().id, f); !fresh)
      throw InputError({fmt::format("{}: validation.case: \"{}\" again, as in {}; expected one case per id", f,
                                    cases.back().id, at->second)});
    if (!o.quiet)
      fmt::print(stderr, "{}: {:+.1f}%\n", cases.back().id, cases.back().error_pct);
  }
  Summary sum           = summarise(cases);
  const Ranking ranking = rank(cases);
  const bool held = !o.leave_out.empty();
  const LeaveOut l = held ? leave_out(cases, o.leave_out, o.quiet) : LeaveOut{};
  if (!o.markdown_out.empty())
    write_text_file(o.markdown_out, markdown_table(cases, sum, ranking));
  if (!o.json_out.empty()) {
    nlohmann::json j = json_report(cases, sum, ranking);
    if (held) {
      j["left_out"] = {{"sources", l.sources},         {"mape_pct", l.held_out_mape}, {"cases", l.held_out},
                       {"kept_mape_pct", l.kept_mape}, {"kept_cases", l.kept},       {"refitted", !l.refits.empty()},
                       {"dropped", l.dropped}};
      for (const auto& r : l.refits) {
        nlohmann::json refit = {{"devices", r.devices},
                                {"shipped", r.shipped},
                                {"refitted", r.refitted},
                                {"fitted_on_runs", r.fitted_on},
                                {"figure", r.figure}};
        if (!r.framework_file.empty())
          refit["framework_figure"] = r.framework_file;
        if (!r.precision.empty())
          refit["precision"] = r.precision;
        if (!r.kernel.empty())
          refit["attention_kernel"] = {
              {"kernel", r.kernel}, {"shipped", r.kernel_shipped}, {"refitted", r.kernel_refitted}};
        j["left_out"]["refits"].push_back(refit);
      }
      for (const auto& c : l.predicted)
        j["left_out"]["predicted"].push_back({{"case", c.id}, {"predicted", c.predicted}, {"error_pct", c.error_pct}});
    }
    if (o.json_out == "-") // standard output, as run and collective take "-"
      fmt::print("{}\n", j.dump(2));
    else
      write_text_file(o.json_out, j.dump(2) + "\n");
  }
  if (!o.quiet && o.json_out != "-")
    fmt::print("{}{}", text_table(cases, sum, ranking), held ? leave_out_line(l) : "");
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<AccuracyOptions>();
  o->dir = config_dir() + "/validation";
  sub.add_option("DIR", o->dir, "folder of validation scenarios (each with a \"validation\" block)");
  sub.add_option("--markdown", o->markdown_out, "write the table as Markdown to this file");
  sub.add_option("--json", o->json_out,
                 "write the cases, the MAPE, the worst case and the ranking as JSON to this file (- = standard output, "
                 "no table)");
  sub.add_option("--leave-out", o->leave_out,
                 "hold out the cases of this source (part of a case's id or citation, e.g. korthikanti, mtnlg) "
                 "from what is fitted, and report their error as a prediction; repeatable");
  sub.add_flag("--quiet,-q", o->quiet, "print nothing (use with --json or --markdown)");
  return [o] { return accuracy(*o); };
}

const bool registered = CommandRegistry::add(
    "accuracy", "simulate the published cases (configs/validation/) and compare with their measurements",
    Command{setup});

} // namespace
} // namespace stepsim
