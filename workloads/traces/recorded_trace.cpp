#include "workloads/traces/recorded_trace.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>

namespace stepsim {

namespace {

// The first bytes of a file, for the formats to recognise it by.
std::string head_of(const std::string& file)
{
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw InputError({fmt::format("{}: cannot read the trace file", file)});
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// Orders a rank's ops so that each follows those it waits for (Kahn's algorithm, the earliest
// recorded start first among those ready, then the reader's order), renumbering `after`. An op left
// over waits, directly or not, for itself.
void order_ops(RecordedRank& rank)
{
  auto& ops      = rank.ops;
  const size_t n = ops.size();
  std::vector<std::vector<size_t>> successors(n);
  std::vector<size_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j : ops[i].after) {
      if (j >= n)
        throw std::logic_error(fmt::format("{}: {} waits for op {} of {}", rank.file, ops[i].where, j, n));
      if (j == i)
        throw InputError({fmt::format("{}: {} waits for itself (a dependency cycle)", rank.file, ops[i].where)});
      successors[j].push_back(i);
      ++waiting[i];
    }
  using Key = std::pair<double, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0)
      ready.emplace(ops[i].start_s, i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t i = ready.top().second;
    ready.pop();
    order.push_back(i);
    for (size_t s : successors[i])
      if (--waiting[s] == 0)
        ready.emplace(ops[s].start_s, s);
  }
  if (order.size() != n) {
    // Every op left waits for another op left: walking back from one reaches an op on a cycle.
    size_t i = 0;
    while (waiting[i] == 0)
      ++i;
    std::vector<char> seen(n, 0);
    while (!seen[i]) {
      seen[i] = 1;
      for (size_t j : ops[i].after)
        if (waiting[j] > 0) {
          i = j;
          break;
        }
    }
    throw InputError({fmt::format("{}: {} is on a dependency cycle (it waits, through its dependencies, for itself)",
                                  rank.file, ops[i].where)});
  }
  std::vector<size_t> position(n);
  for (size_t k = 0; k < n; ++k)
    position[order[k]] = k;
  std::vector<RecordedOp> sorted;
  sorted.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    sorted.push_back(std::move(ops[order[k]]));
    for (auto& j : sorted.back().after)
      j = position[j];
    std::sort(sorted.back().after.begin(), sorted.back().after.end());
    sorted.back().after.erase(std::unique(sorted.back().after.begin(), sorted.back().after.end()),
                              sorted.back().after.end());
  }
  ops = std::move(sorted);
}

std::string ordinal(size_t k)
{
  const size_t n = k + 1;
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return fmt::format("{}{}", n, suffix);
}

// An op that takes no time and only orders others (a host op or metadata node of a Chakra trace, a
// zero-length kernel): its recorded start says nothing of when the GPU was busy.
bool is_marker(const RecordedOp& op) { return op.kind == RecordedKind::Compute && op.seconds == 0; }

// The earliest recorded start of the rank's GPU work (0 without any).
double first_recorded_start(const RecordedRank& rank)
{
  bool any     = false;
  double first = 0;
  for (const auto& op : rank.ops)
    if (!is_marker(op) && (!any || op.start_s < first)) {
      first = op.start_s;
      any   = true;
    }
  return first;
}

struct OpRef {
  size_t rank = 0, op = 0;
};

} // namespace

