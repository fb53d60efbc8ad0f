// Pipeline schedules, every one: per-stage pass orders against tables written by hand from each
// schedule's paper, peak micro-batches in flight and weight versions as the memory model counts
// them, and measured bubbles with uniform stages and free communication against the textbook,
// PipeDream's steady state included.
#include "support.hpp"

#include "models/compute/compute_model.hpp"
#include "workloads/stage_memory.hpp"
#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/schedules/schedule.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <set>

using namespace stepsim;

namespace {

std::string order_text(const std::vector<PipeOp>& order, size_t first_ops = SIZE_MAX)
{
  std::string out;
  for (size_t i = 0; i < order.size() && i < first_ops; ++i) {
    const PipeOp& op = order[i];
    out += fmt::format("{}{}{} ", op.type == PipeOp::Type::F ? "F" : op.type == PipeOp::Type::B ? "B" : "W",
                       op.micro_batch, op.chunk > 0 ? fmt::format(".{}", op.chunk) : "");
  }
  if (!out.empty())
    out.pop_back();
  return out;
}

const PipelineSchedule& schedule(const std::string& name)
{
  return ScheduleRegistry::get(name, "parallelism.schedule");
}


// A p-stage, m-micro-batch scenario with uniform stages and free communication (links of
// unbounded speed and no latency, untied embeddings so that no all-reduce joins the first and
// last stages).
Scenario uniform_scenario(const std::string& name, int p, int m, int v = 1)
{
  nlohmann::json doc                    = testing::small_scenario(p, 1, m);
  doc["parallelism"]["schedule"]        = name;
  doc["parallelism"]["virtual_stages"]  = v;
  doc["model"]["num_layers"]            = 4 * p * v;
  doc["model"]["tied_embeddings"]       = false;
  doc["simulation"]["compute_model"]    = testing::kUniformLayers;
  return scenario_from_json(doc);
}

} // namespace

// --- orders against the papers' tables ---------------------------------------------------------

TEST_CASE("GPipe order matches the GPipe paper's Figure 2c (p=2, m=4)", "[schedules]")
{
  // Huang et al. 2019: every device runs F0..F3, then the backwards, last micro-batch first.
  PipelineShape shape{2, 4, 1};
  CHECK(order_text(schedule("gpipe").order(0, shape)) == "F0 F1 F2 F3 B3 B2 B1 B0");
  CHECK(order_text(schedule("gpipe").order(1, shape)) == "F0 F1 F2 F3 B3 B2 B1 B0");
}

TEST_CASE("1F1B order matches PipeDream-Flush's Figure (p=4, m=8), every stage", "[schedules]")
{
  // Narayanan et al. 2021 (PipeDream-2BW paper, Figure 4 "PipeDream-Flush") and Megatron-LM: stage
  // s runs p-s-1 warm-up forwards, then one forward one backward, then drains.
  PipelineShape shape{4, 8, 1};
  const char* table[] = {"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                         "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                         "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                         "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"};
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage);
    CHECK(order_text(schedule("1f1b").order(stage, shape)) == table[stage]);
  }
}

