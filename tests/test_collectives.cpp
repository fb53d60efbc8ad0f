// Ring all-reduce replayed on SimGrid against its closed form 2(n-1)/n·S/B + 2(n-1)·L, with every
// member simulated and with one representative standing for the rest.
#include "support.hpp"

#include "models/collective.hpp"
#include "sim/replay.hpp"
#include "topologies/platform.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <catch2/catch.hpp>

using namespace stepsim;

namespace {

// n single-GPU nodes whose NICs have bandwidth B and latency L between them.
double replay_all_reduce(int n, double bytes, double bandwidth, double latency, bool every_member)
{
  return testing::in_child([&] {
           xbt_log_control_set("root.thres:critical");
           int argc     = 1;
           char name[]  = "test";
           char* argv[] = {name, nullptr};
           simgrid::s4u::Engine engine(&argc, argv);
           configure_network_model();
           PlatformSpec spec;
           NodeGroupSpec g;
           g.count             = n;
           g.gpu               = "A100-SXM4-80GB";
           g.gpus_per_node     = 1;
           g.nic.count         = 1;
           g.nic.bandwidth_Bps = bandwidth;
           g.nic.latency_s     = latency;
           spec.node_groups    = {g};
           BuiltPlatform platform = build_platform(spec);

           Workload w;
           w.world_size = n;
           w.groups.push_back(Group{"all", {}});
           for (int r = 0; r < n; ++r)
             w.groups[0].ranks.push_back(r);
           for (int r = 0; r < (every_member ? n : 1); ++r) {
             w.ranks.push_back(RankProgram{r, 0, {}});
             ProgramBuilder b(w.ranks.back());
             Task t;
             t.kind   = TaskKind::Collective;
             t.stream = Stream::Data;
             t.group  = 0;
             t.bytes  = bytes;
             t.op     = CollectiveOp::AllReduce;
             b.add(t);
           }
           ReplayResult result = replay(w, platform.gpus, CollectiveRegistry::get("ring", ""));
           return nlohmann::json(result.end_s);
         })
      .get<double>();
}

} // namespace

TEST_CASE("ring all-reduce time equals 2(n-1)/n·S/B + 2(n-1)·L")
{
  const double B = 25e9, L = 5e-6;
  auto n         = GENERATE(2, 3, 4, 8, 16);
  auto S         = GENERATE(1e6, 64e6, 1e9);
  double expected = 2.0 * (n - 1) / n * S / B + 2.0 * (n - 1) * L;
  INFO("n=" << n << " S=" << S);
  CHECK(replay_all_reduce(n, S, B, L, true) == Approx(expected).epsilon(0.02));
  CHECK(replay_all_reduce(n, S, B, L, false) == Approx(expected).epsilon(0.02));
}

TEST_CASE("ring steps send (n-1)/n of the buffer per phase")
{
  const auto& ring = CollectiveRegistry::get("ring", "");
  for (int n : {2, 3, 5, 8}) {
    CHECK(bytes_sent_per_member(ring, CollectiveOp::AllReduce, n, 1000.0) == Approx(2.0 * (n - 1) / n * 1000.0));
    CHECK(bytes_sent_per_member(ring, CollectiveOp::AllGather, n, 1000.0) == Approx(double(n - 1) / n * 1000.0));
    CHECK(bytes_sent_per_member(ring, CollectiveOp::ReduceScatter, n, 1000.0) == Approx(double(n - 1) / n * 1000.0));
  }
}
