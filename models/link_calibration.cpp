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
  auto fraction = [&](const char* key, double& out) {
    JsonReader link = r.object(key, true);
    out             = link.number("efficiency", std::nullopt, 0, true);
    link.text("source");
    link.raw("notes");
    link.reject_unknown_keys();
    if (out > 1.0)
      problems.add(link.path_of("efficiency"), "expected a fraction no larger than 1");
  };
  fraction("nvswitch", e.nvswitch);
  fraction("pcie", e.pcie);
  fraction("nic", e.nic);
  r.raw("description");
  r.reject_unknown_keys();
  problems.throw_if_any();
  return e;
}

PlatformSpec with_achieved_bandwidth(const PlatformSpec& platform, const LinkEfficiency& efficiency)
{
  PlatformSpec achieved = platform;
  for (auto& g : achieved.node_groups) {
    g.intra_node.bandwidth_Bps *= g.intra_node.type == "pcie" ? efficiency.pcie : efficiency.nvswitch;
    g.nic.bandwidth_Bps *= efficiency.nic;
  }
  return achieved;
}

} // namespace stepsim
