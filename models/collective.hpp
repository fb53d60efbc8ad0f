// A collective algorithm: how the members of a group exchange data, as a sequence of steps. In
// step k, member i sends `bytes` to member `send_to` and receives from member `recv_from`; a step
// starts when the member's previous send finished and its previous receive arrived. Registered by
// name ("ring", ...); the engine turns each step into a SimGrid transfer.
#pragma once

#include "sim/registry.hpp"
#include "sim/task_graph.hpp"

#include <functional>

namespace stepsim {

struct CollectiveStep {
  int send_to   = -1; // member index; -1 = no send in this step
  int recv_from = -1; // member index; -1 = no receive in this step
  double bytes  = 0;
};

struct CollectiveAlgorithm {
  // Steps of a collective over n members; `bytes` is each member's whole buffer.
  std::function<int(CollectiveOp op, int n)> steps;
  std::function<CollectiveStep(CollectiveOp op, int n, int member, int step, double bytes)> step;
};

using CollectiveRegistry = Registry<CollectiveAlgorithm>;

// Bytes one member sends in the whole collective (for tests and reports).
double bytes_sent_per_member(const CollectiveAlgorithm& a, CollectiveOp op, int n, double bytes);

} // namespace stepsim
