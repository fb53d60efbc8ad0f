// stepsim_bench: the speed and memory figures of issue 8, on fixed scenarios, printed as a table
// (and as Markdown with --markdown FILE for the README). Each scenario runs in a child process of
// its own, so that its peak resident memory is its own, and the wall time is the child's whole
// life: reading the scenario, lowering, the SimGrid replay and the report.
//
//   make bench        (Release build; run on an otherwise idle machine)
#include "tools/driver/collective_bench.hpp"
#include "tools/driver/process_pool.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/sweep.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <fstream>

using namespace stepsim;

namespace {

struct Case {
  std::string label;
  std::string file;
  std::vector<std::string> sets;
  // One of the input bounds of sim/input/limits.hpp at its limit: run once (it takes a minute),
  // to show that what the parser accepts ends in reasonable time and memory.
  bool at_a_bound = false;
};

struct Figures {
  int gpus = 0;
  long long ranks = 0, activities = 0;
  double wall_s = 0, peak_rss_mb = 0, step_s = 0;
};

Figures measure(const Case& c)
{
  long peak_kb = 0;
  auto start   = std::chrono::steady_clock::now();
  std::string text = run_in_child(
      [&] {
        try {
          Report r = simulate(load_scenario(c.file, c.sets));
          return fmt::format("{} {} {} {:.9g}", r.gpus, r.simulated_ranks, r.activities, r.step_time_s);
        } catch (const std::exception& e) {
          return std::string("error ") + e.what();
        }
      },
      &peak_kb);
  Figures f;
  f.wall_s      = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  f.peak_rss_mb = peak_kb / 1024.0;
  if (text.rfind("error", 0) == 0 || std::sscanf(text.c_str(), "%d %lld %lld %lf", &f.gpus, &f.ranks, &f.activities,
                                                 &f.step_s) != 4)
    throw std::runtime_error(fmt::format("{}: {}", c.label, text));
  return f;
}

std::string source_path(const std::string& relative) { return std::string(STEPSIM_SOURCE_DIR) + "/" + relative; }

} // namespace

