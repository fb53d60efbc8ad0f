// Pipeline schedules: pass orders against the papers' tables, and measured bubbles against the
// textbook (p-1)/(m+p-1) with uniform stages and free communication.
#include "support.hpp"

#include "models/compute_model.hpp"
#include "tools/driver/simulate.hpp"
#include "workloads/schedule.hpp"

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

// Uniform stages: only the transformer layers cost time (1 us per forward kernel, 2 us per
// backward kernel); embedding, head and optimizer are free, so every stage does the same work.
double uniform_layer_seconds(const Kernel& k, const Device&, const std::string&)
{
  static const std::set<std::string> free_kernels = {
      "embedding_lookup", "embedding_grad", "final_norm", "logits", "cross_entropy", "cross_entropy_bwd",
      "logits_dgrad",     "logits_wgrad",   "final_norm_bwd", "optimizer_step"};
  if (free_kernels.count(k.name) != 0)
    return 0;
  return k.name.find("bwd") != std::string::npos || k.name.find("grad") != std::string::npos ? 2e-6 : 1e-6;
}
const bool registered = ComputeModelRegistry::add("test_uniform_layers", "test only", ComputeModel{uniform_layer_seconds});

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

TEST_CASE("measured bubble equals the textbook fraction with uniform stages and free communication")
{
  auto [schedule, p, m] = GENERATE(table<std::string, int, int>({{"gpipe", 2, 4},
                                                                {"gpipe", 4, 8},
                                                                {"gpipe", 8, 4},
                                                                {"1f1b", 2, 4},
                                                                {"1f1b", 4, 8},
                                                                {"1f1b", 4, 16},
                                                                {"1f1b", 8, 32}}));
  nlohmann::json doc                        = testing::small_scenario(p, 1, m);
  doc["parallelism"]["schedule"]            = schedule;
  doc["simulation"]["compute_model"]        = "test_uniform_layers";
  Scenario s                                = scenario_from_json(doc);
  Report r                                  = simulate_isolated(s);
  double textbook                           = double(p - 1) / double(m + p - 1);
  INFO(schedule << " p=" << p << " m=" << m);
  REQUIRE(r.stages.size() == static_cast<size_t>(p));
  for (const auto& st : r.stages) {
    INFO("stage " << st.stage);
    CHECK(st.textbook_bubble_fraction == Approx(textbook).epsilon(1e-8));
    CHECK(st.bubble_fraction == Approx(textbook).epsilon(0.01));
  }
}
