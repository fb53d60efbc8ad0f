// Bad input: a clear message that names the JSON path, exit code 2, never a crash.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "sim/engine/graph_check.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/platform.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/core/units.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"

#include <simgrid/s4u/Engine.hpp>

#include <catch2/catch.hpp>

using namespace stepsim;

namespace {
std::string default_scenario() { return std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json"; }

void expect_rejected(const std::string& args, const std::string& message)
{
  auto r = testing::run_stepsim(args);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(message) != std::string::npos);
}
} // namespace

TEST_CASE("malformed JSON names the line and column")
{
  auto file = testing::write_temp_file("bad.json", "{\n  \"model\": {\n    \"num_layers\": 96,\n  }\n}\n");
  expect_rejected("run " + file, "malformed JSON at line 4");
}

// Each bad input as a --set on the default scenario, with the message it must produce.
TEST_CASE("bad inputs name the JSON path and what was expected")
{
  auto [sets, message] = GENERATE(table<std::string, std::string>({
      {"--set parallelism.tensor='\"eight\"'",
       "parallelism.tensor: expected a positive integer, got the string \"eight\""},
      {"--set parallelism.tensr=8", "parallelism.tensr: unknown key (did you mean \"tensor\"?)"},
      // A key that is part of a known one's name ("layers" of "num_layers"), far by spelling.
      {"--set model.layers=8", "model.layers: unknown key (did you mean \"num_layers\"?)"},
      // Nothing alike: what the object takes.
      {"--set parallelism.zzz=8", "parallelism.zzz: unknown key; expected one of "},
      {"--set platform.node_groups.0.count=64",
       "parallelism.tensor: 8 × pipeline 16 × data 8 = 1024 GPUs, but the platform has 512"},
      {"--set parallelism.tensor=5 --set parallelism.data=12 --set platform.node_groups.0.count=120",
       "model.num_attention_heads 96 is not divisible by tensor 5"},
      {"--set platform.node_groups.0.gpu=A100-SXM4-80G",
       "platform.node_groups[0].gpu: unknown device \"A100-SXM4-80G\" (did you mean \"A100-SXM4-80GB\"?)"},
      {"--set parallelism.schedule=1f1bb", "parallelism.schedule: unknown name \"1f1bb\" (did you mean \"1f1b\"?)"},
      {"--set platform.node_groups.0.nic.bandwidth=200Gbs", "platform.node_groups[0].nic.bandwidth: expected a bandwidth"},
      {"--set parallelism.schedule=interleaved_1f1b", "parallelism.virtual_stages: schedule \"interleaved_1f1b\" needs"},
  }));
  expect_rejected("run " + default_scenario() + " " + sets, message);
}

TEST_CASE("several independent problems are reported together")
{
  auto r = testing::run_stepsim("run " + default_scenario() +
                                " --set training.precision=fp12 --set training.micro_batch_size=0");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("training.precision") != std::string::npos);
  CHECK(r.output.find("training.micro_batch_size") != std::string::npos);
}

TEST_CASE("a missing file is an input error")
{
  expect_rejected("run /nonexistent/scenario.json", "cannot open the file");
}

TEST_CASE("units parse as SimGrid writes them")
{
  CHECK(*units::parse_bandwidth("200Gbps") == Approx(25e9));
  CHECK(*units::parse_bandwidth("300GBps") == Approx(300e9));
  CHECK(*units::parse_time("1.5us") == Approx(1.5e-6));
  CHECK(*units::parse_bytes("25MiB") == Approx(25 * 1048576.0));
  CHECK_FALSE(units::parse_bandwidth("fast").has_value());
  CHECK_FALSE(units::parse_time("3 parsecs").has_value());
}

TEST_CASE("every device of the catalogue loads and lists")
{
  auto r = testing::run_stepsim("devices");
  CHECK(r.exit_code == 0);
  for (const char* name : {"A100-SXM4-80GB", "H100-SXM", "V100-SXM3-32GB", "H200-SXM", "Tesla-P40", "Chiplet-Die"})
    CHECK(r.output.find(name) != std::string::npos);
  CHECK(r.output.find(" 0.0 TFLOP/s") == std::string::npos);
}

