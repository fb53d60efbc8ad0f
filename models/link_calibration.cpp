#include "models/link_calibration.hpp"

#include "models/device.hpp"
#include "sim/input/json_reader.hpp"

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
  auto fraction = [&](const char* key, double& out, double& step, bool nvswitch = false) {
    JsonReader link = r.object(key, true);
    out             = link.number("efficiency", std::nullopt, 0, true);
    step            = link.time("step_latency", 0.0);
    if (step > 1e-3)
      problems.add(link.path_of("step_latency"), "expected a per-step latency below 1 ms");
    if (nvswitch && link.has("in_switch_reduction")) {
      e.nvls_reduction_Bps = link.bandwidth("in_switch_reduction", 0.0);
      if (!(e.nvls_reduction_Bps > 0))
        problems.add(link.path_of("in_switch_reduction"), "expected a positive bandwidth such as 274GBps");
      link.text("in_switch_reduction_source");
    }
    link.text("source");
    link.raw("step_latency_source");
    link.raw("notes");
    link.reject_unknown_keys();
    if (out > 1.0)
      problems.add(link.path_of("efficiency"), "expected a fraction no larger than 1");
  };
  fraction("nvswitch", e.nvswitch, e.nvswitch_step_s, true);
  fraction("pcie", e.pcie, e.pcie_step_s);
  fraction("nic", e.nic, e.nic_step_s);
  JsonReader base             = r.object("collective_base_latency");
  e.collective_base_latency_s = base.time("value", 0.0);
  if (e.collective_base_latency_s > 1e-3)
    problems.add(base.path_of("value"), "expected a base latency below 1 ms");
  base.text("source", std::string());
  base.reject_unknown_keys();
  if (r.has("protocols")) {
    JsonReader protocols = r.object("protocols");
    protocols.raw("description");
    protocols.raw("source");
    protocols.raw("tree"); // read by models/collectives/protocol.cpp
    const char* names[] = {"LL", "LL128", "Simple"};
    for (size_t i = 0; i < e.protocols.size(); ++i) {
      JsonReader p      = protocols.object(names[i], true);
      ProtocolCost& c   = e.protocols[i];
      c.wire_factor     = p.number("wire_bytes_per_byte", std::nullopt, 1.0);
      JsonReader step   = p.object("step_latency", true);
      c.step_inside_s   = step.time("inside_node", 0.0);
      c.step_between_s  = step.time("between_nodes", 0.0);
      step.raw("source");
      step.reject_unknown_keys();
      JsonReader launch = p.object("base_latency", true);
      c.base_ring_s     = launch.time("ring", 0.0);
      c.base_tree_s     = launch.time("tree", 0.0);
      c.base_nvls_s     = launch.time("nvls", 0.0);
      c.base_other_s    = launch.time("other", 0.0);
      launch.raw("source");
      launch.reject_unknown_keys();
      for (double v : {c.step_inside_s, c.step_between_s, c.base_ring_s, c.base_tree_s, c.base_nvls_s, c.base_other_s})
        if (v > 1e-3)
          problems.add(p.path(), "expected latencies below 1 ms");
      p.raw("source");
      p.reject_unknown_keys();
    }
    protocols.reject_unknown_keys();
    e.protocols_loaded = true;
  }
  r.raw("description");
  r.reject_unknown_keys();
  problems.throw_if_any();
  return e;
}

const LinkEfficiency& link_efficiency()
{
  static const LinkEfficiency e = load_link_efficiency();
  return e;
}

} // namespace stepsim
