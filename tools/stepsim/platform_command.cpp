// `stepsim platform FILE`: builds the scenario's SimGrid platform and prints what it holds, so a
// user can check the cluster before simulating on it: nodes and GPUs, every kind of link with its
// bandwidth and latency, and example routes with the links they cross.
//
// Everything printed is read back from the built SimGrid platform (Engine::get_all_links,
// Host::route_to), not recomputed from the scenario, so it shows what the simulation will use.
#include "models/link_calibration.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/link_bandwidth.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/collective_bench.hpp"
#include "tools/stepsim/command.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <tuple>

namespace stepsim {
namespace {

namespace sg4 = simgrid::s4u;

// Above this many GPUs only those of the example routes (and the first GPU of every node) are
// built: SimGrid's platform creation grows faster than linearly, and nodes of a group are alike.
constexpr int kFullBuildGpus = 4096;

struct PlatformOptions {
  std::string file, json_out, preset, platform_file;
  std::vector<std::string> sets;
  int nodes  = 0;
  bool quiet = false;
};

// A link's kind is its name with the indices taken out ("node17-gpu3-nvswitch_UP" →
// "nodeN-gpuN-nvswitch"): builders name links by role and index, so this groups them by role
// whatever the fabric, and a split-duplex link's two directions count once.
std::string kind_of(std::string name)
{
  for (const char* suffix : {"_UP", "_DOWN"})
    if (name.size() > std::string(suffix).size() && name.ends_with(suffix))
      name.resize(name.size() - std::string(suffix).size());
  std::string kind;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      if (i == 0 || !std::isdigit(static_cast<unsigned char>(name[i - 1])))
        kind += 'N';
    } else {
      kind += name[i];
    }
  }
  return kind;
}

// A link's latency as a transfer pays it: a NIC link's with its kind's transport, which transfers
// owe beyond SimGrid's (kNicTransportProperty).
double link_latency(const sg4::Link* l)
{
  const char* transport = l->get_property(kNicTransportProperty);
  return l->get_latency() + (transport != nullptr ? std::stod(transport) : 0.0);
}

nlohmann::json route_json(const std::string& label, int from, int to, const BuiltPlatform& p)
{
  std::vector<sg4::Link*> links;
  double latency = 0;
  p.gpus[static_cast<size_t>(from)]->route_to(p.gpus[static_cast<size_t>(to)], links, &latency);
  nlohmann::json route{{"label", label},
                       {"from_gpu", from},
                       {"to_gpu", to},
                       {"from", p.gpus[static_cast<size_t>(from)]->get_name()},
                       {"to", p.gpus[static_cast<size_t>(to)]->get_name()},
                       {"links", nlohmann::json::array()}};
  double bottleneck = links.empty() ? 0 : link_bandwidth(links.front());
  for (const auto* l : links) {
    route["links"].push_back({{"name", l->get_name()}, {"bandwidth_Bps", link_bandwidth(l)}, {"latency_s", link_latency(l)}});
    bottleneck = std::min(bottleneck, link_bandwidth(l));
  }
  route["bottleneck_Bps"] = bottleneck;
  route["latency_s"]      = latency + transport_latency_of(links);
  return route;
}

// The fabric's own parameters, as the scenario gives them (the links themselves are listed from
// the built platform).
nlohmann::json fabric_json(const PlatformSpec& p)
{
  const auto& n = p.network;
  nlohmann::json f{{"topology", n.topology}};
  if (!p.preset.empty())
    f["preset"] = p.preset;
  if (n.topology == "fat_tree" || n.topology == "rail_optimized") {
    f["leaf_radix"]       = n.leaf_radix;
    if (n.topology == "fat_tree" && n.levels == 3) {
      f["levels"]                = n.levels;
      f["pod_radix"]             = n.pod_radix;
      f["core_oversubscription"] = n.core_oversubscription;
    }
    f["oversubscription"] = n.oversubscription;
  } else if (n.topology == "torus") {
    f["dimensions"] = n.torus.dimensions;
  } else if (n.topology == "dragonfly") {
    const auto& d = n.dragonfly;
    f["groups"]           = d.groups;
    f["chassis"]          = d.chassis;
    f["routers"]          = d.routers;
    f["nodes_per_router"] = d.nodes_per_router;
  } else if (n.topology == "custom") {
    f["switches"] = n.switches.size();
    f["links"]    = n.links.size();
  } else if (n.topology == "wifi") {
    f["stations"]  = n.wifi.stations;
    f["rate_Bps"]  = n.wifi.rate_Bps;
    f["latency_s"] = n.wifi.latency_s;
  }
  return f;
}

