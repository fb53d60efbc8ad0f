// Pieces the fabric builders (topologies/fabrics/fat_tree.cpp, fabric_*.cpp) share.
#pragma once

#include <simgrid/s4u.hpp>

#include <string>
#include <vector>

namespace stepsim {

// A switch inside a star zone, in the form SimGrid routes between zones through: a one-router
// child zone "{name}-switch" holding the router "{name}-switch-router", reached over a FATPIPE
// backplane that no realistic traffic fills. Returns the router: the star's gateway to the zone
// above it, and the point where the star's members meet.
simgrid::kernel::routing::NetPoint* add_switch_port(simgrid::s4u::NetZone* star, const std::string& name);

// Bandwidth of a generated fabric's links: `Bps`, or, when 0, the uplink of the widest node.
struct NodePort;
double fabric_link_bandwidth(double Bps, const std::vector<NodePort>& nodes);

// Leaves for SimGrid's generated fabrics (torus, dragonfly): leaf `id` is a star zone
// "{prefix}{id}" holding node `id` (when there is one) and its switch port, the leaf's gateway.
struct FabricBuild;
simgrid::s4u::ClusterCallbacks node_leaves(FabricBuild& build, const std::string& prefix);

} // namespace stepsim
