// The workload as the engine sees it: per simulated rank, a graph of tasks (Boost.Graph) whose
// edges are "must finish before". Plain data: the workload fills it, the cost models put seconds
// on its compute work, the replay engine runs it. Nothing here knows what a transformer is.
#pragma once

#include "sim/kernel.hpp"

#include <boost/graph/adjacency_list.hpp>

#include <array>

#include <cstdint>
#include <string>
#include <vector>

namespace stepsim {

enum class TaskKind : uint8_t { Compute, Send, Recv, Collective };

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
  Context,
  Expert,
};
inline constexpr int kStreamCount = 9;
const char* stream_name(Stream s);
inline bool is_communication(Stream s) { return s != Stream::Compute; }

enum class Pass : uint8_t { Forward, Backward, BackwardInput, BackwardWeight, Recompute, Optimizer, Other };
const char* pass_name(Pass p);

enum class CollectiveOp : uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce };
const char* collective_name(CollectiveOp op);

struct Task {
  TaskKind kind   = TaskKind::Compute;
  Stream stream   = Stream::Compute;
  Pass pass       = Pass::Other;
  int micro_batch = -1;
  int chunk       = 0;  // model chunk (virtual stage) on this rank
  int work        = -1; // Compute: index into Workload::works
  double bytes    = 0;  // Send/Recv: payload; Collective: each rank's buffer (the whole tensor)
  int peer        = -1; // Send/Recv: global rank on the other side
  int tag         = 0;  // Send/Recv: same on both sides
  int group       = -1; // Collective: index into Workload::groups
  CollectiveOp op = CollectiveOp::AllReduce;
};

using TaskGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Task>;
using TaskId    = TaskGraph::vertex_descriptor;

// A compute item shared by every task that runs the same kernels (e.g. one layer's forward).
struct Work {
  std::string name;
  std::vector<Kernel> kernels;
  double seconds = 0; // filled by the cost model
  double flops() const;
};

// A communicator: the ranks of one collective group, in ring order.
struct Group {
  std::string name;
  std::vector<int> ranks;
};

struct RankProgram {
  int rank  = 0;
  int stage = 0; // pipeline stage
  TaskGraph graph;
};

struct Workload {
  int world_size = 0;
  int stages     = 1;
  std::vector<Group> groups;
  std::vector<Work> works;
  std::vector<RankProgram> ranks; // the simulated ranks, in increasing rank order
};

// The ranks a replay touches: the simulated ones, their peers and the members of their groups.
std::vector<bool> ranks_in_use(const Workload& w);

// Builds a graph stream by stream: each added task depends on the previous task of its stream.
class ProgramBuilder {
public:
  explicit ProgramBuilder(RankProgram& program) : program_(program) { last_.fill(kNone); }
  TaskId add(const Task& task);
  void depends(TaskId later, TaskId earlier);
  static constexpr TaskId kNone = static_cast<TaskId>(-1);

private:
  RankProgram& program_;
  std::array<TaskId, kStreamCount> last_;
};

} // namespace stepsim
