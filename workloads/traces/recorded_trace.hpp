// A training step as a profiler recorded it, one file per rank: the GPU work it saw, what each
// piece waited for, and the communication with its size and communicator. Trace formats read
// their files into this plain data (kineto_trace.cpp: PyTorch profiler's Chrome trace;
// chakra_trace.cpp: Chakra execution traces), each registered by name; trace_workload lowers it
// into stepsim's task graphs, keeping or re-timing the compute, for the network model to re-time
// the communication (sim/trace_replay.hpp).
#pragma once

#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "sim/core/kernel.hpp"
#include "sim/core/registry.hpp"
#include "sim/core/task_graph.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stepsim {

enum class RecordedKind : uint8_t {
  Compute,    // a kernel, copy or set on the GPU (or a zero-time node that only orders others)
  Collective, // a collective of a communicator
  Send,
  Recv,
};

struct RecordedOp {
  RecordedKind kind = RecordedKind::Compute;
  std::string name;
  // How error messages name it in its file: `traceEvents[12] ("ncclDevKernel_AllReduce...")` or
  // `node 7 ("all_reduce")`.
  std::string where;
  double start_s = 0; // on the trace's clock
  double seconds = 0; // recorded duration; < 0: none recorded (timed by the kernel model)
  // Compute: the kernel's shape for the kernel model, where the trace tells it (a GEMM's
  // dimensions, an attention's, a node's FLOPs or bytes); none: re-timed by memory bandwidth.
  std::optional<Kernel> kernel;
  std::string precision = "bf16"; // of `kernel`
  // Collective: what it does, each member's whole buffer in bytes (stepsim's Task::bytes), and its
  // communicator: a name the same on every member, and its members' ranks where the trace lists
  // them (empty: the ranks whose traces use that name).
  CollectiveOp op = CollectiveOp::AllReduce;
  double bytes    = 0;
  std::string group;
  std::vector<int> group_ranks;
  // Send/Recv: the rank on the other side, and a tag matched on both sides (< 0: the k-th send from
  // a to b meets the k-th receive on b from a).
  int peer = -1;
  long long tag = -1;
  // Indices into the rank's ops of those this one waits for (besides nothing else: a stream's order
  // is listed here too).
  std::vector<size_t> after;
};

struct RecordedRank {
  std::string file;
  std::string format;   // the registered format that read it
  int stated_rank = -1; // the rank the file says it is (-1: it does not say)
  long long stated_world = -1; // the job's rank count the file states (-1: it does not say)
  std::vector<RecordedOp> ops;
  // The ops carry start times on one clock (Kineto always; Chakra when its nodes have
  // start_time_micros): the time a stream waited for the CPU is kept as idle.
  bool timed = true;
  // The host's time per kernel launch where the trace has the launch calls (Kineto's cuda_runtime
  // events): the median gap between one thread's consecutive launches, over those with no
  // synchronising call between them, seconds; -1: none recorded. It is what
  // simulation.host_launch_overhead takes (sim/engine/compute.cpp), from the user's own job.
  double host_launch_s = -1;
  long long launch_gaps = 0; // the gaps that median is over
};

// A trace format: whether a file's first bytes are its own, and how to read one rank's file.
// Readers throw InputError naming the file and the event or node at fault.
struct TraceFormat {
  std::function<bool(const std::string& head)> recognises;
  std::function<RecordedRank(const std::string& file)> read;
};
using TraceFormatRegistry = Registry<TraceFormat>;

// Reads one file per rank, the format told by each file's content. The files are the ranks in the
// order given, or, where every file states its rank (Kineto's distributedInfo.rank, Chakra's
// NAME.RANK.et), in that order. Each rank's ops come out in an order where every op follows those
// it waits for; a cycle is an InputError naming an op on it.
std::vector<RecordedRank> read_traces(const std::vector<std::string>& files);

// How compute is timed in the replay. Recorded durations are kept where a rank's recorded device
// is null or its target device itself; otherwise a kernel with a shape takes its recorded duration
// × (kernel model time on the target / on the recorded device), and one without a shape its
// recorded duration × (memory bandwidth of the recorded device / of the target). An op without a
// recorded duration takes the kernel model's time on the target (0 without a shape).
struct TraceTiming {
  std::vector<const Device*> device_of_rank;      // target, one per rank
  std::vector<const Device*> recorded_on_of_rank; // one per rank, or empty: durations kept
  const ComputeModel* model = nullptr;
};

// The seconds a compute op takes on `target` when recorded on `recorded` (the rule above).
double compute_op_seconds(const RecordedOp& op, const Device& target, const Device* recorded, const ComputeModel* model);

// The recorded ranks as stepsim's task graphs (full fidelity, rank i is workload.ranks[i]): compute
// ops as compute tasks on the compute stream, the time a stream waited for the CPU before an op as
// an idle task on the host stream (no compute, no communication), collectives on the data stream
// with one Group per communicator, sends and receives matched pair by pair. Throws InputError for a
// communicator whose members disagree, a peer or member that is no rank, a send without its
// receive. `op_of_task[r][t]` is the op of task t of rank r (-1 for an idle task).
struct TraceWorkload {
  Workload workload;
  std::vector<std::vector<long long>> op_of_task;
};
TraceWorkload trace_workload(const std::vector<RecordedRank>& ranks, const TraceTiming& timing);

// Recorded figures of a rank: its span from its first op's start to its last op's end, and each
// task's recorded interval on that span's clock (idle tasks: from the end of what the op waited for
// to its start), indexed like the workload's tasks.
struct RecordedTimeline {
  double step_s = 0;
  std::vector<std::pair<double, double>> tasks;
};
RecordedTimeline recorded_timeline(const RecordedRank& rank, const TraceWorkload& w, size_t rank_index);

} // namespace stepsim
