// Rotated lanes replayed as their first ones (CollectiveTiming::rotation): a tree over nodes of
// k GPUs runs 2k lanes that rotate two, and with every member simulated the replay runs those
// two alone, each send on a representative pair of GPUs. It must time the collective exactly as
// all the lanes do, and refuse where a link would then carry other than what all the lanes put
// on it. Recording the links' traffic turns it off (the representative pairs would misplace the
// bytes), which gives the replay of every lane to compare with.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "models/link_calibration.hpp"
#include "sim/engine/replay.hpp"
#include "tools/driver/collective_bench.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include <numeric>
#include <string>
#include <vector>

using namespace stepsim;

namespace {

// A tree all-reduce of `bytes` over every GPU of `nodes` nodes of `preset`, every member
// simulated: its end and the activities it started, with all lanes (recording the links) and
// with the rotated ones folded.
nlohmann::json tree_all_reduce(const std::string& preset, int nodes, double bytes, const std::vector<std::string>& sets = {})
{
  const Scenario s = platform_scenario(preset, "", nodes, sets);
  nlohmann::json out;
  for (bool record : {true, false}) // one engine, and one replay, per child process
    out[record ? "all_lanes" : "folded"] = testing::in_child([&] {
      auto engine                = testing::start_engine();
      const LinkEfficiency links = load_link_efficiency();
      std::vector<int> members(static_cast<size_t>(s.platform.total_gpus()));
      std::iota(members.begin(), members.end(), 0);
      const Workload w    = collective_workload(s.platform, members, CollectiveOp::AllReduce, bytes, false);
      BuiltPlatform built = build_platform(with_achieved_bandwidth(s.platform, links), ranks_in_use(w));
      ReplayOptions options;
      options.record_links = record;
      const ReplayResult r = replay(w, built.gpus, CollectiveRegistry::get("tree", "test"), options);
      return nlohmann::json{{"seconds", r.end_s}, {"activities", r.activities}};
    });
  return out;
}

} // namespace

TEST_CASE("rotated lanes: a tree over nodes of NVSwitch GPUs runs two lanes of sixteen, in the same time",
          "[collectives][rotated_lanes]")
{
  // Four DGX H100 on a non-blocking fat tree: each GPU its own NVSwitch port and NIC; the
  // NVSwitch itself (a FATPIPE) is shared by none.
  for (double bytes : {1e6, 64e6}) {
    const auto out = tree_all_reduce("dgx-h100", 4, bytes);
    INFO(bytes << " B: " << out.dump());
    const double all = out["all_lanes"]["seconds"].get<double>(), folded = out["folded"]["seconds"].get<double>();
    REQUIRE(all > 0);
    CHECK(std::abs(folded / all - 1) < 1e-9);
    // 16 lanes replayed as 2: an eighth of the transfers.
    CHECK(out["folded"]["activities"].get<long long>() * 7 < out["all_lanes"]["activities"].get<long long>());
  }
}

TEST_CASE("rotated lanes: refused where an uplink above whole nodes could hold the flows back",
          "[collectives][rotated_lanes]")
{
  // One node per leaf and 4:1 uplinks: every inter-node flow of every lane crosses its node's
  // leaf uplink, which the folded lanes would load an eighth as much. Every lane runs.
  const auto out = tree_all_reduce("dgx-h100", 4, 64e6,
                                   {"platform.network.leaf_radix=8", "platform.network.oversubscription=4"});
  INFO(out.dump());
  CHECK(out["folded"]["activities"].get<long long>() == out["all_lanes"]["activities"].get<long long>());
  CHECK(out["folded"]["seconds"].get<double>() == out["all_lanes"]["seconds"].get<double>());
}

TEST_CASE("rotated lanes: a non-blocking fat tree's leaf uplinks do not stop the folding",
          "[collectives][rotated_lanes]")
{
  // Two nodes per leaf of 16 NICs, 1:1: the uplinks can never be what holds a flow back (their
  // NICs below cannot fill them), so the lanes fold, in the same time as all of them.
  const auto out = tree_all_reduce("dgx-h100", 4, 64e6, {"platform.network.leaf_radix=16"});
  INFO(out.dump());
  const double all = out["all_lanes"]["seconds"].get<double>(), folded = out["folded"]["seconds"].get<double>();
  CHECK(out["folded"]["activities"].get<long long>() * 7 < out["all_lanes"]["activities"].get<long long>());
  CHECK(std::abs(folded / all - 1) < 1e-6);
}

namespace {

// `stepsim run` of a GPT 1.3B step at full fidelity on 4 DGX H100 (tensor 1), the gradients'
// all-reduce as NCCL's tree: its JSON report as is, and with `--links` (which records the links'
// traffic and so runs every lane), each without its activities, links and waits; and the two
// activity counts.
struct TwoReports {
  nlohmann::json folded, all;
  long long folded_activities = 0, all_activities = 0;
};
TwoReports dp_step(int pipeline, int data)
{
  const std::string scenario = testing::write_temp_file(
      fmt::format("rotated_lanes_p{}_d{}.json", pipeline, data),
      fmt::format(R"({{
    "model": {{"name": "GPT 1.3B", "num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
              "seq_length": 2048, "vocab_size": 50257}},
    "training": {{"global_batch_size": {}, "micro_batch_size": 1, "precision": "bf16"}},
    "parallelism": {{"tensor": 1, "pipeline": {}, "data": {}}},
    "platform": {{"preset": "dgx-h100", "node_groups": [{{"count": 4}}]}},
    "simulation": {{"fidelity": "full", "collective_algorithm": "tree"}}}})",
                  2 * pipeline * data, pipeline, data));
  const auto folded = testing::run_stepsim("run " + scenario + " --json -");
  const auto all    = testing::run_stepsim("run " + scenario + " --links 5 --json -");
  REQUIRE(folded.exit_code == 0);
  REQUIRE(all.exit_code == 0);
  TwoReports r{nlohmann::json::parse(folded.output), nlohmann::json::parse(all.output)};
  r.folded_activities = r.folded.at("activities").get<long long>();
  r.all_activities    = r.all.at("activities").get<long long>();
  for (auto* report : {&r.folded, &r.all})
    for (const char* key : {"activities", "links", "waits"})
      report->erase(key);
  return r;
}

} // namespace

TEST_CASE("rotated lanes: refused where pipeline sends cross the data-parallel group's NICs",
          "[collectives][rotated_lanes]")
{
  // Pipeline 2 x data 16: each stage's data-parallel group spans two nodes, and the stages'
  // sends cross the same NICs, which the folded lanes would load otherwise. Every lane runs.
  const TwoReports r = dp_step(2, 16);
  CHECK(r.folded_activities == r.all_activities);
  CHECK(r.folded.dump() == r.all.dump());
}

TEST_CASE("rotated lanes: a data-parallel step at full fidelity reports the same with and without them",
          "[collectives][rotated_lanes]")
{
  // 32 H100 in 4 nodes, pure data parallel: each rank's compute resumes when its own members'
  // lanes end, which the folded lanes must keep (a member ends once every member of its node has
  // run the two lanes: lane l + 2r is the member r places before it on lane l).
  const TwoReports r = dp_step(1, 32);
  CHECK(r.folded_activities * 7 < r.all_activities);
  CHECK(r.folded.dump() == r.all.dump());
}
