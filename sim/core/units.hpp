// Units as SimGrid writes them. Every quantity read from a file is converted once, here, into
// bytes per second, seconds or bytes; the rest of the code never sees a unit string.
#pragma once

#include <optional>
#include <string>

namespace stepsim::units {

// "200Gbps" (bits), "300GBps" (bytes), "25GiBps", "100Mbps". Returns bytes per second.
std::optional<double> parse_bandwidth(const std::string& text);
// "1.5us", "5ms", "10ns", "2s". Returns seconds.
std::optional<double> parse_time(const std::string& text);
// "25MB", "25MiB", "4GB", "512B", "1KiB". Returns bytes.
std::optional<double> parse_bytes(const std::string& text);

// The accepted units of each kind, listed for error messages: "bps, kbps, ...".
std::string bandwidth_units();
std::string time_units();
std::string bytes_units();

} // namespace stepsim::units
