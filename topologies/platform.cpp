#include "topologies/platform.hpp"

#include "sim/task_graph.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

namespace stepsim {

namespace sg4 = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

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

namespace {

// GPUs of one node, their switch, their NICs and the node's gateway, as a zone under `parent`.
void build_node(sg4::NetZone* parent, const NodeGroupSpec& g, int node, int group_index, const std::vector<bool>& in_use,
                BuiltPlatform& out)
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

  auto* zone = sg4::create_floyd_zone(fmt::format("node{}", node));
  if (parent != nullptr) // a one-node platform is the node's zone alone
    zone->set_parent(parent);
  auto* hub     = zone->create_router(fmt::format("node{}-{}", node, g.intra_node.type));
  auto* gateway = zone->create_router(fmt::format("node{}-gateway", node));
  // A NIC of its own GPU hangs straight off the gateway; a NIC shared by several GPUs is a router
  // they reach over PCIe.
  std::vector<simgrid::kernel::routing::NetPoint*> nics(static_cast<size_t>(g.nic.count), nullptr);
  auto nic_link = [&](int n, simgrid::kernel::routing::NetPoint* from) {
    // Half the NIC-to-NIC latency on each end, so any two NICs are latency_s apart.
    auto* link = zone->create_split_duplex_link(fmt::format("node{}-nic{}-link", node, n), g.nic.bandwidth_Bps);
    link->set_latency(g.nic.latency_s / 2)->seal();
    zone->add_route(from, gateway, nullptr, nullptr, {sg4::LinkInRoute(link, Direction::UP)}, true);
  };
  for (int n = 0; n < g.nic.count && gpus_per_nic > 1; ++n) {
    bool needed = false;
    for (int local = n * gpus_per_nic; local < (n + 1) * gpus_per_nic; ++local)
      needed = needed || used(local);
    if (needed) {
      nics[static_cast<size_t>(n)] = zone->create_router(fmt::format("node{}-nic{}", node, n));
      nic_link(n, nics[static_cast<size_t>(n)]);
    }
  }
  int used_gpus = 0;
  for (int local = 0; local < g.gpus_per_node; ++local)
    used_gpus += used(local) ? 1 : 0;
  for (int local = 0; local < g.gpus_per_node; ++local) {
    if (!used(local)) {
      out.gpus.push_back(nullptr);
      out.group_of_gpu.push_back(group_index);
      continue;
    }
    // The replay runs known-length work (kernels, collectives timed by their closed form) as
    // Execs of one core each; cores let those of different streams run side by side at full
    // speed, as kernels on separate CUDA streams do.
    auto* gpu = zone->create_host(fmt::format("node{}-gpu{}", node, local), 1e9);
    gpu->set_core_count(kStreamCount);
    if (used_gpus > 1) { // a lone GPU of a reduced platform has no one to talk to in its node
      auto* intra = zone->create_split_duplex_link(fmt::format("node{}-gpu{}-{}", node, local, g.intra_node.type),
                                                   g.intra_node.bandwidth_Bps);
      intra->set_latency(g.intra_node.latency_s / 2)->seal();
      zone->add_route(gpu->get_netpoint(), hub, nullptr, nullptr, {sg4::LinkInRoute(intra, Direction::UP)}, true);
    }
    if (gpus_per_nic == 1) {
      nic_link(local, gpu->get_netpoint());
    } else { // the NIC, not the PCIe link, is the narrower part
      auto* pcie = zone->create_split_duplex_link(fmt::format("node{}-gpu{}-to-nic", node, local), 2 * g.nic.bandwidth_Bps);
      pcie->set_latency(0)->seal();
      zone->add_route(gpu->get_netpoint(), nics[static_cast<size_t>(local / gpus_per_nic)], nullptr, nullptr,
                      {sg4::LinkInRoute(pcie, Direction::UP)}, true);
    }
    out.gpus.push_back(gpu);
    out.group_of_gpu.push_back(group_index);
  }
  zone->seal();
  if (parent == nullptr)
    return;
  // The node's NICs are its links to the switch above; it needs no uplink of its own.
  parent->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
}

} // namespace

BuiltPlatform build_platform(const PlatformSpec& spec, const std::vector<bool>& in_use)
{
  BuiltPlatform out;
  std::vector<NodePort> ports;
  std::vector<std::pair<const NodeGroupSpec*, int>> node_group;
  for (size_t gi = 0; gi < spec.node_groups.size(); ++gi)
    for (int i = 0; i < spec.node_groups[gi].count; ++i) {
      const auto& g = spec.node_groups[gi];
      ports.push_back(NodePort{static_cast<int>(ports.size()), g.nic.count, g.nic.count * g.nic.bandwidth_Bps});
      node_group.emplace_back(&g, static_cast<int>(gi));
    }
  if (ports.size() == 1) {
    build_node(nullptr, *node_group[0].first, 0, node_group[0].second, in_use, out);
    return out;
  }
  std::vector<sg4::NetZone*> parents =
      FabricRegistry::get(spec.network.topology, "platform.network.topology").build(spec, ports);
  for (size_t node = 0; node < ports.size(); ++node)
    build_node(parents[node], *node_group[node].first, static_cast<int>(node), node_group[node].second, in_use, out);
  sg4::Engine::get_instance()->get_netzone_root()->seal();
  return out;
}

} // namespace stepsim
