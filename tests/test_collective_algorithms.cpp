// The direct and halving-doubling collectives: their steps (who sends what to whom), and their
// times replayed flow by flow on an idle fat-tree against the textbook closed forms in latency α
// and bandwidth B (ring for reference).
#include "support.hpp"

#include "models/collective.hpp"
#include "sim/collective_timing.hpp"
#include "sim/replay.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/collective_bench.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <stdexcept>

using namespace stepsim;

namespace {

constexpr CollectiveOp kOps[] = {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                                 CollectiveOp::AllToAll};

struct Replayed {
  double seconds = 0, alpha = 0, bandwidth = 0;
  bool analytic = false;
  long long activities = 0;
};

// n single-GPU nodes, two per leaf switch (NIC bandwidth B, latency L), all in one group whose
// order crosses the leaves: members 2i+1 and 2i+2 swap places within every four, so that two
// flows of one step share a leaf uplink (of 2B, so neither is slowed). Then the collective is not
// timed by its closed form but replayed transfer by transfer, with its step dependencies.
Replayed replay_collective(const std::string& algorithm, CollectiveOp op, int n, double bytes, double B, double L)
{
  auto j = testing::in_child([&] {
    auto engine       = testing::start_engine();
    PlatformSpec spec = testing::single_gpu_nodes(n, B, L);
    spec.network.leaf_radix = 2;
    BuiltPlatform platform = build_platform(spec);

    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      members.push_back(r % 4 == 1 ? r + 1 : r % 4 == 2 ? r - 1 : r);
    Workload w = collective_workload(spec, members, op, bytes);
    const auto& a = CollectiveRegistry::get(algorithm, "");
    CollectiveTiming timing(w, platform.gpus, a);
    // Path between two nodes under different leaves; every pair has the same here.
    std::vector<simgrid::s4u::Link*> route;
    double alpha = 0;
    platform.gpus[0]->route_to(platform.gpus[static_cast<size_t>(n - 1)], route, &alpha);
    double bandwidth = INFINITY;
    for (auto* link : route)
      bandwidth = std::min(bandwidth, link->get_bandwidth());
    ReplayResult result = replay(w, platform.gpus, a);
    return nlohmann::json{{"seconds", result.end_s},
                          {"alpha", alpha},
                          {"bandwidth", bandwidth},
                          {"analytic", timing.analytic(0, op)},
                          {"activities", result.activities}};
  });
  return Replayed{j["seconds"], j["alpha"], j["bandwidth"], j["analytic"], j["activities"]};
}

} // namespace

TEST_CASE("direct and halving_doubling steps are permutations of the group")
{
  for (const char* name : {"direct", "halving_doubling", "ring"}) {
    const auto& a = CollectiveRegistry::get(name, "");
    for (int n : {2, 3, 4, 5, 8, 16}) {
      const bool power_of_two = (n & (n - 1)) == 0;
      for (CollectiveOp op : kOps) {
        if (std::string(name) == "halving_doubling" && (!power_of_two || op == CollectiveOp::AllToAll))
          continue;
        INFO(name << " " << collective_name(op) << " n=" << n);
        for (int k = 0; k < a.steps(op, n); ++k) {
          std::set<int> receivers;
          for (int m = 0; m < n; ++m) {
            CollectiveStep s = a.step(op, n, m, k, 1000.0);
            REQUIRE(s.send_to >= 0);
            REQUIRE(s.send_to < n);
            CHECK(s.send_to != m);
            CHECK(s.bytes > 0);
            receivers.insert(s.send_to);
            // The receiver expects this member in this step.
            CHECK(a.step(op, n, s.send_to, k, 1000.0).recv_from == m);
          }
          CHECK(static_cast<int>(receivers.size()) == n); // no two members send to the same peer
        }
      }
    }
  }
}

