#include "sim/replay.hpp"

#include "sim/collective_timing.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <deque>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace stepsim {

namespace sg4 = simgrid::s4u;

namespace {

constexpr double kHostSpeed = 1e9; // GPU hosts run 1e9 "flops" per second: an Exec's amount is nanoseconds

struct TaskRef {
  int rank_index; // into Workload::ranks
  TaskId task;
};

class Replay {
public:
  Replay(const Workload& w, const std::vector<sg4::Host*>& hosts, const CollectiveAlgorithm& algorithm)
      : w_(w), hosts_(hosts), algorithm_(algorithm), timing_(w, hosts, algorithm),
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
  }

  ReplayResult run()
  {
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { on_completion(a); });
    drain();
    sg4::Engine::get_instance()->run();
    if (remaining_ > 0)
      throw std::runtime_error(deadlock_message());
    result_.end_s = sg4::Engine::get_clock();
    return std::move(result_);
  }

private:
  // --- bookkeeping of live SimGrid activities ----------------------------------------------
  enum class Kind { Chain, PointToPoint, CollectiveStep, CollectiveDelay, CoalescedTransfer };
  struct Live {
    sg4::ActivityPtr activity;
    Kind kind;
    int a = 0, b = 0; // chain: chain; p2p: channel; collective step: instance, member; delay: instance
  };

  void launch(sg4::ActivityPtr activity, Kind kind, int a, int b)
  {
    size_t slot;
    if (free_slots_.empty()) {
      slot = live_.size();
      live_.emplace_back();
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
    live_[slot] = Live{activity, kind, a, b};
    activity->set_data(reinterpret_cast<void*>(slot + 1));
    activity->start();
    ++result_.activities;
  }

  void on_completion(const sg4::Activity& activity)
  {
    // An activity must outlive its own completion callback; the previous one is done by now.
    finished_.clear();
    auto slot = reinterpret_cast<size_t>(activity.get_data<void>());
    if (slot == 0 || slot > live_.size())
      return;
    Live done = live_[slot - 1];
    finished_.push_back(std::move(live_[slot - 1].activity));
    free_slots_.push_back(slot - 1);
    switch (done.kind) {
    case Kind::Chain: chain_done(done.a); break;
    case Kind::PointToPoint: point_to_point_done(done.a); break;
    case Kind::CollectiveStep: collective_step_done(done.a, done.b); break;
    case Kind::CollectiveDelay: collective_delay_done(done.a); break;
    case Kind::CoalescedTransfer: coalesced_transfer_done(done.a); break;
    }
    drain();
  }

  double now() const { return sg4::Engine::get_clock(); }
  const Task& task_of(const TaskRef& t) const { return w_.ranks[t.rank_index].graph[t.task]; }
  TaskTiming& timing(const TaskRef& t) { return result_.ranks[t.rank_index].tasks[t.task]; }

  void begin(const TaskRef& t)
  {
    if (timing(t).start < 0)
      timing(t).start = now();
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
      return std::max(0.0, w_.works[static_cast<size_t>(task.work)].seconds);
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
  };

  void start_chain(const TaskRef& t, double first_seconds)
  {
    const auto& g = w_.ranks[t.rank_index].graph;
    Chain chain{t.rank_index, t.task, t.task, now(), {first_seconds}};
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
    int id = allocate_chain(std::move(chain));
    if (total <= 0) {
      chain_done(id);
      return;
    }
    begin(t);
    sg4::Host* host = hosts_[static_cast<size_t>(w_.ranks[t.rank_index].rank)];
    launch(sg4::Exec::init()->set_host(host)->set_flops_amount(total * kHostSpeed), Kind::Chain, id, 0);
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
    double t = chain.start;
    for (TaskId v = chain.first; v <= chain.last; ++v) {
      const double end = v == chain.last ? now() : t + chain.seconds[v - chain.first];
      finish({chain.rank_index, v}, t, end);
      t = end;
    }
  }

  // --- point to point ----------------------------------------------------------------------
  struct Channel {
    TaskRef send{-1, 0}, recv{-1, 0};
    int src = 0, dst = 0;
    double bytes = 0;
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
      channels_.push_back(Channel{{-1, 0}, {-1, 0}, src, dst, task.bytes});
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
    launch(sg4::Comm::sendto_init(hosts_[static_cast<size_t>(c.src)], hosts_[static_cast<size_t>(c.dst)])
               ->set_payload_size(static_cast<uint64_t>(c.bytes)),
           Kind::PointToPoint, id, 0);
  }

  void point_to_point_done(int id)
  {
    Channel& c = channels_[static_cast<size_t>(id)];
    for (TaskRef side : {c.send, c.recv})
      if (side.rank_index >= 0)
        complete(side);
  }

  // --- collectives -------------------------------------------------------------------------
  struct Member {
    TaskRef task{-1, 0};
    int sends_done = 0, recvs_done = 0;
    bool sending = false, done = false;
  };
  struct Instance {
    int group = 0;
    CollectiveOp op = CollectiveOp::AllReduce;
    double bytes = 0;
    int steps = 0, posted = 0, simulated = 0, finished = 0;
    double tail_s = 0; // latency still to wait after a coalesced transfer
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
      inst.steps     = algorithm_.steps(task.op, static_cast<int>(g.ranks.size()));
      inst.members.assign(g.ranks.size(), Member{});
      for (int r : g.ranks)
        inst.simulated += simulated_[static_cast<size_t>(r)] >= 0 ? 1 : 0;
    }
    int id         = it->second;
    Instance& inst = instances_[static_cast<size_t>(id)];
    const int me   = w_.ranks[t.rank_index].rank;
    for (size_t m = 0; m < g.ranks.size(); ++m)
      if (g.ranks[m] == me)
        inst.members[m].task = t;
    if (++inst.posted < inst.simulated)
      return; // a collective starts when every simulated member has posted it
    instance_ids_.erase(it);
    for (size_t m = 0; m < inst.members.size(); ++m)
      if (inst.members[m].task.rank_index >= 0)
        begin(inst.members[m].task);
    if (timing_.analytic(inst.group, inst.op)) {
      double seconds = timing_.seconds(inst.group, inst.op, inst.bytes);
      if (seconds <= 0) {
        collective_delay_done(id);
        return;
      }
      launch(sg4::Exec::init()->set_host(hosts_[static_cast<size_t>(me)])->set_flops_amount(seconds * kHostSpeed),
             Kind::CollectiveDelay, id, 0);
      return;
    }
    if (inst.simulated == 1 && coalesce(id))
      return;
    for (size_t m = 0; m < inst.members.size(); ++m)
      if (inst.members[m].task.rank_index >= 0)
        advance(id, static_cast<int>(m));
  }

  // A lone simulated member whose steps all send to the same peer (a ring) moves its data as
  // one transfer of all the steps' bytes, then waits the latencies of the other steps: the same
  // bytes share the same links with the same other flows, in 2 activities instead of 2(n-1).
  // (With no other member simulated, nothing waits for its individual steps.)
  bool coalesce(int id)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    const int n    = static_cast<int>(inst.members.size());
    int m          = 0;
    while (inst.members[static_cast<size_t>(m)].task.rank_index < 0)
      ++m;
    int peer     = -1;
    double bytes = 0;
    for (int k = 0; k < inst.steps; ++k) {
      CollectiveStep step = algorithm_.step(inst.op, n, m, k, inst.bytes);
      if (step.send_to < 0 || (peer >= 0 && step.send_to != peer))
        return false;
      peer = step.send_to;
      bytes += step.bytes;
    }
    if (peer < 0 || bytes <= 0)
      return false;
    const Group& g = w_.groups[static_cast<size_t>(inst.group)];
    const int src  = g.ranks[static_cast<size_t>(m)], dst = g.ranks[static_cast<size_t>(peer)];
    inst.tail_s    = (inst.steps - 1) * timing_.latency(src, dst);
    launch(sg4::Comm::sendto_init(hosts_[static_cast<size_t>(src)], hosts_[static_cast<size_t>(dst)])
               ->set_payload_size(static_cast<uint64_t>(bytes)),
           Kind::CoalescedTransfer, id, 0);
    return true;
  }

  void coalesced_transfer_done(int id)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    int m          = 0;
    while (inst.members[static_cast<size_t>(m)].task.rank_index < 0)
      ++m;
    const int me = w_.ranks[inst.members[static_cast<size_t>(m)].task.rank_index].rank;
    if (inst.tail_s <= 0) {
      collective_delay_done(id);
      return;
    }
    launch(sg4::Exec::init()->set_host(hosts_[static_cast<size_t>(me)])->set_flops_amount(inst.tail_s * kHostSpeed),
           Kind::CollectiveDelay, id, 0);
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

  // Starts the member's next step if it may, or finishes the member.
  void advance(int id, int m)
  {
    Instance& inst = instances_[static_cast<size_t>(id)];
    Member& me     = inst.members[static_cast<size_t>(m)];
    if (me.sending || me.done)
      return;
    const int n = static_cast<int>(inst.members.size());
    while (true) {
      int k = me.sends_done;
      // Data for step k comes from what arrived in step k-1 (ring dependency).
      if (k > 0) {
        CollectiveStep prev = algorithm_.step(inst.op, n, m, k - 1, inst.bytes);
        if (simulated_member(inst, prev.recv_from) && me.recvs_done < k)
          return;
      }
      if (k == inst.steps) {
        CollectiveStep last = inst.steps > 0 ? algorithm_.step(inst.op, n, m, k - 1, inst.bytes) : CollectiveStep{};
        if (inst.steps > 0 && simulated_member(inst, last.recv_from) && me.recvs_done < k)
          return;
        me.done = true;
        complete(me.task);
        if (++inst.finished == inst.simulated)
          free_instances_.push_back(id);
        return;
      }
      CollectiveStep step = algorithm_.step(inst.op, n, m, k, inst.bytes);
      if (step.send_to < 0 || step.bytes <= 0) {
        step_sent(inst, m, step);
        continue;
      }
      me.sending = true;
      const Group& g = w_.groups[static_cast<size_t>(inst.group)];
      launch(sg4::Comm::sendto_init(hosts_[static_cast<size_t>(g.ranks[static_cast<size_t>(m)])],
                                    hosts_[static_cast<size_t>(g.ranks[static_cast<size_t>(step.send_to)])])
                 ->set_payload_size(static_cast<uint64_t>(step.bytes)),
             Kind::CollectiveStep, id, m);
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

  void step_sent(Instance& inst, int m, const CollectiveStep& step)
  {
    auto& me = inst.members[static_cast<size_t>(m)];
    me.sending = false;
    ++me.sends_done;
    if (step.send_to >= 0)
      ++inst.members[static_cast<size_t>(step.send_to)].recvs_done;
  }

  void collective_step_done(int id, int m)
  {
    Instance& inst      = instances_[static_cast<size_t>(id)];
    const int n         = static_cast<int>(inst.members.size());
    CollectiveStep step = algorithm_.step(inst.op, n, m, inst.members[static_cast<size_t>(m)].sends_done, inst.bytes);
    step_sent(inst, m, step);
    if (simulated_member(inst, step.send_to))
      advance(id, step.send_to);
    advance(id, m);
  }

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
  CollectiveTiming timing_;
  std::vector<int> simulated_;       // global rank -> index into w_.ranks, or -1
  std::vector<int> group_simulated_; // simulated members of each group
  ReplayResult result_;
  std::vector<std::vector<int>> indegree_;
  std::vector<std::vector<char>> claimed_;
  std::vector<Chain> chains_;
  std::vector<int> free_chains_;
  std::deque<TaskRef> ready_;
  long long remaining_ = 0;

  std::vector<Live> live_;
  std::vector<size_t> free_slots_;
  std::vector<sg4::ActivityPtr> finished_;

  std::vector<Channel> channels_;
  std::unordered_map<long long, int> channel_ids_;

  std::vector<std::unordered_map<int, int>> collective_seq_;
  std::vector<Instance> instances_;
  std::vector<int> free_instances_;
  std::unordered_map<long long, int> instance_ids_;
};

} // namespace

ReplayResult replay(const Workload& workload, const std::vector<sg4::Host*>& gpu_of_rank,
                    const CollectiveAlgorithm& algorithm)
{
  if (gpu_of_rank.size() < static_cast<size_t>(workload.world_size))
    throw std::runtime_error(fmt::format("the platform has {} GPUs for {} ranks", gpu_of_rank.size(), workload.world_size));
  return Replay(workload, gpu_of_rank, algorithm).run();
}

} // namespace stepsim
