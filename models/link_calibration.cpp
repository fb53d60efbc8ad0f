#include "models/link_calibration.hpp"

#include "models/device.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/platform_parse.hpp"
#include "sim/core/scenario_check.hpp"

#include <fmt/format.h>

#include <functional>

#include <algorithm>
#include <filesystem>
#include <optional>

namespace stepsim {

namespace {

// The calibration in force instead of links.json while a ScopedLinkEfficiency lives.
std::optional<LinkEfficiency>& override_slot()
{
  static std::optional<LinkEfficiency> slot;
  return slot;
}

int& generation_slot()
{
  static int generation = 0;
  return generation;
}

// "nccl_group_launch" (links.json and a cluster's calibration file alike): what one host thread
// spends per GPU it drives (tools/driver/collective_bench.hpp nccl_tests_iteration_seconds);
// `current` where the entry leaves it out.
double read_group_launch(JsonReader group, double current)
{
  const double per_gpu = group.time("per_gpu", current);
  if (per_gpu > 1e-3)
    group.problems().add(group.path_of("per_gpu"), "expected a launch cost below 1 ms");
  group.text("per_gpu_source", std::string());
  group.raw("notes");
  group.reject_unknown_keys();
  return per_gpu;
}

// "msccl" (links.json and a cluster's calibration file alike): what RCCL's MSCCL all-pairs
// program costs beyond its protocol's base latency (models/collectives/msccl.cpp); `current`
// where the entry leaves it out.
double read_msccl(JsonReader msccl, double current)
{
  const double base = msccl.time("base_latency", current);
  if (base > 1e-3)
    msccl.problems().add(msccl.path_of("base_latency"), "expected a base latency below 1 ms");
  msccl.raw("description");
  msccl.raw("base_latency_source");
  msccl.raw("source");
  msccl.reject_unknown_keys();
  return base;
}

// "nic_kinds": one entry per kind of sim/input/platform_parse.hpp nic_kind_names(), each with its
// achieved efficiency and per-step latency and their sources. infiniband's figures are the `nic`
// entry's (the fabric they were fitted on), repeated so that every kind reads alike; a
// difference is refused, so that a refit of one cannot leave the other behind.
void read_nic_kinds(JsonReader kinds, LinkEfficiency& e)
{
  kinds.raw("description");
  for (const auto& name : nic_kind_names()) {
    JsonReader k = kinds.object(name, true);
    NicKindCost c;
    c.efficiency = k.number("efficiency", std::nullopt, 0, true);
    if (c.efficiency > 1.0)
      kinds.problems().add(k.path_of("efficiency"), "expected a fraction no larger than 1");
    c.step_s = k.time("step_latency", 0.0);
    if (c.step_s > 1e-3)
      kinds.problems().add(k.path_of("step_latency"), "expected a per-step latency below 1 ms");
    k.text("source");
    k.text("step_latency_source");
    k.raw("notes");
    k.reject_unknown_keys();
    if (name == nic_kind_names().front() && (c.efficiency != e.nic || c.step_s != e.nic_step_s))
      kinds.problems().add(k.path(), fmt::format("expected the `nic` entry's figures (efficiency {:g}, step_latency "
                                                 "{:g}us): infiniband is the fabric they were fitted on",
                                                 e.nic, e.nic_step_s * 1e6));
    e.nic_kinds[name] = c;
  }
  kinds.reject_unknown_keys();
}

// "protocols.tree": NCCL's tree beyond the ring (LinkEfficiency::tree_step_between_s). links.json
// (`full`) gives its step between nodes per protocol and its bandwidth factor; a cluster's own
// calibration file the steps it fitted, each left out keeping links.json's.
void read_tree(JsonReader tree, LinkEfficiency& e, bool full)
{
  if (full && !tree.has("bandwidth_factor"))
    return; // a links.json of before the tree's figures: the tree costs what the ring does
  JsonReader step = tree.object("step_between_nodes", full);
  for (size_t i = 0; i < e.tree_step_between_s.size(); ++i) {
    const char* name = i == 0 ? "LL" : i == 1 ? "LL128" : "Simple";
    e.tree_step_between_s[i] = step.time(name, e.tree_step_between_s[i]);
    if (e.tree_step_between_s[i] > 1e-3)
      tree.problems().add(step.path_of(name), "expected a per-step latency below 1 ms");
  }
  step.raw("source");
  step.reject_unknown_keys();
  tree.raw("source");
  if (full) {
    e.tree_bandwidth_factor = tree.number("bandwidth_factor", 1.0, 0, true);
    if (e.tree_bandwidth_factor > 1)
      tree.problems().add(tree.path_of("bandwidth_factor"), "expected a fraction no larger than 1");
    // NVLS-tree's trees take the tree's Simple step unless protocols.nvls_tree gives their own.
    e.nvls_tree_step_between_s = e.tree_step_between_s[2];
    return; // links.json's entry holds more for people (notes, sources per figure)
  }
  tree.reject_unknown_keys();
}

// "protocols.nvls_tree": NVLS-tree's own step between nodes (LinkEfficiency::nvls_tree_step_between_s).
void read_nvls_tree(JsonReader nvls_tree, LinkEfficiency& e)
{
  e.nvls_tree_step_between_s = nvls_tree.time("step_between_nodes", e.nvls_tree_step_between_s);
  if (e.nvls_tree_step_between_s > 1e-3)
    nvls_tree.problems().add(nvls_tree.path_of("step_between_nodes"), "expected a per-step latency below 1 ms");
  nvls_tree.text("step_between_nodes_source", std::string());
  e.nvls_tree_switch_share = nvls_tree.number("switch_share", e.nvls_tree_switch_share, 0, true);
  if (e.nvls_tree_switch_share > 1)
    nvls_tree.problems().add(nvls_tree.path_of("switch_share"), "expected a fraction no larger than 1");
  nvls_tree.text("switch_share_source", std::string());
  nvls_tree.raw("notes");
  nvls_tree.reject_unknown_keys();
}

// link[key] = {"H100-SXM": figure, "H100-SXM_source": "..."}: a figure and its source per
// catalogue device, each figure read by `read` into `out`.
void read_by_gpu(JsonReader& link, const char* key, std::map<std::string, double>& out,
                 const std::function<double(JsonReader&, const std::string&)>& read)
{
  const nlohmann::json* by_gpu = link.raw(key);
  JsonReader gpus              = link.object(key);
  const auto devices           = device_names();
  if (by_gpu->is_object())
    for (const auto& [name, value] : by_gpu->items()) {
      if (name.size() > 7 && name.ends_with("_source")) {
        gpus.text(name);
        continue;
      }
      if (std::find(devices.begin(), devices.end(), name) == devices.end())
        gpus.problems().add(gpus.path_of(name), "expected a device of configs/devices/ (H100-SXM, B200, ...)");
      out[name] = read(gpus, name);
    }
  gpus.reject_unknown_keys();
}

} // namespace

LinkEfficiency load_link_efficiency()
{
  if (const auto& scoped = override_slot())
    return *scoped;
  LinkEfficiency e;
  const std::string file = config_dir() + "/calibration/links.json";
  if (!std::filesystem::exists(file))
    return e;
  nlohmann::json doc = read_json_file(file);
  Problems problems;
  JsonReader r(doc, file, problems);
  auto fraction = [&](const char* key, double& out, double& step, bool nvswitch = false) {
    JsonReader link = r.object(key, true);
    out             = link.number("efficiency", std::nullopt, 0, true);
    step            = link.time("step_latency", 0.0);
    if (step > 1e-3)
      problems.add(link.path_of("step_latency"), "expected a per-step latency below 1 ms");
    if (std::string(key) == "nic" && link.has("in_network_reduction")) {
      e.in_network_reduction = link.number("in_network_reduction", std::nullopt, 0, true);
      if (!(e.in_network_reduction > 0) || e.in_network_reduction > 1)
        problems.add(link.path_of("in_network_reduction"), "expected a fraction above 0 and no larger than 1");
      link.text("in_network_reduction_source");
    }
    if (std::string(key) == "pcie" && link.has("host_staged")) {
      e.pcie_host_staged = link.number("host_staged", std::nullopt, 0, true);
      if (!(e.pcie_host_staged > 0) || e.pcie_host_staged > 1)
        problems.add(link.path_of("host_staged"), "expected a fraction above 0 and no larger than 1");
      link.text("host_staged_source");
    }
    if (nvswitch && link.has("step_latency_by_gpu"))
      read_by_gpu(link, "step_latency_by_gpu", e.nvswitch_step_by_gpu_s, [&](JsonReader& gpus, const std::string& name) {
        const double s = gpus.time(name);
        if (s > 1e-3)
          problems.add(gpus.path_of(name), "expected a per-step latency below 1 ms");
        return s;
      });
    if (nvswitch && link.has("in_switch_reduction_by_gpu"))
      read_by_gpu(link, "in_switch_reduction_by_gpu", e.nvls_reduction_by_gpu_Bps,
                  [&](JsonReader& gpus, const std::string& name) {
                    const double bps = gpus.bandwidth(name, 0.0);
                    if (!(bps > 0))
                      problems.add(gpus.path_of(name), "expected a positive bandwidth such as 463GBps");
                    return bps;
                  });
    if (nvswitch && link.has("in_switch_reduction")) {
      e.nvls_reduction_Bps = link.bandwidth("in_switch_reduction", 0.0);
      if (!(e.nvls_reduction_Bps > 0))
        problems.add(link.path_of("in_switch_reduction"), "expected a positive bandwidth such as 274GBps");
      link.text("in_switch_reduction_source");
    }
    link.text("source");
    link.raw("step_latency_source");
    link.raw("notes");
    link.reject_unknown_keys();
    if (out > 1.0)
      problems.add(link.path_of("efficiency"), "expected a fraction no larger than 1");
  };
  fraction("nvswitch", e.nvswitch, e.nvswitch_step_s, true);
  // Direct NVLink takes the NVSwitch's figures where the file has none of its own.
  e.nvlink        = e.nvswitch;
  e.nvlink_step_s = e.nvswitch_step_s;
  if (r.has("nvlink"))
    fraction("nvlink", e.nvlink, e.nvlink_step_s);
  // xGMI likewise, where the file has no figure of its own.
  e.xgmi        = e.nvlink;
  e.xgmi_step_s = e.nvlink_step_s;
  if (r.has("xgmi"))
    fraction("xgmi", e.xgmi, e.xgmi_step_s);
  fraction("pcie", e.pcie, e.pcie_step_s);
  fraction("nic", e.nic, e.nic_step_s);
  JsonReader base             = r.object("collective_base_latency");
  e.collective_base_latency_s = base.time("value", 0.0);
  if (e.collective_base_latency_s > 1e-3)
    problems.add(base.path_of("value"), "expected a base latency below 1 ms");
  base.text("source", std::string());
  base.reject_unknown_keys();
  if (r.has("nccl_group_launch"))
    e.group_launch_per_gpu_s = read_group_launch(r.object("nccl_group_launch"), 0.0);
  if (r.has("msccl"))
    e.msccl_base_s = read_msccl(r.object("msccl"), 0.0);
  if (r.has("protocols")) {
    JsonReader protocols = r.object("protocols");
    protocols.raw("description");
    protocols.raw("source");
    const char* names[] = {"LL", "LL128", "Simple"};
    for (size_t i = 0; i < e.protocols.size(); ++i) {
      JsonReader p      = protocols.object(names[i], true);
      ProtocolCost& c   = e.protocols[i];
      c.wire_factor     = p.number("wire_bytes_per_byte", std::nullopt, 1.0);
      JsonReader step   = p.object("step_latency", true);
      c.step_inside_s   = step.time("inside_node", 0.0);
      c.step_between_s  = step.time("between_nodes", 0.0);
      step.raw("source");
      step.reject_unknown_keys();
      JsonReader launch = p.object("base_latency", true);
      c.base_ring_s     = launch.time("ring", 0.0);
      c.base_tree_s     = launch.time("tree", 0.0);
      c.base_nvls_s     = launch.time("nvls", 0.0);
      c.base_other_s    = launch.time("other", 0.0);
      launch.raw("source");
      launch.reject_unknown_keys();
      for (double v : {c.step_inside_s, c.step_between_s, c.base_ring_s, c.base_tree_s, c.base_nvls_s, c.base_other_s})
        if (v > 1e-3)
          problems.add(p.path(), "expected latencies below 1 ms");
      p.raw("source");
      p.reject_unknown_keys();
    }
    if (protocols.has("tree"))
      read_tree(protocols.object("tree"), e, true);
    if (protocols.has("nvls_tree"))
      read_nvls_tree(protocols.object("nvls_tree"), e);
    protocols.reject_unknown_keys();
    e.protocols_loaded = true;
  }
  if (r.has("nic_kinds"))
    read_nic_kinds(r.object("nic_kinds"), e);
  r.raw("description");
  r.reject_unknown_keys();
  problems.throw_if_any();
  return e;
}

double LinkEfficiency::nvls_reduction_for(const std::string& gpu) const
{
  if (auto it = nvls_reduction_by_gpu_Bps.find(gpu); it != nvls_reduction_by_gpu_Bps.end())
    return it->second;
  return nvls_reduction_Bps;
}

double LinkEfficiency::nvswitch_step_for(const std::string& gpu) const
{
  if (auto it = nvswitch_step_by_gpu_s.find(gpu); it != nvswitch_step_by_gpu_s.end())
    return it->second;
  return nvswitch_step_s;
}

NicKindCost LinkEfficiency::nic_kind(const std::string& kind) const
{
  if (auto it = nic_kinds.find(kind); it != nic_kinds.end())
    return it->second;
  return NicKindCost{nic, nic_step_s};
}

const LinkEfficiency& link_efficiency()
{
  if (const auto& scoped = override_slot())
    return *scoped;
  static const LinkEfficiency e = load_link_efficiency();
  return e;
}

} // namespace stepsim

