#include "sim/engine/replay.hpp"

#include "sim/engine/accounting.hpp"
#include "sim/engine/activities.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/jitter.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <stdexcept>
#include <unordered_map>
#include <variant>

namespace stepsim {

namespace sg4 = simgrid::s4u;

namespace {

using namespace engine;

template <class... Fs> struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs> Overloaded(Fs...) -> Overloaded<Fs...>;

class Replay {
public:
  Replay(const Workload& w, const std::vector<sg4::Host*>& hosts, const CollectiveAlgorithm& algorithm,
         const ReplayOptions& options)
      : w_(w), hosts_(hosts), algorithm_(algorithm), options_(options),
        timing_(w, hosts, algorithm, options.analytic_network, options.collective_base_latency_s),
        accounting_(w, algorithm, timing_, options.record_links), activities_(hosts),
        simulated_(static_cast<size_t>(w.world_size), -1), group_simulated_(w.groups.size(), 0)
  {
    result_.ranks.resize(w.ranks.size());
    indegree_.resize(w.ranks.size());
    claimed_.resize(w.ranks.size());
    collective_seq_.resize(w.ranks.size());
    for (size_t i = 0; i < w.ranks.size(); ++i) {
      const auto& p = w.ranks[i];
      simulated_.at(static_cast<size_t>(p.rank)) = static_cast<int>(i);
      auto& timeline = result_.ranks[i];
      timeline.rank  = p.rank;
      timeline.stage = p.stage;
      timeline.tasks.resize(boost::num_vertices(p.graph));
      auto& deg = indegree_[i];
      deg.resize(boost::num_vertices(p.graph));
      claimed_[i].assign(deg.size(), 0);
      for (TaskId v = 0; v < deg.size(); ++v) {
        deg[v] = static_cast<int>(boost::in_degree(v, p.graph));
        if (deg[v] == 0)
          ready_.push_back({static_cast<int>(i), v});
      }
      remaining_ += static_cast<long long>(deg.size());
    }
    for (size_t gi = 0; gi < w.groups.size(); ++gi)
      for (int r : w.groups[gi].ranks)
        group_simulated_[gi] += simulated_[static_cast<size_t>(r)] >= 0 ? 1 : 0;
    set_up_interference();
  }

  ReplayResult run()
  {
    record_collective_algorithms();
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { on_completion(a); });
    drain();
    sg4::Engine::get_instance()->run();
    if (remaining_ > 0)
      throw std::runtime_error(deadlock_message());
    result_.end_s      = sg4::Engine::get_clock();
    result_.activities = activities_.started();
    accounting_.export_to(result_);
    return std::move(result_);
  }

private:
  void on_completion(const sg4::Activity& activity)
  {
    auto done = activities_.completed(activity);
    if (!done)
      return;
    if (done->transfer.src >= 0)
      accounting_.carried(done->transfer.src, done->transfer.dst, done->transfer.bytes, done->transfer.start, now());
    std::visit(Overloaded{
                   [&](const ChainExec& r) { chain_done(r.chain); },
                   [&](const PointToPointTransfer& r) { point_to_point_done(r.channel); },
                   [&](const CollectiveSend& r) { collective_step_done(r); },
                   [&](const CollectiveDelay& r) { collective_delay_done(r.instance); },
                   [&](const CoalescedTransfer& r) { coalesced_transfer_done(r.instance); },
                   [&](const HostCopy& r) { complete(r.task); },
                   [&](const CollectiveLaunch& r) { start_collective_steps(r.instance); },
               },
               done->role);
    drain();
  }

  const Task& task_of(const TaskRef& t) const { return w_.ranks[t.rank_index].graph[t.task]; }
  TaskTiming& timing(const TaskRef& t) { return result_.ranks[t.rank_index].tasks[t.task]; }

  void begin(const TaskRef& t)
  {
    if (timing(t).start < 0) {
      timing(t).start = now();
      collective_started(t);
    }
  }

  void complete(const TaskRef& t)
  {
    begin(t);
    finish(t, timing(t).start, now());
  }

  void finish(const TaskRef& t, double start, double end)
  {
    timing(t) = TaskTiming{start, end};
    --remaining_;
    collective_ended(t);
    const auto& g = w_.ranks[t.rank_index].graph;
    for (auto [e, last] = boost::out_edges(t.task, g); e != last; ++e) {
      TaskId next = boost::target(*e, g);
      // A claimed task belongs to a running chain, which finishes it itself.
      if (--indegree_[t.rank_index][next] == 0 && !claimed_[t.rank_index][next])
        ready_.push_back({t.rank_index, next});
    }
  }

