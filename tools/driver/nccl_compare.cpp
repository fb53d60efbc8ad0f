#include "tools/driver/nccl_compare.hpp"

#include "models/collectives/collective.hpp"
#include "models/link_calibration.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "tools/driver/collective_bench.hpp"
#include "topologies/collective_groups.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace stepsim {

SizeFamily size_family(double bytes)
{
  if (bytes >= 64.0 * (1 << 20))
    return SizeFamily::Large;
  if (bytes >= 8192 && bytes <= (1 << 20))
    return SizeFamily::Small;
  return SizeFamily::None;
}

namespace {

void add_error(FamilyError& f, double error)
{
  f.mape = (f.mape * f.rows + std::abs(error)) / (f.rows + 1);
  ++f.rows;
}

// Why `algorithm` cannot run `op` on the group, or "" when it can: not registered (an algorithm
// still to come, such as collnet), or refusing the group's shape, as `stepsim collective` checks.
std::string refusal(const Scenario& s, const std::vector<int>& members, CollectiveOp op, const std::string& algorithm)
{
  const auto* chosen = CollectiveRegistry::find(algorithm);
  if (chosen == nullptr)
    return fmt::format("no collective algorithm named \"{}\"", algorithm);
  try {
    Workload one;
    one.groups.push_back(Group{"benchmark", members, {}, false, 0, {}});
    describe_groups(one, s.platform, {}, s.simulation.nccl_channels);
    const Group& g         = one.groups.front();
    const GroupShape shape = group_shape(g); // its flags too: NVLS, SHARP
    concrete_algorithm(*chosen, op, shape, 1.0).steps(op, shape, 1.0);
  } catch (const std::invalid_argument& e) {
    return fmt::format("{} refuses the group: {}", algorithm, e.what());
  }
  return "";
}

} // namespace