std::vector<RecordedRank> read_traces(const std::vector<std::string>& files)
{
  if (files.empty())
    throw InputError({"TRACE_FILES: give one trace file per rank"});
  std::vector<RecordedRank> ranks;
  for (const auto& file : files) {
    const std::string head = head_of(file);
    const TraceFormat* format = nullptr;
    std::string name;
    for (const auto& [n, item] : TraceFormatRegistry::all())
      if (item.entry.recognises(head)) {
        format = &item.entry;
        name   = n;
        break;
      }
    if (format == nullptr)
      throw InputError({fmt::format("{}: neither a PyTorch profiler (Kineto) JSON trace nor a Chakra execution "
                                    "trace (.et protobuf)",
                                    file)});
    RecordedRank rank = format->read(file);
    rank.file         = file;
    rank.format       = name;
    order_ops(rank);
    ranks.push_back(std::move(rank));
  }
  // Mixed formats could be joined, but their clocks and conventions differ: one format per replay.
  for (const auto& r : ranks)
    if (r.format != ranks.front().format)
      throw InputError({fmt::format("{}: a {} trace among {} traces ({}); give the ranks of one recording", r.file,
                                    r.format, ranks.front().format, ranks.front().file)});
  // A job of 8 ranks replayed from 2 of its files would time a job that never ran: the
  // collectives of the 6 missing ranks would be left out, silently.
  for (const auto& r : ranks)
    if (r.stated_world >= 0 && r.stated_world != static_cast<long long>(ranks.size()))
      throw InputError({fmt::format("{}: the trace is of a job of {} ranks (distributedInfo.world_size), but {} trace "
                                    "file{} given; give one file per rank of the job",
                                    r.file, r.stated_world, ranks.size(), ranks.size() == 1 ? " was" : "s were")});
  const bool all_stated = std::all_of(ranks.begin(), ranks.end(), [](const RecordedRank& r) { return r.stated_rank >= 0; });
  if (all_stated) {
    std::map<int, std::string> seen;
    for (const auto& r : ranks) {
      if (r.stated_rank >= static_cast<int>(ranks.size()))
        throw InputError({fmt::format("{}: the trace is of rank {}, but {} trace files were given (ranks 0 to {})", r.file,
                                      r.stated_rank, ranks.size(), ranks.size() - 1)});
      auto [it, fresh] = seen.emplace(r.stated_rank, r.file);
      if (!fresh)
        throw InputError({fmt::format("{}: the trace is of rank {}, as is {}", r.file, r.stated_rank, it->second)});
    }
    std::stable_sort(ranks.begin(), ranks.end(),
                     [](const RecordedRank& a, const RecordedRank& b) { return a.stated_rank < b.stated_rank; });
  }
  return ranks;
}

double compute_op_seconds(const RecordedOp& op, const Device& target, const Device* recorded, const ComputeModel* model)
{
  if (op.seconds < 0)
    return op.kernel && model ? model->kernel_seconds(*op.kernel, target, op.precision) : 0.0;
  if (recorded == nullptr || recorded->name == target.name || op.seconds == 0)
    return op.seconds;
  if (op.kernel && model) {
    const double there = model->kernel_seconds(*op.kernel, *recorded, op.precision);
    const double here  = model->kernel_seconds(*op.kernel, target, op.precision);
    if (there > 0 && std::isfinite(there) && std::isfinite(here))
      return op.seconds * here / there;
  }
  // Kernels the trace gives no shape for (elementwise, norms, optimizers, copies) are mostly bound
  // by memory bandwidth.
  if (recorded->memory_bandwidth_Bps > 0 && target.memory_bandwidth_Bps > 0)
    return op.seconds * recorded->memory_bandwidth_Bps / target.memory_bandwidth_Bps;
  return op.seconds;
}

