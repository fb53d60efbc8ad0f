// `stepsim run FILE`: simulate one training step and print its report.
#include "sim/output/gantt_svg.hpp"
#include "sim/output/html_run_report.hpp"
#include "sim/output/report_csv.hpp"
#include "sim/output/trace.hpp"
#include "sim/simulate.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

namespace stepsim {
namespace {

struct RunOptions {
  std::string file, json_out;
  std::string csv_out, trace_out, svg_out, html_out; // the other outputs (see the footer)
  std::vector<std::string> sets;
  bool quiet     = false;
  bool allow_oom = false;
  int links      = 0; // busiest links to report (--links [N])
};

int run(const RunOptions& o)
{
  std::vector<std::string> sets = o.sets;
  if (o.allow_oom)
    sets.push_back("simulation.allow_oom=true");
  Scenario s  = load_scenario(o.file, sets);
  // An output written over the scenario it was read from would lose the scenario.
  for (const auto& [option, out] : {std::pair{"--json", o.json_out}, std::pair{"--csv", o.csv_out},
                                    std::pair{"--trace", o.trace_out}, std::pair{"--svg", o.svg_out},
                                    std::pair{"--html", o.html_out}}) {
    std::error_code same_error;
    if (!out.empty() && out != "-" && std::filesystem::exists(out) &&
        std::filesystem::equivalent(out, o.file, same_error) && !same_error)
      throw InputError({fmt::format("{}: {} is the scenario FILE itself; writing the report there would overwrite "
                                    "it: name another file",
                                    option, out)});
  }
  auto start  = std::chrono::steady_clock::now();
  const bool pictures = !o.trace_out.empty() || !o.svg_out.empty() || !o.html_out.empty();
  // The page always shows the busiest links: without --links it asks for ten, for itself only.
  const int page_links = !o.html_out.empty() && o.links == 0 ? 10 : 0;
  Timeline timeline;
  Report r    = simulate(s, pictures ? &timeline : nullptr, std::max(o.links, page_links));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.html_out.empty())
    write_text_file(o.html_out, html_run_report(r, &timeline));
  if (page_links > 0) { // the other outputs as without --html: no links, nor the waits they bring
    r.links.clear();
    if (s.simulation.stragglers.empty() && s.simulation.jitter_sigma <= 0) // as sim/step_report.cpp keeps waits
      r.waits.clear();
  }
  if (o.json_out == "-") // standard output, as replay, graph and collective take "-"
    fmt::print("{}\n", to_json(r).dump(2));
  else if (!o.json_out.empty())
    write_text_file(o.json_out, to_json(r).dump(2) + "\n");
  if (!o.csv_out.empty())
    write_text_file(o.csv_out, csv_header(r) + csv_row(r));
  if (!o.trace_out.empty())
    write_text_file(o.trace_out, trace_json(timeline));
  if (!o.svg_out.empty())
    write_text_file(o.svg_out, gantt_svg(timeline, r));
  if (!o.quiet && o.json_out != "-") {
    fmt::print("{}", to_table(r));
    fmt::print("\n  simulated {} ranks, {} activities in {:.2f} s wall\n", r.simulated_ranks, r.activities, wall);
  }
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<RunOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file")->required();
  sub.add_option("--set", o->sets, "override a field: path=value, e.g. parallelism.tensor=4 (repeatable)");
  sub.add_option("--json", o->json_out, "write the report as JSON to this file (\"-\" = standard output, no table)");
  sub.add_option("--csv", o->csv_out, "write the report as CSV (a header line and one row) to this file");
  sub.add_option("--trace", o->trace_out,
                 "write a Chrome/Perfetto trace (open it in https://ui.perfetto.dev or chrome://tracing)");
  sub.add_option("--svg", o->svg_out, "write a Gantt chart of the step, one row per simulated rank, as SVG");
  sub.add_option("--html", o->html_out,
                 "write one self-contained HTML page: summary, stages, Gantt chart, memory against capacity and "
                 "the busiest links (10 unless --links says)");
  sub.add_flag("--quiet,-q", o->quiet, "print nothing (use with --json)");
  sub.add_option("--links", o->links,
                 "report the N busiest links (default 10): bytes carried and busy fraction of the step, in the "
                 "table and the JSON report; also who waited for whom")
      ->expected(0, 1)
      ->default_str("10")
      ->check(CLI::Range(1, 100000));
  sub.add_flag("--allow-oom", o->allow_oom,
               "simulate even when a stage needs more memory than the GPU has (otherwise exit 2)");
  sub.footer("Examples:\n  stepsim run configs/scenarios/default.json\n"
             "  stepsim run configs/scenarios/default.json --set parallelism.pipeline=8 --set parallelism.data=16\n"
             "  stepsim run configs/scenarios/default.json --json report.json --quiet\n"
             "  stepsim run configs/scenarios/default.json --links 5        # the 5 busiest links\n"
             "  stepsim run configs/scenarios/default.json --csv report.csv      # header + one row, per-stage columns\n"
             "  stepsim run configs/scenarios/default.json --trace step.json     # open in https://ui.perfetto.dev\n"
             "  stepsim run configs/scenarios/default.json --svg step.svg        # Gantt chart, open in a browser\n"
             "  stepsim run configs/scenarios/default.json --html step.html      # one page with all of it, offline");
  return [o] { return run(*o); };
}

const bool registered = CommandRegistry::add("run", "simulate one training step and print its report", Command{setup});

} // namespace
} // namespace stepsim
