// The platform section of a scenario: node groups (GPU, node type, NICs, host) and the network.
#include "sim/input/platform_parse.hpp"

#include "sim/input/limits.hpp"
#include "sim/input/nccl_env_parse.hpp"
#include "sim/input/network_parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace stepsim {

using namespace limits;

int PlatformSpec::total_gpus() const
{
  int total = 0;
  for (const auto& g : node_groups)
    total += g.count * g.gpus_per_node;
  return total;
}


const std::vector<std::string>& nic_kind_names()
{
  // infiniband first: the default, and the fabric the "nic" figures of links.json were fitted on.
  static const std::vector<std::string> names = {"infiniband", "roce", "efa", "efa-v2", "efa-v3", "tcpx", "tcpxo", "ethernet"};
  return names;
}

namespace {

// The node's NICs as stepsim builds them: `count` NICs, each shared by gpus_per_node / count GPUs
// (topologies/platform.cpp, topologies/fabrics/rail.cpp). A node with NICs and GPUs in any other
// ratio is laid out as NCCL uses it: the GPUs and NICs split into d = gcd(NICs, GPUs) equal PCIe
// groups (AWS p5: 8 groups of one H100 and four 100 Gb/s EFA; a node of 12 NICs for 8 GPUs: 4
// groups of two GPUs and three NICs); NCCL's channels use every NIC of the node, each GPU's
// through the NICs nearest it on PCIe (NCCL src/graph/search.cc, ncclTopoCompute), so a group's
// NICs act as one NIC of their summed bandwidth, on one rail. With no common divisor (3 NICs for
// 8 GPUs) no even split exists, and which GPU is nearest which NIC is not in the description: the
// node is one group, its GPUs sharing all its NICs as one of their summed bandwidth. A collective
// across nodes, whose channels leave through every NIC, then gets the node's whole NIC bandwidth
// as NCCL's rings do; one GPU alone (a pipeline send) gets more than its nearest NIC would give
// it. `stepsim platform` prints the layout (NicSpec::ports).
void lay_out_nics(NicSpec& nic, int gpus_per_node)
{
  if (nic.count <= 0 || gpus_per_node <= 0 || gpus_per_node % nic.count == 0)
    return; // one NIC per GPU, or one shared by several: built as given
  const int groups = std::gcd(nic.count, gpus_per_node);
  nic.ports        = nic.count / groups;
  nic.bandwidth_Bps *= static_cast<double>(nic.ports);
  nic.count = groups;
}

} // namespace

