// A link's bandwidth as a route's bottleneck sees it. SimGrid's WIFI links (the air of an edge
// Wi-Fi zone, topologies/fabrics/wifi.cpp) report a placeholder bandwidth of 1 B/s, their real
// rates being per station; the wifi fabric records its stations' rate in the property below.
#pragma once

#include <simgrid/s4u/Link.hpp>

#include <string>
#include <vector>

namespace stepsim {

inline constexpr const char* kWifiRateProperty = "wifi_rate_Bps";
// The air's one-way latency, on the WIFI link (SimGrid refuses a latency on it: "Latency cannot
// be set for WiFi Links"), and the mark of the link that carries it for routes leaving the zone.
inline constexpr const char* kWifiLatencyProperty     = "wifi_latency_s";
inline constexpr const char* kWifiLatencyLinkProperty = "wifi_latency_link";

inline double link_bandwidth(const simgrid::s4u::Link* link)
{
  if (link->get_sharing_policy() == simgrid::s4u::Link::SharingPolicy::WIFI)
    if (const char* rate = link->get_property(kWifiRateProperty))
      return std::stod(rate);
  return link->get_bandwidth();
}

// The latency a route's crossings of the air owe beyond what SimGrid charges it. The wifi fabric
// (topologies/fabrics/wifi.cpp) puts the air's latency on a link between the access point and
// the wired side, which a device-to-server route crosses once, with its one crossing of the air;
// a device-to-device route crosses the air twice, both inside the zone, and SimGrid charges it no
// latency at all. Each crossing costs the air's latency: 0 for a route to or from the wired side,
// twice the air's latency from device to device, 0 off the air.
inline double air_latency_owed(const std::vector<simgrid::s4u::Link*>& route)
{
  int crossings   = 0;
  bool paid       = false;
  double latency  = 0;
  for (const auto* link : route) {
    if (link->get_sharing_policy() == simgrid::s4u::Link::SharingPolicy::WIFI)
      if (const char* air = link->get_property(kWifiLatencyProperty)) {
        ++crossings;
        latency = std::stod(air);
      }
    paid = paid || link->get_property(kWifiLatencyLinkProperty) != nullptr;
  }
  return crossings == 0 ? 0.0 : latency * (crossings - (paid ? 1 : 0));
}

// A NIC link's share of its NIC kind's transport latency (NicSpec::transport_latency_s, half on
// each end as the link latency is), which SimGrid does not charge: a transfer across it owes it
// once its bytes are in, except a ring's steps after its first (models/collectives/collective.hpp
// PathCost::transport_s). Absent on InfiniBand and RoCE NICs.
inline constexpr const char* kNicTransportProperty = "nic_transport_latency_s";

// The transport latency of a route: its NIC links' shares (0 without any).
inline double transport_latency_of(const std::vector<simgrid::s4u::Link*>& route)
{
  double transport = 0;
  for (const auto* link : route)
    if (const char* share = link->get_property(kNicTransportProperty))
      transport += std::stod(share);
  return transport;
}

} // namespace stepsim
