#include "sim/engine/compute.hpp"

#include "sim/engine/jitter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace stepsim::engine {

Compute::Compute(const Workload& w, const ReplayOptions& options, const Parts& parts)
    : w_(w), options_(options), parts_(parts)
{
  collectives_in_flight_.assign(w_.ranks.size(), 0);
  interfering_.resize(w_.ranks.size());
  interferes_.assign(w_.ranks.size(), 0);
  exposed_chains_.resize(w_.ranks.size());
  host_clock_.assign(w_.ranks.size(), 0.0);
  host_waits_.resize(w_.ranks.size());
  launches_cost_ = std::any_of(w_.works.begin(), w_.works.end(), [](const Work& work) { return work.host_seconds > 0; });
  for (size_t i = 0; i < w_.ranks.size(); ++i) {
    const double f = w_.ranks[i].comm_compute_interference;
    if (!(f > 0))
      continue;
    if (f >= 1)
      throw std::runtime_error(fmt::format("rank {}: a compute/communication interference of {} leaves compute no speed",
                                           w_.ranks[i].rank, f));
    interferes_[i] = 1;
  }
}

// --- chains of timed tasks -------------------------------------------------------------------
double Compute::timed_seconds(const TaskRef& t)
{
  const Task& task = parts_.scheduler.task_of(t);
  if (task.kind == TaskKind::Compute)
    return std::max(0.0, w_.works[static_cast<size_t>(task.work)].seconds) * compute_factor(t);
  if (task.kind == TaskKind::Collective && parts_.simulated.in_group[static_cast<size_t>(task.group)] == 1 &&
      parts_.timing.analytic_in_chain(task.group, task.op))
    return parts_.timing.seconds(task.group, task.op, task.bytes);
  return -1;
}

void Compute::start_chain(const TaskRef& t, double first_seconds)
{
  const auto& g = w_.ranks[t.rank_index].graph;
  // Built in a free slot, whose vectors keep their capacity from the chains before it (a
  // full-fidelity replay runs millions of chains, most of one task: an allocation each).
  const int id = allocate_chain();
  Chain& chain = chains_[static_cast<size_t>(id)];
  chain.rank_index = t.rank_index;
  chain.first = chain.last = t.task;
  chain.start              = now();
  chain.seconds.assign(1, first_seconds);
  chain.exposed = false;
  chain.slot    = 0;
  chain.rates.clear();
  chain.launched_s = 0;
  // Grow while the next task waits for the chain's tail and otherwise only for tasks of the
  // chain: it would start exactly when the tail ends (tasks of a rank are numbered in program
  // order, and every edge goes forward).
  for (TaskId next = t.task + 1; next < boost::num_vertices(g); ++next) {
    const double seconds =
        parts_.scheduler.may_join_chain(t.rank_index, next, chain.first) ? timed_seconds({t.rank_index, next}) : -1;
    if (seconds < 0)
      break;
    chain.seconds.push_back(seconds);
    chain.last = next;
  }
  // Cut it where a task releases one outside the chain: that one must not wait for the end.
  TaskId last = chain.first, reach = chain.first;
  for (TaskId v = chain.first; v <= chain.last; ++v) {
    if (v > chain.first && reach <= v)
      last = v;
    if (parts_.scheduler.next_only(t.rank_index, v)) {
      reach = std::max(reach, v + 1);
      continue;
    }
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
      reach = std::max(reach, boost::target(*e, g));
  }
  chain.last = last;
  chain.seconds.resize(last - chain.first + 1);
  for (TaskId v = chain.first + 1; v <= chain.last; ++v)
    parts_.scheduler.claim({t.rank_index, v});
  if (launches_cost_) // a second pass over every chain's tasks otherwise, for nothing
    wait_for_host(chain);

  double total = 0;
  for (double s : chain.seconds)
    total += s;
  if (parts_.accounting.records_links()) { // closed-form collectives inside the chain, at their planned times
    double at = chain.start;
    for (TaskId v = chain.first; v <= chain.last; at += chain.seconds[v - chain.first], ++v) {
      const Task& task = g[v];
      if (task.kind != TaskKind::Collective)
        continue;
      const auto& ranks = w_.groups[static_cast<size_t>(task.group)].ranks;
      const int member  = static_cast<int>(std::find(ranks.begin(), ranks.end(), w_.ranks[t.rank_index].rank) - ranks.begin());
      parts_.accounting.carried_by_collective(task.group, task.op, task.bytes, member, at, at + chain.seconds[v - chain.first]);
    }
  }
  if (total <= 0) {
    chain_done(id);
    return;
  }
  parts_.scheduler.begin(t);
  Chain& c = chains_[static_cast<size_t>(id)];
  // A chain that starts with compute is the rank's compute kernels (tensor-parallel
  // collectives inside it included): interference slows it.
  c.exposed = parts_.scheduler.task_of(t).kind == TaskKind::Compute && w_.ranks[t.rank_index].comm_compute_interference > 0;
  if (!c.exposed) {
    parts_.activities.delay(total, ChainDelay{id});
    return;
  }
  const double rate = compute_rate(t.rank_index);
  c.rates.emplace_back(now(), rate);
  c.launched_s = total;
  c.slot       = parts_.activities.delay(total / rate, ChainDelay{id});
  exposed_chains_[static_cast<size_t>(t.rank_index)].push_back(id);
}