void read_platform(JsonReader r, PlatformSpec& platform)
{
  for (auto& g : r.array_of_objects("node_groups", true)) {
    NodeGroupSpec spec;
    spec.count         = static_cast<int>(g.integer("count", std::nullopt, 1, kMaxGpus));
    spec.gpu           = g.text("gpu"); // as nvidia-smi prints it too: apply_rated_bandwidths names the entry
    spec.gpus_per_node = static_cast<int>(g.integer("gpus_per_node", 8, 1, kMaxGpusPerNode));
    spec.price_per_gpu_hour = g.number("price_per_gpu_hour", 0.0, 0);
    if (spec.price_per_gpu_hour > kMaxPricePerGpuHour)
      r.problems().add(g.path_of("price_per_gpu_hour"),
                       fmt::format("{:g} per GPU-hour is beyond {:g}; expected a price in currency units per GPU-hour",
                                   spec.price_per_gpu_hour, kMaxPricePerGpuHour));
    auto intra         = g.object("intra_node");
    // The type names a node builder (topologies/nodes/*.cpp); the driver checks the name and the
    // GPU count it needs, so that an unknown type is reported with the closest one.
    spec.intra_node.type          = intra.text("type", std::string("nvswitch"));
    // 0 when not given: the node type's rated figure (topologies/nodes/) fills it in.
    spec.intra_node.bandwidth_Bps = intra.bandwidth("bandwidth", 0.0);
    spec.intra_node.latency_s     = intra.time("latency", 1e-6);
    spec.intra_node.gpus_per_switch =
        static_cast<int>(intra.integer("gpus_per_switch", 2, 1, kMaxGpusPerNode));
    spec.intra_node.nvls = intra.boolean("nvls", true);
    spec.intra_node.msccl = intra.boolean("msccl", true);
    if (const auto* mesh = intra.raw("mesh")) {
      const bool ok = mesh->is_array() && mesh->size() == 2 &&
                      std::all_of(mesh->begin(), mesh->end(), [](const nlohmann::json& v) {
                        return v.is_number_integer() && v.get<long long>() >= 1 && v.get<long long>() <= kMaxGpusPerNode;
                      });
      if (ok)
        spec.intra_node.mesh = {mesh->at(0).get<int>(), mesh->at(1).get<int>()};
      else
        r.problems().add(intra.path_of("mesh"), fmt::format("expected [rows, columns] of chiplets, two integers "
                                                             "from 1 to {}, got {}", kMaxGpusPerNode, mesh->dump()));
    }
    intra.reject_unknown_keys();
    auto host                         = g.object("host");
    spec.host.link_bandwidth_Bps      = host.has("link_bandwidth") ? host.bandwidth("link_bandwidth") : 0.0;
    spec.host.link_latency_s          = host.time("link_latency", 1e-6);
    spec.host.memory_bandwidth_Bps    = host.bandwidth("memory_bandwidth", 204.8e9);
    spec.host.cpu_cores               = static_cast<int>(host.integer("cpu_cores", 0, 1, kMaxCpuCores));
    spec.host.nvme_bandwidth_Bps      = host.bandwidth("nvme_bandwidth", 0.0);
    spec.host.nvme_latency_s          = host.time("nvme_latency", 100e-6);
    spec.host.cpu_vendor              = host.text("cpu_vendor", "intel", {"intel", "amd", "arm", "other"});
    host.reject_unknown_keys();
    auto nic                  = g.object("nic");
    spec.nic.count            = static_cast<int>(nic.integer("count", 8, 1, 8 * kMaxGpusPerNode));
    spec.nic.bandwidth_Bps    = nic.bandwidth("bandwidth", 25e9);
    spec.nic.latency_s        = nic.time("latency", 2e-6);
    spec.nic.kind             = nic.text("kind", nic_kind_names().front(), nic_kind_names());
    nic.reject_unknown_keys();
    g.reject_unknown_keys();
    lay_out_nics(spec.nic, spec.gpus_per_node);
    platform.node_groups.push_back(spec);
  }
  read_network(r.object("network"), platform.network, platform.node_groups);
  if (r.has("storage")) {
    JsonReader st                       = r.object("storage");
    platform.storage.bandwidth_Bps      = st.bandwidth("bandwidth");
    platform.storage.latency_s          = st.time("latency", 0.0);
    platform.storage.node_bandwidth_Bps = st.bandwidth("node_bandwidth", 0.0);
    st.reject_unknown_keys();
  }
  // A preset (configs/platforms/) was expanded into the fields above by expand_platform_preset.
  platform.preset = r.text("preset", std::string());
  if (const auto* placement = r.raw("placement")) {
    JsonReader pr = r.object("placement");
    if (const auto* stages = pr.raw("stages")) {
      bool ok = stages->is_array() && !stages->empty();
      for (const auto& g : ok ? *stages : nlohmann::json::array())
        ok = ok && g.is_number_integer() && g.get<long long>() >= 0 &&
             g.get<long long>() < static_cast<long long>(platform.node_groups.size());
      if (ok)
        platform.stage_groups = stages->get<std::vector<int>>();
      else
        pr.problems().add(pr.path_of("stages"),
                          "expected an array with one index into platform.node_groups per pipeline stage");
    }
    pr.reject_unknown_keys();
    (void)placement;
  }
  read_nccl_env(r, platform.nccl_env);
  r.reject_unknown_keys();
}


} // namespace stepsim
