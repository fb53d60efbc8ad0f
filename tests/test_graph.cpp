// `stepsim graph`: one rank's task graph as JSON and DOT.
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;
using testing::run_stepsim;

TEST_CASE("stepsim graph exports one rank's tasks and edges", "[graph]")
{
  nlohmann::json doc = testing::small_scenario(2, 2, 4);
  std::string file   = testing::write_temp_file("graph.json", doc.dump());
  std::string out    = file + ".out.json";
  // Rank 3 is stage 1 of data replica 1 (tensor innermost, pipeline outermost).
  auto result = run_stepsim("graph " + file + " --rank 3 --json " + out);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto g = nlohmann::json::parse(testing::read_text_file(out));
  CHECK(g["rank"] == 3);
  CHECK(g["stage"] == 1);
  size_t forwards = 0, receives = 0;
  for (const auto& t : g["tasks"]) {
    forwards += t["pass"] == "forward" && t["kind"] == "compute";
    receives += t["kind"] == "recv";
    if (t["kind"] == "compute")
      CHECK(t["seconds"].get<double>() > 0);
  }
  CHECK(forwards == 4 * 4 * 2 + 4); // 4 micro-batches × 4 layers × 2 blocks, and the head per micro-batch
  CHECK(receives == 4);             // each forward's activation from stage 0
  for (const auto& e : g["edges"])
    CHECK(e[0].get<int>() < e[1].get<int>()); // program order: every edge goes forward

  auto dot = run_stepsim("graph " + file + " --rank 0 --dot -");
  REQUIRE(dot.exit_code == 0);
  CHECK(dot.output.rfind("digraph G {", 0) == 0);
  CHECK(run_stepsim("graph " + file + " --rank 4 --dot -").exit_code == 2);
  CHECK(run_stepsim("graph " + file).exit_code == 2);
}
