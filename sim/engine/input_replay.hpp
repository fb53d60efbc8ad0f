// The data loader beside the training step, as PyTorch's DataLoader runs it
// (torch/utils/data/dataloader.py, _MultiProcessingDataLoaderIter): `workers` processes per
// loading rank, each building whole batches from the indices handed to it in turn; at most
// prefetch_factor × workers batches handed out and not yet taken by the training loop
// (_try_put_index: "_tasks_outstanding < self._prefetch_factor * self._num_workers"). A worker
// reads its batch's samples from the source, decodes them on one CPU core, and the batch is
// copied to the GPU over the host link (pin_memory, then the copy), in order.
//
// The training loop takes micro-batch j of each step when the replayed step reaches the forward
// of that micro-batch on the first pipeline stage; a batch that is not ready delays the rest of
// the step by as long as it is late, and data-parallel replicas wait for each other at the end
// of every step (the gradient reduction). Several steps are replayed from an empty queue and the
// last one is the steady state.
#pragma once

#include "sim/engine/host_side_platform.hpp"

#include <memory>
#include <vector>

namespace stepsim {

struct InputReplayPlan {
  HostSideSpec platform;
  struct Loader {
    int node = 0; // index into platform.nodes
    int gpu  = 0; // the loading rank's GPU on that node
  };
  std::vector<Loader> loaders; // one per data- and context-parallel coordinate of the first stage
  int workers         = 2;
  int prefetch_factor = 2;
  bool from_storage   = false; // else each node's local disk
  int micro_batches   = 1;     // per step, per loader
  double read_bytes = 0, decode_cpu_s = 0, device_bytes = 0; // per micro-batch
  std::vector<double> need_s; // per micro-batch: when the step reaches its forward, from the step's start
  double step_s = 0;          // the step as replayed without a data loader
  int steps          = 4; // replayed from an empty queue
  int measured_steps = 1; // the last ones, averaged: the steady state
};

struct InputReplayResult {
  double step_s       = 0; // the steady-state step with the data loader
  double input_path_s = 0; // the loader alone: how long it takes to supply one step, never waited for
};

// Runs in the engine already created; builds two copies of the host side under `root`: one paced
// by the training step and one free-running.
struct InputReplay {
  InputReplay(simgrid::s4u::NetZone* root, const InputReplayPlan& plan);
  InputReplayResult result() const;

  struct Loader; // per loading rank: what was decoded, copied and taken
private:
  const InputReplayPlan& plan_;
  std::vector<double> paced_step_ends_, free_step_ready_;
  std::vector<std::shared_ptr<Loader>> loaders_;
  void start(const HostSidePlatform& platform, bool paced);
};

} // namespace stepsim