  void drain()
  {
    while (!ready_.empty()) {
      TaskRef t = ready_.front();
      ready_.pop_front();
      start(t);
    }
  }

  void start(const TaskRef& t)
  {
    const double seconds = timed_seconds(t);
    if (seconds >= 0) {
      start_chain(t, seconds);
      return;
    }
    switch (task_of(t).kind) {
    case TaskKind::Compute: break; // always timed
    case TaskKind::Send:
    case TaskKind::Recv: post_point_to_point(t); return;
    case TaskKind::Collective: post_collective(t); return;
    case TaskKind::HostCopy: post_host_copy(t); return;
    }
  }

  // --- chains of timed tasks ---------------------------------------------------------------
  // A task is timed when its duration is known before it runs: compute, and a collective timed
  // by its closed form whose group has no other simulated member to wait for. Consecutive timed
  // tasks of a rank that nothing else waits on in between run as one SimGrid activity: the
  // timings are the same, the engine does a fraction of the work (a transformer stage's forward
  // pass with its tensor-parallel all-reduces becomes one activity).
  double timed_seconds(const TaskRef& t)
  {
    const Task& task = task_of(t);
    if (task.kind == TaskKind::Compute)
      return std::max(0.0, w_.works[static_cast<size_t>(task.work)].seconds) * compute_factor(t);
    if (task.kind == TaskKind::Collective && group_simulated_[static_cast<size_t>(task.group)] == 1 &&
        timing_.analytic(task.group, task.op))
      return timing_.seconds(task.group, task.op, task.bytes);
    return -1;
  }

  struct Chain {
    int rank_index = 0;
    TaskId first = 0, last = 0;
    double start = 0;
    std::vector<double> seconds; // of each task, first to last
    // A chain exposed to interference: its slot in the live activities, and from which time it
    // ran at which fraction of the host's speed (one entry per restart), to place its tasks in
    // chain_done.
    bool exposed = false;
    size_t slot  = 0;
    std::vector<std::pair<double, double>> rates;
  };

  void start_chain(const TaskRef& t, double first_seconds)
  {
    const auto& g = w_.ranks[t.rank_index].graph;
    Chain chain{t.rank_index, t.task, t.task, now(), {first_seconds}, false, 0, {}};
    // Grow while the next task waits for the chain's tail and otherwise only for tasks of the
    // chain: it would start exactly when the tail ends (tasks of a rank are numbered in program
    // order, and every edge goes forward).
    for (TaskId next = t.task + 1; next < boost::num_vertices(g); ++next) {
      bool inside = true, after_tail = false;
      for (auto [e, end] = boost::in_edges(next, g); e != end && inside; ++e) {
        inside     = boost::source(*e, g) >= chain.first;
        after_tail = after_tail || boost::source(*e, g) == chain.last;
      }
      const double seconds = inside && after_tail ? timed_seconds({t.rank_index, next}) : -1;
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
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
        reach = std::max(reach, boost::target(*e, g));
    }
    chain.last = last;
    chain.seconds.resize(last - chain.first + 1);
    for (TaskId v = chain.first + 1; v <= chain.last; ++v)
      claimed_[t.rank_index][v] = 1;

    double total = 0;
    for (double s : chain.seconds)
      total += s;
    if (accounting_.records_links()) { // closed-form collectives inside the chain, at their planned times
      double at = chain.start;
      for (TaskId v = chain.first; v <= chain.last; at += chain.seconds[v - chain.first], ++v) {
        const Task& task = g[v];
        if (task.kind != TaskKind::Collective)
          continue;
        const auto& ranks = w_.groups[static_cast<size_t>(task.group)].ranks;
        const int member  = static_cast<int>(std::find(ranks.begin(), ranks.end(), w_.ranks[t.rank_index].rank) - ranks.begin());
        accounting_.carried_by_collective(task.group, task.op, task.bytes, member, at, at + chain.seconds[v - chain.first]);
      }
    }
    int id = allocate_chain(std::move(chain));
    if (total <= 0) {
      chain_done(id);
      return;
    }
    begin(t);
    Chain& c = chains_[static_cast<size_t>(id)];
    // A chain that starts with compute is the rank's compute kernels (tensor-parallel
    // collectives inside it included): interference slows it.
    c.exposed = task_of(t).kind == TaskKind::Compute && w_.ranks[t.rank_index].comm_compute_interference > 0;
    if (!c.exposed) {
      activities_.launch(chain_exec(c, total * kHostSpeed), ChainExec{id});
      return;
    }
    c.rates.emplace_back(now(), compute_rate(t.rank_index));
    c.slot = activities_.launch(chain_exec(c, total * kHostSpeed), ChainExec{id});
    exposed_chains_[static_cast<size_t>(t.rank_index)].push_back(id);
  }

