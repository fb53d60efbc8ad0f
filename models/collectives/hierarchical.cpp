// Hierarchical all-reduce (Horovod's and NCCL's CollNet layout without the switch): a
// reduce-scatter inside each node, an all-reduce of each member's S/k share across nodes with the
// members of the same local index on the other nodes, then an all-gather inside the node. All
// three phases are rings. Every member takes part in the cross-node phase through its own NIC, so
// a node's k NICs carry k rings at once. For k members on each of N nodes a member sends
// 2(k-1)/k·S inside its node and 2(N-1)/N·S/k across, and on idle links the all-reduce costs
// 2(k-1)·(α_node + S/(k·B_node)) + 2(N-1)·(α_net + S/(k·N·B_net)). Needs the same number of
// members on every node; all-reduce only.
#include "models/collectives/collective.hpp"
#include "models/collectives/requirements.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

void check(CollectiveOp op, const GroupShape& g)
{
  require_all_reduce("hierarchical", op);
  require_same_members_per_node("hierarchical", g);
}

int hierarchical_steps(CollectiveOp op, const GroupShape& g, double)
{
  check(op, g);
  if (g.n <= 1)
    return 0;
  return 2 * (g.per_node - 1) + 2 * (g.nodes() - 1);
}

CollectiveStep hierarchical_step(CollectiveOp, const GroupShape& g, double bytes, int, int member, int step)
{
  const int k     = g.per_node;
  const int nodes = g.nodes();
  const int node  = g.node_of_member[static_cast<size_t>(member)];
  const int local = g.local_rank[static_cast<size_t>(member)];
  const auto& here = g.node_members[static_cast<size_t>(node)];
  CollectiveStep s;
  const bool inside = step < k - 1 || step >= k - 1 + 2 * (nodes - 1);
  if (inside) { // reduce-scatter, then at the end all-gather, around the node's ring
    s.bytes = bytes / k;
    s.send(here[static_cast<size_t>((local + 1) % k)]);
    s.recv(here[static_cast<size_t>((local - 1 + k) % k)]);
  } else { // ring all-reduce of this member's S/k across the nodes
    s.bytes = bytes / k / nodes;
    s.send(g.node_members[static_cast<size_t>((node + 1) % nodes)][static_cast<size_t>(local)]);
    s.recv(g.node_members[static_cast<size_t>((node - 1 + nodes) % nodes)][static_cast<size_t>(local)]);
  }
  return s;
}

const bool registered = CollectiveRegistry::add(
    "hierarchical",
    "all-reduce as reduce-scatter inside each node, all-reduce of S/k across nodes on every NIC, all-gather inside",
    CollectiveAlgorithm{"hierarchical", {}, hierarchical_steps, hierarchical_step, {}});

} // namespace
} // namespace stepsim
