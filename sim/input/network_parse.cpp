#include "sim/input/network_parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace stepsim {
namespace {

constexpr long long kMaxFabricSize = 1LL << 20;

std::vector<int> int_list(JsonReader& r, const std::string& key, long long minimum, long long maximum,
                          const std::string& expected)
{
  std::vector<int> out;
  const auto* v = r.raw(key);
  if (v == nullptr)
    return out;
  bool ok = v->is_array() && !v->empty();
  for (const auto& n : ok ? *v : nlohmann::json::array())
    ok = ok && n.is_number_integer() && n.get<long long>() >= minimum && n.get<long long>() <= maximum;
  if (ok)
    return v->get<std::vector<int>>();
  r.problems().add(r.path_of(key), fmt::format("expected {}, got {}", expected, v->dump()));
  return {};
}

void read_link(JsonReader& r, FabricLinkSpec& link)
{
  link.bandwidth_Bps = r.has("link_bandwidth") ? r.bandwidth("link_bandwidth") : 0.0;
  link.latency_s     = r.time("link_latency", 0.5e-6);
}

void read_torus(JsonReader r, TorusSpec& t, int nodes)
{
  t.dimensions = int_list(r, "dimensions", 1, 1 << 16, "a non-empty array of router counts, each at least 1");
  read_link(r, t.link);
  r.reject_unknown_keys();
  if (t.dimensions.empty()) {
    if (!r.has("dimensions"))
      r.problems().add(r.path_of("dimensions"), "required field is missing (expected the routers along each "
                                                "dimension, e.g. [4, 4])");
    return;
  }
  long long routers = 1;
  for (int d : t.dimensions)
    routers = std::min(routers * d, kMaxFabricSize + 1);
  // A dimension of one router is its own neighbour both ways round; with two such, SimGrid names
  // their links alike and aborts ("declared several times"). They add no link, so they can go.
  if (std::count(t.dimensions.begin(), t.dimensions.end(), 1) > 1)
    r.problems().add(r.path_of("dimensions"),
                     "two or more dimensions of 1 router, which SimGrid cannot build; a dimension of 1 router adds "
                     "no link, so leave them out (e.g. [1, 1, 2] is [2])");
  if (routers < nodes || routers > kMaxFabricSize)
    r.problems().add(r.path_of("dimensions"),
                     fmt::format("{} routers (one node each) for {} nodes; expected between {} and {}",
                                 routers, nodes, nodes, kMaxFabricSize));
}

void read_dragonfly(JsonReader r, DragonflySpec& d, int nodes)
{
  d.groups           = static_cast<int>(r.integer("groups", std::nullopt, 1, 1 << 16));
  d.group_links      = static_cast<int>(r.integer("group_links", 1, 1, 1 << 10));
  d.chassis          = static_cast<int>(r.integer("chassis", 1, 1, 1 << 16));
  d.chassis_links    = static_cast<int>(r.integer("chassis_links", 1, 1, 1 << 10));
  d.routers          = static_cast<int>(r.integer("routers", 1, 1, 1 << 16));
  d.router_links     = static_cast<int>(r.integer("router_links", 1, 1, 1 << 10));
  d.nodes_per_router = static_cast<int>(r.integer("nodes_per_router", 1, 1, 1 << 16));
  read_link(r, d.link);
  r.reject_unknown_keys();
  // SimGrid's minimal route leaves a group from its first chassis, through the router whose index
  // is the destination group's: each chassis needs a router per group, or the route reads past
  // the routers (it crashed).
  if (d.groups > 1 && d.routers < d.groups)
    r.problems().add(r.path_of("routers"), fmt::format("{} routers per chassis for {} groups; SimGrid's dragonfly joins "
                                                       "group g through router g of a chassis, so expected at least {}",
                                                       d.routers, d.groups, d.groups));
  const long long slots = 1LL * d.groups * d.chassis * d.routers * d.nodes_per_router;
  if (d.groups > 0 && (slots < nodes || slots > kMaxFabricSize))
    r.problems().add(r.path(), fmt::format("groups {} × chassis {} × routers {} × nodes_per_router {} = {} node "
                                           "slots for {} nodes; expected between {} and {}",
                                           d.groups, d.chassis, d.routers, d.nodes_per_router, slots, nodes, nodes,
                                           kMaxFabricSize));
}

void read_custom(JsonReader& net, NetworkSpec& n, int nodes)
{
  const size_t problems_before = net.problems().list().size();
  std::map<std::string, std::string> switch_path; // name -> where it was declared
  std::vector<std::string> attached(static_cast<size_t>(nodes));
  for (auto& s : net.array_of_objects("switches", true)) {
    SwitchSpec spec;
    spec.name = s.text("name");
    spec.nodes = int_list(s, "nodes", 0, nodes - 1,
                          fmt::format("a non-empty array of node indices from 0 to {}", nodes - 1));
    s.reject_unknown_keys();
    if (!spec.name.empty() && !switch_path.emplace(spec.name, s.path()).second)
      s.problems().add(s.path_of("name"), fmt::format("\"{}\" is already the name of {}", spec.name,
                                                      switch_path[spec.name]));
    for (int node : spec.nodes) {
      auto& where = attached[static_cast<size_t>(node)];
      if (!where.empty())
        s.problems().add(s.path_of("nodes"), fmt::format("node {} already hangs from switch \"{}\"", node, where));
      where = spec.name;
    }
    n.switches.push_back(spec);
  }
  std::vector<std::string> names;
  for (const auto& [name, path] : switch_path)
    names.push_back(name);
  auto known_switch = [&](JsonReader& l, const std::string& key, const std::string& name) {
    if (name.empty() || switch_path.count(name) != 0)
      return;
    std::string near = closest_name(name, names);
    l.problems().add(l.path_of(key), fmt::format("unknown switch \"{}\"{}", name,
                                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
  };
  // One route joins each pair of switches, so a second link between them would be a second route
  // for the same pair, which SimGrid cannot hold (it crashed).
  std::map<std::pair<std::string, std::string>, std::string> link_path;
  for (auto& l : net.array_of_objects("links", n.switches.size() > 1)) {
    SwitchLinkSpec spec;
    spec.from          = l.text("from");
    spec.to            = l.text("to");
    spec.bandwidth_Bps = l.bandwidth("bandwidth");
    spec.latency_s     = l.time("latency", 0.0);
    l.reject_unknown_keys();
    known_switch(l, "from", spec.from);
    known_switch(l, "to", spec.to);
    if (!spec.from.empty() && spec.from == spec.to)
      l.problems().add(l.path_of("to"), fmt::format("a link from \"{}\" to itself", spec.from));
    auto pair = std::minmax(spec.from, spec.to);
    if (!spec.from.empty() && !spec.to.empty() && spec.from != spec.to &&
        !link_path.emplace(std::pair(pair.first, pair.second), l.path()).second)
      l.problems().add(l.path_of("to"), fmt::format("a second link between \"{}\" and \"{}\" (the first is {}); "
                                                    "give one link their combined bandwidth",
                                                    spec.from, spec.to, link_path[std::pair(pair.first, pair.second)]));
    n.links.push_back(spec);
  }
  if (switch_path.size() != n.switches.size())
    return; // already reported
  for (int node = 0; node < nodes; ++node)
    if (attached[static_cast<size_t>(node)].empty()) {
      net.problems().add(net.path_of("switches"), fmt::format("node {} hangs from no switch; list it in the "
                                                              "\"nodes\" of one", node));
      break;
    }
  // Every switch must reach every other, or some routes would not exist.
  if (n.switches.empty() || net.problems().list().size() != problems_before)
    return;
  std::map<std::string, std::vector<std::string>> adjacent;
  for (const auto& l : n.links) {
    adjacent[l.from].push_back(l.to);
    adjacent[l.to].push_back(l.from);
  }
  std::set<std::string> seen{n.switches[0].name};
  std::vector<std::string> todo{n.switches[0].name};
  while (!todo.empty()) {
    std::string s = todo.back();
    todo.pop_back();
    for (const auto& t : adjacent[s])
      if (seen.insert(t).second)
        todo.push_back(t);
  }
  for (const auto& s : n.switches)
    if (seen.count(s.name) == 0) {
      net.problems().add(net.path_of("links"), fmt::format("switch \"{}\" is not connected to switch \"{}\"", s.name,
                                                           n.switches[0].name));
      break;
    }
}

void read_wifi(JsonReader r, WifiSpec& w, const std::vector<NodeGroupSpec>& groups)
{
  w.stations  = int_list(r, "stations", 0, static_cast<long long>(groups.size()) - 1,
                         fmt::format("a non-empty array of node group indices from 0 to {}", groups.size() - 1));
  if (!r.has("stations"))
    w.stations = {0};
  w.rate_Bps  = r.bandwidth("rate");
  w.latency_s = r.time("latency", 0.0);
  r.reject_unknown_keys();
  for (int g : w.stations)
    if (g < static_cast<int>(groups.size()) && groups[static_cast<size_t>(g)].gpus_per_node != 1)
      r.problems().add(r.path_of("stations"),
                       fmt::format("node group {} has {} GPUs per node; a Wi-Fi station is one device with one GPU "
                                   "(gpus_per_node 1)", g, groups[static_cast<size_t>(g)].gpus_per_node));
}

} // namespace

constexpr double kMostOversubscription = 1000;

void read_network(JsonReader net, NetworkSpec& n, const std::vector<NodeGroupSpec>& groups)
{
  int nodes = 0;
  for (const auto& g : groups)
    nodes += g.count;
  n.topology         = net.text("topology", std::string("fat_tree"));
  n.oversubscription = net.number("oversubscription", 1.0, 1.0);
  n.leaf_radix       = static_cast<int>(net.integer("leaf_radix", 32, 1, kMaxFabricSize));
  n.levels           = static_cast<int>(net.integer("levels", 2, 2, 3));
  n.pod_radix        = static_cast<int>(net.integer("pod_radix", 8, 1, kMaxFabricSize));
  n.core_oversubscription = net.number("core_oversubscription", 1.0, 1.0);
  // Real fabrics thin their uplinks 2:1 to 8:1; past 1000:1 a leaf's uplink carries under a
  // thousandth of what its NICs do, a misprint (1e300 ran until the step's bound blamed a NIC).
  for (const auto& [key, value] : {std::pair{"oversubscription", n.oversubscription},
                                   std::pair{"core_oversubscription", n.core_oversubscription}})
    if (value > kMostOversubscription)
      net.problems().add(net.path_of(key), fmt::format("expected at most {:g} (a ratio such as 2 for 2:1), got {:g}",
                                                       kMostOversubscription, value));
  // A field of another fabric is ignored by this one's builder (topologies/fabrics/): said, not
  // dropped. leaf_radix and oversubscription shape fat trees and rails (rail.cpp: a scalable unit
  // of leaf_radix nodes, each rail leaf's uplink thinned); levels, pod_radix and
  // core_oversubscription only a fat tree's third level (fat_tree.cpp).
  // (A topology of no fabric is refused by its name alone, later, with the names there are.)
  static const std::set<std::string> fabrics_with_fields{"fat_tree",  "rail_optimized", "torus",
                                                         "dragonfly", "custom",         "wifi"};
  if (fabrics_with_fields.count(n.topology) != 0) {
    const bool rail_too = n.topology == "fat_tree" || n.topology == "rail_optimized";
    struct Field {
      const char* key;
      bool read;
      const char* readers;
    };
    for (const Field& f : {Field{"leaf_radix", rail_too, "fat_tree or rail_optimized"},
                           Field{"oversubscription", rail_too, "fat_tree or rail_optimized"},
                           Field{"levels", n.topology == "fat_tree", "fat_tree"},
                           Field{"pod_radix", n.topology == "fat_tree", "fat_tree"},
                           Field{"core_oversubscription", n.topology == "fat_tree", "fat_tree"}})
      if (net.has(f.key) && !f.read)
        net.problems().add(net.path_of(f.key),
                           fmt::format("a field of {} fabrics, which the \"{}\" topology does not read; remove it "
                                       "(--set {}=null) or set platform.network.topology to {}",
                                       f.readers, n.topology, net.path_of(f.key), f.readers));
    // A two-level fat tree has no pods: their radix and the core's thinning are read at levels 3.
    if (n.topology == "fat_tree" && n.levels != 3)
      for (const char* key : {"pod_radix", "core_oversubscription"})
        if (net.has(key))
          net.problems().add(net.path_of(key), fmt::format("read only by a three-level fat tree, and levels is {}; "
                                                           "set platform.network.levels to 3 or remove it",
                                                           n.levels));
    // SHARP reduces in InfiniBand switches (Quantum's aggregation trees): a fat tree's or a rail
    // fabric's; a torus's, a dragonfly's and Wi-Fi's routers have none to reduce in. (A custom
    // fabric's switches may be such switches.)
    const nlohmann::json* sharp = net.raw("sharp");
    const bool switchless = n.topology == "torus" || n.topology == "dragonfly" || n.topology == "wifi";
    if (sharp != nullptr && sharp->is_boolean() && sharp->get<bool>() && switchless)
      net.problems().add(net.path_of("sharp"), fmt::format("in-network reduction needs InfiniBand SHARP switches, "
                                                           "which a \"{}\" fabric does not have; remove it",
                                                           n.topology));
    for (const char* key : {"torus", "dragonfly", "wifi"})
      if (net.has(key) && n.topology != key)
        net.problems().add(net.path_of(key), fmt::format("the {} fabric's section, but the topology is \"{}\"; remove "
                                                         "it (--set {}=null) or set platform.network.topology to {}",
                                                         key, n.topology, net.path_of(key), key));
    for (const char* key : {"switches", "links"})
      if (net.has(key) && n.topology != "custom")
        net.problems().add(net.path_of(key), fmt::format("a custom fabric's field, but the topology is \"{}\"; "
                                                         "remove it (--set {}=null) or set platform.network.topology "
                                                         "to custom",
                                                         n.topology, net.path_of(key)));
  }
  n.sharp                 = net.boolean("sharp", false);
  // A fabric's object is required by its topology; when it is missing, that is the one problem.
  // Another fabric's section was named above, and is not read as well (its own problems would
  // bury the one that matters).
  auto section = [&](const char* key) {
    if (n.topology == key && !net.has(key))
      net.object(key, true);
    if (n.topology != key && fabrics_with_fields.count(n.topology) != 0) {
      net.raw(key);
      return false;
    }
    return net.has(key);
  };
  if (section("torus"))
    read_torus(net.object("torus"), n.torus, nodes);
  if (section("dragonfly"))
    read_dragonfly(net.object("dragonfly"), n.dragonfly, nodes);
  if (n.topology != "custom" && fabrics_with_fields.count(n.topology) != 0) {
    net.raw("switches");
    net.raw("links");
  } else if (n.topology == "custom" || net.has("switches") || net.has("links"))
    read_custom(net, n, nodes);
  if (section("wifi"))
    read_wifi(net.object("wifi"), n.wifi, groups);
  net.reject_unknown_keys();
}

} // namespace stepsim
