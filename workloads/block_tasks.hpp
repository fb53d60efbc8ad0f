// What the lowering of a layer block that is more than "compute between tensor-parallel
// collectives" (context-parallel ring attention, a MoE layer's expert all-to-alls) adds to the
// rank being lowered. workloads/lower.cpp implements it for the pass and micro-batch at hand; each
// call adds one task after `after` (ProgramBuilder::kNone = no extra dependency) on its stream.
#pragma once

#include "sim/core/task_graph.hpp"

namespace stepsim {

class BlockTasks {
public:
  virtual TaskId compute(int work, TaskId after)                                                      = 0;
  virtual TaskId collective(Stream stream, CollectiveOp op, int group, double bytes, TaskId after)      = 0;
  virtual TaskId point_to_point(TaskKind kind, Stream stream, int peer, int tag, double bytes, TaskId after) = 0;
  virtual void depends(TaskId later, TaskId earlier)                                                    = 0;

protected:
  ~BlockTasks() = default;
};

} // namespace stepsim
