// The workload as the engine sees it: per simulated rank, a graph of tasks (Boost.Graph) whose
// edges are "must finish before". Plain data: the workload fills it, the cost models put seconds
// on its compute work, the replay engine runs it. Nothing here knows what a transformer is.
#pragma once

#include "sim/core/kernel.hpp"
#include "sim/core/nccl_env.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>

#include <array>

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stepsim {

// HostCopy: bytes between the rank's GPU and its node's CPU memory over the host link (PCIe),
// towards the host on Stream::DeviceToHost, towards the GPU on Stream::HostToDevice.
enum class TaskKind : uint8_t { Compute, Send, Recv, Collective, HostCopy };

// Streams of one rank. Tasks on one stream run one after another in the order the workload gave;
// tasks on different streams may overlap.
enum class Stream : uint8_t {
  Compute,
  Tensor,       // tensor-parallel collectives
  Data,         // data-parallel gradient collectives
  SendNext,     // pipeline point-to-point, towards the next stage
  SendPrev,
  RecvPrev,
  RecvNext,
  Context,     // context-parallel ring: K/V (forward) and dK/dV (backward) sent to the next rank;
               // Ulysses' all-to-alls of Q, K, V and the attention's output (and their gradients)
  Expert,      // expert-parallel token all-to-alls
  ContextRecv, // context-parallel ring: receives from the previous rank, posted with the send
  ParamGather,  // ZeRO-3 / FSDP parameter all-gathers, on their own stream as FSDP issues them
  HostToDevice, // copy engines over the host link: cached parameters, offloaded optimizer results
  DeviceToHost,
  Host,         // work of the node's CPU for this rank (ZeRO-Offload's optimizer step)
  TensorOverlap, // tensor-parallel collectives overlapped with the GEMMs (Transformer Engine's userbuffers)
};
inline constexpr int kStreamCount = 15;
const char* stream_name(Stream s);
// CPU work is neither GPU compute nor communication: the GPU idles through it.
inline bool is_communication(Stream s) { return s != Stream::Compute && s != Stream::Host; }

enum class Pass : uint8_t { Forward, Backward, BackwardInput, BackwardWeight, Recompute, Optimizer, Other };
const char* pass_name(Pass p);

enum class CollectiveOp : uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce };
const char* collective_name(CollectiveOp op);

// 32 bytes: a full-fidelity replay holds millions (the default scenario 15 million), so the chunk
// and the enumerations share one word (in this order: a one-byte enumeration's bits may not
// cross a byte).
struct Task {
  int chunk : 17      = 0; // model chunk (virtual stage) on this rank, below kMaxTaskChunks
  TaskKind kind : 3   = TaskKind::Compute;
  Pass pass : 3       = Pass::Other;
  Stream stream : 4   = Stream::Compute;
  CollectiveOp op : 3 = CollectiveOp::AllReduce;
  int micro_batch     = -1;
  int work            = -1; // Compute: index into Workload::works
  int peer            = -1; // Send/Recv: global rank on the other side
  int tag             = 0;  // Send/Recv: same on both sides
  int group           = -1; // Collective: index into Workload::groups
  double bytes        = 0;  // Send/Recv: payload; Collective: each rank's buffer (the whole tensor)
};
static_assert(sizeof(Task) == 32);
// The chunks a task can name: parallelism.virtual_stages is at most kMaxLayers (65,536).
inline constexpr int kMaxTaskChunks = 1 << 16;

// Each kind of task a lowering creates, filled in one place. micro_batch and chunk say which
// pipeline pass a task belongs to (-1 and 0 outside any).
Task compute_task(int work, Pass pass, int micro_batch = -1, int chunk = 0, Stream stream = Stream::Compute);
Task collective_task(Stream stream, CollectiveOp op, int group, double bytes, Pass pass = Pass::Other,
                     int micro_batch = -1, int chunk = 0);
Task point_to_point_task(TaskKind kind, Stream stream, int peer, int tag, double bytes, Pass pass, int micro_batch,
                         int chunk);
Task host_copy_task(Stream stream, double bytes, Pass pass, int micro_batch, int chunk);