TEST_CASE("direct and halving_doubling send the closed-form bytes")
{
  const auto& direct = CollectiveRegistry::get("direct", "");
  const auto& hd     = CollectiveRegistry::get("halving_doubling", "");
  const double S     = 1 << 20;
  for (int n : {2, 3, 4, 7, 8, 16}) {
    INFO("n=" << n);
    CHECK(direct.steps(CollectiveOp::AllGather, n) == n - 1);
    CHECK(direct.steps(CollectiveOp::AllReduce, n) == 2 * (n - 1));
    CHECK(bytes_sent_per_member(direct, CollectiveOp::AllReduce, n, S) == Approx(2.0 * (n - 1) / n * S));
    CHECK(bytes_sent_per_member(direct, CollectiveOp::AllGather, n, S) == Approx(double(n - 1) / n * S));
    CHECK(bytes_sent_per_member(direct, CollectiveOp::ReduceScatter, n, S) == Approx(double(n - 1) / n * S));
    CHECK(bytes_sent_per_member(direct, CollectiveOp::AllToAll, n, S) == Approx(double(n - 1) / n * S));
  }
  for (int n : {2, 4, 8, 16, 1024}) {
    INFO("n=" << n);
    const int levels = static_cast<int>(std::lround(std::log2(n)));
    CHECK(hd.steps(CollectiveOp::AllReduce, n) == 2 * levels);
    CHECK(hd.steps(CollectiveOp::ReduceScatter, n) == levels);
    CHECK(hd.steps(CollectiveOp::AllGather, n) == levels);
    CHECK(bytes_sent_per_member(hd, CollectiveOp::AllReduce, n, S) == Approx(2.0 * (n - 1) / n * S));
    CHECK(bytes_sent_per_member(hd, CollectiveOp::AllGather, n, S) == Approx(double(n - 1) / n * S));
    CHECK(bytes_sent_per_member(hd, CollectiveOp::ReduceScatter, n, S) == Approx(double(n - 1) / n * S));
    // Halving: S/2 first; doubling: S/n first.
    CHECK(hd.step(CollectiveOp::ReduceScatter, n, 0, 0, S).bytes == Approx(S / 2));
    CHECK(hd.step(CollectiveOp::AllGather, n, 0, 0, S).bytes == Approx(S / n));
  }
}

TEST_CASE("halving_doubling and direct refuse what they do not implement")
{
  const auto& direct = CollectiveRegistry::get("direct", "");
  const auto& hd     = CollectiveRegistry::get("halving_doubling", "");
  CHECK_THROWS_WITH(hd.steps(CollectiveOp::AllReduce, 6), Catch::Contains("power-of-two") && Catch::Contains("6"));
  CHECK_THROWS_AS(hd.steps(CollectiveOp::AllGather, 12), std::invalid_argument);
  CHECK_THROWS_WITH(hd.steps(CollectiveOp::AllToAll, 8), Catch::Contains("all_to_all"));
  CHECK_THROWS_WITH(direct.steps(CollectiveOp::Broadcast, 8), Catch::Contains("broadcast"));
  CHECK_THROWS_AS(direct.steps(CollectiveOp::Reduce, 8), std::invalid_argument);
}

TEST_CASE("replayed collectives take their textbook time on an idle fat-tree")
{
  const double B = 25e9, L = 5e-6;
  auto n         = GENERATE(4, 8, 16);
  auto S         = GENERATE(1e6, 64e6, 1e9);
  const double levels = std::log2(n);
  struct Case {
    const char* algorithm;
    CollectiveOp op;
    int steps;
    double latencies, bandwidth_bytes; // time = latencies·α + bandwidth_bytes/B
  };
  const Case cases[] = {
      {"ring", CollectiveOp::AllReduce, 2 * (n - 1), 2.0 * (n - 1), 2.0 * (n - 1) / n * S},
      {"halving_doubling", CollectiveOp::AllReduce, 2 * int(levels), 2 * levels, 2.0 * (n - 1) / n * S},
      {"halving_doubling", CollectiveOp::ReduceScatter, int(levels), levels, double(n - 1) / n * S},
      {"direct", CollectiveOp::AllGather, n - 1, n - 1.0, double(n - 1) / n * S},
      {"direct", CollectiveOp::AllReduce, 2 * (n - 1), 2.0 * (n - 1), 2.0 * (n - 1) / n * S},
      {"direct", CollectiveOp::AllToAll, n - 1, n - 1.0, double(n - 1) / n * S},
  };
  for (const Case& c : cases) {
    INFO(c.algorithm << " " << collective_name(c.op) << " n=" << n << " S=" << S);
    Replayed r = replay_collective(c.algorithm, c.op, n, S, B, L);
    REQUIRE(r.alpha > 0);
    CHECK(r.bandwidth == Approx(B));
    // Replayed transfer by transfer: one per member and step, none timed by its closed form.
    CHECK_FALSE(r.analytic);
    CHECK(r.activities == static_cast<long long>(n) * c.steps);
    CHECK(r.seconds == Approx(c.latencies * r.alpha + c.bandwidth_bytes / r.bandwidth).epsilon(0.02));
  }
}
