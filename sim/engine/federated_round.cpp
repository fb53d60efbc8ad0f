#include "sim/engine/federated_round.hpp"

#include "topologies/platform.hpp"

#include <simgrid/Exception.hpp>
#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace stepsim {
namespace {

namespace sg4 = simgrid::s4u;

constexpr double kUnusedHostSpeed = 1e9; // clients' compute is a known time (a sleep), never a flop count

struct Built {
  sg4::Host* server = nullptr;
  std::vector<sg4::Host*> edges;
  std::vector<sg4::Host*> clients; // as plan.clients; nullptr for those not selected
};

sg4::Link* wired_link(sg4::NetZone* zone, const std::string& name, const FederatedLinkSpec& l)
{
  auto* link = zone->create_link(name, l.bandwidth_Bps);
  link->set_latency(l.latency_s)->seal();
  return link;
}

// SimGrid 3.32's star zone numbers its hosts and its child zones apart, and one that holds both
// mixes them up (routes went through another member's link). So every star here holds only
// child zones, or only hosts and routers; a host reached through a zone is that zone's gateway.

// `host` alone in a star zone of its own under `parent`; returns the zone.
sg4::NetZone* zone_of_host(sg4::NetZone* parent, const std::string& name, sg4::Host*& host)
{
  auto* zone = sg4::create_star_zone(name + "-zone");
  zone->set_parent(parent);
  host = zone->create_host(name, kUnusedHostSpeed);
  zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, {}, true);
  zone->seal();
  return zone;
}

// The selected clients among `members` under `parent` (a star of zones): the wired and cellular
// ones in a star of their own, each behind its own link; the Wi-Fi ones as the stations of one
// access point, whose air they share.
void attach_clients(sg4::NetZone* parent, const std::string& prefix, const RoundPlan& plan,
                    const std::vector<size_t>& members, Built& built)
{
  std::vector<size_t> stations, wired;
  for (size_t i : members)
    (plan.clients[i].link.kind == "wifi" ? stations : wired).push_back(i);
  if (!wired.empty()) {
    auto* zone = sg4::create_star_zone(prefix + "clients");
    zone->set_parent(parent);
    auto* gateway = zone->create_router(prefix + "clients-gateway");
    zone->add_route(gateway, nullptr, nullptr, nullptr, {}, true);
    for (size_t i : wired) {
      const auto& c = plan.clients[i];
      auto* host    = zone->create_host(c.name, kUnusedHostSpeed);
      zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                      {sg4::LinkInRoute(wired_link(zone, c.name + "-" + c.link.kind, c.link))}, true);
      built.clients[i] = host;
    }
    zone->seal();
    parent->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
  }
  if (stations.empty())
    return;
  // As topologies/fabrics/wifi.cpp: the air is the zone's one WIFI link, with one bandwidth per
  // rate level (here every distinct station rate); a transfer at rate r uses the air 1/r of each
  // second, and transfers in flight share the air time max-min fairly, so each of n transfers
  // moves 1 / sum(1/r_i) bytes per second (a slow station slows all: the 802.11 performance
  // anomaly, Heusse et al. 2003). The latency is a FATPIPE hop between the access point and
  // the wired side.
  std::vector<double> rates;
  for (size_t i : stations)
    rates.push_back(plan.clients[i].link.bandwidth_Bps);
  std::sort(rates.begin(), rates.end());
  rates.erase(std::unique(rates.begin(), rates.end()), rates.end());
  auto* wifi = sg4::create_wifi_zone(prefix + "wifi");
  wifi->set_parent(parent);
  auto* access_point = wifi->create_router(prefix + "wifi-access-point");
  wifi->set_property("access_point", prefix + "wifi-access-point");
  auto* air = wifi->create_link(prefix + "wifi-air", rates);
  air->seal();
  auto* air_latency = parent->create_link(prefix + "wifi-latency", 1e18);
  air_latency->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
      ->set_latency(plan.clients[stations.front()].link.latency_s)
      ->seal();
  for (size_t i : stations) {
    auto* host = wifi->create_host(plan.clients[i].name, kUnusedHostSpeed);
    const auto level =
        std::lower_bound(rates.begin(), rates.end(), plan.clients[i].link.bandwidth_Bps) - rates.begin();
    air->set_host_wifi_rate(host, static_cast<int>(level));
    built.clients[i] = host;
  }
  wifi->seal();
  parent->add_route(wifi->get_netpoint(), nullptr, access_point, nullptr, {sg4::LinkInRoute(air_latency)}, true);
}