// A rank's tasks once lowered, frozen as a compressed sparse row graph: each task's successors
// side by side, 4 bytes an edge (32-bit task numbers and edge offsets: a rank holds far fewer than
// 4 billion of either), out-edges only. An adjacency list allocates every edge on its own
// (Boost keeps even an empty edge property behind a pointer), and a bidirectional one keeps each
// edge three times: the graphs of a full-fidelity replay took about 250 bytes a task, and the
// default scenario at full fidelity holds 15 million tasks and 30 million edges (1,024 ranks of
// about 14,800 tasks, `stepsim graph`). What the replay needs of the in-edges (in-degrees,
// whether a task waits for the one before it) the scheduler derives once
// (sim/engine/scheduler.hpp).
using TaskGraph = boost::compressed_sparse_row_graph<boost::directedS, Task, boost::no_property, boost::no_property,
                                                     uint32_t, uint32_t>;
using TaskId    = TaskGraph::vertex_descriptor;

// A compute item shared by every task that runs the same kernels (e.g. one layer's forward).
struct Work {
  std::string name;
  std::vector<Kernel> kernels;
  double seconds = 0; // filled by the cost model
  // Host (CPU) time to issue the work's kernels (the device calibration's host_launch_s per
  // launch), filled with `seconds`; the replay lets no kernel finish before the host issued it.
  double host_seconds = 0;
  // > 0: the work runs on the node's CPU, bandwidth-bound at this many bytes per second (its
  // kernels are memory kernels); cost models time it from this, not from the GPU.
  double host_memory_Bps = 0;
  // The host waits for the GPU once this work's kernels have run: it needs a value they compute
  // (a device-to-host copy it synchronises on), so it issues nothing after them until then.
  bool synchronizes_host = false;
  double flops() const;
};

// A communicator: the ranks of one collective group, in ring order.
struct Group {
  std::string name;
  std::vector<int> ranks;
  // What collective algorithms that follow the hardware need (models/collectives/collective.hpp GroupShape),
  // filled by the driver from the platform: the node of each member (empty = every member on a
  // node of its own), whether every member's node has an NVSwitch that reduces in the switch
  // (NVLS, NVLS-tree), and NCCL's channel count (simulation.nccl_channels; 0 = NCCL's default).
  std::vector<int> node_of_member;
  bool in_switch_reduction = false;
  int channels             = 0;
  // Reduced fidelity: the groups of the ranks the simulated members stand for, which run the
  // same collectives at the same time (each in member order; this group is not among them). Their
  // flows are replayed as shadows where they share links with the simulated ranks'
  // (sim/engine/shadows.hpp). Empty at full fidelity.
  std::vector<std::vector<int>> copies;
  // The fabric between the members' nodes reduces in its switches (platform.network.sharp), filled
  // by the driver with node_of_member. Last, so that the positional initialisers stay valid.
  bool in_network_reduction = false;
  // The rate at which the members' NVSwitches reduce what one GPU pushes in, bytes per second
  // (the slowest node's; 0: links.json's nvswitch.in_switch_reduction), filled with it.
  double in_switch_reduction_Bps = 0;
  // Every member's node joins each two of its GPUs by a link of their own (an xGMI mesh), filled
  // by the driver with node_of_member.
  bool full_mesh = false;
  // All members on one such node, whose RCCL runs its MSCCL programs (intra_node.msccl).
  bool msccl = false;
  // What the platform's NCCL_ALGO and NCCL_PROTO leave to NCCL's tuner (platform.nccl_env),
  // filled by the driver with node_of_member.
  NcclChoices nccl{};
};

struct RankProgram {
  int rank  = 0;
  int stage = 0; // pipeline stage
  // Fraction by which this rank's compute slows while one of its collectives runs on a
  // communication stream (NCCL kernels take SMs and memory bandwidth); 0 = no interference.
  double comm_compute_interference = 0;
  TaskGraph graph;
  // Per lowered step, the task that completes its weight update (set only when the workload
  // lowers several steps, see Workload::steps).
  std::vector<TaskId> step_ends;
};

