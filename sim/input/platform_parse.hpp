// Reads `platform`: node groups and the network, converted to SI units (sim/core/scenario.hpp).
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/input/json_reader.hpp"

namespace stepsim {

void read_platform(JsonReader r, PlatformSpec& platform);

} // namespace stepsim