Built build_round_platform(const RoundPlan& plan)
{
  Built built;
  built.clients.assign(plan.clients.size(), nullptr);
  auto* root   = sg4::create_star_zone("federated");
  auto* server = zone_of_host(root, "server", built.server);
  root->add_route(server->get_netpoint(), nullptr, built.server->get_netpoint(), nullptr,
                  {sg4::LinkInRoute(wired_link(root, "server-link", plan.server_link))}, true);
  std::vector<std::vector<size_t>> members(static_cast<size_t>(std::max(plan.edge_servers, 1)));
  for (size_t i = 0; i < plan.clients.size(); ++i)
    if (plan.clients[i].selected)
      members[plan.edge_servers > 0 ? static_cast<size_t>(plan.clients[i].edge_server) : 0].push_back(i);
  if (plan.edge_servers == 0)
    attach_clients(root, "", plan, members[0], built);
  for (int e = 0; e < plan.edge_servers; ++e) {
    // An edge server and its clients are a star of their own, reached from the server's star
    // through the edge server's link (its gateway is the edge server).
    auto* zone = sg4::create_star_zone(fmt::format("edge{}", e));
    zone->set_parent(root);
    sg4::Host* edge = nullptr;
    auto* own       = zone_of_host(zone, fmt::format("edge{}-server", e), edge);
    zone->add_route(own->get_netpoint(), nullptr, edge->get_netpoint(), nullptr, {}, true);
    attach_clients(zone, fmt::format("edge{}-", e), plan, members[static_cast<size_t>(e)], built);
    zone->seal();
    root->add_route(zone->get_netpoint(), nullptr, edge->get_netpoint(), nullptr,
                    {sg4::LinkInRoute(wired_link(root, fmt::format("edge{}-link", e), plan.edge_link))}, true);
    built.edges.push_back(edge);
  }
  root->seal();
  return built;
}

// The round's state, shared by its actors (one SimGrid engine: they never run at once).
struct Round {
  const RoundPlan& plan;
  const Built& built;
  double deadline = std::numeric_limits<double>::infinity();
  RoundResult result;

  // Waits for `comm` until the deadline; false (the transfer cancelled, what it had moved added
  // to `moved`) when it had not ended by then.
  bool finish_by_deadline(const sg4::CommPtr& comm, double bytes, double& moved)
  {
    if (!std::isfinite(deadline)) {
      comm->wait();
      moved += bytes;
      return true;
    }
    try {
      comm->wait_for(std::max(0.0, deadline - sg4::Engine::get_clock()));
      moved += bytes;
      return true;
    } catch (const simgrid::TimeoutException&) {
      moved += std::clamp(bytes - comm->get_remaining(), 0.0, bytes);
      comm->cancel();
      return false;
    }
  }

  // One selected client: the model from `parent`, local training, the update back to it.
  void client(size_t i, sg4::Host* parent)
  {
    auto& r         = result.clients[i];
    sg4::Host* self = built.clients[i];
    double start    = sg4::Engine::get_clock();
    const bool got  = finish_by_deadline(sg4::Comm::sendto_async(parent, self, static_cast<uint64_t>(plan.model_bytes)),
                                         plan.model_bytes, result.bytes_down);
    r.download_s    = sg4::Engine::get_clock() - start;
    r.dropped       = !got;
    if (got) {
      start = sg4::Engine::get_clock();
      if (start + plan.clients[i].compute_s > deadline) {
        sg4::this_actor::sleep_until(deadline);
        r.dropped = true;
      } else
        sg4::this_actor::sleep_for(plan.clients[i].compute_s);
      r.compute_s = sg4::Engine::get_clock() - start;
    }
    if (!r.dropped) {
      start     = sg4::Engine::get_clock();
      r.dropped = !finish_by_deadline(
          sg4::Comm::sendto_async(self, parent, static_cast<uint64_t>(plan.update_bytes)), plan.update_bytes,
          result.bytes_up);
      r.upload_s = sg4::Engine::get_clock() - start;
    }
    r.finish_s = sg4::Engine::get_clock();
  }