struct Workload {
  int world_size = 0;
  int stages     = 1;
  std::vector<Group> groups;
  std::vector<Work> works;
  std::vector<RankProgram> ranks; // the simulated ranks, in increasing rank order
  // Schedules without a pipeline flush (PipeDream) never start a step from an empty pipeline: the
  // lowering lays out `steps` consecutive steps, and the step time is that of step
  // `measured_step`, in steady state, from the end of the previous step's weight update to the
  // end of its own (RankProgram::step_ends). Flushing schedules lower one step.
  int steps         = 1;
  int measured_step = 0;
  // The host waits for the GPU after each pipeline send or receive
  // (FrameworkProfile::pipeline_transfer_synchronizes_host).
  bool pipeline_transfers_sync_host = false;
  // Reduced fidelity: for each transfer of a simulated rank, keyed by (source, destination), the
  // same transfer between the ranks that the two stand for (their images under the plan's
  // symmetry), without those replayed anyway (an end that is simulated). A host copy is keyed
  // (rank, -1) and lists (image, -1). Shadows, as Group::copies.
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> transfer_copies;
  // Reduced fidelity above kShadowedWorld ranks: no copies are listed (the platform would have to
  // hold every rank), so shadows replay only the simulated ranks' own groups.
  bool copies_left_out = false;
  // Reduced fidelity on a platform where one GPU's flows may take bandwidth from another's
  // (workloads/lower.cpp peers_may_contend); false: the replay need not look for shadows.
  bool peers_may_contend = false;
};

// The largest world whose reduced replay lists every copy (workloads/lower.cpp).
inline constexpr int kShadowedWorld = 2048;

// The ranks a replay touches: the simulated ones, their peers, the members of their groups and the
// ranks their shadow flows may start from or reach (Group::copies, Workload::transfer_copies).
std::vector<bool> ranks_in_use(const Workload& w);

// A collective as the cost models see it: which group runs it, what it does and on how many bytes.
struct CollectiveKind {
  int group       = -1;
  CollectiveOp op = CollectiveOp::AllReduce;
  double bytes    = 0;
  bool operator==(const CollectiveKind&) const = default;
};
// The distinct collectives of the workload's tasks, in the order they first occur (rank by rank,
// task by task). A rank repeats the same few thousands of times (a layer's collectives, once per
// micro-batch): the checks and the closed forms that look at each kind once take them from here.
std::vector<CollectiveKind> distinct_collectives(const Workload& w);

// Builds a graph stream by stream: each added task depends on the previous task of its stream.
// It goes on from the tasks the program already has, and freezes them all into the program's
// graph when finished (or destroyed).
class ProgramBuilder {
public:
  explicit ProgramBuilder(RankProgram& program);
  ~ProgramBuilder();
  ProgramBuilder(const ProgramBuilder&)            = delete;
  ProgramBuilder& operator=(const ProgramBuilder&) = delete;

  TaskId add(const Task& task);
  // add, and make the task wait for `after` as well as for its stream (kNone: the stream only).
  TaskId add(const Task& task, TaskId after);
  void depends(TaskId later, TaskId earlier);
  // The tasks so far, one of them, and whether `later` already waits for `earlier`.
  size_t size() const { return tasks_.size(); }
  const Task& task(TaskId v) const { return tasks_[v]; }
  bool waits_for(TaskId later, TaskId earlier) const;
  // Writes them into the program's graph; the builder takes nothing more.
  void finish();
  static constexpr TaskId kNone = static_cast<TaskId>(-1);

private:
  RankProgram& program_;
  // Flat while building: the tasks, and the edges in the order they were added (an adjacency
  // list allocated each task's successors on their own: most of a reduced run's lowering time
  // went to malloc and free). Each edge also links to the previous edge into the same task, for
  // waits_for; indices + 1, 0 for none.
  std::vector<Task> tasks_;
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::vector<uint32_t> last_in_;     // per task
  std::vector<uint32_t> previous_in_; // per edge
  std::array<TaskId, kStreamCount> last_;
  bool finished_ = false;
};

} // namespace stepsim
