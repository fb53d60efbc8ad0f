#include "topologies/platform.hpp"
#include "sim/core/link_bandwidth.hpp"
#include "sim/core/scenario_check.hpp"

#include "sim/core/task_graph.hpp"
#include "models/link_calibration.hpp"
#include "topologies/nodes/node_type.hpp"

#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

namespace stepsim {

namespace sg4 = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

void mark_transport_latency(sg4::Link* link, double share_s)
{
  if (!(share_s > 0))
    return;
  const std::string value = fmt::format("{:.17g}", share_s);
  // A split-duplex link's routes take its up and down halves, each a link of its own.
  if (auto* duplex = dynamic_cast<sg4::SplitDuplexLink*>(link)) {
    duplex->get_link_up()->set_property(kNicTransportProperty, value);
    duplex->get_link_down()->set_property(kNicTransportProperty, value);
  } else {
    link->set_property(kNicTransportProperty, value);
  }
}

void configure_network_model()
{
  // NVLink and InfiniBand/RoCE move data by RDMA with credit-based flow control: no TCP slow
  // start, no window, no ACK stream in the reverse direction. CM02 without cross-traffic gives
  // exactly latency + size / bandwidth on an idle path and max-min fair sharing under contention,
  // which is what link-level measurements of both show for large transfers. The TCP gamma bound
  // (window / RTT) does not apply to RDMA, so it is lifted.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:1e18");
}

std::unique_ptr<sg4::Engine> start_engine()
{
  xbt_log_control_set("root.thres:critical");
  // The engine parses its command line and keeps what it reads; static, so that it outlives it.
  static int argc     = 1;
  static char name[]  = "stepsim";
  static char* argv[] = {name, nullptr};
  auto engine         = std::make_unique<sg4::Engine>(&argc, argv);
  configure_network_model();
  return engine;
}

namespace {

sg4::NetZone* with_models_of(sg4::NetZone* zone, const sg4::NetZone* like)
{
  auto* impl       = zone->get_impl();
  const auto* from = like->get_impl();
  impl->set_network_model(from->get_network_model());
  impl->set_cpu_pm_model(from->get_cpu_pm_model());
  impl->set_cpu_vm_model(from->get_cpu_vm_model());
  impl->set_disk_model(from->get_disk_model());
  impl->set_host_model(from->get_host_model());
  return zone;
}

} // namespace

sg4::NetZone* detached_full_zone(const std::string& name, const sg4::NetZone* like)
{
  return with_models_of(sg4::create_full_zone(name), like);
}

sg4::NetZone* detached_star_zone(const std::string& name, const sg4::NetZone* like)
{
  return with_models_of(sg4::create_star_zone(name), like);
}

void seal_zone_and_hosts(sg4::NetZone* zone, const std::vector<sg4::Host*>& hosts)
{
  for (auto* host : hosts)
    host->seal();
  zone->seal();
}

namespace {

// GPUs of one node, their CPU host, their NICs and the node's gateway, as a zone under `parent`;
// the node type (topologies/nodes/*.cpp, on intra_node.type) builds the links between them.
// With `hang_later`, the zone is filled detached and what hangs it under `parent` is left there
// (detached_full_zone).
void build_node(sg4::NetZone* parent, const NodeGroupSpec& g, const NodeType& type, double host_link_Bps, int node,
                int group_index, const std::vector<bool>& in_use, bool host_side, BuiltPlatform& out,
                std::vector<std::function<void()>>* hang_later = nullptr)
{
  const size_t first_gpu = out.gpus.size();
  auto used = [&](int local) { return in_use.empty() || in_use[first_gpu + static_cast<size_t>(local)]; };
  const int gpus_per_nic = g.gpus_per_node / g.nic.count;
  bool any = false;
  for (int local = 0; local < g.gpus_per_node; ++local)
    any = any || used(local);
  if (!any) {
    out.gpus.resize(first_gpu + static_cast<size_t>(g.gpus_per_node), nullptr);
    out.group_of_gpu.resize(out.gpus.size(), group_index);
    return;
  }
  // Where routes between GPUs cross other GPUs, every GPU of the node is built.
  auto built = [&](int local) { return type.builds_every_gpu || used(local); };

  // Explicit routes (a Full zone): see topologies/nodes/node_type.hpp for why not shortest paths.
  NodeBuild b;
  const bool detached = hang_later != nullptr && parent != nullptr;
  b.zone = detached ? detached_full_zone(fmt::format("node{}", node), parent)
                    : sg4::create_full_zone(fmt::format("node{}", node));
  if (parent != nullptr && !detached) // a one-node platform is the node's zone alone
    b.zone->set_parent(parent);
  b.group         = &g;
  b.node          = node;
  b.host_link_Bps = host_link_Bps;
  b.host_side     = host_side;
  for (int local = 0; local < g.gpus_per_node; ++local) {
    if (!built(local)) {
      b.gpus.push_back(nullptr);
      continue;
    }
    // The replay runs known-length work (kernels, collectives timed by their closed form) as
    // Execs of one core each; cores let those of different streams run side by side at full
    // speed, as kernels on separate CUDA streams do.
    auto* gpu = b.zone->create_host(fmt::format("node{}-gpu{}", node, local), 1e9);
    gpu->set_core_count(kStreamCount);
    b.gpus.push_back(gpu);
  }
  build_cpu_host(b);
  type.build(b);

  // NICs. Unless the node type placed them, a NIC of its own GPU hangs off the GPU, and a NIC
  // shared by several GPUs is a router they reach over PCIe links of their own (the NIC, not the
  // PCIe link, is the narrower part).
  auto* gateway = b.router("gateway");
  if (b.path_to_nic.empty()) {
    b.path_to_nic.assign(b.gpus.size(), Path{});
    for (int local = 0; local < g.gpus_per_node && gpus_per_nic > 1; ++local)
      if (b.gpu(local) != nullptr && used(local)) {
        auto* pcie = b.link(fmt::format("gpu{}-to-nic", local), 2 * g.nic.bandwidth_Bps, 0);
        b.path_to_nic[static_cast<size_t>(local)] = {Hop(pcie, Direction::UP)};
      }
  }
  std::vector<sg4::Link*> nic_links(static_cast<size_t>(g.nic.count), nullptr);
  for (int local = 0; local < g.gpus_per_node; ++local) {
    if (b.gpu(local) == nullptr || !used(local))
      continue;
    const auto n = static_cast<size_t>(local / gpus_per_nic);
    if (nic_links[n] == nullptr) // half the NIC-to-NIC latency on each end: any two NICs are latency_s apart
    {
      nic_links[n] = b.link(fmt::format("nic{}-link", n), g.nic.bandwidth_Bps, g.nic.latency_s / 2);
      mark_transport_latency(nic_links[n], g.nic.transport_latency_s / 2);
    }
    Path path = b.path_to_nic[static_cast<size_t>(local)];
    path.emplace_back(nic_links[n], Direction::UP);
    b.route(b.gpu(local), gateway, path);
  }
  for (int local = 0; local < g.gpus_per_node; ++local) {
    out.gpus.push_back(used(local) ? b.gpus[static_cast<size_t>(local)] : nullptr);
    out.group_of_gpu.push_back(group_index);
  }
  // The node's NICs are its links to the switch above; it needs no uplink of its own.
  auto hang = [zone = b.zone, parent, gateway, detached] {
    if (detached)
      zone->set_parent(parent);
    zone->seal();
    if (parent != nullptr)
      parent->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
  };
  if (detached)
    hang_later->push_back(hang);
  else
    hang();
}

} // namespace

BuiltPlatform build_platform(const PlatformSpec& spec, const std::vector<bool>& in_use, bool host_side)
{
  check_node_types(spec); // the node types' own checks, for callers that did not validate
  std::vector<NodePort> ports;
  int total_gpus = 0;
  for (size_t gi = 0; gi < spec.node_groups.size(); ++gi)
    for (int i = 0; i < spec.node_groups[gi].count; ++i) {
      const auto& g = spec.node_groups[gi];
      ports.push_back(NodePort{static_cast<int>(ports.size()), g.nic.count, g.nic.count * g.nic.bandwidth_Bps, &g,
                               static_cast<int>(gi), total_gpus});
      total_gpus += g.gpus_per_node;
    }
  BuiltPlatform out;
  // Every node of a group asks for its GPUs' host link; the device file is read once per group.
  std::vector<std::optional<double>> host_link_Bps(spec.node_groups.size());
  const FabricBuilder& fabric_builder =
      FabricRegistry::get(spec.network.topology, "platform.network.topology");
  std::vector<std::function<void()>> hang_later; // node zones to hang once the fabric is built
  auto build_one = [&](sg4::NetZone* parent, const NodePort& port) {
    const std::string path = fmt::format("platform.node_groups[{}]", port.group_index);
    auto& host_link        = host_link_Bps[static_cast<size_t>(port.group_index)];
    if (!host_link)
      host_link = host_link_bandwidth(*port.group, path);
    build_node(parent, *port.group, NodeTypeRegistry::get(port.group->intra_node.type, path + ".intra_node.type"),
               *host_link, port.node, port.group_index, in_use, host_side, out,
               fabric_builder.nodes_hung_last ? &hang_later : nullptr);
  };
  if (ports.size() == 1) {
    build_one(nullptr, ports[0]);
    return out;
  }
  // build_node appends its GPUs, so nodes are built in order; GPUs a fabric places itself wait
  // in `placed` until the end.
  std::vector<sg4::Host*> placed(static_cast<size_t>(total_gpus), nullptr);
  FabricBuild fabric{spec, ports, nullptr, nullptr, nullptr, {}};
  fabric.uplinks.resize(static_cast<size_t>(total_gpus));
  fabric.node = [&](int node, sg4::NetZone* star) {
    const auto& port = ports.at(static_cast<size_t>(node));
    if (out.gpus.size() > static_cast<size_t>(port.first_gpu))
      throw std::logic_error(fmt::format("fabric \"{}\" built node {} out of order", spec.network.topology, node));
    out.gpus.resize(static_cast<size_t>(port.first_gpu), nullptr);
    build_one(star, port);
  };
  fabric.used = [&](int node, int local) {
    return in_use.empty() || in_use[static_cast<size_t>(ports.at(static_cast<size_t>(node)).first_gpu + local)];
  };
  fabric.gpu = [&](int node, int local, sg4::NetZone* zone) {
    // As in build_node: each stream runs its known-length work on a core of its own.
    auto* gpu = zone->create_host(fmt::format("node{}-gpu{}", node, local), 1e9);
    gpu->set_core_count(kStreamCount);
    placed.at(static_cast<size_t>(ports.at(static_cast<size_t>(node)).first_gpu + local)) = gpu;
    return gpu;
  };
  fabric_builder.build(fabric);
  for (const auto& hang : hang_later)
    hang();
  out.gpus.resize(static_cast<size_t>(total_gpus), nullptr);
  for (size_t g = 0; g < placed.size(); ++g)
    if (placed[g] != nullptr)
      out.gpus[g] = placed[g];
  out.group_of_gpu.clear();
  for (const auto& port : ports)
    out.group_of_gpu.insert(out.group_of_gpu.end(), static_cast<size_t>(port.group->gpus_per_node), port.group_index);
  // What NCCL's tree search may credit a tree with on two nodes (collective.hpp,
  // GroupShape::nic_feed_ratio): the GPU's PCIe link at the PCIe figure of links.json over one
  // of its node's NICs (one port of a NIC that stands for several, lay_out_nics).
  for (const auto& port : ports) {
    const auto& g = *port.group;
    for (int local = 0; local < g.gpus_per_node; ++local)
      if (auto* gpu = out.gpus[static_cast<size_t>(port.first_gpu + local)]; gpu != nullptr) {
        gpu->set_property(kCpuVendorProperty, g.host.cpu_vendor);
        if (const auto& up = fabric.uplinks[static_cast<size_t>(port.first_gpu + local)]; !up.empty()) {
          std::vector<std::string> named;
          for (const auto* link : up)
            named.push_back(fmt::format("{}={:.17g}", link->get_name(), link->get_bandwidth()));
          gpu->set_property(kUplinksProperty, fmt::format("{}", fmt::join(named, ",")));
        }
      }
    if (g.nic.count <= 0 || !(g.nic.bandwidth_Bps > 0))
      continue;
    const double one_nic = g.nic.bandwidth_Bps / std::max(1, g.nic.ports);
    const double ratio   = *host_link_Bps[static_cast<size_t>(port.group_index)] * link_efficiency().pcie / one_nic;
    // Each NIC is shared by gpus_per_node / count GPUs in a row (lay_out_nics has made the count
    // divide the GPUs).
    const int sharing = std::max(1, g.gpus_per_node / g.nic.count);
    for (int local = 0; local < g.gpus_per_node; ++local)
      if (auto* gpu = out.gpus[static_cast<size_t>(port.first_gpu + local)]; gpu != nullptr) {
        gpu->set_property(kNicFeedRatioProperty, fmt::format("{:.17g}", ratio));
        gpu->set_property(kNicProperty, std::to_string(port.first_gpu + local / sharing * sharing));
      }
  }
  sg4::Engine::get_instance()->get_netzone_root()->seal();
  return out;
}

namespace {

const bool checked = ScenarioCheckRegistry::add(
    "fabric", "the network topology exists", ScenarioCheck{[](const Scenario& s) {
      FabricRegistry::get(s.platform.network.topology, "platform.network.topology");
    }});

} // namespace

} // namespace stepsim
