#include "models/link_calibration.hpp"

#include "models/device.hpp"
#include "sim/json_reader.hpp"

#include <filesystem>

namespace stepsim {

LinkEfficiency load_link_efficiency()
{
  LinkEfficiency e;
  const std::string file = config_dir() + "/calibration/links.json";
  if (!std::filesystem::exists(file))
    return e;
  nlohmann::json doc = read_json_file(file);
  Problems problems;
  JsonReader r(doc, file, problems);
  auto fraction = [&](const char* key, double& out, double& step) {
    JsonReader link = r.object(key, true);
    out             = link.number("efficiency", std::nullopt, 0, true);
    step            = link.time("step_latency", 0.0);
    if (step > 1e-3)
      problems.add(link.path_of("step_latency"), "expected a per-step latency below 1 ms");
    link.text("source");
    link.raw("step_latency_source");
    link.raw("notes");
    link.reject_unknown_keys();
    if (out > 1.0)
      problems.add(link.path_of("efficiency"), "expected a fraction no larger than 1");
  };
  fraction("nvswitch", e.nvswitch, e.nvswitch_step_s);
  fraction("pcie", e.pcie, e.pcie_step_s);
  fraction("nic", e.nic, e.nic_step_s);
  JsonReader base             = r.object("collective_base_latency");
  e.collective_base_latency_s = base.time("value", 0.0);
  if (e.collective_base_latency_s > 1e-3)
    problems.add(base.path_of("value"), "expected a base latency below 1 ms");
  base.text("source", std::string());
  base.reject_unknown_keys();
  r.raw("description");
  r.reject_unknown_keys();
  problems.throw_if_any();
  return e;
}

PlatformSpec with_achieved_bandwidth(const PlatformSpec& platform, const LinkEfficiency& efficiency)
{
  PlatformSpec achieved = platform;
  for (auto& g : achieved.node_groups) {
    // NVLink node types take the NVSwitch figure, PCIe ones the PCIe figure; a chiplet mesh has no
    // measurement to take one from, so its links keep their rated bandwidth.
    const std::string& type = g.intra_node.type;
    if (type == "pcie" || type == "pcie_switch") {
      g.intra_node.bandwidth_Bps *= efficiency.pcie;
      g.intra_node.latency_s += g.intra_node.latency_s > 0 ? efficiency.pcie_step_s : 0;
    } else if (type != "chiplet_mesh") {
      g.intra_node.bandwidth_Bps *= efficiency.nvswitch;
      g.intra_node.latency_s += g.intra_node.latency_s > 0 ? efficiency.nvswitch_step_s : 0;
    }
    g.nic.bandwidth_Bps *= efficiency.nic;
    // A link given zero latency is an idealisation (free communication): it gets no step cost either.
    g.nic.latency_s += g.nic.latency_s > 0 ? efficiency.nic_step_s : 0;
  }
  return achieved;
}

} // namespace stepsim