// --- runtime guards: graphs that would deadlock are refused before the replay ----------------

namespace {
// Two ranks (pipeline stages 0 and 1) that each compute once and exchange one message.
Workload two_ranks()
{
  Workload w;
  w.world_size = 2;
  w.stages     = 2;
  w.works.push_back(Work{"layer", {}, 1e-3});
  for (int r = 0; r < 2; ++r) {
    w.ranks.emplace_back();
    w.ranks.back().rank  = r;
    w.ranks.back().stage = r;
  }
  return w;
}

Task forward(int micro_batch)
{
  return compute_task(0, Pass::Forward, micro_batch);
}

Task p2p(TaskKind kind, Stream stream, int peer, int tag)
{
  return point_to_point_task(kind, stream, peer, tag, 1e6, Pass::Forward, -1, 0);
}

// The rank's graph: these tasks and exactly these edges (a builder would add its stream order).
void set_graph(RankProgram& program, const std::vector<Task>& tasks, const std::vector<std::pair<TaskId, TaskId>>& edges)
{
  program.graph = TaskGraph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), tasks.size());
  for (TaskId v = 0; v < tasks.size(); ++v)
    program.graph[v] = tasks[v];
}

std::string all(const std::vector<std::string>& problems)
{
  std::string out;
  for (const auto& p : problems)
    out += p + "\n";
  return out;
}
} // namespace

TEST_CASE("graph check: a lowered scenario passes", "[graph_check]")
{
  for (const char* schedule : {"gpipe", "1f1b", "zb_h1"}) {
    auto doc                            = testing::small_scenario(4, 2, 8);
    doc["parallelism"]["schedule"]      = schedule;
    doc["simulation"]["fidelity"]       = "full";
    Scenario s                          = scenario_from_json(doc);
    INFO(schedule);
    CHECK(find_graph_problems(lower(s)).empty());
  }
  auto doc                              = testing::small_scenario(4, 1, 8);
  doc["parallelism"]["schedule"]        = "interleaved_1f1b";
  doc["parallelism"]["virtual_stages"]  = 2;
  CHECK(find_graph_problems(lower(scenario_from_json(doc))).empty());
}

TEST_CASE("graph check: a cycle within a rank names the rank and the tasks", "[graph_check]")
{
  Workload w = two_ranks();
  set_graph(w.ranks[1], {forward(0), forward(1)}, {{0, 1}, {1, 0}});
  auto text = all(find_graph_problems(w));
  INFO(text);
  CHECK(text.find("rank 1: the task graph has a cycle") != std::string::npos);
  CHECK(text.find("task 0 (forward compute, micro-batch 0") != std::string::npos);
  CHECK(text.find("task 1 (forward compute, micro-batch 1") != std::string::npos);
  CHECK_THROWS_AS(check_task_graphs(w), GraphError);
}

TEST_CASE("graph check: a send without its receive names both ranks and the tag", "[graph_check]")
{
  Workload w = two_ranks();
  set_graph(w.ranks[0], {p2p(TaskKind::Send, Stream::SendNext, 1, 7)}, {});
  set_graph(w.ranks[1], {p2p(TaskKind::Recv, Stream::RecvPrev, 0, 8)}, {}); // wrong tag
  auto text = all(find_graph_problems(w));
  INFO(text);
  CHECK(text.find("rank 0: task 0 (forward send to rank 1, tag 7") != std::string::npos);
  CHECK(text.find("no matching receive on rank 1 (source 0, destination 1, tag 7)") != std::string::npos);
  CHECK(text.find("rank 1: task 0 (forward receive from rank 0, tag 8") != std::string::npos);
  CHECK(text.find("no matching send on rank 0") != std::string::npos);
}

