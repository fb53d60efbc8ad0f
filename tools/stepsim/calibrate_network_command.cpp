// `stepsim calibrate network LOG... --preset NAME|--platform FILE [-o FILE]`: fits the network
// model's link figures (configs/calibration/links.json) to a cluster's own nccl-tests logs
// (tools/driver/network_fit.hpp), prints each log's busbw measured, before and after, and writes
// the calibration file a scenario names in simulation.network_calibration. Its last line is the
// fit's error: `fit MAPE X % (>= 64 MiB), Y % (8 KiB-1 MiB)`.
#include "sim/core/input_error.hpp"
#include "tools/driver/network_fit.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>

namespace stepsim {
namespace {

struct NetworkOptions {
  std::vector<std::string> logs;
  std::string preset, platform, out;
  std::vector<std::string> sets;
};

std::string size_text(double bytes)
{
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4 && std::fmod(bytes, 1024) == 0) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:g}{}", bytes, units[u]);
}

std::string band(const Mape& m, bool large)
{
  const int rows = large ? m.large_rows : m.small_rows;
  return rows == 0 ? "-" : fmt::format("{:.1f}", large ? m.large_pct : m.small_pct);
}

int run_network(const NetworkOptions& o)
{
  // One log twice would count its rows twice in the fit.
  auto same_file = [](const std::string& a, const std::string& b) {
    std::error_code ea, eb;
    const auto ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
    return ea || eb ? a == b : ca == cb;
  };
  for (size_t i = 0; i < o.logs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (same_file(o.logs[i], o.logs[j]))
        throw InputError({fmt::format("{}: given twice (as argument {} and {}); each log once, or its rows weigh "
                                      "double in the fit",
                                      o.logs[i], j + 1, i + 1)});
  const NetworkFit fit = fit_network(NetworkFitRequest{o.logs, o.preset, o.platform, o.sets});
  fmt::print("calibrate network: {} log{} on {} ({} model runs)\n", fit.logs.size(), fit.logs.size() == 1 ? "" : "s",
             fit.machine, fit.model_runs);
  for (const auto& l : fit.logs) {
    const auto& log = l.log;
    fmt::print("\n{}: {}, {} ranks on {} host{} ({}){}\n", log.path, log.op, log.ranks.size(), log.hosts.size(),
               log.hosts.size() == 1 ? "" : "s", log.ranks.front().device_name,
               l.fitted_link.empty() ? "" : ", fits " + l.fitted_link);
    if (!l.note.empty())
      fmt::print("  {}\n", l.note);
    if (l.rows.empty())
      continue;
    fmt::print("{:>10} {:>10} {:>10} {:>10}   busbw GB/s (out-of-place)\n", "size", "measured", "before", "after");
    for (const auto& r : l.rows)
      fmt::print("{:>10} {:>10.2f} {:>10.2f} {:>10.2f}\n", size_text(r.bytes), r.measured_busbw, r.before_busbw,
                 r.after_busbw);
    fmt::print("MAPE of the time, before -> after: {} -> {} % (>= 64 MiB, {} rows), {} -> {} % (8 KiB-1 MiB, {} rows)\n",
               band(l.before, true), band(l.after, true), l.after.large_rows, band(l.before, false),
               band(l.after, false), l.after.small_rows);
  }
  fmt::print("\n{:<24}{:>12}{:>12}\n", "link figure", "links.json", "fitted");
  auto figure = [&](const char* name, double before, double after, bool time) {
    if (before == after)
      return;
    // Microseconds as printed: a fit's shift that rounds to nothing reads "0.000", not "-0.000".
    auto us = [](double s) { return std::abs(s * 1e6) < 5e-4 ? 0.0 : s * 1e6; };
    if (time)
      fmt::print("{:<24}{:>10.3f}us{:>10.3f}us\n", name, us(before), us(after));
    else
      fmt::print("{:<24}{:>12.4f}{:>12.4f}\n", name, before, after);
  };
  const auto &b = fit.before, &a = fit.after;
  figure("nvswitch efficiency", b.nvswitch, a.nvswitch, false);
  figure("nvswitch step_latency", b.nvswitch_step_s, a.nvswitch_step_s, true);
  figure("nvlink efficiency", b.nvlink, a.nvlink, false);
  figure("nvlink step_latency", b.nvlink_step_s, a.nvlink_step_s, true);
  figure("xgmi efficiency", b.xgmi, a.xgmi, false);
  figure("xgmi step_latency", b.xgmi_step_s, a.xgmi_step_s, true);
  figure("pcie efficiency", b.pcie, a.pcie, false);
  figure("pcie step_latency", b.pcie_step_s, a.pcie_step_s, true);
  figure("nic efficiency", b.nic, a.nic, false);
  figure("nic step_latency", b.nic_step_s, a.nic_step_s, true);
  for (const auto& [kind, cost] : a.nic_kinds) {
    const NicKindCost was = b.nic_kind(kind);
    if (kind == "infiniband")
      continue; // the `nic` lines
    figure(("nic_kinds." + kind + " efficiency").c_str(), was.efficiency, cost.efficiency, false);
    figure(("nic_kinds." + kind + " step").c_str(), was.step_s, cost.step_s, true);
  }
  figure("nvswitch reduction GB/s", b.nvls_reduction_Bps / 1e9, a.nvls_reduction_Bps / 1e9, false);
  figure("tree step (LL)", b.tree_step_between_s[0], a.tree_step_between_s[0], true);
  figure("LL wire bytes per byte", b.protocols[0].wire_factor, a.protocols[0].wire_factor, false);
  figure("LL128 wire bytes/byte", b.protocols[1].wire_factor, a.protocols[1].wire_factor, false);
  figure("base latency (ring/LL)", b.protocols_loaded ? b.protocols[0].base_ring_s : b.collective_base_latency_s,
         a.protocols_loaded ? a.protocols[0].base_ring_s : a.collective_base_latency_s, true);
  figure("launch per GPU (-g N)", b.group_launch_per_gpu_s, a.group_launch_per_gpu_s, true);
  if (o.out.empty()) {
    fmt::print("\n(no -o given: nothing written)\n");
  } else {
    write_text_file(o.out, fit.file.dump(2) + "\n");
    fmt::print("\nwrote {} (name it in a scenario: \"simulation\": {{\"network_calibration\": \"...\"}})\n", o.out);
  }
  fmt::print("fit MAPE {} % (>= 64 MiB), {} % (8 KiB-1 MiB)\n", band(fit.after_all, true), band(fit.after_all, false));
  return 0;
}

} // namespace