int main(int argc, char** argv)
{
  CLI::App app{"stepsim_bench: wall time, activities per second and peak memory on fixed scenarios"};
  std::string markdown;
  int repeat       = 3;
  bool skip_sweep  = false;
  bool skip_tables = false;
  int sweep_jobs   = 2;
  std::vector<std::string> sets;
  app.add_option("--markdown", markdown, "also write the table as Markdown to this file");
  app.add_option("--repeat", repeat, "runs per scenario; the fastest is reported (default 3)")->check(CLI::Range(1, 20));
  app.add_flag("--no-sweep", skip_sweep, "skip the 1,024-point sweep");
  app.add_flag("--no-tables", skip_tables, "skip the collective tables (stepsim collective)");
  app.add_option("--set", sets, "override a field in every scenario (not the sweep), path=value, e.g. "
                               "simulation.comm_compute_interference=false to time a model's cost");
  app.add_option("-j", sweep_jobs, "worker processes for the sweep and the collective tables (default 2)")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  const std::string gpt3    = source_path("configs/scenarios/default.json");
  std::vector<Case> cases = {
      {"GPT 6.7B, 64 GPUs", source_path("configs/scenarios/gpt-7b-64.json"), {}},
      {"GPT-3 175B, 1,024 GPUs (default)", gpt3, {}},
      {"GPT-3 175B, 2,048 GPUs", gpt3, {"parallelism.data=16", "platform.node_groups[0].count=256", "training.global_batch_size=3072"}},
      {"GPT-3 175B, 4,096 GPUs", gpt3, {"parallelism.data=32", "platform.node_groups[0].count=512", "training.global_batch_size=6144"}},
      {"GPT-3 175B, 8,192 GPUs", gpt3, {"parallelism.data=64", "platform.node_groups[0].count=1024", "training.global_batch_size=12288"}},
      {"GPT-3 175B, 16,384 GPUs", gpt3, {"parallelism.data=128", "platform.node_groups[0].count=2048", "training.global_batch_size=24576"}},
      {"Llama 3 405B, 16,384 GPUs", source_path("configs/scenarios/llama3-405b-16k.json"), {}},
      // Issue 18: the peers' traffic on an oversubscribed fabric, replayed as shadows at reduced
      // fidelity, and the full replay it stands for (global batch 512: the default's 192
      // micro-batches would take the full replay past the layer-pass bound).
      {"GPT-3 175B, 1,024 GPUs, 4:1 fat-tree, batch 512", gpt3,
       {"platform.network.oversubscription=4", "training.global_batch_size=512"}},
      {"the same at full fidelity", gpt3,
       {"platform.network.oversubscription=4", "training.global_batch_size=512", "simulation.fidelity=full"}, true},
      {"bound: 65,536 GPUs (GPT-3 175B)", gpt3,
       {"parallelism.data=512", "platform.node_groups[0].count=8192", "training.global_batch_size=98304"}, true},
      // Issue 18: every rank replayed, the escape where symmetry does not hold (target 10 s, 1 GB).
      {"the default at full fidelity", gpt3, {"simulation.fidelity=full"}, true},
      {"bound: 1.25e6 layer passes (1,008 layers x 1,240)", gpt3,
       {"model.num_layers=1008", "model.hidden_size=1024", "model.num_attention_heads=16", "model.ffn_hidden_size=4096",
        "training.global_batch_size=9920", "simulation.allow_oom=true"},
       true},
  };

  std::string table = "| scenario | GPUs | simulated ranks | activities | wall s | activities/s | peak RSS MB |\n"
                      "|---|---:|---:|---:|---:|---:|---:|\n";
  fmt::print("{:<36} {:>6} {:>6} {:>10} {:>8} {:>12} {:>8}\n", "scenario", "GPUs", "ranks", "activities", "wall s",
             "activities/s", "RSS MB");
  for (auto& c : cases)
    c.sets.insert(c.sets.end(), sets.begin(), sets.end());
  for (const auto& c : cases) {
    Figures best;
    for (int i = 0; i < (c.at_a_bound ? 1 : repeat); ++i) {
      Figures f = measure(c);
      if (i == 0 || f.wall_s < best.wall_s)
        best = f;
    }
    fmt::print("{:<36} {:>6} {:>6} {:>10} {:>8.3f} {:>12.0f} {:>8.1f}\n", c.label, best.gpus, best.ranks,
               best.activities, best.wall_s, best.activities / best.wall_s, best.peak_rss_mb);
    table += fmt::format("| {} | {} | {} | {} | {:.3f} | {:.0f} | {:.1f} |\n", c.label, best.gpus, best.ranks,
                         best.activities, best.wall_s, best.activities / best.wall_s, best.peak_rss_mb);
  }

  // Issue 17: nccl-tests' table (all-reduce, 8 B to 8 GiB doubling) on a DGX A100 SuperPOD of
  // 1,024 GPUs, as `stepsim collective --preset dgx-a100-superpod --nodes 128 [--algorithm ring]`
  // times it: the ring with its first member replayed for all and the tuner's protocol choice in
  // closed form; NCCL's own choice, `auto`, which runs the tree across these nodes (timed by its
  // closed form over more than 256 GPUs, tools/driver/collective_bench.hpp). Then `auto` on
  // 16,384 GPUs (2,048 nodes), issue 17's second figure; and `auto` on 1,024 GPUs whose rail
  // uplinks are thinned 2:1 (the closed form shares them, GroupShape::uplinks_of_member). Last,
  // `auto` on 128 H100 (16 nodes), below the closed form's 256 GPUs: its trees run flow by flow,
  // with every member simulated and the rotated lanes folded (CollectiveTiming::rotation). The
  // sizes are timed -j at a time, as `stepsim collective -j` does.
  if (!skip_tables) {
    struct Table {
      const char* preset;
      int nodes;
      const char* algorithm;
      const char* oversubscription;
    };
    for (const Table t : {Table{"dgx-a100-superpod", 128, "ring", "1"}, Table{"dgx-a100-superpod", 128, "auto", "1"},
                          Table{"dgx-a100-superpod", 2048, "auto", "1"}, Table{"dgx-a100-superpod", 128, "auto", "2"},
                          Table{"dgx-h100-superpod", 16, "auto", "1"}}) {
      const bool thinned      = std::string(t.oversubscription) != "1";
      const std::string set   = fmt::format("platform.network.oversubscription={}", t.oversubscription);
      const Scenario superpod = platform_scenario(t.preset, "", t.nodes, {set});
      const auto members      = benchmark_group(superpod.platform, 0);
      std::vector<double> all;
      for (double bytes = 8; bytes <= 8.0 * (1ull << 30); bytes *= 2)
        all.push_back(bytes);
      auto start = std::chrono::steady_clock::now();
      time_collectives(superpod.platform, members, CollectiveOp::AllReduce, all, t.algorithm, false, "auto",
                       sweep_jobs);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print("\n{} all-reduce table, {} GPUs of {}{}: {} sizes (8 B to 8 GiB) in {:.1f} s wall with -j {}\n",
                 t.algorithm, members.size(), t.preset,
                 thinned ? fmt::format(", uplinks {}:1", t.oversubscription) : "", all.size(), wall, sweep_jobs);
      table += fmt::format("\nAll-reduce table with `{}` (`stepsim collective --preset {} --nodes {} "
                           "--algorithm {}{} -j {}`): {} GPUs, {} sizes from 8 B to 8 GiB in {:.1f} s wall.\n",
                           t.algorithm, t.preset, t.nodes, t.algorithm, thinned ? " --set " + set : "", sweep_jobs,
                           members.size(), all.size(), wall);
    }
  }

  if (!skip_sweep) {
    Sweep sweep = load_sweep(source_path("configs/sweeps/gpt3-175b-1024.json"));
    std::vector<size_t> points(sweep.points());
    for (size_t i = 0; i < points.size(); ++i)
      points[i] = i;
    size_t simulated = 0;
    auto start       = std::chrono::steady_clock::now();
    run_in_processes(
        points, sweep_jobs, [&](size_t i) { return evaluate_point(sweep, i, false).dump(); },
        [&](size_t, std::string text) { simulated += text.find("\"status\":\"ok\"") != std::string::npos; });
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double per_minute = 60.0 * static_cast<double>(simulated) / wall;
    fmt::print("\nsweep {} ({} points, {} simulated, the rest infeasible): {:.1f} s wall with -j {}, {:.0f} simulated "
               "points a minute\n",
               sweep.name, points.size(), simulated, wall, sweep_jobs, per_minute);
    table += fmt::format("\nSweep `configs/sweeps/gpt3-175b-1024.json`: {} points ({} simulated, {} infeasible) in "
                         "{:.1f} s wall with `-j {}`: {:.0f} simulated points a minute.\n",
                         points.size(), simulated, points.size() - simulated, wall, sweep_jobs, per_minute);
  }
  if (!markdown.empty())
    std::ofstream(markdown) << table;
  return 0;
}