namespace stepsim {

LinkEfficiency load_network_calibration(const std::string& file, const LinkEfficiency& base, const std::string& named_by)
{
  if (!std::filesystem::exists(file))
    throw InputError({fmt::format("{}: no network calibration file \"{}\" (expected one written by `stepsim "
                                  "calibrate network -o FILE`)",
                                  named_by, file)});
  LinkEfficiency e = base;
  try {
    const nlohmann::json doc =
        parse_json_text(read_bounded_file(file, kMaxJsonFileBytes, "a network calibration file"), file);
    Problems problems;
    JsonReader r(doc, "", problems);
    // Every key the file may hold, so that a misspelt one is named with the closest of them.
    for (const char* key : {"nvswitch", "nvlink", "xgmi", "pcie", "nic", "nic_kinds", "collective_base_latency",
                            "protocols", "nccl_group_launch", "msccl"})
      r.raw(key);
    // Each link entry as links.json writes it; what an entry leaves out keeps links.json's figure.
    auto link = [&](JsonReader l, double& efficiency, double& step, bool pcie = false) {
      efficiency = l.number("efficiency", efficiency, 0, true);
      if (efficiency > 1.0)
        problems.add(l.path_of("efficiency"), "expected a fraction no larger than 1");
      step = l.time("step_latency", step);
      if (step > 1e-3)
        problems.add(l.path_of("step_latency"), "expected a per-step latency below 1 ms");
      l.raw("source");
      l.raw("step_latency_source");
      l.raw("notes");
      if (pcie && l.has("host_staged")) {
        e.pcie_host_staged = l.number("host_staged", std::nullopt, 0, true);
        if (!(e.pcie_host_staged > 0) || e.pcie_host_staged > 1)
          problems.add(l.path_of("host_staged"), "expected a fraction above 0 and no larger than 1");
      }
      if (pcie)
        l.raw("host_staged_source");
      l.reject_unknown_keys();
    };
    if (r.has("nvswitch")) {
      JsonReader nvswitch = r.object("nvswitch");
      if (nvswitch.has("in_switch_reduction")) {
        e.nvls_reduction_Bps = nvswitch.bandwidth("in_switch_reduction");
        if (!(e.nvls_reduction_Bps > 0))
          problems.add(nvswitch.path_of("in_switch_reduction"), "expected a positive bandwidth such as 274GBps");
        e.nvls_reduction_by_gpu_Bps.clear(); // a cluster's own figure, fitted on its rows, is its GPUs'
      }
      nvswitch.raw("in_switch_reduction_source");
      // A cluster's own NVSwitch step, fitted on its own rows, is every GPU's there.
      if (nvswitch.has("step_latency"))
        e.nvswitch_step_by_gpu_s.clear();
      link(nvswitch, e.nvswitch, e.nvswitch_step_s);
    }
    if (r.has("nvlink"))
      link(r.object("nvlink"), e.nvlink, e.nvlink_step_s);
    if (r.has("xgmi"))
      link(r.object("xgmi"), e.xgmi, e.xgmi_step_s);
    if (r.has("pcie"))
      link(r.object("pcie"), e.pcie, e.pcie_step_s, true);
    if (r.has("nic")) {
      link(r.object("nic"), e.nic, e.nic_step_s);
      if (auto it = e.nic_kinds.find(nic_kind_names().front()); it != e.nic_kinds.end())
        it->second = NicKindCost{e.nic, e.nic_step_s}; // `nic` is infiniband's
    }
    if (r.has("nic_kinds")) {
      JsonReader kinds = r.object("nic_kinds");
      for (const auto& name : nic_kind_names())
        kinds.raw(name);
      for (const auto& name : nic_kind_names())
        if (kinds.has(name)) {
          NicKindCost c = e.nic_kind(name);
          link(kinds.object(name), c.efficiency, c.step_s);
          e.nic_kinds[name] = c;
          if (name == nic_kind_names().front()) {
            e.nic        = c.efficiency;
            e.nic_step_s = c.step_s;
          }
        }
      kinds.reject_unknown_keys();
    }
    if (r.has("collective_base_latency")) {
      JsonReader b                = r.object("collective_base_latency");
      e.collective_base_latency_s = b.time("value", e.collective_base_latency_s);
      if (e.collective_base_latency_s > 1e-3)
        problems.add(b.path_of("value"), "expected a base latency below 1 ms");
      b.raw("source");
      b.reject_unknown_keys();
    }
    if (r.has("nccl_group_launch")) // the cluster's host, from its logs run with nccl-tests -g N
      e.group_launch_per_gpu_s = read_group_launch(r.object("nccl_group_launch"), e.group_launch_per_gpu_s);
    if (r.has("msccl")) // RCCL's MSCCL program's own cost, fitted on the cluster's logs
      e.msccl_base_s = read_msccl(r.object("msccl"), e.msccl_base_s);
    if (r.has("protocols")) { // each protocol's base latency per algorithm (links.json "protocols")
      JsonReader protocols = r.object("protocols");
      const char* names[]  = {"LL", "LL128", "Simple"};
      for (const char* name : names)
        protocols.raw(name);
      // The tree's and NVLS-tree's steps between nodes, where the cluster's fit set them.
      if (protocols.has("tree"))
        read_tree(protocols.object("tree"), e, false);
      if (protocols.has("nvls_tree"))
        read_nvls_tree(protocols.object("nvls_tree"), e);
      for (size_t i = 0; i < e.protocols.size(); ++i) {
        if (!protocols.has(names[i]))
          continue;
        JsonReader p    = protocols.object(names[i]);
        ProtocolCost& c = e.protocols[i];
        // What one byte of payload costs on the wire: for LL the fit's figure of LL's bandwidth
        // on this cluster (NCCL's tuner gives ring LL a quarter of the bus bandwidth, not the
        // half its flags take: tuning.cc).
        c.wire_factor = p.number("wire_bytes_per_byte", c.wire_factor, 1.0);
        if (c.wire_factor > 64)
          problems.add(p.path_of("wire_bytes_per_byte"), "expected a factor from 1 to 64");
        p.raw("wire_bytes_per_byte_source");
        JsonReader b    = p.object("base_latency");
        c.base_ring_s   = b.time("ring", c.base_ring_s);
        c.base_tree_s   = b.time("tree", c.base_tree_s);
        c.base_nvls_s   = b.time("nvls", c.base_nvls_s);
        c.base_other_s  = b.time("other", c.base_other_s);
        for (double v : {c.base_ring_s, c.base_tree_s, c.base_nvls_s, c.base_other_s})
          if (v > 1e-3)
            problems.add(b.path(), "expected latencies below 1 ms");
        b.raw("source");
        b.reject_unknown_keys();
        p.reject_unknown_keys();
      }
      protocols.reject_unknown_keys();
    }
    r.raw("description");
    r.raw("fitted_on"); // the logs and the fit's summary, for people
    r.raw("fit");
    r.reject_unknown_keys();
    problems.throw_if_any();
  } catch (const InputError& error) {
    std::vector<std::string> named;
    for (const auto& p : error.problems())
      named.push_back(fmt::format("{}: in \"{}\", {}", named_by, file, p));
    throw InputError(named);
  }
  return e;
}

ScopedLinkEfficiency::ScopedLinkEfficiency(const LinkEfficiency& links) : previous_(override_slot())
{
  override_slot() = links;
  ++generation_slot();
}

ScopedLinkEfficiency::~ScopedLinkEfficiency()
{
  override_slot() = previous_;
  ++generation_slot();
}

int link_efficiency_generation() { return generation_slot(); }

} // namespace stepsim

namespace stepsim {

std::unique_ptr<ScopedLinkEfficiency> network_calibration_scope(const SimulationSpec& s)
{
  if (s.network_calibration.empty())
    return nullptr;
  return std::make_unique<ScopedLinkEfficiency>(
      load_network_calibration(s.network_calibration, load_link_efficiency(), "simulation.network_calibration"));
}

namespace {

// A calibration file that is missing or malformed is bad input found by `stepsim validate`, not a
// failure in the middle of a sweep.
const bool checked = ScenarioCheckRegistry::add(
    "network_calibration", "simulation.network_calibration names a readable calibration file",
    ScenarioCheck{[](const Scenario& s) { network_calibration_scope(s.simulation); }});

} // namespace
} // namespace stepsim
