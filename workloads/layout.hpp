// Where each rank sits in the parallel plan. Megatron's order: tensor innermost, then context,
// then data, pipeline outermost, so that tensor-parallel peers share a node.
#pragma once

#include "sim/scenario.hpp"

namespace stepsim {

struct RankCoord {
  int tensor = 0, context = 0, data = 0, pipeline = 0;
};

struct Layout {
  int tensor = 1, context = 1, data = 1, pipeline = 1;

  explicit Layout(const ParallelSpec& p) : tensor(p.tensor), context(p.context), data(p.data), pipeline(p.pipeline) {}
  int world_size() const { return tensor * context * data * pipeline; }
  int rank_of(const RankCoord& c) const { return c.tensor + tensor * (c.context + context * (c.data + data * c.pipeline)); }
  RankCoord coord_of(int rank) const
  {
    RankCoord c;
    c.tensor   = rank % tensor;
    rank /= tensor;
    c.context  = rank % context;
    rank /= context;
    c.data     = rank % data;
    c.pipeline = rank / data;
    return c;
  }
};

} // namespace stepsim
