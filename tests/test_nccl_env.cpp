// platform.nccl_env: NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE and NCCL_COLLNET_ENABLE as a
// platform's image sets them, read in NCCL's syntax (sim/input/nccl_env_parse.cpp) and applied to
// what `auto` picks (models/collectives/auto.cpp, protocol.cpp).
#include "support.hpp"

#include "sim/simulate.hpp"
#include "topologies/preset.hpp"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

using namespace stepsim;

namespace {

NcclEnv env_of(const nlohmann::json& variables)
{
  nlohmann::json doc          = testing::small_scenario(1, 8, 8);
  doc["platform"]["nccl_env"] = variables;
  return parse_scenario(doc).platform.nccl_env;
}

// CollectiveOp's order in the masks.
constexpr size_t kAllReduce = 0, kAllGather = 1, kReduceScatter = 2, kAllToAll = 3, kBroadcast = 4;

// The algorithm/protocol column of `stepsim collective`'s rows, in size order.
std::vector<std::string> picked(const std::string& arguments)
{
  const auto run = testing::run_stepsim("collective " + arguments);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::vector<std::string> out;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    double number = 0;
    std::string name;
    if (line.rfind('#', 0) != 0 && fields >> number >> number >> number >> number >> number >> name &&
        name.find('/') != std::string::npos)
      out.push_back(name);
  }
  return out;
}

} // namespace

TEST_CASE("nccl_env: NCCL_ALGO and NCCL_PROTO are read as NCCL reads them")
{
  // No variables: NCCL's defaults, every algorithm and protocol.
  CHECK(env_of(nlohmann::json::object()).choices == NcclChoices{});
  // A list names what is enabled, for every collective function; names in any case.
  const NcclEnv ring = env_of({{"NCCL_ALGO", "ring"}, {"NCCL_PROTO", "Simple"}});
  for (size_t op : {kAllReduce, kAllGather, kReduceScatter, kBroadcast}) {
    CHECK(ring.choices.algorithms[op] == kNcclRing);
    CHECK(ring.choices.protocols[op] == kNcclSimple);
  }
  // All-to-all is point-to-point sends in NCCL: NCCL_ALGO and NCCL_PROTO leave it alone.
  CHECK(ring.choices.algorithms[kAllToAll] == kEveryNcclAlgorithm);
  CHECK(ring.choices.protocols[kAllToAll] == kEveryNcclProtocol);
  CHECK(ring.variables.at("NCCL_ALGO") == "ring");
  // ^ enables all but those.
  const NcclEnv no_ll128 = env_of({{"NCCL_PROTO", "^LL128"}});
  CHECK(no_ll128.choices.protocols[kAllReduce] == (kNcclLL | kNcclSimple));
  // Entries after the first name their function; a function no entry names keeps the defaults.
  const NcclEnv split = env_of({{"NCCL_ALGO", "Ring;allreduce:Tree,Ring"}});
  CHECK(split.choices.algorithms[kAllReduce] == (kNcclTree | kNcclRing));
  CHECK(split.choices.algorithms[kAllGather] == kNcclRing);
  const NcclEnv one = env_of({{"NCCL_ALGO", "AllReduce:^NVLS,NVLSTree"}});
  CHECK(one.choices.algorithms[kAllReduce] == (kEveryNcclAlgorithm & ~(kNcclNvls | kNcclNvlsTree)));
  CHECK(one.choices.algorithms[kAllGather] == kEveryNcclAlgorithm);
  // NCCL_NVLS_ENABLE=0 takes NVLS and NVLS-tree away, NCCL_COLLNET_ENABLE=0 CollNet, whatever
  // NCCL_ALGO says; 1 (and NVLS's 2, NCCL's default) change nothing.
  const NcclEnv off = env_of({{"NCCL_ALGO", "Ring,Tree,NVLS,NVLSTree,CollNetDirect"}, {"NCCL_NVLS_ENABLE", "0"},
                              {"NCCL_COLLNET_ENABLE", 0}});
  CHECK(off.choices.algorithms[kAllReduce] == (kNcclRing | kNcclTree));
  CHECK(env_of({{"NCCL_NVLS_ENABLE", "2"}, {"NCCL_COLLNET_ENABLE", "1"}}).choices == NcclChoices{});
}

