// What collectives and transfers really reach on each kind of link, as a fraction of the link's
// rated bandwidth (NCCL's achieved bus bandwidth over the datasheet figure): protocol overhead,
// chunking, and the SMs NCCL's kernels leave idle. Read from configs/calibration/links.json, one
// entry per link type with its source; the platform is built with the achieved bandwidths.
#pragma once

#include "sim/scenario.hpp"

#include <string>

namespace stepsim {

struct LinkEfficiency {
  double nvswitch = 1.0; // GPU to NVSwitch (NVLink)
  double pcie     = 1.0; // GPU to GPU through PCIe switches
  double nic      = 1.0; // NIC to NIC through the cluster fabric (InfiniBand, RoCE)
};

// configs/calibration/links.json, or all 1.0 when the file is absent.
LinkEfficiency load_link_efficiency();

// The platform with every link's bandwidth scaled to what transfers achieve on it.
PlatformSpec with_achieved_bandwidth(const PlatformSpec& platform, const LinkEfficiency& efficiency);

} // namespace stepsim
