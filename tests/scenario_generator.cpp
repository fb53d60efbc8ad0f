#include "scenario_generator.hpp"

#include <cstdlib>
#include <limits>
#include <vector>

namespace stepsim::testing {

namespace {

// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): the same numbers from a seed on every standard
// library, which std::uniform_int_distribution does not promise.
struct Random {
  uint64_t state;
  uint64_t next()
  {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  template <class T>
  const T& pick(const std::vector<T>& items)
  {
    return items[below(static_cast<int>(items.size()))];
  }
};

// Every node's pointer, containers included (flatten() gives the leaves only).
void collect_pointers(const nlohmann::json& node, const nlohmann::json::json_pointer& at,
                      std::vector<nlohmann::json::json_pointer>& out)
{
  out.push_back(at);
  if (node.is_object())
    for (const auto& [key, value] : node.items())
      collect_pointers(value, at / key, out);
  else if (node.is_array())
    for (size_t i = 0; i < node.size(); ++i)
      collect_pointers(node[i], at / i, out);
}

nlohmann::json nasty_value(Random& r)
{
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 200; ++i)
    deep = nlohmann::json::array({deep});
  const std::vector<nlohmann::json> values = {
      -1, 0, 1, 3, 7, -0.5, 0.999, 1e308, -1e308, 1e-308, 4294967297.0, 9.3e18, 18446744073709551615ULL,
      std::numeric_limits<int64_t>::min(), "", "x", "auto", "none", "1e300s", "-5GBps", "0Gbps", "1PB", "NaN", "inf",
      "../devices/H100-SXM", nullptr, true, false, nlohmann::json::array(), nlohmann::json::object(),
      nlohmann::json::array({1, 2, 3}), nlohmann::json::object({{"unknown", 1}}), deep, std::string(10000, 'a'),
  };
  return r.pick(values);
}

} // namespace

uint64_t property_base_seed()
{
  if (const char* env = std::getenv("STEPSIM_PROPERTY_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 10);
  return 20261201;
}

uint64_t property_seed(int index)
{
  Random r{property_base_seed() + static_cast<uint64_t>(index) * 0x632be59bd9b4e019ULL};
  return r.next();
}

nlohmann::json random_scenario(uint64_t seed)
{
  Random r{seed};
  const int heads     = r.pick(std::vector<int>{8, 16, 32});
  const int head_dim  = r.pick(std::vector<int>{64, 128});
  const int hidden    = heads * head_dim;
  const int tensor    = r.pick(std::vector<int>{1, 2, 4, 8});
  const int pipeline  = r.pick(std::vector<int>{1, 2, 4});
  const int data      = r.pick(std::vector<int>{1, 2, 4, 8});
  const int gpus      = tensor * pipeline * data;
  const int per_node  = gpus < 8 ? gpus : 8;
  const int micro     = 1 + r.below(8);
  const int micro_bs  = r.pick(std::vector<int>{1, 2});
  const bool two_node = gpus / per_node > 1;

  nlohmann::json parallelism = {{"tensor", tensor},
                                {"pipeline", pipeline},
                                {"data", data},
                                {"schedule", pipeline > 1 ? r.pick(std::vector<std::string>{"1f1b", "gpipe"}) : "1f1b"}};
  if (data > 1)
    parallelism["zero_stage"] = r.below(4);

  nlohmann::json node_group = {
      {"count", gpus / per_node},
      {"gpu", r.pick(std::vector<std::string>{"A100-SXM4-80GB", "A100-SXM4-40GB", "H100-SXM", "H200-SXM"})},
      {"gpus_per_node", per_node},
      {"intra_node",
       {{"type", "nvswitch"}, {"bandwidth", r.pick(std::vector<std::string>{"150GBps", "300GBps", "450GBps"})},
        {"latency", "1us"}}},
      {"nic",
       {{"count", per_node}, {"bandwidth", r.pick(std::vector<std::string>{"100Gbps", "200Gbps", "400Gbps"})},
        {"latency", "2us"}}},
  };
  nlohmann::json platform = {{"node_groups", nlohmann::json::array({node_group})}};
  if (two_node)
    platform["network"] = {{"topology", "fat_tree"}};

  return {
      {"name", "property-" + std::to_string(seed)},
      {"model",
       {{"num_layers", pipeline * (1 + r.below(3))},
        {"hidden_size", hidden},
        {"num_attention_heads", heads},
        {"ffn_hidden_size", 4 * hidden},
        {"seq_length", r.pick(std::vector<int>{512, 1024, 2048})},
        {"vocab_size", 32000},
        {"mlp", r.pick(std::vector<std::string>{"gelu", "swiglu"})}}},
      {"training",
       {{"global_batch_size", micro * micro_bs * data},
        {"micro_batch_size", micro_bs},
        {"precision", r.pick(std::vector<std::string>{"bf16", "fp16"})},
        {"recompute", r.pick(std::vector<std::string>{"none", "selective", "full"})}}},
      {"parallelism", parallelism},
      {"platform", platform},
  };
}

nlohmann::json random_balanced_pipeline(uint64_t seed)
{
  Random r{seed ^ 0x9e3779b9ULL};
  // On one NVSwitch node, and with messages far shorter than the blocks' compute: a middle
  // stage sends and receives twice what an end stage does, so a slow link between stages would
  // make them unequal again.
  const int pipeline   = r.pick(std::vector<int>{2, 4, 8});
  const int data       = pipeline == 8 ? 1 : r.pick(std::vector<int>{1, 2, 8 / pipeline});
  const int per_stage  = 1 + r.below(3);
  const int micro      = 1 + r.below(8);
  const double gflop   = r.pick(std::vector<double>{50, 500, 5000}); // a block's forward, per micro-batch
  const double mbytes  = r.pick(std::vector<double>{0.01, 0.1, 1});  // its output, the stage-to-stage message
  const int gpus       = pipeline * data;
  const int per_node   = gpus < 8 ? gpus : 8;
  nlohmann::json block = {{"name", "block"},
                          {"repeat", pipeline * per_stage},
                          {"forward_flops", gflop * 1e9},
                          {"backward_input_flops", gflop * 1e9},
                          {"backward_weight_flops", gflop * 1e9},
                          {"forward_memory_bytes", mbytes * 1e6},
                          {"backward_input_memory_bytes", 2 * mbytes * 1e6},
                          {"parameters", r.pick(std::vector<double>{1e6, 1e7, 1e8})},
                          {"activation_bytes", mbytes * 1e6},
                          {"saved_bytes", 4 * mbytes * 1e6}};
  nlohmann::json node_group = {
      {"count", gpus / per_node},
      {"gpu", r.pick(std::vector<std::string>{"A100-SXM4-80GB", "H100-SXM"})},
      {"gpus_per_node", per_node},
      {"intra_node", {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}}},
      {"nic", {{"count", per_node}, {"bandwidth", "200Gbps"}, {"latency", "2us"}}},
  };
  nlohmann::json platform = {{"node_groups", nlohmann::json::array({node_group})}};
  if (gpus > per_node)
    platform["network"] = {{"topology", "fat_tree"}};
  return {
      {"name", "balanced-" + std::to_string(seed)},
      {"model",
       {{"architecture", "layers"},
        {"seq_length", 1024},
        {"input_bytes", mbytes * 1e6},
        {"layers", nlohmann::json::array({block})}}},
      {"training",
       {{"global_batch_size", micro * data}, {"micro_batch_size", 1}, {"precision", "bf16"}, {"recompute", "none"}}},
      {"parallelism",
       {{"tensor", 1},
        {"pipeline", pipeline},
        {"data", data},
        {"schedule", r.pick(std::vector<std::string>{"1f1b", "gpipe"})}}},
      {"platform", platform},
  };
}

nlohmann::json mutate(const nlohmann::json& scenario, uint64_t seed, std::string* what)
{
  Random r{seed ^ 0x5bd1e995ULL};
  nlohmann::json out = scenario;
  std::vector<nlohmann::json::json_pointer> pointers;
  collect_pointers(out, nlohmann::json::json_pointer(), pointers);
  const auto at = pointers[1 + r.below(static_cast<int>(pointers.size()) - 1)]; // never the root
  const int action = r.below(4);
  if (action == 1 && out.at(at.parent_pointer()).is_object()) {
    out.at(at.parent_pointer()).erase(at.back());
    *what = "removed " + at.to_string();
  } else if (action == 2 && out.at(at).is_object()) {
    out.at(at)["no_such_field"] = nasty_value(r);
    *what = "added " + at.to_string() + "/no_such_field";
  } else {
    nlohmann::json value = nasty_value(r);
    std::string shown    = value.dump();
    *what                = "set " + at.to_string() + " to " + (shown.size() > 60 ? shown.substr(0, 60) + "..." : shown);
    out.at(at)           = std::move(value);
  }
  return out;
}

} // namespace stepsim::testing
