#include "sim/core/task_graph.hpp"

#include <fmt/format.h>

#include <exception>
#include <stdexcept>
#include <unordered_set>

namespace stepsim {

const char* stream_name(Stream s)
{
  switch (s) {
  case Stream::Compute: return "compute";
  case Stream::Tensor: return "tensor";
  case Stream::Data: return "data";
  case Stream::SendNext: return "send_next";
  case Stream::SendPrev: return "send_prev";
  case Stream::RecvPrev: return "recv_prev";
  case Stream::RecvNext: return "recv_next";
  case Stream::Context: return "context";
  case Stream::Expert: return "expert";
  case Stream::ContextRecv: return "context_recv";
  case Stream::ParamGather: return "param_gather";
  case Stream::HostToDevice: return "host_to_device";
  case Stream::DeviceToHost: return "device_to_host";
  case Stream::Host: return "host";
  case Stream::TensorOverlap: return "tensor_overlap";
  }
  return "?";
}

const char* pass_name(Pass p)
{
  switch (p) {
  case Pass::Forward: return "forward";
  case Pass::Backward: return "backward";
  case Pass::BackwardInput: return "backward_input";
  case Pass::BackwardWeight: return "backward_weight";
  case Pass::Recompute: return "recompute";
  case Pass::Optimizer: return "optimizer";
  case Pass::Other: return "other";
  }
  return "?";
}

const char* collective_name(CollectiveOp op)
{
  switch (op) {
  case CollectiveOp::AllReduce: return "all_reduce";
  case CollectiveOp::AllGather: return "all_gather";
  case CollectiveOp::ReduceScatter: return "reduce_scatter";
  case CollectiveOp::AllToAll: return "all_to_all";
  case CollectiveOp::Broadcast: return "broadcast";
  case CollectiveOp::Reduce: return "reduce";
  }
  return "?";
}

double Work::flops() const
{
  double total = 0;
  for (const auto& k : kernels)
    total += k.flops();
  return total;
}

std::vector<bool> ranks_in_use(const Workload& w)
{
  std::vector<bool> used(static_cast<size_t>(w.world_size), false);
  for (const auto& g : w.groups) {
    for (int r : g.ranks)
      used.at(static_cast<size_t>(r)) = true;
    for (const auto& copy : g.copies)
      for (int r : copy)
        used.at(static_cast<size_t>(r)) = true;
  }
  for (const auto& [key, copies] : w.transfer_copies)
    for (const auto& [src, dst] : copies) {
      used.at(static_cast<size_t>(src)) = true;
      if (dst >= 0)
        used.at(static_cast<size_t>(dst)) = true;
    }
  for (const auto& program : w.ranks) {
    used.at(static_cast<size_t>(program.rank)) = true;
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph)))
      if (program.graph[v].peer >= 0)
        used.at(static_cast<size_t>(program.graph[v].peer)) = true;
  }
  return used;
}

std::vector<CollectiveKind> distinct_collectives(const Workload& w)
{
  struct Hash {
    size_t operator()(const CollectiveKind& k) const
    {
      return std::hash<double>{}(k.bytes) ^ (static_cast<size_t>(k.group) << 8 | static_cast<size_t>(k.op));
    }
  };
  std::unordered_set<CollectiveKind, Hash> seen;
  std::vector<CollectiveKind> kinds;
  for (const auto& program : w.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
      const Task& t = program.graph[v];
      if (t.kind == TaskKind::Collective && seen.insert({t.group, t.op, t.bytes}).second)
        kinds.push_back({t.group, t.op, t.bytes});
    }
  return kinds;
}

namespace {
// What every task says: its kind, its stream and the pipeline pass it belongs to. (The chunk is
// assigned after: an int brace-initialising the 17-bit field would be a narrowing conversion.)
Task task_of_pass(TaskKind kind, Stream stream, Pass pass, int micro_batch, int chunk)
{
  if (chunk < 0 || chunk >= kMaxTaskChunks)
    throw std::length_error(fmt::format("model chunk {} is outside the {} a task can name", chunk, kMaxTaskChunks));
  Task t{.kind = kind, .pass = pass, .stream = stream, .micro_batch = micro_batch};
  t.chunk = chunk;
  return t;
}
} // namespace

// Each factory sets the fields its kind uses; the rest keep Task's defaults.
Task compute_task(int work, Pass pass, int micro_batch, int chunk, Stream stream)
{
  Task t = task_of_pass(TaskKind::Compute, stream, pass, micro_batch, chunk);
  t.work = work;
  return t;
}