TraceWorkload trace_workload(const std::vector<RecordedRank>& ranks, const TraceTiming& timing)
{
  const int world = static_cast<int>(ranks.size());
  if (timing.device_of_rank.size() != ranks.size())
    throw std::logic_error("trace_workload: one target device per rank");

  // Communicators: their members, and each member's collectives on them in order.
  struct Communicator {
    std::vector<int> listed; // members as an op listed them
    OpRef lister;
    bool has_list = false;
    std::set<int> users;
    std::map<int, std::vector<size_t>> ops_of_rank;
  };
  std::map<std::string, Communicator> communicators;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t i = 0; i < ranks[r].ops.size(); ++i) {
      const RecordedOp& op = ranks[r].ops[i];
      if (op.kind == RecordedKind::Send || op.kind == RecordedKind::Recv) {
        if (op.peer < 0 || op.peer >= world || op.peer == static_cast<int>(r))
          throw InputError({fmt::format("{}: {}: {} rank {}, which is {} ({} traces, ranks 0 to {}; this is rank {})",
                                        ranks[r].file, op.where, op.kind == RecordedKind::Send ? "sends to" : "receives from",
                                        op.peer, op.peer == static_cast<int>(r) ? "itself" : "no rank of the job", world,
                                        world - 1, r)});
        continue;
      }
      if (op.kind != RecordedKind::Collective)
        continue;
      Communicator& c = communicators[op.group];
      c.users.insert(static_cast<int>(r));
      c.ops_of_rank[static_cast<int>(r)].push_back(i);
      if (op.group_ranks.empty())
        continue;
      for (int m : op.group_ranks)
        if (m < 0 || m >= world)
          throw InputError({fmt::format("{}: {}: communicator \"{}\" lists rank {}, but {} trace files were given (ranks "
                                        "0 to {}); give one file per rank of the job",
                                        ranks[r].file, op.where, op.group, m, world, world - 1)});
      if (!c.has_list) {
        c.listed   = op.group_ranks;
        c.lister   = {r, i};
        c.has_list = true;
      } else if (c.listed != op.group_ranks) {
        const auto& other = ranks[c.lister.rank];
        throw InputError({fmt::format("{}: {}: communicator \"{}\" has ranks [{}] here but [{}] in {} ({}): the "
                                      "collective's group does not match across ranks",
                                      ranks[r].file, op.where, op.group, fmt::join(op.group_ranks, ", "),
                                      fmt::join(c.listed, ", "), other.file, other.ops[c.lister.op].where)});
      }
    }

  TraceWorkload out;
  Workload& w  = out.workload;
  w.world_size = world;
  std::map<std::string, int> group_index;
  for (auto& [name, c] : communicators) {
    std::vector<int> members = c.has_list ? c.listed : std::vector<int>(c.users.begin(), c.users.end());
    const std::set<int> member_set(members.begin(), members.end());
    if (member_set.size() != members.size())
      throw InputError({fmt::format("{}: {}: communicator \"{}\" lists a rank twice ([{}])", ranks[c.lister.rank].file,
                                    ranks[c.lister.rank].ops[c.lister.op].where, name, fmt::join(members, ", "))});
    for (int u : c.users)
      if (!member_set.count(u)) {
        const auto& op = ranks[static_cast<size_t>(u)].ops[c.ops_of_rank[u].front()];
        throw InputError({fmt::format("{}: {}: a collective on communicator \"{}\", whose ranks are [{}] (as {} lists "
                                      "them), from rank {}: the collective's group does not match across ranks",
                                      ranks[static_cast<size_t>(u)].file, op.where, name, fmt::join(members, ", "),
                                      ranks[c.lister.rank].file, u)});
      }
    // Every member runs the same collectives on it, in the same order (NCCL issues a communicator's
    // collectives in order on one stream, and a member that skips one hangs the others).
    const int first   = *c.users.begin();
    const auto& model = c.ops_of_rank[first];
    for (int m : members) {
      if (!c.users.count(m))
        throw InputError({fmt::format("{}: rank {} is a member of communicator \"{}\" (ranks [{}], as {} {} lists them) "
                                      "but its trace runs no collective on it: the collective's group does not match "
                                      "across ranks",
                                      ranks[static_cast<size_t>(m)].file, m, name, fmt::join(members, ", "),
                                      ranks[c.lister.rank].file, ranks[c.lister.rank].ops[c.lister.op].where)});
      const auto& mine = c.ops_of_rank[m];
      for (size_t k = 0; k < std::max(mine.size(), model.size()); ++k) {
        const auto& here = ranks[static_cast<size_t>(m)];
        const auto& there = ranks[static_cast<size_t>(first)];
        if (k >= mine.size() || k >= model.size()) {
          const bool short_here = k >= mine.size();
          throw InputError({fmt::format("{}: rank {} runs {} collectives on communicator \"{}\", but rank {} ({}) runs "
                                        "{}; the {} is {} in {}",
                                        here.file, m, mine.size(), name, first, there.file, model.size(), ordinal(k),
                                        (short_here ? there.ops[model[k]] : here.ops[mine[k]]).where,
                                        short_here ? there.file : here.file)});
        }
        const RecordedOp& a = here.ops[mine[k]];
        const RecordedOp& b = there.ops[model[k]];
        if (a.op != b.op || a.bytes != b.bytes)
          throw InputError({fmt::format("{}: {}: the {} collective on communicator \"{}\" is {} of {:.0f} bytes here, "
                                        "but {} of {:.0f} bytes on rank {} ({}: {})",
                                        here.file, a.where, ordinal(k), name, collective_name(a.op), a.bytes,
                                        collective_name(b.op), b.bytes, first, there.file, b.where)});
      }
    }
    group_index[name] = static_cast<int>(w.groups.size());
    Group g;
    g.name  = name.empty() ? "(unnamed communicator)" : name;
    g.ranks = members;
    w.groups.push_back(std::move(g));
  }

  // Point to point: the k-th send from a to b (with the same tag, where tags are given) meets the
  // k-th receive on b from a. Tags are renumbered densely per pair (the engine keys channels by
  // source, destination and a 20-bit tag).
  std::map<std::tuple<int, int, long long>, std::vector<OpRef>> sends, recvs;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t i = 0; i < ranks[r].ops.size(); ++i) {
      const RecordedOp& op = ranks[r].ops[i];
      if (op.kind == RecordedKind::Send)
        sends[{static_cast<int>(r), op.peer, op.tag}].push_back({r, i});
      else if (op.kind == RecordedKind::Recv)
        recvs[{op.peer, static_cast<int>(r), op.tag}].push_back({r, i});
    }
  std::map<std::pair<size_t, size_t>, int> tag_of_op; // (rank, op) -> tag in the workload
  std::map<std::pair<int, int>, int> next_tag;
  for (const auto& [key, list] : sends) {
    const auto it     = recvs.find(key);
    const size_t have = it == recvs.end() ? 0 : it->second.size();
    const auto [src, dst, tag] = key;
    if (have != list.size()) {
      const OpRef extra = have < list.size() ? list[have] : it->second[list.size()];
      throw InputError({fmt::format("{}: {}: {} from rank {} to rank {}{} has no matching {} in {} ({} sends, {} "
                                    "receives)",
                                    ranks[extra.rank].file, ranks[extra.rank].ops[extra.op].where,
                                    have < list.size() ? "the send" : "the receive", src, dst,
                                    tag >= 0 ? fmt::format(" with tag {}", tag) : "", have < list.size() ? "receive" : "send",
                                    ranks[static_cast<size_t>(have < list.size() ? dst : src)].file, list.size(), have)});
    }
    for (size_t k = 0; k < list.size(); ++k) {
      int& next = next_tag[{src, dst}];
      if (next >= (1 << 20))
        throw InputError({fmt::format("{}: more than {} transfers from rank {} to rank {}", ranks[list[k].rank].file,
                                      1 << 20, src, dst)});
      tag_of_op[{list[k].rank, list[k].op}]         = next;
      tag_of_op[{it->second[k].rank, it->second[k].op}] = next;
      ++next;
    }
  }
  for (const auto& [key, list] : recvs)
    if (!sends.count(key)) {
      const auto [src, dst, tag] = key;
      throw InputError({fmt::format("{}: {}: the receive from rank {}{} has no matching send in {}", ranks[list[0].rank].file,
                                    ranks[list[0].rank].ops[list[0].op].where, src,
                                    tag >= 0 ? fmt::format(" with tag {}", tag) : "", ranks[static_cast<size_t>(src)].file)});
    }

  // The task graphs, one task per op (and an idle task before an op that waited for the CPU), every
  // edge forward: tasks are numbered in an order where each follows what it waits for.
  out.op_of_task.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RecordedRank& rank = ranks[r];
    const Device& target     = *timing.device_of_rank[r];
    const Device* recorded   = timing.recorded_on_of_rank.empty() ? nullptr : timing.recorded_on_of_rank[r];
    RankProgram program;
    program.rank = static_cast<int>(r);
    std::vector<Task> tasks;
    std::vector<std::pair<TaskId, TaskId>> edges;
    std::vector<TaskId> task_of_op(rank.ops.size());
    auto& op_of_task = out.op_of_task[r];
    const double first_start = first_recorded_start(rank);
    // When each op's recorded work ended; a marker's, when what it waited for had (its own recorded
    // time is the host's, not the GPU's).
    std::vector<double> end_of(rank.ops.size(), first_start);
    std::map<std::string, TaskId> last_collective_of_group;
    for (size_t i = 0; i < rank.ops.size(); ++i) {
      const RecordedOp& op = rank.ops[i];
      std::vector<TaskId> before;
      double ready = first_start;
      for (size_t j : op.after) {
        before.push_back(task_of_op[j]);
        ready = std::max(ready, end_of[j]);
      }
      end_of[i] = is_marker(op) ? ready : op.start_s + std::max(0.0, op.seconds);
      if (op.kind == RecordedKind::Collective) { // a communicator's collectives run in order
        auto it = last_collective_of_group.find(op.group);
        if (it != last_collective_of_group.end())
          before.push_back(it->second);
      }
      std::sort(before.begin(), before.end());
      before.erase(std::unique(before.begin(), before.end()), before.end());
      // The stream waited for the CPU (a launch, a host synchronisation, the data loader): kept as
      // recorded, since nothing on the GPU explains it.
      const double idle = rank.timed && !is_marker(op) ? op.start_s - ready : 0.0;
      if (idle > 1e-12) {
        w.works.push_back(Work{"idle before " + op.name, {}, idle, 0});
        tasks.push_back(compute_task(static_cast<int>(w.works.size() - 1), Pass::Other, -1, 0, Stream::Host));
        op_of_task.push_back(-1);
        const TaskId idle_task = tasks.size() - 1;
        for (TaskId b : before)
          edges.emplace_back(b, idle_task);
        before = {idle_task};
      }
      Task task;
      switch (op.kind) {
      case RecordedKind::Compute:
        w.works.push_back(Work{op.name, {}, compute_op_seconds(op, target, recorded, timing.model), 0});
        task = compute_task(static_cast<int>(w.works.size() - 1), Pass::Other);
        break;
      case RecordedKind::Collective:
        task = collective_task(Stream::Data, op.op, group_index.at(op.group), op.bytes);
        break;
      case RecordedKind::Send:
      case RecordedKind::Recv:
        task = point_to_point_task(op.kind == RecordedKind::Send ? TaskKind::Send : TaskKind::Recv,
                                   op.kind == RecordedKind::Send ? Stream::SendNext : Stream::RecvPrev, op.peer,
                                   tag_of_op.at({r, i}), op.bytes, Pass::Other, -1, 0);
        break;
      }
      tasks.push_back(task);
      op_of_task.push_back(static_cast<long long>(i));
      task_of_op[i] = tasks.size() - 1;
      for (TaskId b : before)
        edges.emplace_back(b, task_of_op[i]);
      if (op.kind == RecordedKind::Collective)
        last_collective_of_group[op.group] = task_of_op[i];
    }
    // Sorted by source, each task's successors in the order they were added (ProgramBuilder::finish).
    std::stable_sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    program.graph = TaskGraph(boost::edges_are_sorted, edges.begin(), edges.end(), tasks.size());
    for (TaskId v = 0; v < tasks.size(); ++v)
      program.graph[v] = tasks[v];
    w.ranks.push_back(std::move(program));
  }
  return out;
}

