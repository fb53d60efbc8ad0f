// HGX-style and cloud boards without NVLink: GPUs behind PCIe switches, intra_node.gpus_per_switch
// GPUs (default 2, as on the PLX switches of a DGX-1 or the PEX switches of cloud 8-GPU boards)
// and their NIC on each switch, the switches under the CPU's root complex. Every link is a PCIe
// x16 link of intra_node.bandwidth per direction: GPU to switch, and the switch's upstream port to
// the root complex, which its GPUs share. Two GPUs on one switch talk through it (nvidia-smi
// "PIX"): two links, the GPU-to-GPU latency; GPUs on different switches cross the root complex
// (nvidia-smi "PHB"): four links, twice the latency. A NIC sits on the switch of the first of its
// GPUs (GPUDirect RDMA through the switch); a GPU on another switch reaches it over the root.
// The host traffic of a GPU goes up its switch to the root complex and the CPU's memory.
//
//   GPU ─┐                       ┌─ GPU
//   GPU ─┼─ switch0 ─┐  ┌─ switch1 ─┼─ GPU
//   NIC ─┘           root           └─ NIC
//                     │
//                    cpu
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

namespace stepsim {
namespace {

std::vector<std::string> check(const NodeGroupSpec& g)
{
  if (g.gpus_per_node % g.intra_node.gpus_per_switch != 0)
    return {fmt::format("gpus_per_switch: {} GPUs per node cannot be split evenly over switches of {}",
                        g.gpus_per_node, g.intra_node.gpus_per_switch)};
  return {};
}

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  const int per_switch = intra.gpus_per_switch;
  const int n_gpus     = static_cast<int>(b.gpus.size());
  auto sw              = [&](int g) { return g / per_switch; };
  std::vector<simgrid::s4u::Link*> gpu_link(b.gpus.size(), nullptr);
  std::vector<simgrid::s4u::Link*> uplink(static_cast<size_t>(n_gpus / per_switch), nullptr);
  for (int g = 0; g < n_gpus; ++g) {
    if (b.gpu(g) == nullptr)
      continue;
    gpu_link[static_cast<size_t>(g)] =
        b.link(fmt::format("gpu{}-switch{}", g, sw(g)), intra.bandwidth_Bps, intra.latency_s / 2);
    auto& up = uplink[static_cast<size_t>(sw(g))];
    if (up == nullptr)
      up = b.link(fmt::format("switch{}-root", sw(g)), intra.bandwidth_Bps, intra.latency_s / 2);
  }
  auto up   = [&](int g) { return Hop(gpu_link[static_cast<size_t>(g)], Hop::Direction::UP); };
  auto down = [&](int g) { return Hop(gpu_link[static_cast<size_t>(g)], Hop::Direction::DOWN); };
  // From GPU g's switch to switch s: nothing on the same switch, else up to the root and down.
  auto between = [&](int g, int s, Path p) {
    if (sw(g) != s) {
      p.emplace_back(uplink[static_cast<size_t>(sw(g))], Hop::Direction::UP);
      p.emplace_back(uplink[static_cast<size_t>(s)], Hop::Direction::DOWN);
    }
    return p;
  };
  b.route_gpu_pairs([&](int a, int c) {
    Path p = between(a, sw(c), {up(a)});
    p.push_back(down(c));
    return p;
  });
  b.route_to_cpu([&](int g) { return Path{up(g), Hop(uplink[static_cast<size_t>(sw(g))], Hop::Direction::UP)}; });

  const int per_nic = b.group->gpus_per_node / b.group->nic.count;
  b.path_to_nic.assign(b.gpus.size(), Path{});
  for (int g = 0; g < n_gpus; ++g)
    if (b.gpu(g) != nullptr) {
      const int nic_switch = sw(g / per_nic * per_nic);
      if (sw(g) != nic_switch && uplink[static_cast<size_t>(nic_switch)] == nullptr)
        uplink[static_cast<size_t>(nic_switch)] =
            b.link(fmt::format("switch{}-root", nic_switch), intra.bandwidth_Bps, intra.latency_s / 2);
      b.path_to_nic[static_cast<size_t>(g)] = between(g, nic_switch, {up(g)});
    }
}

// 32e9: PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s per direction.
const bool registered = NodeTypeRegistry::add(
    "pcie_switch",
    "HGX/cloud board without NVLink: gpus_per_switch GPUs and a NIC per PCIe switch, switches under the CPU",
    NodeType{0, check, build, false, 32e9, LinkClass::Pcie, false});

} // namespace
} // namespace stepsim