TEST_CASE("graph check: ranks that each receive before they send deadlock across ranks", "[graph_check]")
{
  Workload w = two_ranks();
  // Task 0 receives, task 1 sends.
  for (int r = 0; r < 2; ++r)
    set_graph(w.ranks[static_cast<size_t>(r)],
              {p2p(TaskKind::Recv, Stream::RecvPrev, 1 - r, 1 - r), p2p(TaskKind::Send, Stream::SendNext, 1 - r, r)},
              {{0, 1}});
  auto text = all(find_graph_problems(w));
  INFO(text);
  CHECK(text.find("the task graphs deadlock across ranks") != std::string::npos);
  // The same exchange with the sends first on one side runs.
  Workload ok = two_ranks();
  for (int r = 0; r < 2; ++r)
    set_graph(ok.ranks[static_cast<size_t>(r)],
              {p2p(TaskKind::Recv, Stream::RecvPrev, 1 - r, 1 - r), p2p(TaskKind::Send, Stream::SendNext, 1 - r, r)},
              {r == 0 ? std::pair<TaskId, TaskId>{0, 1} : std::pair<TaskId, TaskId>{1, 0}});
  CHECK(find_graph_problems(ok).empty());
  // The road looks for cycles only once a replay is stuck: all but the cycles finds nothing
  // here, and the replay stops with Deadlock instead of running on or crashing.
  CHECK(find_graph_problems(w, GraphChecks::ButCycles).empty());
  const auto replayed = testing::in_child([&] {
    auto engine     = testing::start_engine();
    BuiltPlatform p = build_platform(testing::single_gpu_nodes(2, 1e9, 1e-6));
    try {
      replay(w, p.gpus, CollectiveRegistry::get("ring", ""));
    } catch (const Deadlock& e) {
      return nlohmann::json{{"deadlock", e.what()}};
    }
    return nlohmann::json{{"deadlock", ""}};
  });
  CHECK(replayed.at("deadlock").get<std::string>().find("the task graph deadlocks: 4 tasks never ran") != std::string::npos);
}

TEST_CASE("graph check: references that point nowhere are problems, not crashes", "[graph_check]")
{
  Workload w = two_ranks();
  Task bad_work = forward(0);
  bad_work.work = 5;
  set_graph(w.ranks[0], {bad_work, p2p(TaskKind::Send, Stream::SendNext, 9, 0)}, {});
  Task bad_group;
  bad_group.kind  = TaskKind::Collective;
  bad_group.group = 3;
  set_graph(w.ranks[1], {bad_group}, {});
  auto text = all(find_graph_problems(w));
  INFO(text);
  CHECK(text.find("refers to work 5, but there are 1") != std::string::npos);
  CHECK(text.find("peer rank 9 is outside the world of 2 ranks") != std::string::npos);
  CHECK(text.find("refers to group 3, but there are 0") != std::string::npos);
}

TEST_CASE("memory_problem names the stage and the breakdown; the default scenario fits", "[memory]")
{
  auto fits = load_scenario(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json");
  CHECK(memory_problem(fits).empty());
  auto big = load_scenario(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json",
                           {"training.recompute=none", "training.micro_batch_size=8", "training.global_batch_size=1536",
                            "simulation.allow_oom=true"});
  auto why = memory_problem(big);
  INFO(why);
  for (const char* part : {"does not fit in memory: pipeline stage", "weights", "gradients", "optimizer", "activations",
                           "buffers", "A100-SXM4-80GB has 79.29 GiB for it"})
    CHECK(why.find(part) != std::string::npos);
  // Loading it is fine (FLOP and memory queries need no fit); simulating it is bad input.
  CHECK_NOTHROW(load_scenario(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json",
                              {"training.recompute=none", "training.micro_batch_size=8"}));
  expect_rejected("run " + default_scenario() + " --set training.recompute=none --set training.micro_batch_size=8",
                  "platform.node_groups[0].gpu: does not fit in memory: pipeline stage");
}

TEST_CASE("JSON nested without end and files that are not files are input errors")
{
  CHECK_THROWS_AS(parse_json_text(std::string(100000, '['), "deep.json"), InputError);
  CHECK_THROWS_AS(read_json_file("/dev/zero"), InputError);
  CHECK_THROWS_AS(read_json_file(STEPSIM_SOURCE_DIR), InputError);
}
