// The replay's delays (sim/engine/activities.hpp): kernel timers of the SimGrid engine that end
// at their date, move when rescheduled, and do not outlive the table that set them (the timers'
// heap is the process's, across engines).
#include "support.hpp"

#include "sim/engine/activities.hpp"
#include "topologies/platform.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u/Engine.hpp>

#include <catch2/catch.hpp>

using namespace stepsim;
using namespace stepsim::engine;

TEST_CASE("delays end at their dates, a rescheduled one at its new date, and none outlives its table", "[engine]")
{
  const auto out = testing::in_child([] {
    auto engine     = testing::start_engine();
    BuiltPlatform p = build_platform(testing::single_gpu_nodes(1, 1e9, 1e-6));
    nlohmann::json ends = nlohmann::json::array();
    double pending_after_teardown = 0;
    long long started             = 0;
    {
      LiveActivities live(p.gpus);
      live.on_delay_done([&](const LiveActivities::Live& done) {
        ends.push_back({std::get<CollectiveDelay>(done.role).instance, now()});
        if (std::get<CollectiveDelay>(done.role).instance == 1) // a delay set from a delay's end
          live.delay(0.25, CollectiveDelay{3});
      });
      live.delay(1.0, CollectiveDelay{1});
      const size_t moved = live.delay(2.0, CollectiveDelay{2});
      live.reschedule(moved, 0.5);
      engine->run();
      // A table torn down with a delay still pending (a replay that threw) removes it.
      {
        LiveActivities torn(p.gpus);
        torn.on_delay_done([&](const LiveActivities::Live&) { ends.push_back({-1, now()}); });
        torn.delay(5.0, CollectiveDelay{4});
      }
      pending_after_teardown = simgrid::kernel::timer::Timer::next();
      engine->run();
      started = live.started();
    }
    return nlohmann::json{{"ends", ends}, {"next_timer", pending_after_teardown}, {"started", started}};
  });
  INFO(out.dump());
  const auto& ends = out.at("ends");
  REQUIRE(ends.size() == 3);
  CHECK(ends[0][0] == 2); // rescheduled from 2 s to 0.5 s
  CHECK(ends[0][1].get<double>() == Approx(0.5));
  CHECK(ends[1][0] == 1);
  CHECK(ends[1][1].get<double>() == Approx(1.0));
  CHECK(ends[2][0] == 3);
  CHECK(ends[2][1].get<double>() == Approx(1.25));
  CHECK(out.at("next_timer").get<double>() == -1.0);
  CHECK(out.at("started") == 3); // a reschedule is not another delay
}