TEST_CASE("nccl_env: what NCCL would refuse is bad input, at its path")
{
  auto problem = [](const nlohmann::json& variables) {
    return testing::input_problems([&] { env_of(variables); });
  };
  const std::string misspelt = problem({{"NCCL_ALGO", "Rign,Tree"}});
  CHECK(misspelt.find("platform.nccl_env.NCCL_ALGO") != std::string::npos);
  CHECK(misspelt.find("did you mean \"Ring\"") != std::string::npos);
  CHECK(problem({{"NCCL_PROTO", "LL,Fast"}}).find("platform.nccl_env.NCCL_PROTO") != std::string::npos);
  CHECK(problem({{"NCCL_ALGO", "Ring;Tree"}}).find("needs a collective function") != std::string::npos);
  CHECK(problem({{"NCCL_ALGO", "allreduse:Ring"}}).find("did you mean \"AllReduce\"") != std::string::npos);
  // A variable stepsim does not model is named, not ignored.
  const std::string unknown = problem({{"NCCL_BUFFSIZE", "8388608"}});
  CHECK(unknown.find("platform.nccl_env.NCCL_BUFFSIZE") != std::string::npos);
  CHECK(unknown.find("not a variable stepsim models") != std::string::npos);
  CHECK(problem({{"NCCL_ALGOS", "Ring"}}).find("did you mean NCCL_ALGO?") != std::string::npos);
  CHECK(problem({{"NCCL_NVLS_ENABLE", "yes"}}).find("platform.nccl_env.NCCL_NVLS_ENABLE") != std::string::npos);
  CHECK(problem({{"NCCL_ALGO", 1}}).find("expected a string") != std::string::npos);
  CHECK(problem(nlohmann::json("NCCL_ALGO=Ring")).find("platform.nccl_env: expected an object") != std::string::npos);
}

TEST_CASE("nccl_env: auto picks among what NCCL_ALGO and NCCL_PROTO enable")
{
  // Two H100 nodes: at 256 MB the tuner takes NVLS-tree, at 64 KB a latency-bound protocol.
  const std::string base = "--preset dgx-h100 --nodes 2 --sizes 64KB,256MB";
  const auto defaults    = picked(base);
  REQUIRE(defaults.size() == 2);
  CHECK(defaults[0].find("/Simple") == std::string::npos);
  CHECK(defaults[1].rfind("nvls_tree/", 0) == 0);
  // Ring and Simple only (Google's GPUDirect-TCPX settings): that is what runs at every size.
  for (const auto& p : picked(base + " --set platform.nccl_env.NCCL_ALGO=Ring --set platform.nccl_env.NCCL_PROTO=Simple"))
    CHECK(p == "ring/Simple");
  // NVLS off as a variable: the tree or the ring across nodes, as intra_node.nvls false gives.
  const auto no_nvls = picked(base + " --set platform.nccl_env.NCCL_NVLS_ENABLE=0");
  const auto by_node = picked(base + " --set platform.node_groups.0.intra_node.nvls=false");
  CHECK(no_nvls == by_node);
  CHECK(no_nvls[1].rfind("nvls", 0) == std::string::npos);
  // Excluding a protocol by ^.
  for (const auto& p : picked(base + " --set 'platform.nccl_env.NCCL_PROTO=^LL,LL128'"))
    CHECK(p.find("/Simple") != std::string::npos);
  // A forced algorithm or protocol (the scenario's what-if) overrides the platform's variables.
  CHECK(picked(base + " --set platform.nccl_env.NCCL_ALGO=Ring --algorithm tree")[1].rfind("tree/", 0) == 0);
  for (const auto& p : picked(base + " --set platform.nccl_env.NCCL_PROTO=Simple --protocol LL128"))
    CHECK(p.find("/LL128") != std::string::npos);
}