TEST_CASE("interleaved 1F1B order, both stages, against Megatron-LM's (p=2, v=2, m=4)", "[schedules]")
{
  // forward_backward_pipelining_with_interleaving: micro-batches go through the chunks in groups
  // of p; stage s warms up with 2(p-s-1) + (v-1)p chunk passes.
  PipelineShape shape{2, 4, 2};
  CHECK(order_text(schedule("interleaved_1f1b").order(0, shape)) ==
        "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  CHECK(order_text(schedule("interleaved_1f1b").order(1, shape)) ==
        "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
}

TEST_CASE("ZB-H1 order (p=3 m=4, p=4 m=8): the paper authors' schedule, W delayed by the stage's rank", "[schedules]")
{
  // Qi et al. ICLR'24, ZB-H1 as its authors run it (sail-sg/zero-bubble-pipeline-parallelism,
  // megatron/core/pipeline_parallel/schedules.py at c5d5074): in the steady phase, iteration i
  // splits B from W when i < rank or i is the last one, and the last iteration then runs one
  // deferred W if i >= rank > 0; each drain B splits and runs one deferred W once
  // steady + j >= rank; the queue is emptied at the end. Rank 0 never splits. Worked by hand from
  // that loop, not from stepsim's code.
  const char* p3m4[] = {"F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3",
                        "F0 F1 B0 F2 B1 W1 F3 B2 W0 B3 W2 W3",
                        "F0 B0 F1 B1 F2 B2 W2 F3 B3 W0 W1 W3"};
  const char* p4m8[] = {
      "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7",
      "F0 F1 F2 B0 F3 B1 W1 F4 B2 W2 F5 B3 W3 F6 B4 W4 F7 B5 W0 B6 W5 B7 W6 W7",
      "F0 F1 B0 F2 B1 F3 B2 W2 F4 B3 W3 F5 B4 W4 F6 B5 W5 F7 B6 W0 B7 W1 W6 W7",
      "F0 B0 F1 B1 F2 B2 F3 B3 W3 F4 B4 W4 F5 B5 W5 F6 B6 W6 F7 B7 W0 W1 W2 W7"};
  for (auto [shape, table] : {std::pair{PipelineShape{3, 4, 1}, p3m4}, std::pair{PipelineShape{4, 8, 1}, p4m8}}) {
    for (int stage = 0; stage < shape.stages; ++stage) {
      INFO("p " << shape.stages << " stage " << stage);
      CHECK(order_text(schedule("zb_h1").order(stage, shape)) == table[stage]);
      CHECK(check_order(schedule("zb_h1").order(stage, shape), shape, true).empty());
    }
  }
}

TEST_CASE("PipeDream orders match PipeDream's Figure 8 (p=4): no flush between steps", "[schedules]")
{
  // Narayanan et al. SOSP'19, Figure 8 (4 workers, numbered from 0 here): worker s admits p-s
  // micro-batches, then alternates; with m = 4 per step, micro-batches 4.. belong to the next
  // step and enter before this step's backwards are done.
  PipelineShape three_steps{4, 12, 1};
  const char* table[] = {"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5",
                         "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 F8",
                         "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6",
                         "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7"};
  for (const char* name : {"pipedream_async", "pipedream_2bw"}) {
    CHECK_FALSE(schedule(name).flushes);
    for (int stage = 0; stage < 4; ++stage) {
      INFO(name << " stage " << stage);
      CHECK(order_text(schedule(name).order(stage, three_steps), 15) == table[stage]);
      CHECK(check_order(schedule(name).order(stage, three_steps), three_steps, false).empty());
    }
  }
  CHECK(schedule("pipedream_async").micro_batches_per_update == 1);
  CHECK(schedule("pipedream_2bw").micro_batches_per_update == 0); // once per step
}

// --- in flight and weight versions -------------------------------------------------------------

TEST_CASE("peak micro-batches in flight per schedule and stage", "[schedules]")
{
  PipelineShape shape{4, 8, 1};
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage);
    CHECK(schedule("gpipe").peak_in_flight(stage, shape) == 8);         // every micro-batch
    CHECK(schedule("1f1b").peak_in_flight(stage, shape) == 4 - stage);  // p - s
    CHECK(schedule("zb_h1").peak_in_flight(stage, shape) == 4 - stage); // the paper: 1F1B's peak
    CHECK(schedule("pipedream_async").peak_in_flight(stage, shape) == 4 - stage);
    CHECK(schedule("pipedream_2bw").peak_in_flight(stage, shape) == 4 - stage);
  }
  // 1F1B with fewer micro-batches than stages holds what it has.
  CHECK(schedule("1f1b").peak_in_flight(0, {4, 2, 1}) == 2);
  // Without a flush the next step's micro-batches fill the pipeline even when m < p.
  CHECK(schedule("pipedream_async").peak_in_flight(0, {4, 2, 1}) == 4);
  // Interleaved (Megatron): stage 0 holds 2(p-1) + (v-1)p + 1 chunks = p + (p-1)/v micro-batches,
  // 5.5 for p=4, v=2, rounded up; the last stage (v-1)p + 1 = 5 chunks, 2.5 -> 3.
  PipelineShape interleaved{4, 8, 2};
  CHECK(schedule("interleaved_1f1b").peak_in_flight(0, interleaved) == 6);
  CHECK(schedule("interleaved_1f1b").peak_in_flight(3, interleaved) == 3);
  // When the warm-up is the whole step (m = p = 4, v = 2: warm-up 10 > 8 chunks) it holds them all.
  CHECK(schedule("interleaved_1f1b").peak_in_flight(0, {4, 4, 2}) == 4);
}

