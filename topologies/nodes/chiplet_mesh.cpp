// A multi-chiplet package as one node: intra_node.mesh = [rows, columns] compute chiplets (the
// node's GPUs, row-major: chiplet r x columns + c) on a 2-D mesh network-on-package without
// wraparound. Each mesh link joins two neighbouring chiplets with intra_node.bandwidth per
// direction and intra_node.latency per hop; each chiplet has its own HBM (the device file, e.g.
// configs/devices/Chiplet-Die.json) and its own host link to the package's host.
//
// Routing is dimension-ordered XY, as on-chip meshes route to stay deadlock-free: along the row
// first (X, to the destination's column), then along the column (Y). The route from b to a is
// b's own XY route, not a's reversed, so the two directions cross different links; every route
// is given explicitly (node_type.hpp), and SimGrid's torus zone is not used because its
// wraparound links are no part of a package.
//
// Off-package links are the NICs: NIC n sits on chiplet n x (chiplets per NIC), the first of
// the chiplets it serves (with one NIC per row, the west edge), and the others reach it over the
// mesh by XY; packages are joined through them by the cluster fabric.
//
//   c0 ── c1 ── c2 ── c3        a route c0 -> c13 (4x4): c0 → c1 (X), c1 → c5 → c9 → c13 (Y)
//   │     │     │     │
//   c4 ── c5 ── c6 ── c7
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

#include <map>

namespace stepsim {
namespace {

std::vector<std::string> check(const NodeGroupSpec& g)
{
  const auto& mesh = g.intra_node.mesh;
  if (mesh.size() != 2)
    return {"mesh: expected [rows, columns] of chiplets for a chiplet_mesh node"};
  if (mesh[0] * mesh[1] != g.gpus_per_node)
    return {fmt::format("mesh: [{}, {}] is {} chiplets, but gpus_per_node is {}; expected rows x columns = "
                        "gpus_per_node",
                        mesh[0], mesh[1], mesh[0] * mesh[1], g.gpus_per_node)};
  return {};
}

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  const int cols    = intra.mesh[1];
  const int n       = static_cast<int>(b.gpus.size());
  b.add_host_links();

  // The link between chiplets a < b (neighbours), UP from a to b.
  std::map<std::pair<int, int>, simgrid::s4u::Link*> mesh_link;
  auto neighbour = [&](int a, int c) {
    if (a > c)
      std::swap(a, c);
    auto& l = mesh_link[{a, c}];
    if (l == nullptr)
      l = b.link(fmt::format("gpu{}-gpu{}-mesh", a, c), intra.bandwidth_Bps, intra.latency_s);
    return l;
  };
  for (int g = 0; g < n; ++g) { // every link exists, used by a route or not, so the package shows whole
    if (g % cols + 1 < cols)
      neighbour(g, g + 1);
    if (g + cols < n)
      neighbour(g, g + cols);
  }
  auto xy = [&](int from, int to) {
    Path p;
    int at = from;
    auto step = [&](int next) {
      p.emplace_back(neighbour(at, next), at < next ? Hop::Direction::UP : Hop::Direction::DOWN);
      at = next;
    };
    while (at % cols != to % cols)
      step(at % cols < to % cols ? at + 1 : at - 1);
    while (at != to)
      step(at < to ? at + cols : at - cols);
    return p;
  };
  for (int a = 0; a < n; ++a)
    for (int c = 0; c < n; ++c)
      if (a != c)
        b.route(b.gpu(a), b.gpu(c), xy(a, c), false);

  const int per_nic = b.group->gpus_per_node / b.group->nic.count;
  b.path_to_nic.assign(b.gpus.size(), Path{});
  for (int g = 0; g < n; ++g)
    b.path_to_nic[static_cast<size_t>(g)] = g % per_nic == 0 ? Path{} : xy(g, g / per_nic * per_nic);
}

// A chiplet mesh is no product with a datasheet: its link bandwidth must be given.
const bool registered = NodeTypeRegistry::add(
    "chiplet_mesh", "chiplet package: mesh [rows, columns] of chiplets, XY routing (bandwidth per mesh link)",
    NodeType{0, check, build, true, std::nullopt, LinkClass::Rated, false});

} // namespace
} // namespace stepsim
