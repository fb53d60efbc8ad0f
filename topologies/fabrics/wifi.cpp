// An edge platform (network.topology "wifi"): devices (the nodes of the network.wifi.stations node
// groups, one GPU each: Jetson-class boards) on the air of one Wi-Fi access point, and the other
// node groups (an edge server) wired to the access point by their NICs (Ethernet).
//
//   device ─┐
//   device ─┼─ air ─ access point ─ server NIC ─ server GPU(s)
//   device ─┘ (one SimGrid WIFI link)
//
// SimGrid's wifi zone gives the air one WIFI link whose bandwidth is each station's rate (its
// 802.11 rate level, network.wifi.rate): a transfer at rate r uses the air 1/r of each second, and
// the transfers in flight share the air time max-min fairly, so two devices sending at once each
// get half of what one gets alone; a device-to-device transfer crosses the air twice. Contention
// backoff, retries and the decay of throughput with many stations are not modelled: the rate
// should be the throughput one station measures alone (iperf), not the PHY rate.
#include "sim/core/link_bandwidth.hpp"
#include "topologies/platform.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {
namespace {

namespace sg4 = simgrid::s4u;

void build_wifi(FabricBuild& build)
{
  const auto& w = build.spec.network.wifi;
  auto* edge    = sg4::create_star_zone("edge");
  auto* wifi    = sg4::create_wifi_zone("wifi");
  wifi->set_parent(edge);
  auto* access_point = wifi->create_router("wifi-access-point");
  wifi->set_property("access_point", "wifi-access-point");
  // A link created in a wifi zone is the zone's WIFI link (the air). SimGrid's WIFI links have no
  // latency; the air's latency is a FATPIPE link between the access point and the wired side, so
  // a transfer between a device and the server pays it once; device to device, SimGrid charges
  // none, and the engine adds the air's latency once per crossing (air_latency_owed).
  auto* air = wifi->create_link("wifi-air", std::vector<double>{w.rate_Bps});
  // get_bandwidth() of a WIFI link is SimGrid's placeholder 1 (its rates are per station); the
  // rate every station uses is recorded for what reads a route's bottleneck (collective timing,
  // `stepsim platform`).
  air->set_property(kWifiRateProperty, fmt::format("{:.17g}", w.rate_Bps));
  // Its latency too, which a device-to-device route (across the air twice, inside the zone) owes
  // and the engine adds (sim/core/link_bandwidth.hpp air_latency_owed).
  air->set_property(kWifiLatencyProperty, fmt::format("{:.17g}", w.latency_s));
  air->seal();
  auto* air_latency = edge->create_link("wifi-latency", 1e18);
  air_latency->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->set_latency(w.latency_s);
  air_latency->set_property(kWifiLatencyLinkProperty, "1");
  air_latency->seal();
  for (const auto& port : build.nodes) {
    const bool station = std::find(w.stations.begin(), w.stations.end(), port.group_index) != w.stations.end();
    if (!station) {
      build.node(port.node, edge);
      continue;
    }
    if (!build.used(port.node, 0))
      continue;
    auto* device = build.gpu(port.node, 0, wifi);
    air->set_host_wifi_rate(device, 0);
  }
  wifi->seal();
  edge->add_route(wifi->get_netpoint(), nullptr, access_point, nullptr, {sg4::LinkInRoute(air_latency)}, true);
}

const bool registered = FabricRegistry::add(
    "wifi", "edge devices sharing one Wi-Fi access point (network.wifi), other node groups wired to it",
    FabricBuilder{build_wifi});

} // namespace
} // namespace stepsim