  // The Exec of a chain with `flops` left to run, bounded while interference slows it.
  sg4::ActivityPtr chain_exec(const Chain& c, double flops) const
  {
    auto exec = sg4::Exec::init()->set_host(hosts_[static_cast<size_t>(w_.ranks[static_cast<size_t>(c.rank_index)].rank)])
                    ->set_flops_amount(flops);
    if (c.exposed && c.rates.back().second < 1)
      exec->set_bound(c.rates.back().second * kHostSpeed);
    return exec;
  }

  int allocate_chain(Chain&& chain)
  {
    if (free_chains_.empty()) {
      chains_.push_back(std::move(chain));
      return static_cast<int>(chains_.size() - 1);
    }
    int id = free_chains_.back();
    free_chains_.pop_back();
    chains_[static_cast<size_t>(id)] = std::move(chain);
    return id;
  }

  void chain_done(int id)
  {
    Chain chain = std::move(chains_[static_cast<size_t>(id)]);
    free_chains_.push_back(id);
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
      finish({chain.rank_index, v}, t, std::max(t, std::min(end, now())));
      t = std::max(t, std::min(end, now()));
    }
  }

  // --- communication/compute interference ----------------------------------------------------
  // NCCL's kernels take SMs and memory bandwidth from the compute kernels beside them. While a
  // rank whose device has an interference factor f has a collective in flight on a communication
  // stream, its compute chains run bounded at (1-f) of the host's speed, so compute then takes
  // 1/(1-f) as long. An Exec's bound cannot change once it runs, so when the rank's first such
  // collective starts or its last ends, each running compute chain is restarted with the work it
  // has left under the new bound: exact, and a handful of activities per collective, where a
  // virtual machine per rank made SimGrid re-solve every VM at every step (up to 3x slower).
  void set_up_interference()
  {
    collectives_in_flight_.assign(w_.ranks.size(), 0);
    interfering_.resize(w_.ranks.size());
    exposed_chains_.resize(w_.ranks.size());
    for (size_t i = 0; i < w_.ranks.size(); ++i) {
      const double f = w_.ranks[i].comm_compute_interference;
      if (!(f > 0))
        continue;
      if (f >= 1)
        throw std::runtime_error(fmt::format("rank {}: a compute/communication interference of {} leaves compute no speed",
                                             w_.ranks[i].rank, f));
      interfering_[i].assign(result_.ranks[i].tasks.size(), 0);
    }
  }

  // The fraction of its speed the rank's compute runs at now.
  double compute_rate(int rank_index) const
  {
    return collectives_in_flight_[static_cast<size_t>(rank_index)] > 0
               ? 1 - w_.ranks[static_cast<size_t>(rank_index)].comm_compute_interference
               : 1.0;
  }

  void collective_started(const TaskRef& t)
  {
    const Task& task = task_of(t);
    // Tensor-parallel collectives run in order with the rank's compute (Megatron waits for them),
    // so they never share the SMs with a kernel of the same rank.
    if (interfering_[t.rank_index].empty() || task.kind != TaskKind::Collective || !is_communication(task.stream) ||
        task.stream == Stream::Tensor)
      return;
    interfering_[t.rank_index][t.task] = 1;
    if (collectives_in_flight_[t.rank_index]++ == 0)
      restart_exposed_chains(t.rank_index);
  }

  void collective_ended(const TaskRef& t)
  {
    if (interfering_[t.rank_index].empty() || !interfering_[t.rank_index][t.task])
      return;
    interfering_[t.rank_index][t.task] = 0;
    if (--collectives_in_flight_[t.rank_index] == 0)
      restart_exposed_chains(t.rank_index);
  }

  // The rank's compute rate changed: each running compute chain goes on, with the work it has
  // left, as a new Exec at the new rate. It keeps its chain, so chain_done sees one chain.
  void restart_exposed_chains(int rank_index)
  {
    const double rate = compute_rate(rank_index);
    for (int id : exposed_chains_[static_cast<size_t>(rank_index)]) {
      Chain& c              = chains_[static_cast<size_t>(id)];
      sg4::ActivityPtr& old = activities_.activity(c.slot);
      const double left     = old->get_remaining();
      if (old->get_state() != sg4::Activity::State::STARTED || !(left > 0))
        continue; // ends now: its completion is on its way
      activities_.cancel(c.slot);
      c.rates.emplace_back(now(), rate);
      c.slot = activities_.occupy(chain_exec(c, left), ChainExec{id}, Transfer{});
    }
  }

