#include "models/collective.hpp"

namespace stepsim {

double bytes_sent_per_member(const CollectiveAlgorithm& a, CollectiveOp op, int n, double bytes)
{
  double total = 0;
  for (int k = 0; k < a.steps(op, n); ++k) {
    CollectiveStep s = a.step(op, n, 0, k, bytes);
    if (s.send_to >= 0)
      total += s.bytes;
  }
  return total;
}

} // namespace stepsim
