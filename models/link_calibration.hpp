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
  // What one step of a collective costs beyond the wire latency on each link type (NCCL's
  // per-step hwLat: the LL protocol's flag polling and the hand-off between thread blocks),
  // seconds per GPU-to-GPU path of that type; added to the scenario's path latency of that type
  // (unless the scenario sets it to zero: an idealised, free link).
  double nvswitch_step_s = 0, pcie_step_s = 0, nic_step_s = 0;
  // NCCL's fixed cost of one collective (its tuner's baseLat: kernel launch and set-up), seconds.
  double collective_base_latency_s = 0;
};

// configs/calibration/links.json, or all 1.0 when the file is absent.
LinkEfficiency load_link_efficiency();

// The platform with every link's bandwidth scaled to what transfers achieve on it, and each
// link's latency raised by its type's per-step cost.
PlatformSpec with_achieved_bandwidth(const PlatformSpec& platform, const LinkEfficiency& efficiency);

} // namespace stepsim