std::string fabric_text(const nlohmann::json& f)
{
  const std::string t = f["topology"].get<std::string>();
  std::string text    = "  fabric " + t;
  if (t == "fat_tree")
    text += fmt::format(": leaf_radix {} NICs, oversubscription {:g}:1{}", f["leaf_radix"].get<int>(),
                        f["oversubscription"].get<double>(),
                        f.contains("levels") ? fmt::format("; 3 levels: pods of {} leaves, core oversubscription {:g}:1",
                                                           f["pod_radix"].get<int>(),
                                                           f["core_oversubscription"].get<double>())
                                             : "");
  else if (t == "rail_optimized")
    text += fmt::format(": NIC k of each node on rail switch k, {} nodes per unit, spine oversubscription {:g}:1",
                        f["leaf_radix"].get<int>(), f["oversubscription"].get<double>());
  else if (t == "torus") {
    std::string dims;
    for (const auto& d : f["dimensions"])
      dims += (dims.empty() ? "" : " x ") + std::to_string(d.get<int>());
    text += fmt::format(": {} routers, one node each, dimension-order routing", dims);
  } else if (t == "dragonfly")
    text += fmt::format(": {} groups x {} chassis x {} routers x {} nodes, minimal routing", f["groups"].get<int>(),
                        f["chassis"].get<int>(), f["routers"].get<int>(), f["nodes_per_router"].get<int>());
  else if (t == "custom")
    text += fmt::format(": {} switches, {} links, shortest paths", f["switches"].get<int>(), f["links"].get<int>());
  else if (t == "wifi")
    text += fmt::format(": node groups {} on one access point at {:.4g} Mb/s each, {:.4g} ms; the others wired",
                        f["stations"].dump(), f["rate_Bps"].get<double>() * 8 / 1e6, f["latency_s"].get<double>() * 1e3);
  if (f.contains("preset"))
    text += fmt::format(" (preset {})", f["preset"].get<std::string>());
  return text + "\n";
}

