// One collective alone on a platform, what nccl-tests measures on a real cluster: the group's
// members each post it once, the engine replays it step by step (or by its closed form where no
// link is shared) and the time is the last member's end. Used by `stepsim collective`.
#pragma once

#include "models/link_calibration.hpp"
#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"

#include <optional>
#include <functional>
#include <string>
#include <vector>

namespace stepsim {

// "all_reduce", "all_gather", "reduce_scatter", "all_to_all" (the ops a benchmark can time).
std::optional<CollectiveOp> benchmark_op(const std::string& name);

// The members of the benchmark group, as GPU indices: the first `gpus` GPUs of the platform, or
// with `per_node` k > 0 the first k GPUs of each node, node after node (k = 1: the inter-node
// network alone; nccl-tests run as 2 nodes x 1 GPU). gpus = 0 means all. Throws InputError naming
// `--gpus` or `--per-node` when there are not that many, or when k does not divide the group.
std::vector<int> benchmark_group(const PlatformSpec& platform, int gpus, int per_node = 0);

// A workload of one group holding `members` in which every member runs one collective `op` of
// `bytes`: every member simulated, or with `reduced` the first alone, standing for the others.
Workload collective_workload(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                             double bytes, bool reduced = false);

// nccl-tests' bus bandwidth factor: busbw = algbw × factor, which makes busbw comparable to the
// link bandwidth whatever the group size (2(n-1)/n for all-reduce, (n-1)/n for the others).
double bus_bandwidth_factor(CollectiveOp op, int n);

// What nccl-tests reports for one iteration of a collective that takes `collective_s` on the
// GPUs, when each of its host threads drives `gpus_per_thread` GPUs (nccl-tests -g, printed as
// "nGpus" in its header; 1 under mpirun with one process per GPU). The thread enqueues the
// collective on its GPUs one after another in one group (nccl-tests src/common.cu startColl:
// ncclGroupStart, one ncclAllReduce per GPU, ncclGroupEnd, which launches each GPU's kernel in
// turn), and times a loop of iterations on the host, so the GPUs' iterations pipeline behind the
// thread's: an iteration takes the longer of the two, the collective or the thread's launches,
// gpus_per_thread x links.group_launch_per_gpu_s (configs/calibration/links.json
// nccl_group_launch). With one GPU per thread its single launch is part of NCCL's base latency
// (the tuner's baseLat) already: the collective's time is returned unchanged.
double nccl_tests_iteration_seconds(double collective_s, int gpus_per_thread, const LinkEfficiency& links);

// Replays one collective on `platform` (built with the achieved link bandwidths, as `stepsim
// run` does) in a child process, and returns its duration in seconds. `algorithm` must accept
// `op` on `members.size()` members (check with CollectiveAlgorithm::steps first).
// NCCL's base latency per collective (configs/calibration/links.json) is added as `run` adds it;
// `analytic_network` times it by its closed form instead of flows (simulation.network_fidelity).
// `protocol`: NCCL's protocol, "auto" (the fastest per size, as NCCL's tuner) or one forced.
// Returns the duration and the algorithm/protocol that ran ("ring/LL", "tree/Simple").
//
// A collective run step by step by every member (a tree, NVLS-tree: not a ring, whose first
// member stands for all) over more than kFlowMembers GPUs on a fat-tree or rail-optimized fabric
// is timed by its closed form (`closed_form`): flow by flow it takes minutes (every member's every
// chunk is a flow; a 1,024-GPU tree on 2:1 uplinks did not end a 64 MB size in 10 minutes). Alone
// on such a fabric its flows share only the members' own links and the fabric's thinned uplinks,
// which the closed form shares as the flows do (uncontended_seconds, GroupShape::uplinks_of_member):
// within 3 % of the flows on 512 GPUs of NVLS-tree, 3-11 % on 128 GPUs of tree on a non-blocking
// fabric; on oversubscribed uplinks see tests/test_collective_uplinks.cpp.
inline constexpr size_t kFlowMembers = 256;
// A fabric whose only shared links are the members' own and its leaves' (and pods') uplinks: a
// fat tree or a rail-optimized fabric, oversubscribed or not, where the closed form above stands
// for the flows. Not a torus, dragonfly, Wi-Fi or custom fabric.
bool closed_form_fabric(const PlatformSpec& platform);
struct CollectiveTime {
  double seconds = 0;
  std::string algorithm;
  bool closed_form = false; // timed by its closed form although flows were asked for (above)
};
CollectiveTime time_collective(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                               double bytes, const std::string& algorithm, bool analytic_network = false,
                               const std::string& protocol = "auto");
// The same for each of `sizes`, handed to `row` (its index in `sizes`, its time) in the order of
// `sizes` as each is timed: one child process builds the platform once and forks a grandchild per
// size (SimGrid runs one engine per process), `jobs` of them at a time; building a 1,024-GPU
// platform for every size took a tenth of nccl-tests' table. The times do not depend on `jobs`.
// Throws as time_collective does, at the first size that fails.
void time_collectives(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                      const std::vector<double>& sizes, const std::string& algorithm, bool analytic_network,
                      const std::string& protocol, const std::function<void(size_t, const CollectiveTime&)>& row,
                      int jobs = 1);
std::vector<CollectiveTime> time_collectives(const PlatformSpec& platform, const std::vector<int>& members,
                                             CollectiveOp op, const std::vector<double>& sizes,
                                             const std::string& algorithm, bool analytic_network = false,
                                             const std::string& protocol = "auto", int jobs = 1);

// The platform of a preset (configs/platforms/NAME.json) or of a platform file, both
// {"platform": {...}}, as a scenario whose only job is to carry it (`stepsim collective
// --preset / --platform`); `nodes` > 0 sets the node count of its first node group, and `sets`
// (path=value, as --set) its platform.* and simulation.* fields after that. Throws InputError
// naming the option or the platform's JSON path.
Scenario platform_scenario(const std::string& preset, const std::string& platform_file, int nodes,
                           const std::vector<std::string>& sets = {});
// The names of configs/platforms/*.json.
std::vector<std::string> platform_presets();

} // namespace stepsim
