// Where each rank sits in the parallel plan, numbered by parallelism.rank_order
// (sim/core/rank_order.hpp). Megatron's default order puts tensor innermost, then context, then data,
// pipeline outermost, so that tensor-parallel peers share a node. Expert layers number the same
// ranks over (tensor, expert, expert-data, pipeline), as Megatron's expert RankGenerator does.
#pragma once

#include "sim/core/rank_order.hpp"
#include "sim/core/scenario.hpp"

#include <vector>

namespace stepsim {

struct RankCoord {
  int tensor = 0, context = 0, data = 0, pipeline = 0;
};

struct Layout {
  int tensor = 1, context = 1, data = 1, pipeline = 1;

  explicit Layout(const ParallelSpec& p)
      : tensor(p.tensor), context(p.context), data(p.data), pipeline(p.pipeline), dense_(stepsim::dense_grid(p)),
        expert_(stepsim::expert_grid(p))
  {
  }
  int world_size() const { return tensor * context * data * pipeline; }
  int rank_of(const RankCoord& c) const
  {
    AxisCoords a{};
    a[static_cast<size_t>(Axis::Tensor)]   = c.tensor;
    a[static_cast<size_t>(Axis::Context)]  = c.context;
    a[static_cast<size_t>(Axis::Data)]     = c.data;
    a[static_cast<size_t>(Axis::Pipeline)] = c.pipeline;
    return dense_.rank_of(a);
  }
  RankCoord coord_of(int rank) const
  {
    const AxisCoords a = dense_.coords_of(rank);
    return {a[static_cast<size_t>(Axis::Tensor)], a[static_cast<size_t>(Axis::Context)], a[static_cast<size_t>(Axis::Data)],
            a[static_cast<size_t>(Axis::Pipeline)]};
  }
  // Dense layers' groups: the ranks that differ from `rank` only along `varying`, in ring order.
  std::vector<int> group(int rank, std::initializer_list<Axis> varying) const { return dense_.group(rank, varying); }
  // Expert layers' numbering: Tensor, Expert, Data (= expert-data), Pipeline.
  const RankGrid& experts() const { return expert_; }
  const RankGrid& dense() const { return dense_; }

private:
  RankGrid dense_, expert_;
};

} // namespace stepsim
