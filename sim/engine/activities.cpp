#include "sim/engine/activities.hpp"
#include "sim/core/link_bandwidth.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Host.hpp>

#include <cstdint>
#include <stdexcept>

namespace stepsim::engine {

LiveActivities::~LiveActivities()
{
  for (auto& live : live_)
    if (live.timer != nullptr)
      live.timer->remove();
}

size_t LiveActivities::allocate(Live&& live)
{
  size_t slot;
  if (free_slots_.empty()) {
    slot = live_.size();
    live_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  live_[slot]                = std::move(live);
  live_[slot].transfer.start = now();
  return slot;
}

size_t LiveActivities::delay(double seconds, Role role, const Transfer& transfer)
{
  const size_t slot = allocate(Live{nullptr, role, transfer, nullptr});
  ++started_;
  live_[slot].timer = simgrid::kernel::timer::Timer::set(now() + seconds, [this, slot] { fired(slot); });
  return slot;
}

// The engine pops a timer before calling it and deletes it after: forget it first, so that
// nothing removes it again (the destructor, a reschedule).
void LiveActivities::fired(size_t slot)
{
  live_[slot].timer = nullptr;
  const Live done   = live_[slot];
  free_slots_.push_back(slot);
  delay_done_(done);
}

void LiveActivities::reschedule(size_t slot, double seconds)
{
  if (live_[slot].timer == nullptr)
    throw std::logic_error("rescheduling a delay that has ended");
  live_[slot].timer->remove();
  live_[slot].timer = simgrid::kernel::timer::Timer::set(now() + seconds, [this, slot] { fired(slot); });
}

size_t LiveActivities::launch(sg4::ActivityPtr activity, Role role, const Transfer& transfer)
{
  const size_t slot = occupy(std::move(activity), role, transfer);
  ++started_;
  return slot;
}

size_t LiveActivities::transfer(int src_rank, int dst_rank, double bytes, Role role, bool owes_transport)
{
  const Transfer moved{src_rank, dst_rank, bytes, 0};
  auto [owed, fresh] =
      owed_.try_emplace(static_cast<long long>(src_rank) << 32 | static_cast<unsigned>(dst_rank), 0.0, 0.0);
  if (fresh) {
    std::vector<sg4::Link*> route;
    host(src_rank)->route_to(host(dst_rank), route, nullptr);
    owed->second = {air_latency_owed(route), transport_latency_of(route)};
  }
  const size_t slot = launch(
      sg4::Comm::sendto_init(host(src_rank), host(dst_rank))->set_payload_size(static_cast<uint64_t>(bytes)), role, moved);
  live_[slot].owed_latency_s = owed->second.first + (owes_transport ? owed->second.second : 0.0);
  return slot;
}

size_t LiveActivities::occupy(sg4::ActivityPtr activity, Role role, const Transfer& transfer)
{
  const size_t slot = allocate(Live{activity, role, transfer, nullptr});
  activity->set_data(reinterpret_cast<void*>(slot + 1));
  activity->start();
  return slot;
}

std::optional<LiveActivities::Live> LiveActivities::completed(const sg4::Activity& activity)
{
  auto slot = reinterpret_cast<size_t>(activity.get_data<void>());
  if (slot == 0 || slot > live_.size())
    return std::nullopt;
  // An activity must outlive its own completion callback; the previous one is done by now.
  finished_.clear();
  Live done = live_[slot - 1];
  finished_.push_back(std::move(live_[slot - 1].activity));
  free_slots_.push_back(slot - 1);
  if (done.owed_latency_s > 0) { // the bytes are in; the latency SimGrid did not charge is still owed
    const size_t wait = allocate(Live{nullptr, done.role, done.transfer, nullptr});
    live_[wait].transfer.start = done.transfer.start;
    live_[wait].timer = simgrid::kernel::timer::Timer::set(now() + done.owed_latency_s, [this, wait] { fired(wait); });
    return std::nullopt;
  }
  return done;
}

} // namespace stepsim::engine
