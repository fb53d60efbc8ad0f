// `stepsim check BASELINE.json`: the regression gate. A baseline lists scenarios with the
// throughput they are expected to reach; check simulates each one and fails (exit 1) when a
// prediction drops below its expectation by more than the tolerance. A prediction that rises
// beyond the tolerance is flagged "changed" but passes: it is not a regression, yet the baseline
// no longer describes the model, and `--update` accepts the new numbers on purpose.
//
// Baseline format (paths relative to the baseline file):
//   { "tolerance": 0.02,
//     "scenarios": [ { "scenario": "../scenarios/default.json",
//                      "set": { "parallelism.schedule": "gpipe" },      (optional)
//                      "tolerance": 0.05,                                (optional, per entry)
//                      "expected_tokens_per_s": 124080 } ] }
// A model without tokens (a CNN) is held by its samples per second instead:
// "expected_samples_per_s".
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

namespace stepsim {
namespace {

constexpr double kDefaultTolerance = 0.02;

struct CheckOptions {
  std::string file;
  std::vector<std::string> sets; // applied to every entry, after its own
  bool update = false;
};

struct Entry {
  std::string scenario; // as written in the baseline
  std::string path;     // resolved against the baseline's folder
  nlohmann::json set = nlohmann::json::object();
  std::optional<double> tolerance; // the entry's own, if it has one
  std::optional<double> expected; // tokens/s, or samples/s when `samples`
  bool samples = false;
  Scenario parsed;
};

struct Baseline {
  std::string description;
  double tolerance = kDefaultTolerance;
  std::vector<Entry> entries;
};

double tolerance_at(JsonReader& reader, const std::string& key, std::optional<double> fallback)
{
  double t = reader.number(key, fallback, 0);
  if (reader.has(key) && t >= 1) {
    reader.problems().add(reader.path_of(key), fmt::format("expected a fraction below 1 (0.02 is 2%), got {}", t));
    return kDefaultTolerance;
  }
  return t;
}

// Reads and checks the whole baseline, every scenario included, before anything is simulated,
// so that a user sees every problem at once. Messages start with the baseline's name.
Baseline read_baseline(const CheckOptions& o)
{
  const nlohmann::json document = read_json_file(o.file);
  const std::filesystem::path folder = std::filesystem::path(o.file).parent_path();
  Problems problems;
  Baseline b;
  JsonReader top(document, "", problems);
  b.description = top.text("description", "");
  b.tolerance   = tolerance_at(top, "tolerance", kDefaultTolerance);
  std::vector<std::string> entry_paths; // each entry's "scenarios[i]", as b.entries
  for (JsonReader& r : top.array_of_objects("scenarios", true)) {
    Entry e;
    e.scenario = r.text("scenario");
    if (r.has("tolerance"))
      e.tolerance = tolerance_at(r, "tolerance", std::nullopt);
    if (r.has("expected_tokens_per_s") && r.has("expected_samples_per_s"))
      problems.add(r.path_of("expected_samples_per_s"),
                   "expected one of expected_tokens_per_s and expected_samples_per_s, not both");
    // A throughput no job reaches is a misprint, not a baseline: 16,384 GPUs at a million tokens
    // a second each is under 2e10.
    constexpr double kMostThroughput = 1e13;
    auto throughput = [&](const char* key) {
      const double v = r.number(key, std::nullopt, 0, true);
      if (v > kMostThroughput)
        problems.add(r.path_of(key), fmt::format("{:g}: expected at most {:g} per second", v, kMostThroughput));
      return v;
    };
    if (r.has("expected_tokens_per_s"))
      e.expected = throughput("expected_tokens_per_s");
    else if (r.has("expected_samples_per_s")) {
      e.expected = throughput("expected_samples_per_s");
      e.samples  = true;
    } else if (!o.update) // --update fills in new entries
      problems.add(r.path_of("expected_tokens_per_s"),
                   fmt::format("required field is missing (expected a number); run `stepsim check {} --update` to "
                               "record the current prediction",
                               o.file));
    if (const nlohmann::json* set = r.raw("set")) {
      if (set->is_object())
        e.set = *set;
      else
        problems.add(r.path_of("set"), "expected an object of field paths and values, e.g. "
                                       "{\"parallelism.schedule\": \"gpipe\"}");
    }
    r.reject_unknown_keys();
    if (e.scenario.empty())
      continue; // already reported
    e.path = (folder / e.scenario).lexically_normal().string();
    if (!std::filesystem::is_regular_file(e.path)) {
      problems.add(r.path_of("scenario"), fmt::format("no scenario file \"{}\" (looked for {})", e.scenario, e.path));
      continue;
    }
    std::vector<std::string> assignments;
    for (const auto& [key, value] : e.set.items())
      assignments.push_back(key + "=" + value.dump());
    assignments.insert(assignments.end(), o.sets.begin(), o.sets.end());
    try {
      e.parsed = load_scenario(e.path, assignments);
    } catch (const InputError& error) {
      for (const auto& p : error.problems())
        problems.add(r.path(), fmt::format("scenario {}: {}", e.scenario, p));
    }
    // The same scenario with the same settings twice: two expectations for one prediction, one of
    // which must fail (or both be the same number, recorded twice).
    for (size_t j = 0; j < b.entries.size(); ++j)
      if (b.entries[j].path == e.path && b.entries[j].set == e.set)
        problems.add(r.path(), fmt::format("scenario {} with the same settings as {}; expected each scenario and "
                                           "settings once",
                                           e.scenario, entry_paths[j]));
    entry_paths.push_back(r.path());
    b.entries.push_back(std::move(e));
  }
  top.reject_unknown_keys();
  try {
    problems.throw_if_any();
  } catch (const InputError& error) {
    std::vector<std::string> named;
    for (const auto& p : error.problems())
      named.push_back(fmt::format("{}: {}", o.file, p));
    throw InputError(named);
  }
  return b;
}

std::string label(const Entry& e)
{
  std::string text = e.scenario;
  for (const auto& [key, value] : e.set.items())
    text += fmt::format(" {}={}", key, value.is_string() ? value.get<std::string>() : value.dump());
  return text;
}

// Deterministic: keys in a fixed order, numbers as to_json writes them.
std::string baseline_text(const Baseline& b, const std::vector<double>& predicted, const std::vector<bool>& samples)
{
  nlohmann::ordered_json out;
  if (!b.description.empty())
    out["description"] = b.description;
  out["tolerance"] = b.tolerance;
  out["scenarios"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < b.entries.size(); ++i) {
    const Entry& e = b.entries[i];
    nlohmann::ordered_json item;
    item["scenario"] = e.scenario;
    if (!e.set.empty())
      item["set"] = e.set;
    if (e.tolerance)
      item["tolerance"] = *e.tolerance;
    item[samples[i] ? "expected_samples_per_s" : "expected_tokens_per_s"] = predicted[i];
    out["scenarios"].push_back(item);
  }
  return out.dump(2) + "\n";
}

int check(const CheckOptions& o)
{
  if (o.update && !o.sets.empty())
    throw InputError({"--update with --set would record predictions for settings the baseline does not name; "
                      "put the overrides in the entries' \"set\" instead"});
  Baseline b = read_baseline(o);

  std::vector<double> predicted(b.entries.size(), NAN);
  std::vector<bool> in_samples(b.entries.size(), false); // what each prediction counts
  size_t width = 8;
  for (const auto& e : b.entries)
    width = std::max(width, label(e).size());
  fmt::print("{:<{}}  {:>16}  {:>14}  {:>8}  {}\n", "scenario", width, "expected per s", "predicted", "change",
             "status");
  int regressions = 0, failures = 0, changed = 0;
  Problems mismatched; // entries whose figure is not the one the model gives
  for (size_t i = 0; i < b.entries.size(); ++i) {
    const Entry& e = b.entries[i];
    std::string expected =
        e.expected ? fmt::format("{:.1f} {}", *e.expected, e.samples ? "smp" : "tok") : std::string("-");
    try {
      // Tokens per second; samples per second for a model without tokens (a CNN).
      const Report r = simulate_isolated(e.parsed);
      in_samples[i]  = !(r.tokens_per_s > 0);
      predicted[i]   = in_samples[i] ? r.samples_per_s : r.tokens_per_s;
    } catch (const std::exception& error) {
      ++failures;
      fmt::print("{:<{}}  {:>16}  {:>14}  {:>8}  FAILED: {}\n", label(e), width, expected, "-", "-", error.what());
      continue;
    }
    if (e.expected && e.samples != in_samples[i] && !o.update) {
      mismatched.add(fmt::format("scenarios[{}].{}", i, e.samples ? "expected_samples_per_s" : "expected_tokens_per_s"),
                     fmt::format("{} predicts {} per second, a figure of {}; expected {}", e.scenario,
                                 in_samples[i] ? "samples" : "tokens",
                                 in_samples[i] ? "a model without tokens" : "a model with tokens",
                                 in_samples[i] ? "expected_samples_per_s" : "expected_tokens_per_s"));
      continue;
    }
    std::string change = "-", status = "new";
    if (e.expected) {
      const double tolerance = e.tolerance.value_or(b.tolerance);
      const double delta     = predicted[i] / *e.expected - 1;
      change                 = fmt::format("{:+.2f}%", 100 * delta);
      status                 = "ok";
      if (delta < -tolerance) {
        status = fmt::format("REGRESSED (beyond -{:g}%)", 100 * tolerance);
        ++regressions;
      } else if (delta > tolerance) {
        status = fmt::format("changed (faster, beyond +{:g}%)", 100 * tolerance);
        ++changed;
      }
    }
    if (o.update)
      status = "updated";
    fmt::print("{:<{}}  {:>16}  {:>14.1f}  {:>8}  {}\n", label(e), width, expected, predicted[i], change, status);
  }

  mismatched.throw_if_any();
  if (failures > 0) {
    fmt::print("\n{} of {} scenarios failed to simulate{}\n", failures, b.entries.size(),
               o.update ? "; the baseline was not rewritten" : "");
    return 1;
  }
  if (o.update) {
    write_text_file(o.file, baseline_text(b, predicted, in_samples));
    fmt::print("\nwrote {} with {} predictions\n", o.file, b.entries.size());
    return 0;
  }
  if (regressions > 0) {
    fmt::print("\n{} of {} scenarios regressed\n", regressions, b.entries.size());
    return 1;
  }
  if (changed > 0)
    fmt::print("\n{} scenarios got faster beyond their tolerance; if that is intended, accept it with "
               "`stepsim check {} --update`\n",
               changed, o.file);
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<CheckOptions>();
  sub.add_option("BASELINE", o->file, "baseline JSON file (scenarios with their expected tokens/s)")->required();
  sub.add_option("--set", o->sets, "override a field in every scenario: path=value (repeatable)");
  sub.add_flag("--update", o->update, "rewrite the baseline with the new predictions");
  sub.footer("Exit codes: 0 every prediction within tolerance or faster (flagged \"changed\"), 1 a prediction is\n"
             "slower than expected beyond its tolerance or a simulation failed, 2 bad input.\n\n"
             "Examples:\n  stepsim check configs/baselines/scenarios.json\n"
             "  stepsim check configs/baselines/scenarios.json --update\n"
             "  stepsim check configs/baselines/scenarios.json --set platform.node_groups.0.gpu=A100-SXM4-40GB");
  return [o] { return check(*o); };
}

const bool registered =
    CommandRegistry::add("check", "simulate a baseline's scenarios and fail when throughput regresses", Command{setup});

} // namespace
} // namespace stepsim
