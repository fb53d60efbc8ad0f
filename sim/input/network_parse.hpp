// Reads `platform.network` (the cluster fabric and its parameters) through JsonReader; kept apart
// from scenario_parse.cpp because every fabric brings its own fields.
#pragma once

#include "sim/input/json_reader.hpp"
#include "sim/core/scenario.hpp"

namespace stepsim {

// `nodes`: the number of nodes of all node groups, against which custom switches' node indices
// and the sizes of generated fabrics are checked.
void read_network(JsonReader net, NetworkSpec& network, const std::vector<NodeGroupSpec>& groups);

} // namespace stepsim
