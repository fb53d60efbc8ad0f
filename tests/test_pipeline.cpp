// Pipeline schedules: pass orders against the papers' tables, and measured bubbles against the
// textbook (p-1)/(m+p-1) with uniform stages and free communication.
#include "support.hpp"

#include "models/compute/compute_model.hpp"
#include "sim/simulate.hpp"
#include "workloads/schedules/schedule.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;

namespace {

std::string order_text(const std::vector<PipeOp>& order)
{
  std::string out;
  for (const auto& op : order)
    out += fmt::format("{}{}{} ", op.type == PipeOp::Type::F ? "F" : op.type == PipeOp::Type::B ? "B" : "W",
                       op.micro_batch, op.chunk > 0 ? fmt::format(".{}", op.chunk) : "");
  if (!out.empty())
    out.pop_back();
  return out;
}


} // namespace

TEST_CASE("1F1B order matches PipeDream-Flush's table (p=4, m=8)")
{
  const auto& s = ScheduleRegistry::get("1f1b", "");
  PipelineShape shape{4, 8, 1};
  CHECK(order_text(s.order(0, shape)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(order_text(s.order(1, shape)) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  CHECK(order_text(s.order(3, shape)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  for (int stage = 0; stage < 4; ++stage)
    CHECK(check_order(s.order(stage, shape), shape, false).empty());
}

TEST_CASE("GPipe order: all forwards then all backwards")
{
  const auto& s = ScheduleRegistry::get("gpipe", "");
  CHECK(order_text(s.order(2, {4, 3, 1})) == "F0 F1 F2 B2 B1 B0");
}

TEST_CASE("interleaved 1F1B order matches Megatron-LM's (p=2, v=2, m=4)")
{
  const auto& s = ScheduleRegistry::get("interleaved_1f1b", "");
  PipelineShape shape{2, 4, 2};
  CHECK(order_text(s.order(0, shape)) == "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  CHECK(order_text(s.order(1, shape)) == "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  for (int stage = 0; stage < 2; ++stage)
    CHECK(check_order(s.order(stage, shape), shape, false).empty());
}

TEST_CASE("measured bubble equals the textbook fraction with uniform stages and free communication")
{
  auto [schedule, p, m] = GENERATE(table<std::string, int, int>({{"gpipe", 2, 4},
                                                                {"gpipe", 4, 8},
                                                                {"gpipe", 8, 4},
                                                                {"1f1b", 2, 4},
                                                                {"1f1b", 4, 8},
                                                                {"1f1b", 4, 16},
                                                                {"1f1b", 8, 32},
                                                                {"interleaved_1f1b", 2, 4},
                                                                {"interleaved_1f1b", 4, 8},
                                                                {"interleaved_1f1b", 4, 16}}));
  const int v                               = schedule == "interleaved_1f1b" ? 2 : 1;
  nlohmann::json doc                        = testing::small_scenario(p, 1, m);
  doc["parallelism"]["schedule"]            = schedule;
  doc["parallelism"]["virtual_stages"]      = v;
  doc["simulation"]["compute_model"]        = testing::kUniformLayers;
  Scenario s                                = scenario_from_json(doc);
  Report r                                  = simulate_isolated(s);
  double textbook                           = double(p - 1) / double(v * m + p - 1);
  INFO(schedule << " p=" << p << " m=" << m);
  REQUIRE(r.stages.size() == static_cast<size_t>(p));
  for (const auto& st : r.stages) {
    INFO("stage " << st.stage);
    CHECK(st.textbook_bubble_fraction == Approx(textbook).epsilon(1e-8));
    CHECK(st.bubble_fraction == Approx(textbook).epsilon(0.01));
  }
}

TEST_CASE("ZB-H1's bubble is strictly below 1F1B's")
{
  for (auto [p, m] : {std::pair{4, 8}, std::pair{8, 16}}) {
    nlohmann::json doc                 = testing::small_scenario(p, 1, m);
    doc["simulation"]["compute_model"] = testing::kUniformLayers;
    Report one_f_one_b                 = simulate_isolated(scenario_from_json(doc));
    doc["parallelism"]["schedule"]     = "zb_h1";
    Report zero_bubble                 = simulate_isolated(scenario_from_json(doc));
    INFO("p=" << p << " m=" << m);
    CHECK(zero_bubble.bubble_fraction < one_f_one_b.bubble_fraction);
    CHECK(zero_bubble.step_time_s < one_f_one_b.step_time_s);
  }
}
