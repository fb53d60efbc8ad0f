// The replay's owner: builds the parts (scheduler.hpp, compute.hpp, point_to_point.hpp,
// collectives.hpp, accounting.hpp over the live activities of activities.hpp), hands each ready
// task to the part that runs its kind, and each completed activity to the part that started it.
#include "sim/engine/replay.hpp"

#include "sim/engine/accounting.hpp"
#include "sim/engine/activities.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/collectives.hpp"
#include "sim/engine/compute.hpp"
#include "sim/engine/point_to_point.hpp"
#include "sim/engine/scheduler.hpp"
#include "sim/engine/shadows.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
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
      : w_(w), algorithm_(algorithm),
        timing_(w, hosts, algorithm, options.analytic_network, options.collective_base_latency_s), simulated_(w),
        shadows_(w, timing_, algorithm, simulated_, !options.analytic_network), scheduler_(w), activities_(hosts),
        accounting_(w, algorithm, timing_, options.record_links),
        parts_{timing_, simulated_, shadows_, scheduler_, activities_, accounting_}, compute_(w, options, parts_),
        point_to_point_(w, options.analytic_network, parts_), collectives_(w, parts_)
  {
    scheduler_.watch(compute_);
    // Without shadows, a group's lone simulated member's flows cross only the hops it is timed
    // on (collective_timing.hpp, lone_members).
    if (shadows_.shadowed_groups() == 0 && shadows_.shadowed_transfers() == 0) {
      std::vector<int> lone(w.groups.size(), -1);
      bool any = false;
      for (size_t g = 0; g < w.groups.size(); ++g) {
        if (simulated_.in_group[g] != 1)
          continue;
        const auto& ranks = w.groups[g].ranks;
        for (size_t m = 0; m < ranks.size(); ++m)
          if (simulated_.simulated(ranks[m]))
            lone[g] = static_cast<int>(m);
        any = any || ranks.size() > 1;
      }
      if (any)
        timing_.lone_members(lone);
    }
  }

  const std::string& symmetry_broken() const { return shadows_.symmetry_broken(); }

  ReplayResult run()
  {
    ReplayResult result;
    result.collective_algorithms = collective_algorithms(timing_, algorithm_);
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) {
      if (auto done = activities_.completed(a))
        on_completion(*done);
    });
    activities_.on_delay_done([this](const LiveActivities::Live& done) { on_completion(done); });
    drain();
    sg4::Engine::get_instance()->run();
    if (scheduler_.remaining() > 0)
      throw Deadlock(scheduler_.deadlock_message());
    result.ranks = scheduler_.take_timelines();
    for (size_t i = 0; i < result.ranks.size(); ++i)
      result.ranks[i].host_waits = compute_.take_host_waits(static_cast<int>(i));
    // The last task's end: shadows that no task waits for may still be moving after it.
    for (const auto& rank : result.ranks)
      for (const auto& t : rank.tasks)
        result.end_s = std::max(result.end_s, t.end);
    result.activities = activities_.started();
    result.shadows    = {shadows_.short_changed_links(), shadows_.shadowed_groups(), shadows_.shadowed_transfers(),
                         collectives_.shadow_flows() + point_to_point_.shadow_flows()};
    accounting_.export_to(result);
    return result;
  }

private:
  // An activity or a delay has ended: the part that started it goes on.
  void on_completion(const LiveActivities::Live& done)
  {
    if (done.transfer.src >= 0)
      accounting_.carried(done.transfer.src, done.transfer.dst, done.transfer.bytes, done.transfer.start, now());
    std::visit(Overloaded{
                   [&](const ChainDelay& r) { compute_.chain_done(r.chain); },
                   [&](const PointToPointTransfer& r) { point_to_point_.transfer_done(r.channel); },
                   [&](const CollectiveSend& r) { collectives_.send_done(r); },
                   [&](const CollectiveShadow& r) { collectives_.shadow_done(r); },
                   [&](const LooseShadow&) {},
                   [&](const CollectiveDelay& r) { collectives_.delay_done(r.instance); },
                   [&](const CoalescedTransfer& r) { collectives_.coalesced_transfer_done(r.instance); },
                   [&](const HostCopy& r) { scheduler_.complete(r.task); },
                   [&](const CollectiveLaunch& r) { collectives_.start_steps(r.instance); },
               },
               done.role);
    drain();
  }

  void drain()
  {
    while (auto t = scheduler_.next_ready())
      start(*t);
  }

  void start(const TaskRef& t)
  {
    const double seconds = compute_.timed_seconds(t);
    if (seconds >= 0) {
      compute_.start_chain(t, seconds);
      return;
    }
    switch (scheduler_.task_of(t).kind) {
    case TaskKind::Compute: break; // always timed
    case TaskKind::Send:
    case TaskKind::Recv: point_to_point_.post(t); return;
    case TaskKind::Collective: collectives_.post(t); return;
    case TaskKind::HostCopy: point_to_point_.post_host_copy(t); return;
    }
  }

  const Workload& w_;
  const CollectiveAlgorithm& algorithm_;
  CollectiveTiming timing_;
  SimulatedRanks simulated_;
  Shadows shadows_;
  Scheduler scheduler_;
  LiveActivities activities_;
  Accounting accounting_;
  Parts parts_;
  Compute compute_;
  PointToPoint point_to_point_;
  Collectives collectives_;
};

} // namespace

ReplayResult replay(const Workload& workload, const std::vector<sg4::Host*>& gpu_of_rank,
                    const CollectiveAlgorithm& algorithm, const ReplayOptions& options)
{
  if (gpu_of_rank.size() < static_cast<size_t>(workload.world_size))
    throw std::runtime_error(fmt::format("the platform has {} GPUs for {} ranks", gpu_of_rank.size(), workload.world_size));
  Replay r(workload, gpu_of_rank, algorithm, options);
  if (!r.symmetry_broken().empty())
    throw SymmetryBroken(r.symmetry_broken());
  return r.run();
}

} // namespace stepsim
