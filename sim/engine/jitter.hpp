// Run-to-run noise of compute kernels (ReplayOptions::jitter_sigma): each compute task is
// multiplied by exp(sigma·z - sigma²/2), z ~ N(0,1), so the factor's mean is 1.
#pragma once

#include "sim/core/task_graph.hpp"

namespace stepsim::engine {

// The factor of task `task` of global rank `rank`, drawn from (seed, rank, task) alone.
double jitter_factor(unsigned seed, double sigma, int rank, TaskId task);

} // namespace stepsim::engine