  // --- point to point ----------------------------------------------------------------------
  struct Channel {
    TaskRef send{-1, 0}, recv{-1, 0};
    int src = 0, dst = 0;
    double bytes = 0;
    double posted_s = 0; // when the first side posted
  };

  static long long channel_key(int src, int dst, int tag)
  {
    return (static_cast<long long>(src) * (1LL << 22) + dst) * (1LL << 20) + tag;
  }

  void post_point_to_point(const TaskRef& t)
  {
    const Task& task  = task_of(t);
    const int me      = w_.ranks[t.rank_index].rank;
    const bool send   = task.kind == TaskKind::Send;
    const int src     = send ? me : task.peer;
    const int dst     = send ? task.peer : me;
    long long key     = channel_key(src, dst, task.tag);
    auto [it, fresh]  = channel_ids_.try_emplace(key, 0);
    if (fresh) {
      it->second = static_cast<int>(channels_.size());
      channels_.push_back(Channel{{-1, 0}, {-1, 0}, src, dst, task.bytes, now()});
    } else if (send && c_has_recv(it->second)) {
      accounting_.waited(dst, src, -1, now() - channels_[static_cast<size_t>(it->second)].posted_s);
    }
    int id     = it->second;
    Channel& c = channels_[static_cast<size_t>(id)];
    (send ? c.send : c.recv) = t;
    const bool peer_simulated = simulated_[static_cast<size_t>(task.peer)] >= 0;
    if (peer_simulated && (c.send.rank_index < 0 || c.recv.rank_index < 0))
      return; // wait for the other side to post
    channel_ids_.erase(it);
    if (c.bytes <= 0) {
      point_to_point_done(id);
      return;
    }
    for (TaskRef side : {c.send, c.recv})
      if (side.rank_index >= 0)
        begin(side);
    if (options_.analytic_network) { // the transfer's closed form on its path, no sharing
      activities_.launch(activities_.delay(c.dst, timing_.transfer_seconds(c.src, c.dst, c.bytes)), PointToPointTransfer{id},
                         Transfer{c.src, c.dst, c.bytes, 0});
      return;
    }
    activities_.transfer(c.src, c.dst, c.bytes, PointToPointTransfer{id});
  }

  void point_to_point_done(int id)
  {
    Channel& c = channels_[static_cast<size_t>(id)];
    for (TaskRef side : {c.send, c.recv})
      if (side.rank_index >= 0)
        complete(side);
  }

  // --- host copies -------------------------------------------------------------------------
  // One transfer between the rank's GPU and its node's CPU host ("nodeN-cpu", in the GPU's node
  // zone), so that it shares the host link and the CPU side with the node's other host traffic.
  void post_host_copy(const TaskRef& t)
  {
    const Task& task = task_of(t);
    begin(t);
    if (task.bytes <= 0) {
      complete(t);
      return;
    }
    sg4::Host* gpu    = hosts_[static_cast<size_t>(w_.ranks[t.rank_index].rank)];
    const auto name   = std::string(gpu->get_englobing_zone()->get_name()) + "-cpu";
    sg4::Host* cpu    = sg4::Host::by_name_or_null(name);
    if (cpu == nullptr)
      throw std::runtime_error(fmt::format("rank {} copies to host memory, but its node has no CPU host {}",
                                           w_.ranks[t.rank_index].rank, name));
    const bool to_host = task.stream == Stream::DeviceToHost;
    activities_.launch(
        sg4::Comm::sendto_init(to_host ? gpu : cpu, to_host ? cpu : gpu)->set_payload_size(static_cast<uint64_t>(task.bytes)),
        HostCopy{t});
  }