// Runs in the child that owns the SimGrid engine.
nlohmann::json describe(const Scenario& s)
{
  const auto engine = start_engine();
  const LinkEfficiency efficiency = load_link_efficiency();
  const PlatformSpec spec         = with_achieved_bandwidth(s.platform, efficiency);

  const int total = spec.total_gpus();
  std::vector<int> first_gpu_of_node;
  for (int next = 0; const auto& g : spec.node_groups)
    for (int i = 0; i < g.count; ++i, next += g.gpus_per_node)
      first_gpu_of_node.push_back(next);
  const bool full = total <= kFullBuildGpus;
  std::vector<bool> in_use;
  if (!full) {
    in_use.assign(static_cast<size_t>(total), false);
    for (int g : first_gpu_of_node)
      in_use[static_cast<size_t>(g)] = true;
    if (total > 1)
      in_use[1] = true;
    if (first_gpu_of_node.size() > 1 && first_gpu_of_node[1] + 1 < total) // the other-rail example
      in_use[static_cast<size_t>(first_gpu_of_node[1] + 1)] = true;
  }
  BuiltPlatform p = build_platform(spec, in_use);

  nlohmann::json out{{"scenario", s.name},
                     {"nodes", first_gpu_of_node.size()},
                     {"gpus", total},
                     {"fully_built", full},
                     {"fabric", fabric_json(s.platform)},
                     {"link_efficiency",
                      {{"nvswitch", efficiency.nvswitch},
                       {"nvlink", efficiency.nvlink},
                       {"xgmi", efficiency.xgmi},
                       {"pcie", efficiency.pcie},
                       {"nic", efficiency.nic}}},
                     {"node_groups", nlohmann::json::array()},
                     {"link_kinds", nlohmann::json::array()},
                     {"routes", nlohmann::json::array()}};
  // NCCL's environment on the machines, as given (platform.nccl_env); absent when none is.
  if (!s.platform.nccl_env.variables.empty())
    out["nccl_env"] = s.platform.nccl_env.variables;
  for (const auto& g : s.platform.node_groups)
    out["node_groups"].push_back({{"nodes", g.count},
                                  {"gpus_per_node", g.gpus_per_node},
                                  {"gpu", g.gpu},
                                  {"intra_node", g.intra_node.type},
                                  // The NICs as described, and as built: groups of `nic_ports` NICs that
                                  // act as one (sim/input/platform_parse.cpp lay_out_nics).
                                  {"nics_per_node", g.nic.count * g.nic.ports},
                                  {"nic_groups_per_node", g.nic.count},
                                  {"nic_ports", g.nic.ports},
                                  // Each NIC as described (rated, per direction) and what its kind
                                  // achieves of it (links.json nic_kinds).
                                  {"nic_kind", g.nic.kind},
                                  {"nic_bandwidth_Bps", g.nic.bandwidth_Bps / std::max(1, g.nic.ports)},
                                  {"nic_latency_s", g.nic.latency_s},
                                  {"nic_efficiency", efficiency.nic_kind(g.nic.kind).efficiency},
                                  {"nic_step_latency_s", efficiency.nic_kind(g.nic.kind).step_s},
                                  // The part of the step that is the kind's transport, which a ring
                                  // pays once per crossing (NicSpec::transport_latency_s).
                                  {"nic_transport_latency_s",
                                   spec.node_groups[static_cast<size_t>(&g - s.platform.node_groups.data())].nic.transport_latency_s}});

  // Kinds in first-seen order of SimGrid's (name-sorted) link list would interleave; sort by kind.
  std::map<std::tuple<std::string, double, double>, int> kinds;
  for (const auto* l : engine->get_all_links()) {
    const std::string& n = l->get_name();
    // The other direction of a split-duplex link is the same link; SimGrid's own links
    // ("__loopback__") are no part of the cluster.
    if (!n.ends_with("_DOWN") && !n.starts_with("__"))
      ++kinds[{kind_of(n), link_bandwidth(l), link_latency(l)}];
  }
  for (const auto& [key, count] : kinds)
    out["link_kinds"].push_back(
        {{"kind", std::get<0>(key)}, {"count", count}, {"bandwidth_Bps", std::get<1>(key)}, {"latency_s", std::get<2>(key)}});

  auto built = [&](int g) { return g < total && p.gpus[static_cast<size_t>(g)] != nullptr; };
  if (spec.node_groups.front().gpus_per_node > 1 && built(1))
    out["routes"].push_back(route_json("same node", 0, 1, p));
  if (first_gpu_of_node.size() > 1) {
    nlohmann::json next = route_json("node 1", 0, first_gpu_of_node[1], p);
    out["routes"].push_back(next);
    // The first node reached over more links than node 1 sits farther in the fabric (under
    // another leaf switch of a fat-tree).
    for (size_t node = 2; node < first_gpu_of_node.size(); ++node) {
      nlohmann::json r = route_json("farther in the fabric", 0, first_gpu_of_node[node], p);
      if (r["links"].size() > next["links"].size()) {
        out["routes"].push_back(r);
        break;
      }
    }
    // On rails, GPU 0 to GPU 1 of node 1 leaves by NIC 0 and arrives by NIC 1: over the spine.
    const int other_rail = first_gpu_of_node[1] + 1;
    if (s.platform.network.topology == "rail_optimized" && first_gpu_of_node.size() > 2 &&
        other_rail < first_gpu_of_node[2] && built(other_rail))
      out["routes"].push_back(route_json("node 1, other rail", 0, other_rail, p));
  }
  // The first node of every other node group (an edge server, another GPU type).
  for (size_t g = 1, node = 0; g < s.platform.node_groups.size(); ++g) {
    node += static_cast<size_t>(s.platform.node_groups[g - 1].count);
    if (node > 1 && built(first_gpu_of_node[node]))
      out["routes"].push_back(route_json(fmt::format("node group {}", g), 0, first_gpu_of_node[node], p));
  }
  return out;
}

