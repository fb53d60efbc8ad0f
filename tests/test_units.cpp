// Units that cannot be forgotten (issue 20, item 4): a quantity without its unit is bad input,
// energies print in the unit that fits, and the memory headline names the device of the stage
// that holds the peak.
#include "support.hpp"

#include "sim/core/input_error.hpp"
#include "sim/core/report.hpp"
#include "sim/core/units.hpp"
#include "sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <string>

using namespace stepsim;
using namespace stepsim::testing;

namespace {

// The problems scenario_from_json reports for `j`, joined; "" when it is accepted.
std::string problems_of(const nlohmann::json& j)
{
  return testing::input_problems([&] { scenario_from_json(j); });
}

} // namespace

TEST_CASE("a bandwidth, latency or size without its unit is refused, naming the path and the units", "[units]")
{
  const nlohmann::json base = small_scenario(2, 2, 4);
  REQUIRE(problems_of(base).empty());
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> change;
    const char* path;
    std::string units;
  };
  const std::vector<Case> cases = {
      {"NIC bandwidth 200", [](auto& j) { j["platform"]["node_groups"][0]["nic"]["bandwidth"] = 200; },
       "platform.node_groups[0].nic.bandwidth", units::bandwidth_units()},
      {"NVLink bandwidth 300e9", [](auto& j) { j["platform"]["node_groups"][0]["intra_node"]["bandwidth"] = 300e9; },
       "platform.node_groups[0].intra_node.bandwidth", units::bandwidth_units()},
      {"NIC latency 2", [](auto& j) { j["platform"]["node_groups"][0]["nic"]["latency"] = 2; },
       "platform.node_groups[0].nic.latency", units::time_units()},
      {"bucket size 25000000", [](auto& j) { j["parallelism"]["bucket_size"] = 25000000; }, "parallelism.bucket_size",
       units::bytes_units()},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    nlohmann::json j = base;
    c.change(j);
    const std::string problems = problems_of(j);
    CHECK_THAT(problems, Catch::Contains(std::string(c.path) + ": expected"));
    CHECK_THAT(problems, Catch::Contains("with its unit"));
    CHECK_THAT(problems, Catch::Contains("(units: " + c.units + ")"));
    CHECK_THAT(problems, Catch::Contains("which has no unit"));
  }
  // Zero is zero in every unit: a latency of 0 stays accepted.
  nlohmann::json zero = base;
  zero["platform"]["node_groups"][0]["nic"]["latency"] = 0;
  CHECK(problems_of(zero).empty());
  // The same quantities with their units are accepted.
  nlohmann::json with_units = base;
  with_units["platform"]["node_groups"][0]["nic"]["bandwidth"] = "200Gbps";
  with_units["platform"]["node_groups"][0]["nic"]["latency"]   = "2us";
  with_units["parallelism"]["bucket_size"]                     = "25MB";
  CHECK(problems_of(with_units).empty());
}

TEST_CASE("every unit the messages list parses", "[units]")
{
  const auto each = [](const std::string& list, const std::function<bool(const std::string&)>& parses) {
    size_t start = 0;
    int count    = 0;
    while (start < list.size()) {
      size_t end = list.find(", ", start);
      if (end == std::string::npos)
        end = list.size();
      const std::string unit = list.substr(start, end - start);
      INFO(unit);
      CHECK(parses("3" + unit));
      ++count;
      start = end + 2;
    }
    return count;
  };
  CHECK(each(units::bandwidth_units(), [](const std::string& t) { return units::parse_bandwidth(t).has_value(); }) == 16);
  CHECK(each(units::time_units(), [](const std::string& t) { return units::parse_time(t).has_value(); }) == 5);
  CHECK(each(units::bytes_units(), [](const std::string& t) { return units::parse_bytes(t).has_value(); }) == 10);
  CHECK(*units::parse_bandwidth("8bps") == Approx(1.0));
  CHECK_FALSE(units::parse_bandwidth("200").has_value());
  CHECK_FALSE(units::parse_time("5").has_value());
  CHECK_FALSE(units::parse_bytes("100").has_value());
}

TEST_CASE("energies print in the unit that fits", "[units]")
{
  Report r;
  r.name   = "energy";
  r.device = "A100-SXM4-80GB";
  r.stages.resize(1);
  const auto line = [&](double joules_per_step, double joules_per_token) {
    r.energy_j_per_step  = joules_per_step;
    r.energy_j_per_token = joules_per_token;
    const std::string table = to_table(r);
    const size_t at         = table.find("energy per step");
    REQUIRE(at != std::string::npos);
    return table.substr(at, table.find('\n', at) - at);
  };
  CHECK_THAT(line(12.5, 0.0125), Catch::Contains("12.500 J") && Catch::Contains("(12.500 mJ per token)"));
  CHECK_THAT(line(4560, 2.5), Catch::Contains("4.560 kJ") && Catch::Contains("(2.500 J per token)"));
  CHECK_THAT(line(10.1e6, 3.211), Catch::Contains("10.100 MJ") && Catch::Contains("(3.211 J per token)"));
  CHECK_THAT(line(0.25, 0), Catch::Contains("250.000 mJ") && !Catch::Contains("per token"));
}

TEST_CASE("the memory headline names the device of the stage that holds the peak", "[units]")
{
  // Two stages of equal layers, the first on an A100 80GB and the second on a V100 32GB: the same
  // memory is tightest on the V100.
  nlohmann::json j              = small_scenario(2, 1, 8);
  nlohmann::json a100           = j["platform"]["node_groups"][0];
  a100["count"]                 = 1;
  nlohmann::json v100           = a100;
  v100["gpu"]                   = "V100-SXM2-32GB";
  j["platform"]["node_groups"]  = {a100, v100};
  j["training"]["precision"]    = "fp16";
  const Report r                = analytic_report(scenario_from_json(j));
  REQUIRE(r.stages.size() == 2);
  CHECK(r.memory_peak_device == "V100-SXM2-32GB");
  CHECK(r.memory_peak_stage == 1);
  CHECK(r.stages[1].device == "V100-SXM2-32GB");
  CHECK_THAT(to_table(r), Catch::Contains("on V100-SXM2-32GB, stage 1"));
  CHECK(to_json(r).at("memory_peak_device") == "V100-SXM2-32GB");

  // On one GPU type the headline names it.
  const Report one = analytic_report(scenario_from_json(small_scenario(2, 1, 8)));
  CHECK_THAT(to_table(one), Catch::Contains("on " + one.stages[0].device));
}
