#include "sim/engine/host_side_platform.hpp"

#include <fmt/format.h>

#include <cmath>

namespace stepsim {

namespace sg4 = simgrid::s4u;

namespace {
sg4::Link* shared_link(sg4::NetZone* zone, const std::string& name, double Bps, double latency_s)
{
  auto* link = zone->create_link(name, Bps);
  link->set_latency(latency_s)->seal();
  return link;
}
} // namespace

HostSidePlatform build_host_side(sg4::NetZone* parent, const HostSideSpec& spec, const std::string& prefix)
{
  HostSidePlatform out;
  // Every member of the star is a zone: SimGrid 3.32's StarZone mixes up the routes of a host
  // and of a sub-zone that are both its members (a node's route came out as the storage's link,
  // without its own), so storage is a zone of one host.
  auto* root = sg4::create_star_zone(prefix + "host-side");
  root->set_parent(parent);
  if (spec.storage_Bps > 0) {
    auto* zone  = sg4::create_full_zone(prefix + "storage");
    zone->set_parent(root);
    out.storage = zone->create_host(prefix + "storage-host", 1);
    out.storage->seal();
    zone->seal();
    auto* link = shared_link(root, prefix + "storage-link", spec.storage_Bps, spec.storage_latency_s);
    root->add_route(zone->get_netpoint(), nullptr, out.storage->get_netpoint(), nullptr, {sg4::LinkInRoute(link)},
                    true);
  }
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    const HostSideNode& node = spec.nodes[n];
    const std::string name   = fmt::format("{}node{}", prefix, n);
    auto* zone               = sg4::create_full_zone(name);
    zone->set_parent(root);
    // Speed 1: a task's flops are its CPU-seconds; a sequential task uses one core at most.
    auto* cpu = zone->create_host(name + "-cpu", 1);
    cpu->set_core_count(node.cores)->seal();
    out.cpu.push_back(cpu);
    auto* memory = shared_link(zone, name + "-memory", node.memory_Bps, 0);
    out.gpus.emplace_back();
    for (int g = 0; g < node.gpus; ++g) {
      auto* gpu = zone->create_host(fmt::format("{}-gpu{}", name, g), 1);
      gpu->seal();
      auto* pcie = shared_link(zone, fmt::format("{}-gpu{}-host-link", name, g), node.host_link_Bps,
                               node.host_link_latency_s);
      zone->add_route(gpu->get_netpoint(), cpu->get_netpoint(), nullptr, nullptr,
                      {sg4::LinkInRoute(pcie), sg4::LinkInRoute(memory)}, true);
      out.gpus.back().push_back(gpu);
    }
    out.disk.push_back(nullptr);
    if (node.nvme_Bps > 0) {
      auto* disk = zone->create_host(name + "-nvme", 1);
      disk->seal();
      auto* link = shared_link(zone, name + "-nvme-link", node.nvme_Bps, node.nvme_latency_s);
      zone->add_route(disk->get_netpoint(), cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(link)}, true);
      out.disk.back() = disk;
    }
    zone->seal();
    if (out.storage != nullptr) {
      auto* uplink = shared_link(root, name + "-storage-link", node.storage_link_Bps, 0);
      root->add_route(zone->get_netpoint(), nullptr, cpu->get_netpoint(), nullptr, {sg4::LinkInRoute(uplink)}, true);
    }
  }
  root->seal();
  return out;
}

void transfer(sg4::Host* from, sg4::Host* to, double bytes)
{
  sg4::Comm::sendto(from, to, static_cast<uint64_t>(std::ceil(bytes)));
}

} // namespace stepsim
