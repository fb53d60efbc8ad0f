#include "tools/driver/network_fit.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/platform_parse.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/collective_bench.hpp"
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

namespace stepsim {
namespace {

// One log on the machine: the group it ran on and how the model times it.
struct Case {
  NetworkFitLog* fit = nullptr;
  PlatformSpec platform;
  std::vector<int> members;
  CollectiveOp op = CollectiveOp::AllReduce;
  std::string algorithm, protocol;
  bool analytic = false;
  double factor = 1;
  int gpus_per_thread = 1; // the log's nGpus: its iterations are at least that many launches
  // The link inside its nodes (nvswitch, nvlink, xgmi, pcie; "" where the node type keeps its rated
  // links): what a log on one host fits, and what may bound one across hosts instead of the NICs.
  std::string node_link;
};

// The rows of 8 KiB-1 MiB each candidate times (of each log): nccl-tests' doubling sizes give 8.
constexpr size_t kSmallRowsTimed = 8;
// The rows of 64 MiB and more each efficiency round times (of each log): nccl-tests' doubling
// sizes to 16 GiB give 9. Every row the fit's figure reports on, so that the figure fitted is
// the one reported: with 3 of them, a log whose curve climbs more steeply than the model's
// (CoreWeave's two GB200 racks, 512 MiB-16 GiB) ended worse over its 6 rows than it started.
constexpr size_t kLargeRowsTimed = 9;
// The search's bound on the tree's step between nodes (fit_link): four times the 9.5 us of
// links.json's, fitted on the slowest cluster in hand (Azure NDv4 VMs).
constexpr double kMostTreeStep = 40e-6;
// The search's bound on LL's effective wire factor (fit_link): 64 is LL on 1 of 8 channels at
// a quarter of the bandwidth, twice over.
constexpr double kMostLlWire = 64;

bool in_large(double bytes) { return bytes >= kLargeFrom; }
bool in_small(double bytes) { return bytes >= kSmallFrom && bytes <= kSmallTo; }

// Microseconds of each size under `links` (each a replay in a child process, which inherits the
// scoped calibration).
std::vector<double> model_us(Case& c, const LinkEfficiency& links, const std::vector<double>& sizes,
                             std::vector<std::string>* picked = nullptr)
{
  ScopedLinkEfficiency scope(links);
  std::vector<double> out;
  for (const auto& timed : time_collectives(c.platform, c.members, c.op, sizes, c.algorithm, c.analytic, c.protocol)) {
    out.push_back(nccl_tests_iteration_seconds(timed.seconds, c.gpus_per_thread, links) * 1e6);
    if (picked != nullptr)
      picked->push_back(timed.algorithm);
    ++c.fit->model_runs;
  }
  return out;
}

// At most `k` rows of a band, spread evenly over its sizes (the model runs are what cost).
std::vector<const NcclTestsRow*> sample(const NcclTestsLog& log, bool (*band)(double), size_t k)
{
  std::vector<const NcclTestsRow*> rows;
  for (const auto& r : log.rows)
    if (band(r.bytes))
      rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->bytes < b->bytes; });
  if (rows.size() <= k)
    return rows;
  std::vector<const NcclTestsRow*> picked;
  for (size_t i = 0; i < k; ++i)
    picked.push_back(rows[static_cast<size_t>(std::lround(double(i) * double(rows.size() - 1) / double(k - 1)))]);
  return picked;
}

// The figures of one link type, read and written by name: "nvswitch", "nvlink", "xgmi", "pcie", or a NIC kind
// (infiniband's are links.json's `nic`, the others "nic_kinds".<kind>).
struct LinkFigures {
  double efficiency = 1, step_s = 0;
};

LinkFigures figures_of(const LinkEfficiency& e, const std::string& link)
{
  if (link == "nvswitch")
    return {e.nvswitch, e.nvswitch_step_s};
  if (link == "nvlink")
    return {e.nvlink, e.nvlink_step_s};
  if (link == "xgmi")
    return {e.xgmi, e.xgmi_step_s};
  if (link == "pcie")
    return {e.pcie, e.pcie_step_s};
  const NicKindCost c = e.nic_kind(link);
  return {c.efficiency, c.step_s};
}

void set_figures(LinkEfficiency& e, const std::string& link, LinkFigures f)
{
  if (link == "nvswitch") {
    e.nvswitch        = f.efficiency;
    e.nvswitch_step_s = f.step_s;
    return;
  }
  if (link == "nvlink") {
    e.nvlink        = f.efficiency;
    e.nvlink_step_s = f.step_s;
    return;
  }
  if (link == "xgmi") {
    e.xgmi        = f.efficiency;
    e.xgmi_step_s = f.step_s;
    return;
  }
  if (link == "pcie") {
    e.pcie        = f.efficiency;
    e.pcie_step_s = f.step_s;
    return;
  }
  if (link == nic_kind_names().front()) {
    e.nic        = f.efficiency;
    e.nic_step_s = f.step_s;
  }
  if (link == nic_kind_names().front() && e.nic_kinds.count(link) == 0)
    return; // no "nic_kinds" in links.json: `nic` is what every kind takes
  e.nic_kinds[link] = NicKindCost{f.efficiency, f.step_s};
}