  // --- collectives -------------------------------------------------------------------------
  // Which algorithm runs each collective type ("auto" and per-type choices pick per group and
  // size), for the report: the names in order, joined by "+" when a type used several.
  void record_collective_algorithms()
  {
    std::set<std::tuple<int, CollectiveOp, double>> seen;
    std::map<std::string, std::set<std::string>> used;
    for (const auto& program : w_.ranks)
      for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
        const Task& t = program.graph[v];
        if (t.kind != TaskKind::Collective || !seen.emplace(t.group, t.op, t.bytes).second)
          continue;
        const GroupShape& g = timing_.shape(t.group);
        if (g.n > 1)
          used[collective_name(t.op)].insert(concrete_algorithm(algorithm_, t.op, g, t.bytes).name);
      }
    for (const auto& [op, names] : used) {
      std::string joined;
      for (const auto& name : names)
        joined += (joined.empty() ? "" : "+") + name;
      result_.collective_algorithms[op] = joined;
    }
  }

  // Each member runs the algorithm's lanes side by side; on a lane, step k starts when the
  // member's sends of step k-1 have finished and the receives it lists up to step k-1 have
  // arrived (messages between two members are matched in order, models/collectives/collective.hpp).
  struct Inbox {
    int from = 0, arrived = 0, consumed = 0;
  };
  struct Lane {
    int step = 0;      // the step being sent, or the next to start
    int in_flight = 0; // sends of `step` still moving
    bool sending = false;
    CollectiveStep current;     // the step being sent
    std::vector<Inbox> inboxes; // per peer it receives from (few: ring 1, tree up to 4)
  };
  struct Member {
    TaskRef task{-1, 0};
    std::vector<Lane> lanes;
    int lanes_done = 0;
    bool done = false;
    double posted_s = 0; // when this member posted the collective
  };
  struct Instance {
    int group = 0;
    CollectiveOp op = CollectiveOp::AllReduce;
    double bytes = 0;
    const CollectiveAlgorithm* algorithm = nullptr; // the concrete one
    const GroupShape* shape = nullptr;
    int steps = 0, lanes = 1, posted = 0, simulated = 0, finished = 0;
    int coalesced_left = 0; // transfers of a coalesced collective still moving
    double tail_s = 0;      // latency still to wait after a coalesced transfer
    std::vector<Member> members; // by position in the group
  };

  void post_collective(const TaskRef& t)
  {
    const Task& task = task_of(t);
    const Group& g   = w_.groups[static_cast<size_t>(task.group)];
    int seq          = collective_seq_[t.rank_index][task.group]++;
    long long key    = static_cast<long long>(task.group) * (1LL << 32) + seq;
    auto [it, fresh] = instance_ids_.try_emplace(key, 0);
    if (fresh) {
      it->second = allocate_instance();
      Instance& inst = instances_[static_cast<size_t>(it->second)];
      inst.group     = task.group;
      inst.op        = task.op;
      inst.bytes     = task.bytes;
      inst.shape     = &timing_.shape(task.group);
      inst.algorithm = &concrete_algorithm(algorithm_, task.op, *inst.shape, task.bytes);
      inst.steps     = g.ranks.size() > 1 ? inst.algorithm->steps(task.op, *inst.shape, task.bytes) : 0;
      inst.lanes     = lanes_of(*inst.algorithm, task.op, *inst.shape, task.bytes);
      inst.members.assign(g.ranks.size(), Member{});
      for (int r : g.ranks)
        inst.simulated += simulated_[static_cast<size_t>(r)] >= 0 ? 1 : 0;
    }
    int id         = it->second;
    Instance& inst = instances_[static_cast<size_t>(id)];
    const int me   = w_.ranks[t.rank_index].rank;
    for (size_t m = 0; m < g.ranks.size(); ++m)
      if (g.ranks[m] == me) {
        inst.members[m].task     = t;
        inst.members[m].posted_s = now();
        inst.members[m].lanes.assign(static_cast<size_t>(inst.lanes), Lane{});
      }
    if (++inst.posted < inst.simulated)
      return; // a collective starts when every simulated member has posted it
    instance_ids_.erase(it);
    for (size_t m = 0; m < inst.members.size(); ++m) // the last to post kept the others waiting
      if (inst.members[m].task.rank_index >= 0 && g.ranks[m] != me)
        accounting_.waited(g.ranks[m], me, inst.group, now() - inst.members[m].posted_s);
    for (size_t m = 0; m < inst.members.size(); ++m)
      if (inst.members[m].task.rank_index >= 0)
        begin(inst.members[m].task);
    if (inst.bytes <= 0 || inst.steps == 0) {
      collective_delay_done(id);
      return;
    }
    if (timing_.analytic(inst.group, inst.op)) {
      double seconds = timing_.seconds(inst.group, inst.op, inst.bytes);
      if (seconds <= 0) {
        collective_delay_done(id);
        return;
      }
      for (size_t m = 0; m < inst.members.size(); ++m)
        if (inst.members[m].task.rank_index >= 0)
          accounting_.carried_by_collective(inst.group, inst.op, inst.bytes, static_cast<int>(m), now(), now() + seconds);
      activities_.launch(activities_.delay(me, seconds), CollectiveDelay{id});
      return;
    }
    if (const double launch_s = timing_.launch_latency(inst.group, inst.op, inst.bytes); launch_s > 0 && inst.steps > 0) {
      // NCCL's launch cost (and its protocol's step latencies beyond the links'), then the steps
      activities_.launch(activities_.delay(me, launch_s), CollectiveLaunch{id});
      return;
    }
    start_collective_steps(id);
  }

  void start_collective_steps(int id)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    if (inst.simulated == 1 && coalesce(id))
      return;
    for (size_t m = 0; m < inst.members.size(); ++m)
      if (inst.members[m].task.rank_index >= 0)
        for (int lane = 0; lane < inst.lanes; ++lane)
          advance(id, static_cast<int>(m), lane);
  }

  // A lone simulated member whose steps on each lane all send to one peer (a ring) moves each
  // lane's data as one transfer of all its steps' bytes, then waits the latencies of the other
  // steps: the same bytes share the same links with the same other flows, in lanes + 1
  // activities instead of lanes · 2(n-1). (With no other member simulated, nothing waits for
  // its individual steps.)
  bool coalesce(int id)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    int m          = 0;
    while (inst.members[static_cast<size_t>(m)].task.rank_index < 0)
      ++m;
    const Group& g = w_.groups[static_cast<size_t>(inst.group)];
    std::vector<std::pair<int, double>> lanes; // peer, bytes
    for (int lane = 0; lane < inst.lanes; ++lane) {
      int peer     = -1;
      double bytes = 0;
      for (int k = 0; k < inst.steps; ++k) {
        CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane, m, k);
        if (step.sends != 1 || (peer >= 0 && step.send_to[0] != peer))
          return false;
        peer = step.send_to[0];
        bytes += step.bytes;
      }
      if (peer < 0 || bytes <= 0)
        return false;
      lanes.emplace_back(peer, bytes);
    }
    if (lanes.empty())
      return false;
    // Every member of the ring sends as much at the same time, and each step forwards what the
    // step before delivered: the ring moves at the pace of its slowest hop. The lone member's
    // lane is timed on that hop (a group over two nodes whose own hop stays inside the node still
    // waits for the NIC hop); ties keep its own hop.
    const int src = g.ranks[static_cast<size_t>(m)];
    std::vector<Hop> hops;
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const int peer     = lanes[lane].first;
      const double bytes = lanes[lane].second;
      auto cost          = [&](const Hop& h) {
        return timing_.transfer_seconds(h.src, h.dst, bytes) + (inst.steps - 1) * timing_.latency(h.src, h.dst);
      };
      Hop slowest{src, g.ranks[static_cast<size_t>(peer)]};
      double worst = cost(slowest);
      for (int other = 0; other < static_cast<int>(g.ranks.size()); ++other) {
        const CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, static_cast<int>(lane), other, 0);
        if (other == m || step.sends != 1)
          continue;
        const Hop hop{g.ranks[static_cast<size_t>(other)], g.ranks[static_cast<size_t>(step.send_to[0])]};
        if (const double c = cost(hop); c > worst) {
          worst   = c;
          slowest = hop;
        }
      }
      hops.push_back(slowest);
    }
    inst.tail_s = 0;
    for (const Hop& h : hops)
      inst.tail_s = std::max(inst.tail_s, (inst.steps - 1) * timing_.latency(h.src, h.dst));
    inst.coalesced_left = static_cast<int>(lanes.size());
    for (size_t lane = 0; lane < lanes.size(); ++lane)
      activities_.transfer(hops[lane].src, hops[lane].dst, lanes[lane].second, CoalescedTransfer{id});
    return true;
  }

  struct Hop {
    int src = -1, dst = -1; // global ranks
  };

  // The hop a lone simulated member's send of step k is timed on: the slowest of the step's
  // sends over every member (each sends at the same time, and the next step forwards what this
  // one delivered), so a member that stands for its group waits for the group's slowest hop, not
  // only its own. Ties keep its own hop. Remembered per group, operation, size, lane and step.
  Hop step_bottleneck(const Instance& inst, int lane, int k, Hop own, double bytes)
  {
    const auto key = std::make_tuple(inst.group, static_cast<int>(inst.op), inst.bytes, lane, k, own.src, own.dst);
    auto [it, fresh] = bottlenecks_.try_emplace(key, own);
    if (!fresh)
      return it->second;
    const Group& g = w_.groups[static_cast<size_t>(inst.group)];
    double worst   = timing_.transfer_seconds(own.src, own.dst, bytes);
    for (int other = 0; other < static_cast<int>(g.ranks.size()); ++other) {
      const CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane, other, k);
      if (step.bytes <= 0)
        continue;
      for (int q = 0; q < step.sends; ++q) {
        const Hop hop{g.ranks[static_cast<size_t>(other)], g.ranks[static_cast<size_t>(step.send_to[static_cast<size_t>(q)])]};
        if (const double c = timing_.transfer_seconds(hop.src, hop.dst, step.bytes); c > worst) {
          worst      = c;
          it->second = hop;
        }
      }
    }
    return it->second;
  }

  void coalesced_transfer_done(int id)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    if (--inst.coalesced_left > 0)
      return;
    int m = 0;
    while (inst.members[static_cast<size_t>(m)].task.rank_index < 0)
      ++m;
    const int me = w_.ranks[inst.members[static_cast<size_t>(m)].task.rank_index].rank;
    if (inst.tail_s <= 0) {
      collective_delay_done(id);
      return;
    }
    activities_.launch(activities_.delay(me, inst.tail_s), CollectiveDelay{id});
  }

  int allocate_instance()
  {
    if (!free_instances_.empty()) {
      int id = free_instances_.back();
      free_instances_.pop_back();
      instances_[static_cast<size_t>(id)] = Instance{};
      return id;
    }
    instances_.emplace_back();
    return static_cast<int>(instances_.size() - 1);
  }

  bool simulated_member(const Instance& inst, int m) const
  {
    return m >= 0 && inst.members[static_cast<size_t>(m)].task.rank_index >= 0;
  }

  static Inbox& inbox(Lane& lane, int from)
  {
    for (auto& box : lane.inboxes)
      if (box.from == from)
        return box;
    lane.inboxes.push_back(Inbox{from, 0, 0});
    return lane.inboxes.back();
  }

  // True when every receive of the member's step k-1 from a simulated member has arrived; then
  // takes them. (A member that is not simulated behaves like this one: it is not waited for.)
  bool take_receives(Instance& inst, int m, Lane& lane, int lane_index, int k)
  {
    if (k == 0)
      return true;
    const CollectiveStep prev = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane_index, m, k - 1);
    for (int r = 0; r < prev.recvs; ++r) {
      const int from = prev.recv_from[static_cast<size_t>(r)];
      if (!simulated_member(inst, from))
        continue;
      int same = 0;
      for (int q = 0; q < r; ++q)
        same += prev.recv_from[static_cast<size_t>(q)] == from ? 1 : 0;
      const Inbox& box = inbox(lane, from);
      if (box.arrived <= box.consumed + same)
        return false;
    }
    for (int r = 0; r < prev.recvs; ++r)
      if (simulated_member(inst, prev.recv_from[static_cast<size_t>(r)]))
        ++inbox(lane, prev.recv_from[static_cast<size_t>(r)]).consumed;
    return true;
  }

  // Starts the member's next step on a lane if it may, or finishes the lane (and the member).
  void advance(int id, int m, int lane_index)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    Member& me     = inst.members[static_cast<size_t>(m)];
    Lane& lane     = me.lanes[static_cast<size_t>(lane_index)];
    if (lane.sending || me.done || lane.step > inst.steps)
      return;
    const Group& g = w_.groups[static_cast<size_t>(inst.group)];
    while (true) {
      const int k = lane.step;
      if (!take_receives(inst, m, lane, lane_index, k))
        return;
      if (k == inst.steps) {
        lane.step = inst.steps + 1; // finished
        if (++me.lanes_done < inst.lanes)
          return;
        me.done = true;
        complete(me.task);
        if (++inst.finished == inst.simulated)
          free_instances_.push_back(id);
        return;
      }
      lane.current = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane_index, m, k);
      if (lane.current.sends == 0 || lane.current.bytes <= 0) {
        sent_to_all(id, m, lane_index);
        continue;
      }
      lane.sending   = true;
      lane.in_flight = lane.current.sends;
      for (int q = 0; q < lane.current.sends; ++q) {
        Hop hop{g.ranks[static_cast<size_t>(m)], g.ranks[static_cast<size_t>(lane.current.send_to[static_cast<size_t>(q)])]};
        if (inst.simulated == 1)
          hop = step_bottleneck(inst, lane_index, k, hop, lane.current.bytes);
        activities_.transfer(hop.src, hop.dst, lane.current.bytes, CollectiveSend{id, m, lane_index, q});
      }
      return;
    }
  }

  void collective_delay_done(int id)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    for (auto& member : inst.members)
      if (member.task.rank_index >= 0)
        complete(member.task);
    free_instances_.push_back(id);
  }

  // The member's current step on a lane has delivered everything: count the arrivals (a step
  // without bytes delivers at once) and move to the next step.
  void sent_to_all(int id, int m, int lane_index)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    Lane& lane     = inst.members[static_cast<size_t>(m)].lanes[static_cast<size_t>(lane_index)];
    if (lane.current.bytes <= 0)
      for (int q = 0; q < lane.current.sends; ++q)
        arrived(id, m, lane.current.send_to[static_cast<size_t>(q)], lane_index);
    lane.sending = false;
    ++lane.step;
  }

  void arrived(int id, int from, int to, int lane_index)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    if (!simulated_member(inst, to))
      return;
    ++inbox(inst.members[static_cast<size_t>(to)].lanes[static_cast<size_t>(lane_index)], from).arrived;
  }

  void collective_step_done(const CollectiveSend& send)
  {
    const int id         = send.instance;
    Instance& inst       = instances_[static_cast<size_t>(id)];
    const int q          = send.peer;
    const int lane_index = send.lane;
    const int m          = send.member;
    Lane& lane           = inst.members[static_cast<size_t>(m)].lanes[static_cast<size_t>(lane_index)];
    const int to         = lane.current.send_to[static_cast<size_t>(q)];
    arrived(id, m, to, lane_index);
    if (--lane.in_flight == 0)
      sent_to_all(id, m, lane_index);
    if (simulated_member(inst, to) && to != m)
      advance(id, to, lane_index);
    advance(id, m, lane_index);
  }

  // --- stragglers, jitter, link traffic and waits -------------------------------------------
  double compute_factor(const TaskRef& t) const
  {
    const int rank = w_.ranks[t.rank_index].rank;
    double f       = 1.0;
    if (static_cast<size_t>(rank) < options_.compute_slowdown.size())
      f = options_.compute_slowdown[static_cast<size_t>(rank)];
    if (options_.jitter_sigma > 0)
      f *= jitter_factor(options_.jitter_seed, options_.jitter_sigma, rank, t.task);
    return f;
  }

  bool c_has_recv(int channel) const { return channels_[static_cast<size_t>(channel)].recv.rank_index >= 0; }

  std::string deadlock_message() const
  {
    std::string stuck;
    int shown = 0;
    for (size_t i = 0; i < w_.ranks.size() && shown < 5; ++i) {
      const auto& g = w_.ranks[i].graph;
      for (TaskId v = 0; v < boost::num_vertices(g) && shown < 5; ++v) {
        if (result_.ranks[i].tasks[v].end >= 0)
          continue;
        const Task& t = g[v];
        stuck += fmt::format("\n  rank {} task {} ({} on stream {}, micro-batch {})", w_.ranks[i].rank, v,
                             pass_name(t.pass), stream_name(t.stream), t.micro_batch);
        ++shown;
        break;
      }
    }
    return fmt::format("the task graph deadlocks: {} tasks never ran; first stuck tasks:{}", remaining_, stuck);
  }

  const Workload& w_;
  const std::vector<sg4::Host*>& hosts_;
  const CollectiveAlgorithm& algorithm_;
  const ReplayOptions& options_;
  CollectiveTiming timing_;
  Accounting accounting_;
  LiveActivities activities_;
  std::map<std::tuple<int, int, double, int, int, int, int>, Hop> bottlenecks_; // step_bottleneck's
  std::vector<int> simulated_;       // global rank -> index into w_.ranks, or -1
  std::vector<int> group_simulated_; // simulated members of each group
  std::vector<int> collectives_in_flight_;       // on communication streams, per simulated rank
  std::vector<std::vector<char>> interfering_;   // per task: counted in collectives_in_flight_; empty without interference
  std::vector<std::vector<int>> exposed_chains_; // per simulated rank: its running compute chains, with interference
  ReplayResult result_;
  std::vector<std::vector<int>> indegree_;
  std::vector<std::vector<char>> claimed_;
  std::vector<Chain> chains_;
  std::vector<int> free_chains_;
  std::deque<TaskRef> ready_;
  long long remaining_ = 0;


  std::vector<Channel> channels_;
  std::unordered_map<long long, int> channel_ids_;

  std::vector<std::unordered_map<int, int>> collective_seq_;
  std::vector<Instance> instances_;
  std::vector<int> free_instances_;
  std::unordered_map<long long, int> instance_ids_;
};

} // namespace

ReplayResult replay(const Workload& workload, const std::vector<sg4::Host*>& gpu_of_rank,
                    const CollectiveAlgorithm& algorithm, const ReplayOptions& options)
{
  if (gpu_of_rank.size() < static_cast<size_t>(workload.world_size))
    throw std::runtime_error(fmt::format("the platform has {} GPUs for {} ranks", gpu_of_rank.size(), workload.world_size));
  return Replay(workload, gpu_of_rank, algorithm, options).run();
}

} // namespace stepsim
