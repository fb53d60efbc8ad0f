// A link's bandwidth as a route's bottleneck sees it. SimGrid's WIFI links (the air of an edge
// Wi-Fi zone, topologies/fabrics/wifi.cpp) report a placeholder bandwidth of 1 B/s, their real
// rates being per station; the wifi fabric records its stations' rate in the property below.
#pragma once

#include <simgrid/s4u/Link.hpp>

#include <string>

namespace stepsim {

inline constexpr const char* kWifiRateProperty = "wifi_rate_Bps";

inline double link_bandwidth(const simgrid::s4u::Link* link)
{
  if (link->get_sharing_policy() == simgrid::s4u::Link::SharingPolicy::WIFI)
    if (const char* rate = link->get_property(kWifiRateProperty))
      return std::stod(rate);
  return link->get_bandwidth();
}

} // namespace stepsim
