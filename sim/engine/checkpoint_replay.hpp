// A checkpoint written to shared storage, as Megatron-Core's distributed checkpointing does it
// (megatron/core/dist_checkpointing/strategies/filesystem_async.py, FileSystemWriterAsync):
// every GPU first copies what it writes to host memory (prepare_write_data: the tensors are
// staged on the CPU), then each node's writer processes send it to storage
// (write_preloaded_data). A synchronous save keeps training waiting for both; an asynchronous one
// (--async-save) only for the copy to host memory, the write going on behind the next steps. A
// gathered checkpoint (PyTorch FSDP's FULL_STATE_DICT with rank0_only) first gathers the whole
// state onto one GPU, which then writes it alone.
#pragma once

#include "sim/engine/host_side_platform.hpp"

#include <vector>

namespace stepsim {

struct CheckpointReplayPlan {
  HostSideSpec platform;
  std::vector<std::vector<double>> bytes; // per node, per GPU: what it writes
  // Gathered: what reaches the writing GPU over the training network first, and that network's
  // bandwidth into the writer's node (its NICs together); both 0 when sharded.
  double gather_bytes = 0, gather_Bps = 0;
};

struct CheckpointReplayResult {
  double gather_s   = 0; // gathered: onto the writing GPU
  double snapshot_s = 0; // every GPU's copy to host memory, until the last one ends
  double write_s    = 0; // from the end of the snapshot until the last byte is in storage
};

struct CheckpointReplay {
  CheckpointReplay(simgrid::s4u::NetZone* root, const CheckpointReplayPlan& plan);
  CheckpointReplayResult result() const { return result_; }

private:
  CheckpointReplayResult result_;
};

} // namespace stepsim