// The host issues the rank's kernels in program order, each launch costing it the work's
// host_seconds, and runs ahead of the GPU: a kernel cannot end before the host has issued it.
// The chain's compute tasks are stretched to that end where the host is behind; the stretch is
// the time the GPU waited for the host. (Interference then slows the stretch with the kernels,
// although the GPU idles through it: a chain is one delay at one rate.)
void Compute::wait_for_host(Chain& chain)
{
  const auto& g = w_.ranks[static_cast<size_t>(chain.rank_index)].graph;
  double& clock = host_clock_[static_cast<size_t>(chain.rank_index)];
  double at     = chain.start;
  for (TaskId v = chain.first; v <= chain.last; ++v) {
    double& seconds = chain.seconds[v - chain.first];
    const Task& task = g[v];
    const Work* work = task.kind == TaskKind::Compute && task.work >= 0 ? &w_.works[static_cast<size_t>(task.work)] : nullptr;
    if (work != nullptr && work->host_seconds > 0) {
      // The host starts on this task's launches once it has issued the previous ones.
      clock += work->host_seconds;
      if (clock > at + seconds) {
        host_waits_[static_cast<size_t>(chain.rank_index)].emplace_back(v, clock - (at + seconds));
        seconds = clock - at;
      }
    }
    at += seconds;
    // A work whose result the host waits for: it issues nothing more until the GPU is there.
    if (work != nullptr && work->synchronizes_host)
      clock = std::max(clock, at);
  }
}

void Compute::host_synchronized(int rank_index)
{
  double& clock = host_clock_[static_cast<size_t>(rank_index)];
  clock         = std::max(clock, now());
}

int Compute::allocate_chain()
{
  if (free_chains_.empty()) {
    chains_.emplace_back();
    return static_cast<int>(chains_.size() - 1);
  }
  int id = free_chains_.back();
  free_chains_.pop_back();
  return id;
}

void Compute::chain_done(int id)
{
  // Finishing its tasks starts no chain (ready tasks wait in the scheduler's queue), so the slot
  // stays where it is until it is freed at the end.
  const Chain& chain = chains_[static_cast<size_t>(id)];
  if (chain.exposed) {
    auto& running = exposed_chains_[static_cast<size_t>(chain.rank_index)];
    running.erase(std::find(running.begin(), running.end(), id));
  }
  // A task ends where the chain's work reached its end: at full speed, or through the spans in
  // which interference slowed the chain (its rates).
  double t = chain.start, work = 0, reached = 0; // reached: work done by rates[span].first
  size_t span = 0;
  for (TaskId v = chain.first; v <= chain.last; ++v) {
    work += chain.seconds[v - chain.first];
    double end = t + chain.seconds[v - chain.first];
    if (!chain.rates.empty()) {
      while (span + 1 < chain.rates.size() &&
             reached + (chain.rates[span + 1].first - chain.rates[span].first) * chain.rates[span].second <= work) {
        reached += (chain.rates[span + 1].first - chain.rates[span].first) * chain.rates[span].second;
        ++span;
      }
      end = chain.rates[span].first + (work - reached) / chain.rates[span].second;
    }
    if (v == chain.last)
      end = now();
    parts_.scheduler.finish({chain.rank_index, v}, t, std::max(t, std::min(end, now())));
    t = std::max(t, std::min(end, now()));
  }
  free_chains_.push_back(id);
}

