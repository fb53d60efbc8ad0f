// Reads `platform`: node groups and the network, converted to SI units (sim/core/scenario.hpp).
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/input/json_reader.hpp"

namespace stepsim {

void read_platform(JsonReader r, PlatformSpec& platform);

// The NIC kinds a node group's `nic.kind` may name, the default (infiniband) first. Their figures
// are in configs/calibration/links.json "nic_kinds" (models/link_calibration.cpp), which must
// name each of them.
const std::vector<std::string>& nic_kind_names();

} // namespace stepsim
