// What an algorithm refuses, said the same way by each: the collectives it implements and the
// layout of the group it needs. Each throws std::invalid_argument, which the validation turns into
// bad input naming the group (sim/engine/graph_check.cpp check_collectives).
#pragma once

#include "models/collectives/collective.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {

// An algorithm that runs all-reduce and nothing else.
inline void require_all_reduce(const std::string& algorithm, CollectiveOp op)
{
  if (op != CollectiveOp::AllReduce)
    throw std::invalid_argument("the " + algorithm + " algorithm does not implement " + collective_name(op) +
                                " (all_reduce only)");
}

// An algorithm that splits the buffer over each node's members: every node must hold as many,
// and at least `at_least`.
inline void require_same_members_per_node(const std::string& algorithm, const GroupShape& g, int at_least = 1)
{
  if (g.per_node < at_least)
    throw std::invalid_argument("the " + algorithm + " algorithm needs the same number of members" +
                                (at_least > 1 ? ", at least " + std::to_string(at_least) + "," : "") +
                                " on every node, got " + std::to_string(g.n) + " members on " +
                                std::to_string(g.nodes()) + " nodes");
}

} // namespace stepsim