// Every base latency (NCCL's baseLat per algorithm and protocol, and the one of algorithms run
// without protocols) moved by `delta` seconds: a launch cost this cluster pays beyond NCCL's
// tuner figures. The same shift for every algorithm keeps `auto`'s choice as it was.
void shift_base(LinkEfficiency& e, double delta)
{
  e.collective_base_latency_s += delta;
  for (auto& p : e.protocols)
    for (double* v : {&p.base_ring_s, &p.base_tree_s, &p.base_nvls_s, &p.base_other_s})
      *v += delta;
}

double smallest_base(const LinkEfficiency& e)
{
  double least = e.collective_base_latency_s;
  if (e.protocols_loaded)
    for (const auto& p : e.protocols)
      least = std::min({least, p.base_ring_s, p.base_tree_s, p.base_nvls_s, p.base_other_s});
  return least;
}

double round_to(double v, double step) { return std::round(v / step) * step; }

// Fits `link` to the cases: its efficiency on their rows >= 64 MiB (time goes as 1/efficiency
// there, so a few fixed-point rounds do), then its step latency by golden-section search on the
// rows of 8 KiB-1 MiB with, when `fit_base`, the base latency shift that is best for each
// candidate in closed form (least squares of the relative time error). `node_link`, when not
// empty, is the link inside the cases' nodes, which no log on one host has fitted: across nodes
// it may bound the large rows instead of `link` (below).
void fit_link(std::vector<Case*> cases, const std::string& link, bool fit_base, LinkEfficiency& e,
              const std::string& node_link = "")
{
  const LinkEfficiency start = e; // what the fit may not end worse than (the end of this function)
  // Where `auto` runs NVLS (NVLink SHARP) the switch's reduction rate bounds a large all-reduce,
  // not the links: that figure (links.json nvswitch.in_switch_reduction) is the one to scale.
  // Across nodes NVLS-tree is bounded by the slower of the switch's reduction and the NICs: each
  // round then scales whichever of the two brings the rows closer (scaling the NIC of a run the
  // switch bounds would only lower it until it binds, and miss the rows between).
  struct Large {
    double log_ratio = 0, error = 0;
    int n = 0, nvls = 0;
  };
  auto large_rows = [&](const LinkEfficiency& candidate) {
    Large out;
    for (Case* c : cases) {
      const auto rows = sample(c->fit->log, in_large, kLargeRowsTimed);
      std::vector<double> sizes;
      for (auto* r : rows)
        sizes.push_back(r->bytes);
      std::vector<std::string> picked;
      const auto predicted = model_us(*c, candidate, sizes, &picked);
      for (size_t i = 0; i < rows.size(); ++i, ++out.n) {
        out.log_ratio += std::log(predicted[i] / rows[i]->time_us);
        out.error += std::abs(predicted[i] / rows[i]->time_us - 1);
        out.nvls += picked[i].rfind("nvls", 0) == 0 ? 1 : 0;
      }
    }
    return out;
  };
  const std::string& gpu = cases.front()->platform.node_groups.front().gpu;
  auto scale_reduction   = [&gpu](LinkEfficiency& candidate, double ratio) {
    // The cluster's own figure, from its GPU's (an NVSwitch generation may have its own): the
    // calibration file's one figure then holds for its GPUs.
    candidate.nvls_reduction_Bps = candidate.nvls_reduction_for(gpu) * ratio;
    candidate.nvls_reduction_by_gpu_Bps.clear();
  };
  auto scale = [](LinkEfficiency& candidate, const std::string& name, double ratio) {
    LinkFigures f = figures_of(candidate, name);
    f.efficiency  = std::clamp(f.efficiency * ratio, 0.01, 1.0);
    set_figures(candidate, name, f);
  };
  auto scale_link = [&](LinkEfficiency& candidate, double ratio) { scale(candidate, link, ratio); };
  auto large_round = [&](int rounds) {
    double best_error   = std::numeric_limits<double>::infinity();
    LinkEfficiency best = e;
    Large now           = large_rows(e);
    for (int round = 0; round < rounds; ++round) {
      if (now.n == 0)
        return;
      if (now.error < best_error) {
        best_error = now.error;
        best       = e;
      }
      const double ratio = std::exp(now.log_ratio / now.n);
      if (std::abs(ratio - 1) < 0.003)
        break;
      const bool switch_bounds = 2 * now.nvls > now.n && e.nvls_reduction_for(gpu) > 0;
      if (switch_bounds && link == "nvswitch") {
        scale_reduction(e, ratio);
        now = large_rows(e);
      } else if (switch_bounds) {
        LinkEfficiency by_switch = e, by_link = e;
        scale_reduction(by_switch, ratio);
        scale_link(by_link, ratio);
        const Large a = large_rows(by_switch), b = large_rows(by_link);
        if (a.error < b.error) {
          e   = by_switch;
          now = a;
        } else {
          e   = by_link;
          now = b;
        }
      } else if (!node_link.empty()) {
        // Across nodes the NICs need not be what bounds a large collective: a ring over two
        // NVLink domains of 72 GB200s crosses each NIC once per ring but every NVLink on every
        // step (CoreWeave's two racks: 811 GB/s of bus bandwidth on 50 GB/s NICs). Scaling NICs
        // that do not bind moves nothing. So where scaling them moved the rows by less than a
        // quarter of the ratio asked, the link inside the nodes is scaled instead. Not whichever
        // fits closer: where the NICs bind, a slower NVSwitch can fit a log about as well (Azure
        // NDv4's two nodes, whose NICs reach two thirds of a DGX's), and would misprice every
        // collective inside a node.
        LinkEfficiency by_link = e;
        scale_link(by_link, ratio);
        const Large b      = large_rows(by_link);
        const double moved = std::abs(b.log_ratio - now.log_ratio) / now.n;
        if (moved < 0.25 * std::abs(std::log(ratio))) {
          scale(e, node_link, ratio);
          now = large_rows(e);
        } else {
          e   = by_link;
          now = b;
        }
      } else {
        scale_link(e, ratio);
        now = large_rows(e);
      }
    }
    if (now.n > 0 && now.error < best_error) {
      best_error = now.error;
      best       = e;
    }
    if (!(best_error == std::numeric_limits<double>::infinity()))
      e = best;
  };
  large_round(5);

  std::vector<std::pair<Case*, std::vector<const NcclTestsRow*>>> small;
  for (Case* c : cases)
    if (auto rows = sample(c->fit->log, in_small, kSmallRowsTimed); !rows.empty())
      small.emplace_back(c, rows);
  if (small.empty())
    return;
  const double lowest_shift_us = -smallest_base(e) * 1e6;
  // The summed absolute relative error of the sampled rows under `candidate`, with (when `fit_base`) the
  // base latency shift that is best for it, in closed form (below).
  struct Trial {
    double error = std::numeric_limits<double>::infinity(), shift_s = 0;
  };
  auto trial = [&](const LinkEfficiency& candidate) {
    std::vector<double> measured, predicted;
    for (auto& [c, rows] : small) {
      std::vector<double> sizes;
      for (auto* r : rows) {
        sizes.push_back(r->bytes);
        measured.push_back(r->time_us);
      }
      for (double t : model_us(*c, candidate, sizes))
        predicted.push_back(t);
    }
    // The shift that minimises the MAPE (what the fit reports): a weighted median of
    // measured - predicted, weights 1/measured (d/dshift of sum |p + shift - m| / m).
    double shift = 0; // microseconds
    if (fit_base) {
      std::vector<std::pair<double, double>> gaps; // (m - p, 1/m)
      double total = 0;
      for (size_t i = 0; i < measured.size(); ++i) {
        gaps.emplace_back(measured[i] - predicted[i], 1 / measured[i]);
        total += 1 / measured[i];
      }
      std::sort(gaps.begin(), gaps.end());
      double seen = 0;
      for (const auto& [gap, weight] : gaps)
        if ((seen += weight) >= total / 2) {
          shift = gap;
          break;
        }
      shift = std::max(shift, lowest_shift_us);
    }
    Trial t{0, shift * 1e-6};
    for (size_t i = 0; i < measured.size(); ++i)
      t.error += std::abs((predicted[i] + shift) / measured[i] - 1);
    return t;
  };
  // Golden-section search of one figure over [lo, hi] (its ends tried too: a free step, 0, is a
  // real answer), the others as they are; keeps the best.
  auto search = [&](double lo, double hi, double now, const std::function<void(LinkEfficiency&, double)>& set) {
    auto at = [&](double x) {
      LinkEfficiency candidate = e;
      set(candidate, x);
      return std::pair{x, trial(candidate)};
    };
    const double golden = (std::sqrt(5.0) - 1) / 2, first = lo, last = hi;
    // The figure as it is wins ties: a figure the rows do not depend on stays as links.json has it.
    auto best = at(now);
    auto a = at(hi - golden * (hi - lo)), b = at(lo + golden * (hi - lo));
    for (const auto* t : {&a, &b})
      if (t->second.error < best.second.error - 1e-9)
        best = *t;
    for (int i = 0; i < 8; ++i) {
      if (a.second.error < b.second.error) {
        hi = b.first;
        b  = a;
        a  = at(hi - golden * (hi - lo));
      } else {
        lo = a.first;
        a  = b;
        b  = at(lo + golden * (hi - lo));
      }
      for (const auto* t : {&a, &b})
        if (t->second.error < best.second.error - 1e-9)
          best = *t;
    }
    for (double end : {first, last})
      if (auto t = at(end); t.second.error < best.second.error - 1e-9)
        best = t;
    set(e, best.first);
    return best.second;
  };
  // The step latency: NCCL's per-step hardware latencies are 0.6-14 us (hwLat in
  // https://github.com/NVIDIA/nccl/blob/v2.20.3-1/src/graph/tuning.cc); 20 us bounds the search,
  // or twice the link's own figure where that is more: the NIC kinds whose transport runs on the
  // host or through a plugin step in 30-65 us (links.json nic_kinds), which 20 us would exclude.
  const double most_step = std::max(20e-6, 2 * figures_of(e, link).step_s);
  auto set_step = [&](LinkEfficiency& candidate, double step_s) {
    LinkFigures f = figures_of(candidate, link);
    f.step_s      = step_s;
    set_figures(candidate, link, f);
  };
  // LL's bytes on the wire per byte of payload, where the base latency is fitted too: its flags
  // alone make it 2 (links.json), but NCCL's tuner gives ring LL a quarter of the bus bandwidth
  // and tree LL 1/3.8 of it (busBw * 1.0/4.0, * 1.0/3.8 in tuning.cc), and a small message runs
  // on fewer channels than stepsim's rings (enqueue.cc lowers nChannels until each has enough
  // bytes), so its throughput falls further: this cluster's figure, from 1 to kMostLlWire.
  auto set_ll_wire = [&](LinkEfficiency& candidate, double factor) { candidate.protocols[0].wire_factor = factor; };
  // LL128's the same way, from its 128/120 (links.json): the channels a message of a few hundred
  // KiB runs on.
  auto set_ll128_wire = [&](LinkEfficiency& candidate, double factor) { candidate.protocols[1].wire_factor = factor; };
  // Between nodes, the tree's own step (links.json protocols.tree.step_between_nodes): `auto`
  // runs the tree on most small messages across nodes, and what each of its hops costs beyond the
  // ring's (NCCL's proxy, the PCIe hops to the NIC) is the cluster's: 9.5 us fitted on Azure NDv4
  // VMs, where bare-metal H100 nodes on NDR take far less. Moved alike for every protocol, so
  // that NCCL's differences between them stay.
  const bool across  = link != "nvswitch" && link != "nvlink" && link != "xgmi" && link != "pcie";
  const auto tree_at = e.tree_step_between_s;
  auto set_tree_step = [tree_at](LinkEfficiency& candidate, double ll) {
    for (size_t i = 0; i < tree_at.size(); ++i)
      candidate.tree_step_between_s[i] = std::max(0.0, tree_at[i] + ll - tree_at[0]);
  };
  Trial best;
  if (fit_base && e.protocols_loaded) {
    search(1, kMostLlWire, e.protocols[0].wire_factor, set_ll_wire);
    search(1, kMostLlWire, e.protocols[1].wire_factor, set_ll128_wire);
    const double step_was = figures_of(e, link).step_s;
    best                  = search(0, most_step, step_was, set_step);
    const double tree_was = e.tree_step_between_s[0];
    if (across)
      best = search(0, kMostTreeStep, tree_was, set_tree_step);
    if (std::abs(figures_of(e, link).step_s - step_was) > 0.1e-6 ||
        std::abs(e.tree_step_between_s[0] - tree_was) > 0.1e-6) // they moved: LL's figure again
      best = search(1, kMostLlWire, e.protocols[0].wire_factor, set_ll_wire);
  } else {
    best = search(0, most_step, figures_of(e, link).step_s, set_step);
    if (across)
      best = search(0, kMostTreeStep, e.tree_step_between_s[0], set_tree_step);
  }
  shift_base(e, best.shift_s);
  large_round(2); // the small-message figures move the 64 MiB rows a little

  // A fit never ends worse than it started: the searches above take one figure at a time, and on
  // a log the figures it started from already fit (AWS p4de with NCCL_PROTO=Simple: 4.3 % at 64
  // MiB and up, 9.6 % below 1 MiB), their round trip can trade more of one band than it gains in
  // the other. Judged on the sampled rows, each band's mean relative error, the two summed.
  auto score = [&](const LinkEfficiency& candidate) {
    const Large l = large_rows(candidate);
    double small_error = 0;
    int small_rows     = 0;
    for (auto& [c, rows] : small) {
      std::vector<double> sizes;
      for (auto* r : rows)
        sizes.push_back(r->bytes);
      const auto predicted = model_us(*c, candidate, sizes);
      for (size_t i = 0; i < rows.size(); ++i, ++small_rows)
        small_error += std::abs(predicted[i] / rows[i]->time_us - 1);
    }
    return (l.n > 0 ? l.error / l.n : 0.0) + (small_rows > 0 ? small_error / small_rows : 0.0);
  };
  if (score(start) < score(e))
    e = start;
}