std::string bandwidth(double Bps)
{
  return Bps >= 1e15 ? "unlimited" : fmt::format("{:.4g} GB/s", Bps / 1e9);
}
std::string latency(double s)
{
  return fmt::format("{:.4g} us", s * 1e6);
}

void print_text(const nlohmann::json& d)
{
  const auto& f = d["fabric"];
  fmt::print("platform of {}: {} nodes, {} GPUs\n", d["scenario"].get<std::string>(), d["nodes"].get<int>(),
             d["gpus"].get<int>());
  for (size_t i = 0; i < d["node_groups"].size(); ++i) {
    const auto& g = d["node_groups"][i];
    const double transport_s = g["nic_transport_latency_s"].get<double>();
    fmt::print("  node group {}: {} nodes x {} {} ({}), {} NICs per node: {} at {:g} Gb/s each, {:g} us "
               "(achieves {:g} of it, {:g} us a step{})\n",
               i, g["nodes"].get<int>(), g["gpus_per_node"].get<int>(), g["gpu"].get<std::string>(),
               g["intra_node"].get<std::string>(), g["nics_per_node"].get<int>(), g["nic_kind"].get<std::string>(),
               g["nic_bandwidth_Bps"].get<double>() * 8 / 1e9, g["nic_latency_s"].get<double>() * 1e6,
               g["nic_efficiency"].get<double>(), g["nic_step_latency_s"].get<double>() * 1e6,
               transport_s > 0 ? fmt::format(", {:g} us of it the transport's, which a ring pays once per crossing of nodes",
                                             transport_s * 1e6)
                               : "");
    const int ports = g["nic_ports"].get<int>(), groups = g["nic_groups_per_node"].get<int>();
    if (ports > 1)
      fmt::print("    built as {} group{} of {} NICs of the node's {} GPUs, each group one NIC of their summed "
                 "bandwidth (NCCL takes a GPU's nearest NICs together){}\n",
                 groups, groups > 1 ? "s" : "", ports, g["gpus_per_node"].get<int>(),
                 groups == 1 && g["gpus_per_node"].get<int>() > 1
                     ? ": no even split of the GPUs over the NICs, so one GPU alone reaches all of them"
                     : "");
  }
  if (d["nodes"].get<int>() > 1)
    fmt::print("{}", fabric_text(f));
  const auto& e = d["link_efficiency"];
  fmt::print("  bandwidths are per direction, rated x achieved fraction (nvswitch {:g}, nvlink {:g}, xgmi {:g}, "
             "pcie {:g}; the NICs' by their kind, above)\n",
             e["nvswitch"].get<double>(), e["nvlink"].get<double>(), e["xgmi"].get<double>(), e["pcie"].get<double>());
  if (d.contains("nccl_env")) {
    std::string env;
    for (const auto& [name, value] : d["nccl_env"].items())
      env += fmt::format(" {}={}", name, value.get<std::string>());
    fmt::print("  NCCL environment (what NCCL's tuner may pick from):{}\n", env);
  }
  fmt::print("\nlinks{}\n", d["fully_built"].get<bool>() ? "" : " (large platform: built for the first GPU of each node only)");
  fmt::print("  {:<28} {:>7} {:>14} {:>10}\n", "kind", "count", "bandwidth", "latency");
  for (const auto& k : d["link_kinds"])
    fmt::print("  {:<28} {:>7} {:>14} {:>10}\n", k["kind"].get<std::string>(), k["count"].get<int>(),
               bandwidth(k["bandwidth_Bps"].get<double>()), latency(k["latency_s"].get<double>()));
  fmt::print("\nroutes\n");
  for (const auto& r : d["routes"]) {
    fmt::print("  GPU {} -> GPU {} ({}, {} -> {}): bottleneck {}, latency {}\n", r["from_gpu"].get<int>(),
               r["to_gpu"].get<int>(), r["label"].get<std::string>(), r["from"].get<std::string>(),
               r["to"].get<std::string>(), bandwidth(r["bottleneck_Bps"].get<double>()),
               latency(r["latency_s"].get<double>()));
    for (const auto& l : r["links"])
      fmt::print("      {:<32} {:>14} {:>10}\n", l["name"].get<std::string>(), bandwidth(l["bandwidth_Bps"].get<double>()),
                 latency(l["latency_s"].get<double>()));
  }
}