Task collective_task(Stream stream, CollectiveOp op, int group, double bytes, Pass pass, int micro_batch, int chunk)
{
  Task t  = task_of_pass(TaskKind::Collective, stream, pass, micro_batch, chunk);
  t.bytes = bytes;
  t.group = group;
  t.op    = op;
  return t;
}

Task point_to_point_task(TaskKind kind, Stream stream, int peer, int tag, double bytes, Pass pass, int micro_batch,
                         int chunk)
{
  Task t  = task_of_pass(kind, stream, pass, micro_batch, chunk);
  t.bytes = bytes;
  t.peer  = peer;
  t.tag   = tag;
  return t;
}

Task host_copy_task(Stream stream, double bytes, Pass pass, int micro_batch, int chunk)
{
  Task t  = task_of_pass(TaskKind::HostCopy, stream, pass, micro_batch, chunk);
  t.bytes = bytes;
  return t;
}

ProgramBuilder::ProgramBuilder(RankProgram& program) : program_(program)
{
  last_.fill(kNone);
  const TaskGraph& g = program.graph;
  const size_t n     = boost::num_vertices(g);
  tasks_.reserve(n);
  last_in_.reserve(n);
  for (TaskId v = 0; v < n; ++v) {
    tasks_.push_back(g[v]);
    last_in_.push_back(0);
  }
  for (TaskId u = 0; u < n; ++u)
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e)
      depends(boost::target(*e, g), u);
}

ProgramBuilder::~ProgramBuilder()
{
  // Not while an exception unwinds the lowering: the graph would be thrown away, and a second
  // exception (out of memory) would end the process.
  if (!finished_ && std::uncaught_exceptions() == 0)
    finish();
}

void ProgramBuilder::finish()
{
  if (finished_)
    throw std::logic_error("a task graph finished twice");
  finished_      = true;
  const size_t n = tasks_.size();
  // Sorted by source, each task's successors in the order they were added (the replay readies
  // them in that order): a counting sort, stable.
  std::vector<size_t> start(n + 1, 0);
  for (const auto& e : edges_)
    ++start[e.first + 1];
  for (size_t v = 0; v < n; ++v)
    start[v + 1] += start[v];
  std::vector<std::pair<TaskId, TaskId>> sorted(edges_.size());
  for (const auto& e : edges_)
    sorted[start[e.first]++] = e;
  edges_       = {};
  previous_in_ = {};
  last_in_     = {};
  // With the edge count given, the graph reserves its edges exactly (grown by doubling, they
  // took up to twice their size).
  // (The graph property argument picks this constructor over the one with edge properties.)
  program_.graph = TaskGraph(boost::edges_are_sorted, sorted.begin(), sorted.end(), static_cast<uint32_t>(n),
                             static_cast<uint32_t>(sorted.size()), boost::no_property());
  for (TaskId v = 0; v < n; ++v)
    program_.graph[v] = tasks_[v];
  tasks_ = {};
}

TaskId ProgramBuilder::add(const Task& task, TaskId after)
{
  TaskId id = add(task);
  depends(id, after);
  return id;
}

TaskId ProgramBuilder::add(const Task& task)
{
  if (tasks_.size() >= UINT32_MAX)
    throw std::length_error("a rank's task graph holds more tasks than a replay numbers");
  const TaskId id = tasks_.size();
  tasks_.push_back(task);
  last_in_.push_back(0);
  // Megatron issues tensor-parallel collectives on the compute stream: the next kernel waits for
  // them, so they share the compute stream's order (they still count as communication).
  const Stream order = task.stream == Stream::Tensor ? Stream::Compute : task.stream;
  auto& last  = last_[static_cast<size_t>(order)];
  if (last != kNone)
    depends(id, last);
  last = id;
  return id;
}

void ProgramBuilder::depends(TaskId later, TaskId earlier)
{
  if (earlier == kNone || later == kNone)
    return;
  // The edge just added, again: a task added after the last of its stream (add) that is told to
  // wait for that same task. One edge stands for both (the successor still readies at the same
  // point of the earlier task's list), and the replay then finds the task's only successor
  // beside it (sim/engine/scheduler.hpp, next_only) instead of in two edges.
  if (!edges_.empty() && edges_.back() == std::pair{earlier, later})
    return;
  if (edges_.size() >= UINT32_MAX - 1)
    throw std::length_error("a rank's task graph holds more edges than the builder numbers");
  edges_.emplace_back(earlier, later);
  previous_in_.push_back(last_in_[later]);
  last_in_[later] = static_cast<uint32_t>(edges_.size());
}

bool ProgramBuilder::waits_for(TaskId later, TaskId earlier) const
{
  for (uint32_t e = last_in_[later]; e != 0; e = previous_in_[e - 1])
    if (edges_[e - 1].first == earlier)
      return true;
  return false;
}

} // namespace stepsim
