#include "topologies/nodes/node_type.hpp"
#include "sim/core/scenario_check.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/task_graph.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <map>

namespace stepsim {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

std::string NodeBuild::name(const std::string& role) const
{
  return fmt::format("node{}-{}", node, role);
}

NetPoint* NodeBuild::router(const std::string& role)
{
  return zone->create_router(name(role));
}

sg4::Link* NodeBuild::link(const std::string& role, double Bps, double latency_s)
{
  auto* l = zone->create_split_duplex_link(name(role), Bps);
  l->set_latency(latency_s)->seal();
  return l;
}

void NodeBuild::route(NetPoint* from, NetPoint* to, const Path& path, bool symmetrical)
{
  zone->add_route(from, to, nullptr, nullptr, path, symmetrical);
}

NetPoint* NodeBuild::gpu(int local) const
{
  auto* h = gpus[static_cast<size_t>(local)];
  return h == nullptr ? nullptr : h->get_netpoint();
}

int NodeBuild::built_gpus() const
{
  int n = 0;
  for (const auto* h : gpus)
    n += h != nullptr ? 1 : 0;
  return n;
}

void NodeBuild::route_gpu_pairs(const std::function<Path(int a, int b)>& path)
{
  const int n = static_cast<int>(gpus.size());
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (gpu(a) != nullptr && gpu(b) != nullptr)
        route(gpu(a), gpu(b), path(a, b));
}

Path NodeBuild::host_staged(simgrid::s4u::Link* sender_pcie, simgrid::s4u::Link* staging,
                           simgrid::s4u::Link* receiver_pcie)
{
  Path p{Hop(sender_pcie, Hop::Direction::UP)};
  if (staging != nullptr)
    p.emplace_back(staging, Hop::Direction::UP);
  p.emplace_back(receiver_pcie, Hop::Direction::DOWN);
  return p;
}

void NodeBuild::route_to_cpu(const std::function<Path(int g)>& to_root)
{
  if (cpu == nullptr)
    return;
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
    if (gpu(g) != nullptr) {
      Path p = to_root(g);
      p.emplace_back(memory_link, Direction::UP);
      route(gpu(g), cpu->get_netpoint(), p);
    }
}

void NodeBuild::add_host_links()
{
  if (cpu == nullptr)
    return;
  std::vector<sg4::Link*> host(gpus.size(), nullptr);
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
    if (gpu(g) != nullptr)
      host[static_cast<size_t>(g)] = link(fmt::format("gpu{}-host", g), host_link_Bps, group->host.link_latency_s);
  route_to_cpu([&](int g) { return Path{Hop(host[static_cast<size_t>(g)], Direction::UP)}; });
}

void NodeBuild::star(const std::string& role, double Bps, double latency_s)
{
  if (built_gpus() < 2)
    return;
  std::vector<sg4::Link*> up(gpus.size(), nullptr);
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
    if (gpu(g) != nullptr)
      up[static_cast<size_t>(g)] = link(fmt::format("gpu{}-{}", g, role), Bps, latency_s / 2);
  route_gpu_pairs([&](int a, int b) {
    return Path{Hop(up[static_cast<size_t>(a)], Direction::UP), Hop(up[static_cast<size_t>(b)], Direction::DOWN)};
  });
}

void NodeBuild::full_mesh(const std::string& role)
{
  add_host_links();
  const double Bps = group->intra_node.bandwidth_Bps, latency_s = group->intra_node.latency_s;
  const auto n     = gpus.size();
  // link[a][c]: the link between a and c. Only the built GPUs' links: a pair's route crosses no
  // other GPU.
  std::vector<std::vector<sg4::Link*>> links(n, std::vector<sg4::Link*>(n, nullptr));
  for (size_t a = 0; a < n; ++a)
    for (size_t c = a + 1; c < n; ++c)
      if (gpu(static_cast<int>(a)) != nullptr && gpu(static_cast<int>(c)) != nullptr)
        links[a][c] = links[c][a] = link(fmt::format("gpu{}-gpu{}-{}", a, c, role), Bps, latency_s);
  route_gpu_pairs([&](int a, int c) {
    return Path{Hop(links[static_cast<size_t>(a)][static_cast<size_t>(c)], a < c ? Direction::UP : Direction::DOWN)};
  });
}

NodeType full_mesh_type(const std::string& type, const std::string& role, const std::string& links, LinkClass link_class,
                        std::optional<double> rated_bandwidth_Bps)
{
  NodeType t;
  t.check = [type, links](const NodeGroupSpec& g) -> std::vector<std::string> {
    if (g.gpus_per_node <= kMostMeshGpus)
      return {};
    return {fmt::format("type: an {} node joins at most {} GPUs pair by pair ({}); got gpus_per_node {}", type,
                        kMostMeshGpus, links, g.gpus_per_node)};
  };
  t.build               = [role](NodeBuild& b) { b.full_mesh(role); };
  t.rated_bandwidth_Bps = rated_bandwidth_Bps;
  t.link_class          = link_class;
  t.full_mesh           = true;
  return t;
}

sg4::Host* build_cpu_host(NodeBuild& b)
{
  if (!b.host_side)
    return nullptr;
  b.cpu = b.zone->create_host(b.name("cpu"), 1e9);
  // Host-side work (an offloaded optimizer step, a cached-parameter copy) runs beside the GPUs'
  // streams, as the CPU's cores do.
  b.cpu->set_core_count(kStreamCount);
  b.memory_link = b.link("cpu-memory", b.group->host.memory_bandwidth_Bps, 0);
  return b.cpu;
}

double host_link_bandwidth(const NodeGroupSpec& g, const std::string& path)
{
  if (g.host.link_bandwidth_Bps > 0)
    return g.host.link_bandwidth_Bps;
  const double device = load_device(g.gpu, path + ".gpu").host_link_bandwidth_Bps;
  if (device <= 0)
    throw InputError({fmt::format("{}.host.link_bandwidth: device \"{}\" gives no host_link_bandwidth; "
                                  "expected a bandwidth such as \"32GBps\"", path, g.gpu)});
  return device;
}

void check_node_types(const PlatformSpec& spec)
{
  Problems problems;
  for (size_t i = 0; i < spec.node_groups.size(); ++i) {
    const auto& g          = spec.node_groups[i];
    const std::string path = fmt::format("platform.node_groups[{}].intra_node", i);
    const NodeType* type   = nullptr;
    try {
      type = &NodeTypeRegistry::get(g.intra_node.type, path + ".type");
    } catch (const InputError& e) {
      for (const auto& p : e.problems())
        problems.add("", p);
      continue;
    }
    if (type->gpus_per_node != 0 && g.gpus_per_node != type->gpus_per_node &&
        (type->also_gpus_per_node == 0 || g.gpus_per_node != type->also_gpus_per_node))
      problems.add(fmt::format("platform.node_groups[{}].gpus_per_node", i),
                   fmt::format("a \"{}\" node has {} GPUs{}, got {}", g.intra_node.type, type->gpus_per_node,
                               type->also_gpus_per_node != 0 ? fmt::format(" (or {})", type->also_gpus_per_node) : "",
                               g.gpus_per_node));
    if (g.intra_node.bandwidth_Bps <= 0 && !type->rated_bandwidth_Bps)
      problems.add(path + ".bandwidth", fmt::format("required field is missing (expected a bandwidth such as "
                                                    "\"200Gbps\" or \"300GBps\": a \"{}\" node has no rated one)",
                                                    g.intra_node.type));
    if (type->check)
      for (const auto& p : type->check(g))
        problems.add("", path + "." + p);
    // A node whose GPUs talk over NVLink or Infinity Fabric needs GPUs that have it: a Jetson or
    // a GeForce card on an NVL72 node was timed at the type's NVLink rate, ten times its own
    // memory's. (An unknown device is the device check's to report; a node of one GPU has no
    // links between GPUs, whatever its type.)
    const bool gpu_links = type->link_class == LinkClass::NvLink || type->link_class == LinkClass::NvLinkDirect ||
                           type->link_class == LinkClass::Xgmi;
    const auto names = device_names();
    if (gpu_links && g.gpus_per_node > 1 && std::find(names.begin(), names.end(), catalogue_device_name(g.gpu)) != names.end() &&
        load_device(g.gpu, fmt::format("platform.node_groups[{}].gpu", i)).nvlink_bandwidth_Bps <= 0)
      problems.add(path + ".type",
                   fmt::format("a \"{}\" node joins its GPUs by {}, which the {} does not have (its device file "
                               "gives no nvlink_bandwidth); describe the node as \"pcie\", \"pcie_switch\" or, "
                               "for GeForce cards, \"pcie_no_p2p\"",
                               g.intra_node.type, type->link_class == LinkClass::Xgmi ? "Infinity Fabric (xGMI)" : "NVLink",
                               catalogue_device_name(g.gpu)));
    // PCIe 7.0 x16, the fastest there is, carries 128 GB/s each way (PCI-SIG, PCIe 7.0
    // specification, 2025); a PCIe node at an NVSwitch's 450 GB/s was a preset's figure kept
    // under another type.
    constexpr double kFastestPcie_Bps = 128e9;
    if (type->link_class == LinkClass::Pcie && g.intra_node.bandwidth_Bps > kFastestPcie_Bps)
      problems.add(path + ".bandwidth",
                   fmt::format("{:g} GB/s per direction over PCIe, above PCIe 7.0 x16's 128; give the GPU's PCIe "
                               "link (PCIe 4.0 x16: \"32GBps\", 5.0: \"64GBps\")",
                               g.intra_node.bandwidth_Bps / 1e9));
  }
  problems.throw_if_any();
}

void apply_rated_bandwidths(PlatformSpec& spec)
{
  for (auto& g : spec.node_groups) {
    // A GPU named as nvidia-smi prints it ("NVIDIA H100 80GB HBM3") is its catalogue device, and
    // the report names that.
    g.gpu = catalogue_device_name(g.gpu);
    if (g.intra_node.bandwidth_Bps > 0)
      continue;
    const NodeType* type = NodeTypeRegistry::find(g.intra_node.type);
    if (type == nullptr)
      continue;
    if (type->rated_by_device) {
      // An unknown device is reported by the device check; its node keeps the type's figure.
      const auto names = device_names();
      if (std::find(names.begin(), names.end(), g.gpu) != names.end())
        if (const double nvlink = load_device(g.gpu, "platform.node_groups[].gpu").nvlink_bandwidth_Bps; nvlink > 0) {
          g.intra_node.bandwidth_Bps = nvlink;
          continue;
        }
    }
    if (type->rated_bandwidth_Bps)
      g.intra_node.bandwidth_Bps = *type->rated_bandwidth_Bps;
  }
}

PlatformSpec with_achieved_bandwidth(const PlatformSpec& platform, const LinkEfficiency& efficiency)
{
  PlatformSpec achieved = platform;
  for (auto& g : achieved.node_groups) {
    // NVSwitch node types take the NVSwitch figure, direct NVLink meshes the NVLink one, xGMI
    // meshes the xGMI one, PCIe ones the PCIe figure; a chiplet mesh has no measurement to take
    // one from, so its links keep their rated bandwidth.
    const NodeType* type = NodeTypeRegistry::find(g.intra_node.type);
    const LinkClass link = type != nullptr ? type->link_class : LinkClass::NvLink;
    if (link == LinkClass::Pcie) {
      g.intra_node.bandwidth_Bps *= efficiency.pcie;
      g.intra_node.latency_s += g.intra_node.latency_s > 0 ? efficiency.pcie_step_s : 0;
    } else if (link == LinkClass::NvLink) {
      g.intra_node.bandwidth_Bps *= efficiency.nvswitch;
      g.intra_node.latency_s += g.intra_node.latency_s > 0 ? efficiency.nvswitch_step_for(g.gpu) : 0;
    } else if (link == LinkClass::NvLinkDirect) {
      g.intra_node.bandwidth_Bps *= efficiency.nvlink;
      g.intra_node.latency_s += g.intra_node.latency_s > 0 ? efficiency.nvlink_step_s : 0;
    } else if (link == LinkClass::Xgmi) {
      g.intra_node.bandwidth_Bps *= efficiency.xgmi;
      g.intra_node.latency_s += g.intra_node.latency_s > 0 ? efficiency.xgmi_step_s : 0;
    }
    // Each NIC kind its own figures (links.json "nic_kinds"); infiniband's are `nic`'s.
    const NicKindCost nic = efficiency.nic_kind(g.nic.kind);
    g.nic.bandwidth_Bps *= nic.efficiency;
    // A link given zero latency is an idealisation (free communication): it gets no step cost either.
    // What a kind's step costs beyond InfiniBand's is its transport's (NicSpec::transport_latency_s):
    // not on the link, but owed by each transfer across it once its bytes are in, so that a ring
    // can pay it once per crossing rather than per step.
    const double transport    = g.nic.latency_s > 0 ? std::max(0.0, nic.step_s - efficiency.nic_step_s) : 0;
    g.nic.transport_latency_s = transport;
    g.nic.latency_s += g.nic.latency_s > 0 ? nic.step_s - transport : 0;
  }
  return achieved;
}

namespace {

const bool checked = ScenarioCheckRegistry::add(
    "node_types", "every node group's type exists and fits its GPUs",
    ScenarioCheck{[](const Scenario& s) { check_node_types(s.platform); }});

} // namespace

} // namespace stepsim