TEST_CASE("weight versions: stashing in PipeDream, double buffering in 2BW, one otherwise", "[schedules]")
{
  PipelineShape shape{4, 8, 1};
  for (const char* name : {"gpipe", "1f1b", "zb_h1"})
    CHECK_FALSE(schedule(name).weight_versions);
  for (int stage = 0; stage < 4; ++stage) {
    CHECK(schedule("pipedream_async").weight_versions(stage, shape) == 4 - stage);
    CHECK(schedule("pipedream_2bw").weight_versions(stage, shape) == (stage < 3 ? 2 : 1));
  }
}

TEST_CASE("the memory model counts stashed weight versions and in-flight micro-batches", "[schedules]")
{
  Scenario one_f_one_b = uniform_scenario("1f1b", 4, 8);
  Scenario async       = uniform_scenario("pipedream_async", 4, 8);
  Scenario two_bw      = uniform_scenario("pipedream_2bw", 4, 8);
  const Report base    = analytic_report(one_f_one_b);
  const Report stashed = analytic_report(async);
  const Report doubled = analytic_report(two_bw);
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage);
    const MemoryBreakdown one = stage_memory(one_f_one_b, stage, 4 - stage);
    const MemoryBreakdown pd  = stage_memory(async, stage, 4 - stage, 4 - stage);
    CHECK(pd.weights == Approx(one.weights * (4 - stage)));
    CHECK(pd.gradients == Approx(one.gradients));
    CHECK(pd.optimizer == Approx(one.optimizer));
    CHECK(pd.activations == Approx(one.activations));
    // The report uses the schedule's figures: PipeDream adds (p-s-1) weight copies to 1F1B.
    CHECK(stashed.stages[stage].memory_bytes == Approx(base.stages[stage].memory_bytes + (3 - stage) * one.weights));
    CHECK(doubled.stages[stage].memory_bytes ==
          Approx(base.stages[stage].memory_bytes + (stage < 3 ? 1 : 0) * one.weights));
  }
}

TEST_CASE("PipeDream-2BW needs at least p micro-batches per step", "[schedules]")
{
  nlohmann::json doc             = testing::small_scenario(4, 1, 2);
  doc["parallelism"]["schedule"] = "pipedream_2bw";
  try {
    scenario_from_json(doc);
    FAIL("accepted 2 micro-batches on 4 stages");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("training.global_batch_size") && Catch::Contains("pipedream_2bw"));
  }
}

// --- lowering without a flush -------------------------------------------------------------------

TEST_CASE("PipeDream lowers several steps, one weight update per micro-batch (async) or per step (2BW)", "[schedules]")
{
  auto updates = [](const RankProgram& r) {
    int n = 0;
    for (auto v : boost::make_iterator_range(boost::vertices(r.graph)))
      n += r.graph[v].pass == Pass::Optimizer && r.graph[v].stream == Stream::Compute;
    return n;
  };
  for (auto [p, m, steps] : {std::tuple{4, 8, 3}, std::tuple{4, 4, 3}, std::tuple{4, 2, 5}, std::tuple{4, 1, 9}}) {
    for (const char* name : {"pipedream_async", "pipedream_2bw", "1f1b"}) {
      if (std::string(name) == "pipedream_2bw" && m < p)
        continue;
      INFO(name << " p=" << p << " m=" << m);
      Workload w         = lower(uniform_scenario(name, p, m));
      const bool flushes = std::string(name) == "1f1b";
      CHECK(w.steps == (flushes ? 1 : steps));
      CHECK(w.measured_step == (flushes ? 0 : (steps - 1) / 2));
      for (const auto& rank : w.ranks) {
        CHECK(rank.step_ends.size() == (flushes ? 0u : static_cast<size_t>(steps)));
        const int per_step = std::string(name) == "pipedream_async" ? m : 1;
        CHECK(updates(rank) == per_step * w.steps);
        // A step ends after the backward of its last micro-batch and before the next step's
        // backwards: no flush, yet each step's update sits between its own passes and the next's.
        for (size_t k = 0; k < rank.step_ends.size(); ++k) {
          const TaskId end = rank.step_ends[k];
          for (auto v : boost::make_iterator_range(boost::vertices(rank.graph))) {
            const Task& t = rank.graph[v];
            if (t.pass != Pass::Backward || t.stream != Stream::Compute)
              continue;
            if (t.micro_batch < static_cast<int>((k + 1) * m))
              CHECK(v < end);
            else
              CHECK(v > end);
          }
        }
      }
    }
  }
}

