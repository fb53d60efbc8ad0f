// `stepsim plan FILE`: the best parallel configurations of a model on a platform (see
// tools/driver/plan.hpp).
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "tools/driver/plan.hpp"
#include "tools/driver/plan_request.hpp"
#include "tools/stepsim/command.hpp"
#include "workloads/schedules/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

namespace stepsim {
namespace {

struct PlanCommandOptions {
  std::string file, json_out, write_best, headroom, objective = "throughput", schedules;
  std::vector<std::string> sets;
  PlanOptions plan;
  int top = 10;
};

constexpr double kGiB = 1024.0 * 1024 * 1024;

int run_plan(PlanCommandOptions o)
{
  nlohmann::json doc = read_json_file(o.file);
  for (const auto& a : o.sets)
    set_by_path(doc, a);
  o.plan                = with_text_options(o.plan, o.headroom, o.objective, o.schedules);
  const std::string dir = std::filesystem::path(o.file).parent_path().string();
  PlanResult r          = plan_or_refuse(doc, dir, o.plan, o.file);
  // The table goes to standard output unless the JSON does (`--json -`, as run and collective take it).
  const bool table = o.json_out != "-";
  std::string text = fmt::format(
      "{} configurations: {} do not divide or are not valid, {} do not fit in memory{}, {} valid; simulated {}\n\n",
      r.enumerated, r.invalid, r.too_big,
      o.plan.headroom_bytes > 0 ? fmt::format(" with {:.2f} GiB of headroom", o.plan.headroom_bytes / kGiB) : "",
      r.candidates.size(),
      std::count_if(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.simulated; }));
  if (r.failed > 0)
    text += fmt::format("{} simulations failed; the first: {}\n\n", r.failed, r.first_failure);
  const bool priced = std::any_of(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.cost_per_token > 0; });
  // The context column widens only for a USP label that needs it ("16u8").
  size_t c_width = 3, listed = 0;
  for (const auto& c : r.candidates)
    if (c.simulated && listed++ < static_cast<size_t>(o.top))
      c_width = std::max(c_width, context_degree(c.settings).size());
  text += fmt::format("{:>4} {:>3} {:>{}} {:>3} {:>4} {:>4} {:>2} {:>3} {:<17} {:>4} {:<9} {:>11} {:>7} {:>6} {:>7} {:>9} "
                      "{:>8}{}\n",
                      "rank", "t", "c", c_width, "e", "p", "d", "v", "mb", "schedule", "zero", "recompute", "tokens/s",
                      "TFLOP/s", "MFU", "bubble", "mem GiB", "J/token", priced ? fmt::format(" {:>10}", "cost/Mtok") : "");
  nlohmann::json out = nlohmann::json::array();
  int shown          = 0;
  bool asynchronous  = false;
  bool ulysses       = false; // a row whose context ranks run Ulysses' all-to-alls
  for (const auto& c : r.candidates) {
    if (!c.simulated || shown >= o.top)
      break;
    const auto& s        = c.settings;
    const std::string sc = s["parallelism.schedule"].get<std::string>();
    const bool flushes   = ScheduleRegistry::get(sc, "parallelism.schedule").flushes;
    asynchronous         = asynchronous || !flushes;
    ulysses              = ulysses || s.contains("parallelism.context_attention");
    text += fmt::format("{:>4} {:>3} {:>{}} {:>3} {:>4} {:>4} {:>2} {:>3} {:<17} {:>4} {:<9} {:>11.0f} {:>7.1f} {:>5.1f}% "
                        "{:>6.1f}% {:>9.2f} {:>8.3f}{}\n",
                        ++shown, s["parallelism.tensor"].get<int>(), context_degree(s), c_width,
                        s["parallelism.expert"].get<int>(), s["parallelism.pipeline"].get<int>(),
                        s["parallelism.data"].get<int>(), s["parallelism.virtual_stages"].get<int>(),
                        s["training.micro_batch_size"].get<int>(), flushes ? sc : sc + "*",
                        s["parallelism.zero_stage"].get<int>(), s["training.recompute"].get<std::string>(),
                        c.report.tokens_per_s, c.report.model_tflops_per_gpu, 100 * c.report.mfu,
                        100 * c.report.bubble_fraction, c.report.memory_peak_bytes / kGiB, c.report.energy_j_per_token,
                        priced ? fmt::format(" {:>10.4f}", c.cost_per_token * 1e6) : "");
    nlohmann::json row = {{"settings", s}, {"report", to_json(c.report)}};
    if (priced)
      row["cost_per_token"] = c.cost_per_token;
    out.push_back(std::move(row));
  }
  if (asynchronous)
    text += "\n* no flush between steps: weights are updated asynchronously (PipeDream), not as the others do\n";
  if (ulysses)
    text += fmt::format("\nc: context ranks; 4 = ring attention, 4u = Ulysses all-to-alls over all 4, 8u2 = USP "
                        "(Ulysses over 2, ring attention across 4)\n");
  if (!table)
    fmt::print("{}\n", out.dump(2));
  else {
    fmt::print("{}", text);
    if (!o.json_out.empty())
      write_text_file(o.json_out, out.dump(2) + "\n");
  }
  if (!o.write_best.empty() && shown > 0) {
    write_text_file(o.write_best, with_settings(doc, r.candidates.front().settings).dump(2) + "\n");
    if (table)
      fmt::print("\nwrote the top configuration to {} (stepsim run {})\n", o.write_best, o.write_best);
  }
  return shown > 0 ? 0 : 1;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<PlanCommandOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file: the model, platform and global batch to plan for")->required();
  sub.add_option("--gpus", o->plan.gpus, "GPUs to plan for (default: the platform's); whole nodes, one node group")
      ->check(CLI::Range(1LL, limits::kMaxPlatformGpus));
  sub.add_option("--top", o->top, "configurations to print (default 10)")->check(CLI::Range(1, 1000));
  sub.add_option("--simulate", o->plan.simulate,
                 "simulate this many of the best-estimated candidates (default 32; 0 = every valid one)")
      ->check(CLI::Range(0, 1 << 20));
  sub.add_option("-j,--jobs", o->plan.jobs, "worker processes (default 1)")->check(CLI::Range(1, 1024));
  sub.add_option("--set", o->sets, "override a field of the scenario first: path=value");
  sub.add_option("--json", o->json_out,
                 "write the printed configurations and their reports as JSON to this file (- = standard output, no "
                 "table)");
  sub.add_option("--write-best", o->write_best, "write the top configuration as a scenario, ready for stepsim run");
  sub.add_option("--headroom", o->headroom,
                 "memory to keep free on every GPU beyond the framework profile's reserve, e.g. 4GiB (default none)");
  sub.add_option("--objective", o->objective, "rank by throughput (default), cost per token or energy per token")
      ->check(CLI::IsMember({"throughput", "cost", "energy"}));
  sub.add_option("--price-per-gpu-hour", o->plan.price_per_gpu_hour,
                 "price of one GPU-hour, for cost per token (default: platform.node_groups[].price_per_gpu_hour)")
      // A price of 0 would rank by a cost that is 0 for every plan (and hide the cost column).
      ->check(CLI::Validator(
          [](std::string& v) {
            double price = 0;
            try {
              price = std::stod(v);
            } catch (const std::exception&) {
              return std::string("expected a price");
            }
            if (!(price > 0))
              return std::string("expected a price above 0 (leave the option out to rank without a cost)");
            if (!(price <= limits::kMaxPricePerGpuHour))
              return fmt::format("expected a price of at most {:g} per GPU-hour", limits::kMaxPricePerGpuHour);
            return std::string();
          },
          "PRICE > 0"));
  sub.add_option("--schedules", o->schedules,
                 "comma-separated schedules to plan, or all (default: every registered schedule that flushes "
                 "between steps, see stepsim list)");
  sub.add_flag("--quiet,-q", o->plan.quiet, "no progress");
  sub.footer("Examples:\n  stepsim plan configs/scenarios/default.json --gpus 1024 -j 2 --top 5\n"
             "  stepsim plan configs/scenarios/default.json --headroom 4GiB --write-best best.json\n"
             "  stepsim plan configs/scenarios/default.json --objective cost --price-per-gpu-hour 2.5");
  return [o] { return run_plan(*o); };
}

const bool registered = CommandRegistry::add(
    "plan", "rank the parallel configurations of a model on a platform by predicted throughput, cost or energy", Command{setup});

} // namespace
} // namespace stepsim