RecordedTimeline recorded_timeline(const RecordedRank& rank, const TraceWorkload& w, size_t rank_index)
{
  RecordedTimeline t;
  const auto& op_of_task = w.op_of_task[rank_index];
  t.tasks.assign(op_of_task.size(), {0, 0});
  if (rank.ops.empty() || !rank.timed)
    return t;
  const double first = first_recorded_start(rank);
  double last        = first;
  for (const auto& op : rank.ops)
    if (!is_marker(op))
      last = std::max(last, op.start_s + std::max(0.0, op.seconds));
  t.step_s = last - first;
  for (size_t v = 0; v < op_of_task.size(); ++v) {
    if (op_of_task[v] >= 0) {
      const RecordedOp& op = rank.ops[static_cast<size_t>(op_of_task[v])];
      if (!is_marker(op))
        t.tasks[v] = {op.start_s - first, op.start_s - first + std::max(0.0, op.seconds)};
    } else if (v + 1 < op_of_task.size()) { // an idle task ends where its op starts
      const RecordedOp& op = rank.ops[static_cast<size_t>(op_of_task[v + 1])];
      const double end     = op.start_s - first;
      const Task& idle     = w.workload.ranks[rank_index].graph[v];
      t.tasks[v]           = {end - w.workload.works[static_cast<size_t>(idle.work)].seconds, end};
    }
  }
  return t;
}

} // namespace stepsim