int platform(const PlatformOptions& o)
{
  // A scenario, or a machine alone: a preset or a platform file, as `stepsim collective` takes them.
  if (o.file.empty() == (o.preset.empty() && o.platform_file.empty()) || (!o.preset.empty() && !o.platform_file.empty()))
    throw InputError({"FILE: expected one of a scenario FILE, --preset NAME or --platform FILE"});
  if (o.nodes > 0 && !o.file.empty())
    throw InputError({"--nodes: goes with --preset or --platform (a scenario sets platform.node_groups[0].count)"});
  Scenario s = o.file.empty() ? platform_scenario(o.preset, o.platform_file, o.nodes, o.sets) : load_scenario(o.file, o.sets);
  if (s.training.federated.enabled)
    throw InputError({"training.federated: a federated scenario has no platform to build: its clients, their links "
                      "and the server are described in training.federated, and `stepsim run` reports the round"});
  nlohmann::json d = nlohmann::json::parse(run_in_child([&] {
    try {
      return describe(s).dump();
    } catch (const InputError& e) {
      return nlohmann::json{{"input_error", e.problems()}}.dump();
    } catch (const std::exception& e) {
      return nlohmann::json{{"error", e.what()}}.dump();
    }
  }));
  if (d.contains("input_error"))
    throw InputError(d["input_error"].get<std::vector<std::string>>());
  if (d.contains("error"))
    throw std::runtime_error(d["error"].get<std::string>());
  if (o.json_out == "-") // standard output, as run and collective take "-"
    fmt::print("{}\n", d.dump(2));
  else if (!o.json_out.empty())
    write_text_file(o.json_out, d.dump(2) + "\n");
  if (!o.quiet && o.json_out != "-")
    print_text(d);
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<PlatformOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file");
  sub.add_option("--preset", o->preset, "a platform preset of configs/platforms/ (dgx-a100, dgx-h100, ...) instead of a scenario");
  sub.add_option("--platform", o->platform_file, "a platform file {\"platform\": {...}} instead of a scenario");
  sub.add_option("--nodes", o->nodes, "with --preset or --platform: the number of nodes (default the file's)")
      ->check(CLI::Range(1, 131072));
  sub.add_option("--set", o->sets, "override a field: path=value, e.g. platform.network.oversubscription=2 (repeatable)");
  sub.add_option("--json", o->json_out,
                 "write the description as JSON to this file (- = standard output, no table)");
  sub.add_flag("--quiet,-q", o->quiet, "print nothing (use with --json)");
  sub.footer("Examples:\n  stepsim platform configs/scenarios/default.json\n"
             "  stepsim platform --preset aws-p5 --nodes 4\n"
             "  stepsim platform --platform my_cluster.json\n"
             "  stepsim platform configs/scenarios/default.json --set platform.network.leaf_radix=16 "
             "--set platform.network.oversubscription=2\n"
             "  stepsim platform configs/scenarios/default.json --json platform.json --quiet");
  return [o] { return platform(*o); };
}

const bool registered = CommandRegistry::add(
    "platform", "build the scenario's platform and print its nodes, links and example routes", Command{setup});

} // namespace
} // namespace stepsim