  // Starts the selected clients among `members` under `parent` and waits for each to report or
  // be dropped; returns how many reported.
  int collect(sg4::Host* parent, const std::vector<size_t>& members)
  {
    std::vector<sg4::ActorPtr> actors;
    for (size_t i : members)
      actors.push_back(sg4::Actor::create(plan.clients[i].name, built.clients[i], [this, i, parent] { client(i, parent); }));
    for (const auto& a : actors)
      a->join();
    int kept = 0;
    for (size_t i : members)
      kept += result.clients[i].dropped ? 0 : 1;
    return kept;
  }

  void edge(int e, const std::vector<size_t>& members, int& reported)
  {
    sg4::Host* self = built.edges[static_cast<size_t>(e)];
    sg4::Comm::sendto(built.server, self, static_cast<uint64_t>(plan.model_bytes));
    result.bytes_down += plan.model_bytes;
    const int kept = collect(self, members);
    if (kept == 0)
      return;
    sg4::this_actor::sleep_for(plan.edge_aggregation_s.at(static_cast<size_t>(kept)));
    sg4::Comm::sendto(self, built.server, static_cast<uint64_t>(plan.model_bytes));
    result.bytes_up += plan.model_bytes;
    ++reported;
  }

  void server()
  {
    std::vector<std::vector<size_t>> members(static_cast<size_t>(std::max(plan.edge_servers, 1)));
    for (size_t i = 0; i < plan.clients.size(); ++i)
      if (plan.clients[i].selected)
        members[plan.edge_servers > 0 ? static_cast<size_t>(plan.clients[i].edge_server) : 0].push_back(i);
    int updates = 0;
    if (plan.edge_servers == 0)
      updates = collect(built.server, members[0]);
    else {
      std::vector<sg4::ActorPtr> edges;
      for (int e = 0; e < plan.edge_servers; ++e)
        if (!members[static_cast<size_t>(e)].empty())
          edges.push_back(sg4::Actor::create(fmt::format("edge{}", e), built.edges[static_cast<size_t>(e)],
                                             [this, e, &members, &updates] { edge(e, members[static_cast<size_t>(e)], updates); }));
      for (const auto& a : edges)
        a->join();
    }
    result.aggregation_s = plan.server_aggregation_s.at(static_cast<size_t>(updates));
    sg4::this_actor::sleep_for(result.aggregation_s);
    result.round_time_s = sg4::Engine::get_clock();
  }
};

} // namespace

RoundResult replay_round(const RoundPlan& plan)
{
  // CM02 without TCP window or cross-traffic: latency + size / bandwidth alone.
  const auto engine = start_engine();
  const Built built = build_round_platform(plan);
  RoundResult result;
  result.clients.assign(plan.clients.size(), RoundClientResult{});
  Round round{plan, built, plan.deadline_s > 0 ? plan.deadline_s : std::numeric_limits<double>::infinity(), result};
  sg4::Actor::create("server", built.server, [&round] { round.server(); });
  engine->run();
  if (!std::isfinite(round.result.round_time_s) || round.result.round_time_s <= 0)
    throw std::runtime_error(fmt::format("the federated round ended at {} s, which is not a round time",
                                         round.result.round_time_s));
  return round.result;
}

std::vector<bool> choose_participants(int clients, double fraction, unsigned seed)
{
  // ceil(C·K) of the decimal figures: 0.3 × 10 is 3.0000000000000004 in binary, whose ceiling
  // would be 4, so the product is taken a relative 1e-12 lower first.
  const int m = std::clamp(static_cast<int>(std::ceil(fraction * clients * (1 - 1e-12))), 1, clients);
  // A partial Fisher-Yates shuffle. std::mt19937's sequence is fixed by the C++ standard;
  // std::uniform_int_distribution's mapping is not (it differs between standard libraries), so
  // the index is taken modulo (its bias, under clients / 2^32, is immaterial here).
  std::mt19937 rng(seed);
  std::vector<int> order(static_cast<size_t>(clients));
  for (int i = 0; i < clients; ++i)
    order[static_cast<size_t>(i)] = i;
  std::vector<bool> chosen(static_cast<size_t>(clients), false);
  for (int i = 0; i < m; ++i) {
    const int j = i + static_cast<int>(rng() % static_cast<unsigned>(clients - i));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    chosen[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  }
  return chosen;
}

} // namespace stepsim