// Registered by tools/stepsim/calibrate_command.cpp as `calibrate network`.
std::function<int()> setup_calibrate_network(CLI::App& calibrate)
{
  auto o       = std::make_shared<NetworkOptions>();
  CLI::App* n  = calibrate.add_subcommand(
      "network", "fit the network's link figures to a cluster's nccl-tests logs and write its calibration file");
  n->add_option("LOG", o->logs, "nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                                "alltoall_perf, sendrecv_perf), one run per file")
      ->required();
  n->add_option("--preset", o->preset, "the machine: a platform preset of configs/platforms/ (dgx-a100, ...)");
  n->add_option("--platform", o->platform, "the machine: a platform file {\"platform\": {...}}");
  n->add_option("--set", o->sets, "a field of the machine that differs from the preset or file: platform.*=value, "
                                  "e.g. platform.node_groups.0.nic.count=4 (repeatable)");
  n->add_option("-o,--out", o->out, "calibration file to write (a scenario names it in simulation.network_calibration)");
  n->footer("The logs name the ranks, hosts and GPUs; the machine gives the links. Single-host logs fit the link "
            "inside a node, multi-host logs the NIC.\nExample:\n  stepsim calibrate network all_reduce_perf.log "
            "--preset dgx-a100 -o my-cluster.json");
  return [n, o]() -> int { return n->parsed() ? run_network(*o) : -1; };
}

} // namespace stepsim