TEST_CASE("nccl_env: a collective NCCL_ALGO leaves no algorithm is refused, as NCCL fails it")
{
  // NCCL_ALGO=Tree for every function: an all-gather has only the ring in NCCL's tuner here.
  const auto gather = testing::run_stepsim(
      "collective --preset dgx-h100 --nodes 2 --op all_gather --sizes 1MB --set platform.nccl_env.NCCL_ALGO=Tree");
  INFO(gather.output);
  CHECK(gather.exit_code == 2);
  CHECK(gather.output.find("platform.nccl_env.NCCL_ALGO") != std::string::npos);
  CHECK(gather.output.find("no algorithm/protocol available") != std::string::npos);
  // `stepsim validate` says so before any run: NVLS alone on A100s, whose switch does not reduce,
  // leaves a one-node plan's all-reduces nothing.
  nlohmann::json doc                                 = testing::small_scenario(1, 2, 2);
  doc["platform"]["node_groups"][0]["count"]         = 1;
  doc["platform"]["node_groups"][0]["gpus_per_node"] = 2;
  doc["platform"]["nccl_env"]                        = {{"NCCL_ALGO", "NVLS"}};
  const auto validated = testing::run_stepsim("validate " + testing::write_temp_file("nvls.json", doc.dump()));
  CHECK(validated.exit_code == 2);
  CHECK(validated.output.find("platform.nccl_env.NCCL_ALGO: leaves the all_reduce") != std::string::npos);
  doc["platform"]["nccl_env"]["NCCL_ALGO"] = "NVLS;allreduce:Ring";
  CHECK(testing::run_stepsim("validate " + testing::write_temp_file("nvls-ring.json", doc.dump())).exit_code == 0);
  // In one node NCCL_ALGO=Tree runs the tree's chain, which auto otherwise leaves to the ring.
  CHECK(picked("--preset dgx-a100 --nodes 1 --sizes 64KB,64MB --set platform.nccl_env.NCCL_ALGO=Tree") ==
        std::vector<std::string>{"tree/LL", "tree/LL128"});
  // Per function it runs: the tree for all-reduce, the ring for the rest.
  CHECK(picked("--preset dgx-h100 --nodes 2 --op all_gather --sizes 1MB "
               "--set 'platform.nccl_env.NCCL_ALGO=Ring;allreduce:Tree'")[0]
            .rfind("ring/", 0) == 0);
  // NVLS runs Simple only: NCCL_PROTO=LL leaves a forced NVLS no protocol.
  const auto nvls = testing::run_stepsim(
      "collective --preset dgx-h100 --nodes 1 --sizes 1MB --algorithm nvls --set platform.nccl_env.NCCL_PROTO=LL");
  CHECK(nvls.exit_code == 2);
  CHECK(nvls.output.find("platform.nccl_env.NCCL_PROTO") != std::string::npos);
}

TEST_CASE("nccl_env: the GCP presets carry their images' NCCL settings")
{
  // A3 High (GPUDirect-TCPX): Ring and Simple only. A3 Mega (TCPXO): Ring and Tree, no NVLS.
  for (const auto& p : picked("--preset gcp-a3 --sizes 8KB,1MB,1GB"))
    CHECK(p == "ring/Simple");
  for (const auto& p : picked("--preset gcp-a3-mega --sizes 8KB,1MB,1GB"))
    CHECK((p.rfind("ring/", 0) == 0 || p.rfind("tree/", 0) == 0));
  nlohmann::json doc = testing::small_scenario(1, 16, 16);
  doc["platform"]    = {{"preset", "gcp-a3"}, {"nodes", 2}};
  const Scenario s   = parse_scenario(expand_platform_preset(doc));
  CHECK(s.platform.nccl_env.variables.at("NCCL_PROTO") == "Simple");
  // `stepsim platform` says so.
  const auto shown = testing::run_stepsim("platform " + testing::write_temp_file("a3.json", doc.dump()));
  CHECK(shown.output.find("NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0 NCCL_PROTO=Simple") != std::string::npos);
}
