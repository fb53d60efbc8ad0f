// The link knob of `simulation.stragglers`: divide the bandwidth of chosen links of the built
// SimGrid platform, for what-if studies (a degraded NIC, a flapping cable, a slow switch port).
#pragma once

#include "sim/core/scenario.hpp"

#include <string>
#include <vector>

namespace stepsim {

// The kind of a link: its name with every number written N and the direction of a split-duplex
// link (_UP / _DOWN) taken off: "node3-nic5-link_UP" -> "nodeN-nicN-link".
std::string link_kind(const std::string& link_name);

// True when `wanted` names this link: the link itself (with or without _UP / _DOWN), its kind,
// or one word of its kind ("nic", "nvswitch", "uplink").
bool link_matches(const std::string& link_name, const std::string& wanted);

// Divides the bandwidth of every link of the running engine's platform that an entry with a
// `link` names by the entry's slowdown (entries with a `rank` are compute stragglers, handled by
// the replay). Throws InputError naming simulation.stragglers[i].link when an entry names no
// built link, with the kinds there are.
void slow_links(const std::vector<SimulationSpec::Straggler>& stragglers);

} // namespace stepsim
