#include "topologies/platform.hpp"

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

// GPUs of one node, their switch and their NICs.
void build_node(sg4::NetZone* zone, const NodeGroupSpec& g, int node, int group_index, BuiltPlatform& out,
                std::vector<NicPort>& nics)
{
  auto* hub = zone->create_router(fmt::format("node{}-{}", node, g.intra_node.type));
  std::vector<simgrid::kernel::routing::NetPoint*> nic_points;
  for (int n = 0; n < g.nic.count; ++n) {
    auto* point = zone->create_router(fmt::format("node{}-nic{}", node, n));
    nic_points.push_back(point);
    nics.push_back(NicPort{point, node, n, g.nic.bandwidth_Bps, g.nic.latency_s});
  }
  const int gpus_per_nic = g.gpus_per_node / g.nic.count;
  for (int local = 0; local < g.gpus_per_node; ++local) {
    auto* gpu = zone->create_host(fmt::format("node{}-gpu{}", node, local), 1e9);
    auto* intra = zone->create_split_duplex_link(fmt::format("node{}-gpu{}-{}", node, local, g.intra_node.type),
                                                 g.intra_node.bandwidth_Bps);
    intra->set_latency(g.intra_node.latency_s / 2)->seal();
    zone->add_route(gpu->get_netpoint(), hub, nullptr, nullptr, {sg4::LinkInRoute(intra, Direction::UP)}, true);
    // The GPU reaches its NIC over PCIe; the NIC, not the PCIe link, is the narrower part.
    auto* pcie = zone->create_split_duplex_link(fmt::format("node{}-gpu{}-pcie", node, local), 2 * g.nic.bandwidth_Bps);
    pcie->set_latency(0)->seal();
    zone->add_route(gpu->get_netpoint(), nic_points[local / gpus_per_nic], nullptr, nullptr,
                    {sg4::LinkInRoute(pcie, Direction::UP)}, true);
    out.gpus.push_back(gpu);
    out.group_of_gpu.push_back(group_index);
  }
}

} // namespace

BuiltPlatform build_platform(const PlatformSpec& spec)
{
  BuiltPlatform out;
  auto* zone = sg4::create_dijkstra_zone("cluster", true);
  FabricContext fabric{zone, &spec, {}};
  int node = 0;
  for (size_t gi = 0; gi < spec.node_groups.size(); ++gi)
    for (int i = 0; i < spec.node_groups[gi].count; ++i)
      build_node(zone, spec.node_groups[gi], node++, static_cast<int>(gi), out, fabric.nics);
  if (node > 1)
    FabricRegistry::get(spec.network.topology, "platform.network.topology").build(fabric);
  zone->seal();
  return out;
}

} // namespace stepsim
