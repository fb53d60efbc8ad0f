#include "sim/engine/point_to_point.hpp"

#include "sim/engine/shadows.hpp"

#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace stepsim::engine {

void PointToPoint::post(const TaskRef& t)
{
  const Task& task  = parts_.scheduler.task_of(t);
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
    parts_.accounting.waited(dst, src, -1, now() - channels_[static_cast<size_t>(it->second)].posted_s);
  }
  int id     = it->second;
  Channel& c = channels_[static_cast<size_t>(id)];
  (send ? c.send : c.recv) = t;
  const bool peer_simulated = parts_.simulated.simulated(task.peer);
  if (peer_simulated && (c.send.rank_index < 0 || c.recv.rank_index < 0))
    return; // wait for the other side to post
  channel_ids_.erase(it);
  if (c.bytes <= 0) {
    transfer_done(id);
    return;
  }
  for (TaskRef side : {c.send, c.recv})
    if (side.rank_index >= 0)
      parts_.scheduler.begin(side);
  if (analytic_network_) { // the transfer's closed form on its path, no sharing
    parts_.activities.delay(parts_.timing.transfer_seconds(c.src, c.dst, c.bytes), PointToPointTransfer{id},
                            Transfer{c.src, c.dst, c.bytes, 0});
    return;
  }
  parts_.activities.transfer(c.src, c.dst, c.bytes, PointToPointTransfer{id});
  if (const auto* images = parts_.shadows.transfer(c.src, c.dst)) {
    const double bytes = c.bytes; // launching may grow channels_; keep no reference across it
    for (const auto& [src, dst] : *images)
      parts_.activities.transfer(src, dst, bytes, PointToPointTransfer{id});
    channels_[static_cast<size_t>(id)].moving += static_cast<int>(images->size());
    shadow_flows_ += static_cast<long long>(images->size());
  }
}

void PointToPoint::transfer_done(int id)
{
  Channel& c = channels_[static_cast<size_t>(id)];
  if (--c.moving > 0)
    return;
  for (TaskRef side : {c.send, c.recv})
    if (side.rank_index >= 0)
      parts_.scheduler.complete(side);
}

// One transfer between the rank's GPU and its node's CPU host ("nodeN-cpu", in the GPU's node
// zone), so that it shares the host link and the CPU side with the node's other host traffic.
void PointToPoint::post_host_copy(const TaskRef& t)
{
  const Task& task = parts_.scheduler.task_of(t);
  parts_.scheduler.begin(t);
  if (task.bytes <= 0) {
    parts_.scheduler.complete(t);
    return;
  }
  sg4::Host* gpu    = parts_.activities.host(w_.ranks[t.rank_index].rank);
  const auto name   = std::string(gpu->get_englobing_zone()->get_name()) + "-cpu";
  sg4::Host* cpu    = sg4::Host::by_name_or_null(name);
  if (cpu == nullptr)
    throw std::runtime_error(fmt::format("rank {} copies to host memory, but its node has no CPU host {}",
                                         w_.ranks[t.rank_index].rank, name));
  const bool to_host = task.stream == Stream::DeviceToHost;
  parts_.activities.launch(
      sg4::Comm::sendto_init(to_host ? gpu : cpu, to_host ? cpu : gpu)->set_payload_size(static_cast<uint64_t>(task.bytes)),
      HostCopy{t});
}

} // namespace stepsim::engine
