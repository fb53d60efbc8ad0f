// `stepsim plan FILE`: the best parallel configurations of a model on a platform (see
// tools/driver/plan.hpp).
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "tools/driver/plan.hpp"
#include "sim/core/input_error.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

namespace stepsim {
namespace {

struct PlanCommandOptions {
  std::string file, json_out;
  std::vector<std::string> sets;
  PlanOptions plan;
  int top = 10;
};

int run_plan(const PlanCommandOptions& o)
{
  nlohmann::json doc = read_json_file(o.file);
  for (const auto& a : o.sets)
    set_by_path(doc, a);
  PlanResult r = plan(doc, std::filesystem::path(o.file).parent_path().string(), o.plan);
  if (r.candidates.empty()) // a property of the input, not a failed simulation
    throw InputError({fmt::format("{}: none of the {} configurations for {} GPUs can run: {} do not divide the model, "
                                  "batch or GPUs or are not valid, {} do not fit in memory",
                                  o.file, r.enumerated, o.plan.gpus > 0 ? std::to_string(o.plan.gpus) : "the platform's",
                                  r.invalid, r.too_big)});
  fmt::print("{} configurations: {} do not divide or are not valid, {} do not fit in memory, {} valid; simulated {}\n\n",
             r.enumerated, r.invalid, r.too_big, r.candidates.size(),
             std::count_if(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.simulated; }));
  if (r.failed > 0)
    fmt::print("{} simulations failed; the first: {}\n\n", r.failed, r.first_failure);
  fmt::print("{:>4} {:>3} {:>4} {:>4} {:>2} {:>3} {:<17} {:>4} {:<9} {:>11} {:>7} {:>6} {:>7} {:>9}\n", "rank", "t",
             "p", "d", "v", "mb", "schedule", "zero", "recompute", "tokens/s", "TFLOP/s", "MFU", "bubble",
             "mem GiB");
  nlohmann::json out = nlohmann::json::array();
  int shown          = 0;
  for (const auto& c : r.candidates) {
    if (!c.simulated || shown >= o.top)
      break;
    const auto& s = c.settings;
    fmt::print("{:>4} {:>3} {:>4} {:>4} {:>2} {:>3} {:<17} {:>4} {:<9} {:>11.0f} {:>7.1f} {:>5.1f}% {:>6.1f}% {:>9.2f}\n",
               ++shown, s["parallelism.tensor"].get<int>(), s["parallelism.pipeline"].get<int>(),
               s["parallelism.data"].get<int>(), s["parallelism.virtual_stages"].get<int>(),
               s["training.micro_batch_size"].get<int>(), s["parallelism.schedule"].get<std::string>(),
               s["parallelism.zero_stage"].get<int>(), s["training.recompute"].get<std::string>(),
               c.report.tokens_per_s, c.report.model_tflops_per_gpu, 100 * c.report.mfu,
               100 * c.report.bubble_fraction, c.report.memory_peak_bytes / (1024.0 * 1024 * 1024));
    out.push_back({{"settings", s}, {"report", to_json(c.report)}});
  }
  if (!o.json_out.empty())
    write_text_file(o.json_out, out.dump(2) + "\n");
  return shown > 0 ? 0 : 1;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<PlanCommandOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file: the model, platform and global batch to plan for")->required();
  sub.add_option("--gpus", o->plan.gpus, "GPUs to plan for (default: the platform's); whole nodes")
      ->check(CLI::Range(1LL, limits::kMaxPlatformGpus));
  sub.add_option("--top", o->top, "configurations to print (default 10)")->check(CLI::Range(1, 1000));
  sub.add_option("--simulate", o->plan.simulate,
                 "simulate this many of the best-estimated candidates (default 32; 0 = every valid one)")
      ->check(CLI::Range(0, 1 << 20));
  sub.add_option("-j,--jobs", o->plan.jobs, "worker processes (default 1)")->check(CLI::Range(1, 1024));
  sub.add_option("--set", o->sets, "override a field of the scenario first: path=value");
  sub.add_option("--json", o->json_out, "write the printed configurations and their reports as JSON");
  sub.add_flag("--quiet,-q", o->plan.quiet, "no progress");
  sub.footer("Example:\n  stepsim plan configs/scenarios/default.json --gpus 1024 -j 2 --top 5");
  return [o] { return run_plan(*o); };
}

const bool registered = CommandRegistry::add(
    "plan", "rank the parallel configurations of a model on a platform by predicted throughput", Command{setup});

} // namespace
} // namespace stepsim
