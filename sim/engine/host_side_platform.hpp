// The host side of a training job as its own small SimGrid platform: each node's CPU (its cores,
// its memory, the host links of its GPUs, its local NVMe disks) and a shared storage system that
// every node reaches over a link of its own. The data loader (input_replay.hpp) and checkpoint
// writes (checkpoint_replay.hpp) run on it. It is built beside, not inside, the training fabric:
// storage traffic runs on a cluster's front-end or storage network (NVIDIA's DGX SuperPOD
// reference architecture gives storage its own fabric, separate from the compute InfiniBand).
//
//            storage ── shared link (platform.storage.bandwidth)
//               │
//     ┌─────────┴─────────┐          star zone: a node's route to storage is its own link,
//  node link          node link      then the shared one
//     │                   │
//   cpu ── disk (nvme)   cpu ...     full zone per node: gateway = the CPU
//   │  ╲
//  gpu0 gpu1 ...  each over the node's host memory, then its own host (PCIe) link
#pragma once

#include <simgrid/s4u.hpp>

#include <string>
#include <vector>

namespace stepsim {

struct HostSideNode {
  int cores = 1;          // CPU cores; each CPU-second of work is one flop on one core
  int gpus  = 1;          // GPUs of the node that take part
  double host_link_Bps       = 0; // per GPU, per direction
  double host_link_latency_s = 0;
  double memory_Bps          = 0; // the node's host memory, every GPU's copies together
  double nvme_Bps = 0, nvme_latency_s = 0; // 0 bandwidth: no local disk
  double storage_link_Bps = 0;            // its link to the storage network
};

struct HostSideSpec {
  std::vector<HostSideNode> nodes;
  double storage_Bps       = 0; // 0: no shared storage
  double storage_latency_s = 0;
};

struct HostSidePlatform {
  simgrid::s4u::Host* storage = nullptr;
  std::vector<simgrid::s4u::Host*> cpu, disk; // per node (disk nullptr without one)
  std::vector<std::vector<simgrid::s4u::Host*>> gpus; // per node, per GPU
};

// Builds one copy of the host side as a star zone under `parent`, its names starting with
// `prefix`, so that several independent copies can run in one engine.
HostSidePlatform build_host_side(simgrid::s4u::NetZone* parent, const HostSideSpec& spec, const std::string& prefix);

// A blocking transfer of `bytes` (rounded up to whole bytes) from one host to another.
void transfer(simgrid::s4u::Host* from, simgrid::s4u::Host* to, double bytes);

} // namespace stepsim