// --- measured bubbles ---------------------------------------------------------------------------

TEST_CASE("measured bubbles equal the textbook with uniform stages and free communication", "[schedules][sim]")
{
  auto [name, p, m, v] = GENERATE(table<std::string, int, int, int>({{"gpipe", 2, 4, 1},
                                                                    {"gpipe", 4, 6, 1},
                                                                    {"1f1b", 4, 8, 1},
                                                                    {"1f1b", 3, 5, 1},
                                                                    {"interleaved_1f1b", 2, 4, 2},
                                                                    {"interleaved_1f1b", 4, 8, 2},
                                                                    {"interleaved_1f1b", 2, 4, 3}}));
  INFO(name << " p=" << p << " m=" << m << " v=" << v);
  Report r              = simulate_isolated(uniform_scenario(name, p, m, v));
  const double textbook = double(p - 1) / double(v * m + p - 1);
  for (const auto& st : r.stages) {
    INFO("stage " << st.stage);
    CHECK(st.textbook_bubble_fraction == Approx(textbook).epsilon(1e-6)); // the report keeps 9 digits
    CHECK(st.bubble_fraction == Approx(textbook).epsilon(0.01));
  }
}

TEST_CASE("ZB-H1's measured bubble is strictly below 1F1B's on every stage", "[schedules][sim]")
{
  Report one_f_one_b = simulate_isolated(uniform_scenario("1f1b", 4, 8));
  Report zero_bubble = simulate_isolated(uniform_scenario("zb_h1", 4, 8));
  CHECK(zero_bubble.step_time_s < one_f_one_b.step_time_s);
  for (int stage = 0; stage < 4; ++stage)
    CHECK(zero_bubble.stages[stage].bubble_fraction < one_f_one_b.stages[stage].bubble_fraction);
}

// PipeDream's steady state: every stage alternates F and B with nothing to wait for, so the bubble
// is that of no pipeline at all and a step of m micro-batches takes m (tF + tB) where 1F1B takes
// (m + p - 1)(tF + tB). Tolerance: 0.5 % of the step, for the free links' residual transfer times.
TEST_CASE("PipeDream's steady-state bubble is zero and its step is m/(m+p-1) of 1F1B's", "[schedules][sim]")
{
  auto [name, p, m] = GENERATE(table<std::string, int, int>(
      {{"pipedream_async", 4, 8}, {"pipedream_async", 4, 2}, {"pipedream_2bw", 4, 8}, {"pipedream_2bw", 3, 5}}));
  INFO(name << " p=" << p << " m=" << m);
  Report flushed = simulate_isolated(uniform_scenario("1f1b", p, m));
  Report steady  = simulate_isolated(uniform_scenario(name, p, m));
  CHECK(steady.step_time_s == Approx(flushed.step_time_s * m / (m + p - 1)).epsilon(0.005));
  for (const auto& st : steady.stages) {
    INFO("stage " << st.stage);
    CHECK(st.textbook_bubble_fraction == 0);
    CHECK(st.bubble_fraction < 0.005);
    // The measured window holds exactly one step's work: the compute of a flushed step.
    CHECK(st.compute_s == Approx(flushed.stages[st.stage].compute_s).epsilon(1e-6));
  }
}

TEST_CASE("PipeDream's async updates cost more than 2BW's once the optimizer takes time", "[schedules][sim]")
{
  // With the kernel cost model the optimizer step is memory-bound and not free: PipeDream runs it
  // after every micro-batch, 2BW once per step, so 2BW's steady step is shorter.
  nlohmann::json doc             = testing::small_scenario(4, 1, 8);
  doc["parallelism"]["schedule"] = "pipedream_async";
  Report async                   = simulate_isolated(scenario_from_json(doc));
  doc["parallelism"]["schedule"] = "pipedream_2bw";
  Report two_bw                  = simulate_isolated(scenario_from_json(doc));
  CHECK(two_bw.step_time_s < async.step_time_s);
  CHECK(two_bw.memory_peak_bytes < async.memory_peak_bytes);
}