// --- stragglers and jitter --------------------------------------------------------------------
double Compute::compute_factor(const TaskRef& t) const
{
  const int rank = w_.ranks[t.rank_index].rank;
  double f       = 1.0;
  if (static_cast<size_t>(rank) < options_.compute_slowdown.size())
    f = options_.compute_slowdown[static_cast<size_t>(rank)];
  if (options_.jitter_sigma > 0)
    f *= jitter_factor(options_.jitter_seed, options_.jitter_sigma, rank, t.task);
  return f;
}

// --- communication/compute interference ---------------------------------------------------------
// The fraction of its speed the rank's compute runs at now.
double Compute::compute_rate(int rank_index) const
{
  return collectives_in_flight_[static_cast<size_t>(rank_index)] > 0
             ? 1 - w_.ranks[static_cast<size_t>(rank_index)].comm_compute_interference
             : 1.0;
}

void Compute::began(const TaskRef& t)
{
  const Task& task = parts_.scheduler.task_of(t);
  // Tensor-parallel collectives run in order with the rank's compute (Megatron waits for them),
  // so they never share the SMs with a kernel of the same rank.
  if (!interferes_[t.rank_index] || task.kind != TaskKind::Collective || !is_communication(task.stream) ||
      task.stream == Stream::Tensor)
    return;
  interfering_[t.rank_index].push_back(t.task);
  if (collectives_in_flight_[t.rank_index]++ == 0)
    restart_exposed_chains(t.rank_index);
}

void Compute::ended(const TaskRef& t)
{
  if (w_.pipeline_transfers_sync_host) {
    const Task& task = parts_.scheduler.task_of(t);
    if ((task.kind == TaskKind::Send || task.kind == TaskKind::Recv) &&
        (task.stream == Stream::SendNext || task.stream == Stream::SendPrev || task.stream == Stream::RecvPrev ||
         task.stream == Stream::RecvNext))
      host_synchronized(t.rank_index);
  }
  // Every task ends here: the count of the rank's collectives in flight answers for most.
  if (collectives_in_flight_[t.rank_index] == 0)
    return;
  auto& in_flight = interfering_[t.rank_index];
  const auto it   = std::find(in_flight.begin(), in_flight.end(), t.task);
  if (it == in_flight.end())
    return;
  in_flight.erase(it);
  if (--collectives_in_flight_[t.rank_index] == 0)
    restart_exposed_chains(t.rank_index);
}

// The rank's compute rate changed: each running compute chain goes on, with the work it has
// left, as a new delay at the new rate. It keeps its chain, so chain_done sees one chain.
void Compute::restart_exposed_chains(int rank_index)
{
  const double rate = compute_rate(rank_index);
  for (int id : exposed_chains_[static_cast<size_t>(rank_index)]) {
    Chain& c          = chains_[static_cast<size_t>(id)];
    const double left = c.launched_s - (now() - c.rates.back().first) * c.rates.back().second;
    // A chain with nothing left is left to end: its delay is due at this very instant (the
    // engine hands out one instant's ends in turn). The slack: a picosecond, or 1e-13 of the
    // clock where a long clock's rounding is coarser (its last bit is about 2e-16 of it).
    if (left <= std::max(1e-12, now() * 1e-13))
      continue;
    c.rates.emplace_back(now(), rate);
    c.launched_s = left;
    parts_.activities.reschedule(c.slot, left / rate);
  }
}

} // namespace stepsim::engine