double mape(const std::vector<NetworkFitRow>& rows, bool (*band)(double), double NetworkFitRow::*model, int& count)
{
  double sum = 0;
  count      = 0;
  for (const auto& r : rows)
    if (band(r.bytes)) {
      sum += std::abs(r.*model / r.measured_us - 1);
      ++count;
    }
  return count == 0 ? 0 : 100 * sum / count;
}

Mape mape_of(const std::vector<NetworkFitRow>& rows, double NetworkFitRow::*model)
{
  Mape m;
  m.large_pct = mape(rows, in_large, model, m.large_rows);
  m.small_pct = mape(rows, in_small, model, m.small_rows);
  return m;
}

std::string us_text(double seconds) { return fmt::format("{:.4g}us", std::max(0.0, seconds * 1e6)); }

nlohmann::json link_entry(const LinkFigures& f, const std::string& logs)
{
  return {{"efficiency", f.efficiency},
          {"step_latency", us_text(f.step_s)},
          {"source", fmt::format("fitted by `stepsim calibrate network` on {}", logs)}};
}

// A log's notes, one after the other.
void add_note(std::string& note, const std::string& more) { note += (note.empty() ? "" : "; ") + more; }

} // namespace

NetworkFit fit_network(const NetworkFitRequest& request)
{
  if ((request.preset.empty() ? 0 : 1) + (request.platform_file.empty() ? 0 : 1) != 1)
    throw InputError({"--preset, --platform: give exactly one: the machine the logs were measured on (the log "
                      "names its hosts and GPUs, not its links)"});
  if (request.logs.empty())
    throw InputError({"LOG: expected at least one nccl-tests log"});
  NetworkFit fit;
  fit.machine = request.preset.empty() ? request.platform_file : request.preset;
  for (const auto& a : request.sets)
    fit.machine += (&a == &request.sets.front() ? " with " : ", ") + a;
  for (const auto& path : request.logs)
    fit.logs.push_back(NetworkFitLog{read_nccl_tests_log(path), "", "", {}, {}, {}, 0});
  fit.before = load_link_efficiency();

  std::vector<Case> cases(fit.logs.size());
  std::vector<Case*> inside, across;
  for (size_t i = 0; i < fit.logs.size(); ++i) {
    NetworkFitLog& l = fit.logs[i];
    Case& c          = cases[i];
    c.fit            = &l;
    const auto& log  = l.log;
    if (log.op == "sendrecv") {
      l.note = "sendrecv: stepsim times no point-to-point benchmark; listed, not fitted";
      continue;
    }
    if (!log.empty_rows.empty())
      add_note(l.note, fmt::format("{} row{} of 0 bytes left out (line{} {}): nothing moved", log.empty_rows.size(),
                                   log.empty_rows.size() == 1 ? "" : "s", log.empty_rows.size() == 1 ? "" : "s",
                                   fmt::join(log.empty_rows, ", ")));
    const int hosts = static_cast<int>(log.hosts.size()), per_host = log.ranks_per_host();
    const Scenario s = platform_scenario(request.preset, request.platform_file, hosts, request.sets);
    c.platform       = s.platform;
    // The log names its GPUs as NVML does; a machine of other GPUs is most likely the wrong one.
    if (!log.ranks.empty() && !log.ranks.front().device_name.empty()) {
      const std::string logged = catalogue_device_name(log.ranks.front().device_name);
      const auto names         = device_names();
      const std::string& machine_gpu = c.platform.node_groups.front().gpu;
      if (std::find(names.begin(), names.end(), logged) != names.end() && logged != machine_gpu)
        l.note = fmt::format("the log's GPUs are {} ({}), {}'s are {}: check that it is the machine the log was "
                             "measured on",
                             log.ranks.front().device_name, logged, fit.machine, machine_gpu);
    }
    // The ranks of each host on its node's first GPUs, host by host (nccl-tests numbers them so).
    std::vector<int> first_gpu;
    for (int g = 0, start = 0; g < static_cast<int>(c.platform.node_groups.size()); ++g)
      for (int node = 0; node < c.platform.node_groups[static_cast<size_t>(g)].count; ++node) {
        if (per_host > c.platform.node_groups[static_cast<size_t>(g)].gpus_per_node)
          throw InputError({fmt::format("{}: {} ranks on host {}, but a node of {} has {} GPUs", log.path, per_host,
                                        log.hosts.front(), fit.machine,
                                        c.platform.node_groups[static_cast<size_t>(g)].gpus_per_node)});
        first_gpu.push_back(start);
        start += c.platform.node_groups[static_cast<size_t>(g)].gpus_per_node;
      }
    if (static_cast<int>(first_gpu.size()) < hosts)
      throw InputError({fmt::format("{}: {} hosts, but {} holds {} nodes", log.path, hosts, fit.machine, first_gpu.size())});
    for (int h = 0; h < hosts; ++h)
      for (int k = 0; k < per_host; ++k)
        c.members.push_back(first_gpu[static_cast<size_t>(h)] + k);
    if (c.members.size() < 2) {
      add_note(l.note, "one rank: no collective to time; listed, not fitted");
      continue;
    }
    c.op        = *benchmark_op(log.op == "alltoall" ? "all_to_all" : log.op);
    c.algorithm = s.simulation.collective_algorithm;
    c.protocol  = s.simulation.nccl_protocol;
    c.analytic  = s.simulation.network_fidelity == "analytic";
    c.factor    = bus_bandwidth_factor(c.op, static_cast<int>(c.members.size()));
    c.gpus_per_thread = log.gpus_per_thread;
    const NodeType* type = NodeTypeRegistry::find(c.platform.node_groups.front().intra_node.type);
    const LinkClass kind = type != nullptr ? type->link_class : LinkClass::NvLink;
    c.node_link          = kind == LinkClass::Rated          ? ""
                           : kind == LinkClass::Pcie         ? "pcie"
                           : kind == LinkClass::NvLinkDirect ? "nvlink"
                           : kind == LinkClass::Xgmi         ? "xgmi"
                                                             : "nvswitch";
    if (hosts > 1) {
      l.fitted_link = c.platform.node_groups.front().nic.kind;
      across.push_back(&c);
    } else {
      if (kind == LinkClass::Rated) {
        add_note(l.note, fmt::format("the node type \"{}\" keeps its rated links (no efficiency to fit); listed, "
                                     "not fitted",
                                     c.platform.node_groups.front().intra_node.type));
        continue;
      }
      l.fitted_link = c.node_link;
      inside.push_back(&c);
    }
  }

  // The logs are of one machine: its GPU's NVSwitch step (links.json nvswitch.step_latency_by_gpu)
  // is the figure the fit starts from, and what it fits for the NVSwitch is the cluster's.
  for (const Case& c : cases)
    if (!c.platform.node_groups.empty()) {
      fit.before.nvswitch_step_s = fit.before.nvswitch_step_for(c.platform.node_groups.front().gpu);
      break;
    }
  fit.before.nvswitch_step_by_gpu_s.clear();

  // The rows before, on links.json.
  for (Case& c : cases) {
    if (c.fit->fitted_link.empty())
      continue;
    std::vector<double> sizes;
    for (const auto& r : c.fit->log.rows)
      sizes.push_back(r.bytes);
    const auto before = model_us(c, fit.before, sizes);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto& r = c.fit->log.rows[i];
      NetworkFitRow row;
      row.bytes          = r.bytes;
      row.measured_us    = r.time_us;
      row.measured_busbw = r.busbw_GBps;
      row.before_us      = before[i];
      row.before_busbw   = r.bytes / (before[i] * 1e-6) / 1e9 * c.factor;
      c.fit->rows.push_back(row);
    }
  }

  LinkEfficiency e = fit.before;
  // A log run with nccl-tests -g N times, where they are the longer part, the N launches of its one
  // host thread (collective_bench.hpp nccl_tests_iteration_seconds): the cluster's own launch is
  // what its smallest rows take, the median of those up to 4 KiB over N (a floor, so the least
  // of the logs' that have such rows). Fitted first: the links' figures are fitted above it.
  std::string launch_logs;
  double launch = 0;
  for (Case& c : cases) {
    if (c.fit->fitted_link.empty() || c.gpus_per_thread <= 1)
      continue;
    std::vector<double> tiny;
    for (const auto& r : c.fit->log.rows)
      if (r.bytes <= 4096)
        tiny.push_back(r.time_us * 1e-6);
    if (tiny.empty())
      continue;
    std::sort(tiny.begin(), tiny.end());
    const double median = (tiny[(tiny.size() - 1) / 2] + tiny[tiny.size() / 2]) / 2;
    const double each   = median / c.gpus_per_thread;
    launch              = launch_logs.empty() ? each : std::min(launch, each);
    launch_logs += (launch_logs.empty() ? "" : ", ") +
                   fmt::format("{} (-g {}: {:.2f} us)", std::filesystem::path(c.fit->log.path).filename().string(),
                               c.gpus_per_thread, each * 1e6);
  }
  if (!launch_logs.empty())
    e.group_launch_per_gpu_s = round_to(launch, 1e-8);
  // Inside a node first: the NIC's rows run over those links too.
  for (const std::string& link :
       {std::string("nvswitch"), std::string("nvlink"), std::string("xgmi"), std::string("pcie")}) {
    std::vector<Case*> group;
    for (Case* c : inside)
      if (c->fit->fitted_link == link)
        group.push_back(c);
    if (!group.empty())
      fit_link(group, link, link == inside.front()->fit->fitted_link, e);
  }
  std::vector<std::string> nic_kinds;
  for (Case* c : across)
    if (std::find(nic_kinds.begin(), nic_kinds.end(), c->fit->fitted_link) == nic_kinds.end())
      nic_kinds.push_back(c->fit->fitted_link);
  for (const auto& kind : nic_kinds) {
    std::vector<Case*> group;
    for (Case* c : across)
      if (c->fit->fitted_link == kind)
        group.push_back(c);
    // The link inside the nodes, where no log on one host fitted it and the logs across hosts
    // are all of one node type.
    std::string node_link = group.front()->node_link;
    for (Case* c : group)
      if (c->node_link != node_link)
        node_link.clear();
    for (Case* c : inside)
      if (c->fit->fitted_link == node_link)
        node_link.clear();
    fit_link(group, kind, inside.empty() && kind == nic_kinds.front(), e, node_link);
  }

  // The figures as the file writes them, so that the file gives the "after" columns exactly.
  std::vector<std::string> fitted_links;
  for (const auto& l : fit.logs)
    if (!l.fitted_link.empty() && std::find(fitted_links.begin(), fitted_links.end(), l.fitted_link) == fitted_links.end())
      fitted_links.push_back(l.fitted_link);
  // A link inside the nodes that a log across them moved (fit_link) is written as the fitted ones are.
  for (const std::string link : {"nvswitch", "nvlink", "xgmi", "pcie"})
    if (figures_of(e, link).efficiency != figures_of(fit.before, link).efficiency &&
        std::find(fitted_links.begin(), fitted_links.end(), link) == fitted_links.end()) {
      fitted_links.push_back(link);
      for (Case* c : across)
        if (c->node_link == link)
          add_note(c->fit->note, fmt::format("its large rows are bound inside its nodes, not by its NICs: the "
                                             "{} efficiency is fitted on them too",
                                             link));
    }
  for (const auto& link : fitted_links) {
    LinkFigures f = figures_of(e, link);
    set_figures(e, link, {round_to(f.efficiency, 1e-4), round_to(f.step_s, 1e-9)});
  }
  const double shift = round_to(e.collective_base_latency_s - fit.before.collective_base_latency_s, 1e-8);
  LinkEfficiency rounded = e;
  rounded.collective_base_latency_s = fit.before.collective_base_latency_s;
  rounded.protocols                 = fit.before.protocols;
  for (size_t p = 0; p < 2; ++p) // LL and LL128
    rounded.protocols[p].wire_factor = round_to(e.protocols[p].wire_factor, 1e-3);
  rounded.nvls_reduction_Bps = round_to(e.nvls_reduction_Bps, 1e8);
  for (size_t p = 0; p < rounded.tree_step_between_s.size(); ++p) // where the fit moved them
    if (e.tree_step_between_s[p] != fit.before.tree_step_between_s[p])
      rounded.tree_step_between_s[p] = round_to(e.tree_step_between_s[p], 1e-8); // as us_text writes it
  shift_base(rounded, shift);
  fit.after = rounded;

  std::vector<NetworkFitRow> all_rows;
  for (Case& c : cases) {
    if (c.fit->fitted_link.empty())
      continue;
    std::vector<double> sizes;
    for (const auto& r : c.fit->rows)
      sizes.push_back(r.bytes);
    const auto after = model_us(c, fit.after, sizes);
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto& row       = c.fit->rows[i];
      row.after_us    = after[i];
      row.after_busbw = row.bytes / (after[i] * 1e-6) / 1e9 * c.factor;
    }
    c.fit->before = mape_of(c.fit->rows, &NetworkFitRow::before_us);
    c.fit->after  = mape_of(c.fit->rows, &NetworkFitRow::after_us);
    if (c.fit->after.large_rows == 0 && c.fit->after.small_rows == 0)
      add_note(c.fit->note, "no rows of >= 64 MiB or 8 KiB-1 MiB: nothing to fit");
    else if (figures_of(fit.after, c.fit->fitted_link).efficiency >= 1.0 && c.fit->after.large_pct > 5)
      add_note(c.fit->note, "the rated bandwidth is too low for the measured rows (efficiency capped at 1): "
                            "check the machine's link bandwidths");
    all_rows.insert(all_rows.end(), c.fit->rows.begin(), c.fit->rows.end());
  }
  fit.before_all = mape_of(all_rows, &NetworkFitRow::before_us);
  fit.after_all  = mape_of(all_rows, &NetworkFitRow::after_us);
  for (const auto& l : fit.logs)
    fit.model_runs += l.model_runs;

  // The file: links.json's entries that changed, in links.json's shape.
  std::vector<std::string> names;
  for (const auto& l : fit.logs)
    names.push_back(std::filesystem::path(l.log.path).filename().string());
  std::string logs_text;
  for (const auto& n : names)
    logs_text += (logs_text.empty() ? "" : ", ") + n;
  logs_text += " on " + fit.machine;
  nlohmann::json& file = fit.file;
  file["description"]  = "A cluster's own network calibration, written by `stepsim calibrate network`: the entries of "
                         "configs/calibration/links.json fitted to its nccl-tests logs, laid over links.json by a "
                         "scenario's simulation.network_calibration or `stepsim collective --network-calibration`.";
  file["fitted_on"] = nlohmann::json::array();
  for (const auto& l : fit.logs)
    file["fitted_on"].push_back(l.log.path);
  for (const auto& link : fitted_links) {
    const auto entry = link_entry(figures_of(fit.after, link), logs_text);
    if (link == "nvswitch" || link == "nvlink" || link == "xgmi" || link == "pcie" ||
        link == nic_kind_names().front())
      file[link == nic_kind_names().front() ? "nic" : link] = entry;
    else
      file["nic_kinds"][link] = entry;
  }
  for (size_t p = 0; p < 2; ++p)
    if (fit.after.protocols[p].wire_factor != fit.before.protocols[p].wire_factor) {
      const char* name                            = p == 0 ? "LL" : "LL128";
      file["protocols"][name]["wire_bytes_per_byte"] = fit.after.protocols[p].wire_factor;
      file["protocols"][name]["wire_bytes_per_byte_source"] =
          fmt::format("{}'s throughput for small messages on this cluster (its protocol and the few channels NCCL "
                      "gives them), fitted on the 8 KiB-1 MiB rows of {} (links.json: {:g})",
                      name, logs_text, fit.before.protocols[p].wire_factor);
    }
  if (fit.after.tree_step_between_s != fit.before.tree_step_between_s) {
    const char* names[] = {"LL", "LL128", "Simple"};
    auto& step          = file["protocols"]["tree"]["step_between_nodes"];
    for (size_t p = 0; p < fit.after.tree_step_between_s.size(); ++p)
      step[names[p]] = us_text(fit.after.tree_step_between_s[p]);
    step["source"] = fmt::format("the tree's latency per hop between nodes on this cluster, fitted on the 8 KiB-1 MiB "
                                 "rows of {} (links.json: LL {}; every protocol moved alike)",
                                 logs_text, us_text(fit.before.tree_step_between_s[0]));
  }
  if (!launch_logs.empty()) {
    file["nccl_group_launch"]["per_gpu"] = us_text(fit.after.group_launch_per_gpu_s);
    file["nccl_group_launch"]["per_gpu_source"] =
        fmt::format("the median of the rows up to 4 KiB over the GPUs each host thread drove, the least of: {} "
                    "(links.json: {})",
                    launch_logs, us_text(fit.before.group_launch_per_gpu_s));
  }
  if (fit.after.nvls_reduction_Bps != fit.before.nvls_reduction_Bps) {
    file["nvswitch"]["in_switch_reduction"] = fmt::format("{:.1f}GBps", fit.after.nvls_reduction_Bps / 1e9);
    file["nvswitch"]["in_switch_reduction_source"] =
        fmt::format("fitted on the rows of 64 MiB and more of {}, where `auto` runs NVLS or NVLS-tree", logs_text);
  }
  if (shift != 0) {
    const std::string source = fmt::format("links.json's shifted by {:+.4g} us, fitted on the 8 KiB-1 MiB rows of {}",
                                           shift * 1e6, logs_text);
    file["collective_base_latency"] = {{"value", us_text(fit.after.collective_base_latency_s)}, {"source", source}};
    if (fit.after.protocols_loaded) {
      const char* protocol_names[] = {"LL", "LL128", "Simple"};
      for (size_t i = 0; i < fit.after.protocols.size(); ++i) {
        const auto& p                                   = fit.after.protocols[i];
        file["protocols"][protocol_names[i]]["base_latency"] = {{"ring", us_text(p.base_ring_s)},
                                                                {"tree", us_text(p.base_tree_s)},
                                                                {"nvls", us_text(p.base_nvls_s)},
                                                                {"other", us_text(p.base_other_s)},
                                                                {"source", source}};
      }
    }
  }
  nlohmann::json summary = {{"machine", fit.machine},
                            {"model_runs", fit.model_runs},
                            {"mape_large_pct", fit.after_all.large_pct},
                            {"mape_small_pct", fit.after_all.small_pct},
                            {"mape_large_before_pct", fit.before_all.large_pct},
                            {"mape_small_before_pct", fit.before_all.small_pct},
                            {"logs", nlohmann::json::array()}};
  for (const auto& l : fit.logs)
    summary["logs"].push_back({{"path", l.log.path},
                               {"op", l.log.op},
                               {"ranks", l.log.ranks.size()},
                               {"hosts", l.log.hosts.size()},
                               {"device", l.log.ranks.front().device_name},
                               {"fitted", l.fitted_link.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.fitted_link)},
                               {"mape_large_pct", l.after.large_pct},
                               {"mape_small_pct", l.after.small_pct},
                               {"note", l.note}});
  file["fit"] = summary;
  return fit;
}

} // namespace stepsim