Comparison compare_published(const std::string& file, bool analytic_network, const std::string& only, int max_gpus,
                             int jobs)
{
  const nlohmann::json doc = read_json_file(file);
  Problems problems;
  JsonReader r(doc, file, problems);
  Comparison out;
  for (auto& c : r.array_of_objects("cases", true)) {
    ComparedCase cc;
    cc.name      = c.text("name");
    cc.preset    = c.text("preset");
    cc.nodes     = static_cast<int>(c.integer("nodes", std::nullopt, 1, 1 << 17));
    cc.gpus      = static_cast<int>(c.integer("gpus", std::nullopt, 1, 1 << 20));
    cc.op        = c.text("op", std::nullopt, {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"});
    cc.algorithm = c.text("algorithm", std::string("auto"));
    // nccl-tests -g: GPUs one host thread drives (1 under mpirun with a process per GPU).
    cc.gpus_per_thread = static_cast<int>(c.integer("gpus_per_thread", 1, 1, 1024));
    for (const char* key : {"as_run", "hardware", "source", "trust", "notes", "gpus_per_thread_source"})
      c.raw(key);
    if (const nlohmann::json* set = c.raw("set")) {
      if (!set->is_object() || set->empty())
        problems.add(c.path_of("set"), "expected an object of platform fields and values, e.g. "
                                       "{\"platform.node_groups.0.nic.count\": 2}");
      else
        for (const auto& [path, value] : set->items())
          if (value.is_structured())
            problems.add(c.path_of("set") + "." + path, "expected a number, string or boolean");
          else
            cc.sets.push_back(path + "=" + value.dump());
    }
    struct Row {
      double bytes, measured_GBps;
    };
    std::vector<Row> rows;
    const auto* given = c.raw("rows");
    if (given == nullptr || !given->is_array() || given->empty())
      problems.add(c.path_of("rows"),
                   "expected a non-empty array of rows {\"bytes\": ..., \"time_us\": ..., \"busbw_GBps\": ...}");
    // nccl-tests on N nodes runs the same number of ranks on each (mpirun -npernode, srun
    // --ntasks-per-node): the case's GPUs are spread evenly, the first of each node.
    if (cc.gpus % cc.nodes != 0)
      problems.add(c.path_of("gpus"), fmt::format("expected a multiple of the case's {} nodes (the same number of GPUs "
                                                  "on each node), got {}",
                                                  cc.nodes, cc.gpus));
    if (cc.gpus % cc.gpus_per_thread != 0)
      problems.add(c.path_of("gpus_per_thread"),
                   fmt::format("expected a divisor of the case's {} GPUs (nccl-tests runs processes x threads x GPUs "
                               "per thread ranks), got {}",
                               cc.gpus, cc.gpus_per_thread));
    c.reject_unknown_keys();
    problems.throw_if_any();
    if (!only.empty() && cc.name.find(only) == std::string::npos)
      continue;
    const CollectiveOp op = *benchmark_op(cc.op);
    const double factor   = bus_bandwidth_factor(op, cc.gpus);
    for (size_t i = 0; i < given->size(); ++i) {
      JsonReader row(given->at(i), fmt::format("{}[{}]", c.path_of("rows"), i), problems);
      const double bytes = row.number("bytes", std::nullopt, 1);
      const double time  = row.has("time_us") ? row.number("time_us", std::nullopt, 0, true) : 0;
      const double busbw = row.has("busbw_GBps") ? row.number("busbw_GBps") : 0;
      row.raw("in_place");
      row.raw("digitized");
      row.reject_unknown_keys();
      // nccl-tests' own busbw, unrounded: its two printed decimals are a large part of 0.09 GB/s.
      const double measured = time > 0 ? bytes / (time * 1e-6) / 1e9 * factor : busbw;
      if (size_family(bytes) != SizeFamily::None && measured > 0)
        rows.push_back({bytes, measured});
    }
    problems.throw_if_any();
    const Scenario s = [&] {
      try {
        return platform_scenario(cc.preset, "", cc.nodes, cc.sets);
      } catch (const InputError& e) { // a field the case sets: say which case
        if (cc.sets.empty())
          throw;
        std::vector<std::string> named;
        for (const auto& p : e.problems())
          named.push_back(fmt::format("{}: {}", c.path_of("set"), p));
        throw InputError(named);
      }
    }();
    std::vector<int> members;
    try {
      members = benchmark_group(s.platform, cc.gpus, cc.gpus / cc.nodes);
    } catch (const InputError& e) { // worded for the command line: say which case asked
      throw InputError({fmt::format("{}: {} GPUs on {} nodes of preset \"{}\" ({} GPUs each): {}", c.path_of("gpus"),
                                    cc.gpus, cc.nodes, cc.preset, s.platform.node_groups.front().gpus_per_node,
                                    e.problems().front())});
    }
    cc.not_modelled                  = max_gpus > 0 && cc.gpus > max_gpus
                                           ? fmt::format("not run here: more than {} GPUs", max_gpus)
                                           : refusal(s, members, op, cc.algorithm);
    std::vector<CollectiveTime> times;
    if (cc.not_modelled.empty()) {
      std::vector<double> sizes;
      for (const auto& row : rows)
        sizes.push_back(row.bytes);
      times = time_collectives(s.platform, members, op, sizes, cc.algorithm, analytic_network, "auto", jobs);
    }
    if (cc.not_modelled.empty())
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto& row   = rows[i];
        const auto& timed = times[i];
        ComparedRow cr;
        cr.bytes          = row.bytes;
        cr.measured_GBps  = row.measured_GBps;
        cr.predicted_GBps =
            row.bytes / nccl_tests_iteration_seconds(timed.seconds, cc.gpus_per_thread, link_efficiency()) / 1e9 * factor;
        cr.picked         = timed.algorithm;
        cc.closed_form_rows += timed.closed_form ? 1 : 0;
        cr.family         = size_family(row.bytes);
        add_error(cr.family == SizeFamily::Large ? cc.large : cc.small, cr.error());
        add_error(cr.family == SizeFamily::Large ? out.large : out.small, cr.error());
        cc.rows.push_back(cr);
      }
    out.cases.push_back(cc);
  }
  r.raw("description");
  r.raw("families");
  r.raw("not_described");
  r.reject_unknown_keys();
  problems.throw_if_any();
  return out;
}

std::string comparison_table(const Comparison& c)
{
  auto cell = [](const FamilyError& f) {
    return f.rows == 0 ? fmt::format("{:>14}", "-") : fmt::format("{:>8.1f} % ({:>2})", 100 * f.mape, f.rows);
  };
  std::string out = fmt::format("# bus bandwidth MAPE of stepsim collective against published nccl-tests rows "
                                "(rows: >= 64 MiB | 8 KiB - 1 MiB)\n");
  out += fmt::format("{:<52} {:<18} {:>5} {:<15} {:>14} {:>14}\n", "case", "preset", "gpus", "op/algorithm",
                     ">= 64 MiB", "8 KiB-1 MiB");
  for (const auto& k : c.cases) {
    const std::string what = fmt::format("{}/{}", k.op == "all_reduce" ? "AR" : k.op == "all_gather" ? "AG"
                                                   : k.op == "reduce_scatter"                          ? "RS"
                                                                                                       : "A2A",
                                         k.algorithm);
    const std::string preset = k.sets.empty() ? k.preset : k.preset + " +";
    if (!k.not_modelled.empty())
      out += fmt::format("{:<52} {:<18} {:>5} {:<15} not modelled: {}\n", k.name, preset, k.gpus, what, k.not_modelled);
    else
      out += fmt::format("{:<52} {:<18} {:>5} {:<15} {} {}{}\n", k.name, preset, k.gpus, what, cell(k.large),
                         cell(k.small), k.closed_form_rows > 0 ? " *" : "");
  }
  bool closed = false, set = false;
  for (const auto& k : c.cases) {
    closed = closed || k.closed_form_rows > 0;
    set    = set || !k.sets.empty();
  }
  out += fmt::format("{:<52} {:<18} {:>5} {:<15} {} {}\n", "all cases run", "", "", "", cell(c.large), cell(c.small));
  if (set)
    out += "+ the preset with the fields the case's \"set\" gives (a machine that differs from it)\n";
  if (closed)
    out += fmt::format("* timed by its closed form: a collective other than a ring over more than {} GPUs on a "
                       "fat-tree or rail fabric "
                       "(tools/driver/collective_bench.hpp)\n",
                       kFlowMembers);
  return out;
}

nlohmann::json comparison_json(const Comparison& c)
{
  auto family = [](const FamilyError& f) { return nlohmann::json{{"rows", f.rows}, {"mape", f.mape}}; };
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& k : c.cases) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : k.rows)
      rows.push_back({{"bytes", r.bytes},
                      {"family", r.family == SizeFamily::Large ? "large" : "small"},
                      {"measured_busbw_GBps", r.measured_GBps},
                      {"predicted_busbw_GBps", r.predicted_GBps},
                      {"error", r.error()},
                      {"picked", r.picked}});
    nlohmann::json j = {{"name", k.name},   {"preset", k.preset},       {"nodes", k.nodes}, {"gpus_per_thread", k.gpus_per_thread},
                        {"gpus", k.gpus},   {"op", k.op},               {"algorithm", k.algorithm},
                        {"large", family(k.large)}, {"small", family(k.small)}, {"rows", rows},
                        {"closed_form_rows", k.closed_form_rows}};
    if (!k.sets.empty())
      j["set"] = k.sets;
    if (!k.not_modelled.empty())
      j["not_modelled"] = k.not_modelled;
    cases.push_back(j);
  }
  return {{"cases", cases}, {"large", family(c.large)}, {"small", family(c.small)}};
}

} // namespace stepsim
