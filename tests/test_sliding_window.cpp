// Sliding-window attention (model.sliding_window, model.window_attn_skip_freq): which layers
// attend in the window, the band of keys their attention kernels run over, Megatron's FLOP count,
// HuggingFace's configs, and the plans it refuses.
#include "support.hpp"

#include "sim/input/hf_config.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"

#include <boost/range/iterator_range.hpp>
#include <catch2/catch.hpp>

#include <fstream>
#include <map>

using namespace stepsim;

namespace {

// A Llama-style model of 4 layers over a sequence of 4,096 on one GPU.
nlohmann::json windowed_model(int window, int skip_freq)
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"num_query_groups", 4}, {"seq_length", 4096},  {"vocab_size", 32000},
                        {"mlp", "swiglu"},       {"norm", "rmsnorm"}};
  if (window > 0)
    doc["model"]["sliding_window"] = window;
  if (skip_freq > 0)
    doc["model"]["window_attn_skip_freq"] = skip_freq;
  return doc;
}

// How many compute tasks of rank 0 run each work, by the work's name.
std::map<std::string, int> tasks_by_work(const Workload& w)
{
  std::map<std::string, int> count;
  const auto& g = w.ranks[0].graph;
  for (auto v : boost::make_iterator_range(boost::vertices(g)))
    if (g[v].kind == TaskKind::Compute && g[v].work >= 0)
      ++count[w.works[static_cast<size_t>(g[v].work)].name];
  return count;
}

const Kernel* attention_kernel_of(const Workload& w, const std::string& work)
{
  for (const Work& x : w.works)
    if (x.name == work)
      for (const Kernel& k : x.kernels)
        if (k.kind == KernelKind::Attention)
          return &k;
  return nullptr;
}

} // namespace

TEST_CASE("every second layer windowed: Megatron's layer numbers, the band of keys, faster attention", "[attention]")
{
  const Scenario s = scenario_from_json(windowed_model(1024, 2));
  // Megatron numbers layers from 1 and gives the whole sequence to those N divides: 2 and 4.
  CHECK(windowed_layer(s.model, 0));
  CHECK(!windowed_layer(s.model, 1));
  CHECK(windowed_layer(s.model, 2));
  CHECK(!windowed_layer(s.model, 3));
  const Workload w = lower(s);
  auto tasks       = tasks_by_work(w);
  CHECK(tasks["attention_forward_windowed"] == 2);
  CHECK(tasks["attention_forward"] == 2);
  CHECK(tasks["attention_backward_windowed"] == 2);
  CHECK(tasks["attention_backward"] == 2);
  // A windowed kernel runs W·s − W(W−1)/2 query-key pairs, without the causal half.
  const Kernel* band  = attention_kernel_of(w, "attention_forward_windowed");
  const Kernel* whole = attention_kernel_of(w, "attention_forward");
  REQUIRE(band != nullptr);
  REQUIRE(whole != nullptr);
  const double s_ = 4096, W = 1024;
  CHECK(!band->causal);
  CHECK(band->m * band->n == Approx(W * s_ - W * (W - 1) / 2));
  CHECK(whole->causal);
  CHECK(band->flops() / whole->flops() == Approx((W * s_ - W * (W - 1) / 2) / (s_ * s_ / 2)));
  // Megatron's count: 4·q per key a token attends to, min(W, s) keys in a windowed layer.
  const double h = 1024, kv = 256, ffn = 4096, vocab = 32000, tokens = s.training.global_batch_size * s_;
  const double layer = 2 * (h * (h + 2 * kv) + h * h + 3 * h * ffn);
  CHECK(model_flops_per_step(s) ==
        Approx(3 * tokens * (4 * layer + 4 * h * (2 * s_ + 2 * W) + 2 * h * vocab)).epsilon(1e-12));
}

TEST_CASE("a window as long as the sequence is whole causal attention: the same report", "[attention]")
{
  auto json_of = [](const nlohmann::json& doc, const char* name) {
    const auto r = testing::run_stepsim("run " + testing::write_temp_file(name, doc.dump()) + " -q --json " + name +
                                        ".out");
    REQUIRE(r.exit_code == 0);
    std::ifstream in(std::string(name) + ".out");
    return nlohmann::json::parse(in);
  };
  const auto plain  = json_of(windowed_model(0, 0), "swa_none.json");
  const auto longer = json_of(windowed_model(4096, 0), "swa_4096.json");
  CHECK(plain["step_time_s"] == longer["step_time_s"]);
  CHECK(plain["model_tflops_per_gpu"] == longer["model_tflops_per_gpu"]);
  // A window of 512 on every layer cuts the attention and the step.
  const auto narrow = json_of(windowed_model(512, 0), "swa_512.json");
  CHECK(narrow["step_time_s"].get<double>() < plain["step_time_s"].get<double>());
}

TEST_CASE("HuggingFace configs: Mistral's window, Qwen's use_sliding_window and layer_types", "[attention]")
{
  const nlohmann::json base = {{"num_hidden_layers", 4},   {"hidden_size", 1024}, {"num_attention_heads", 16},
                               {"intermediate_size", 4096}, {"vocab_size", 32000}};
  auto import = [&](const char* type, nlohmann::json extra) {
    nlohmann::json c  = base;
    c["model_type"]   = type;
    c.update(extra);
    return import_hf_config(c);
  };
  CHECK(import("mistral", {{"sliding_window", 4096}}).sliding_window == 4096);
  CHECK(import("mistral", nlohmann::json::object()).sliding_window == 4096); // MistralConfig's default
  CHECK(import("mistral", {{"sliding_window", nullptr}}).sliding_window == 0);
  CHECK(import("mixtral", {{"num_local_experts", 8}, {"num_experts_per_tok", 2}}).sliding_window == 0);
  // Qwen keeps its window off unless use_sliding_window (Qwen1.5-MoE's config gives 32768 unused).
  CHECK(import("qwen2", {{"sliding_window", 32768}, {"use_sliding_window", false}}).sliding_window == 0);
  const ModelSpec all = import("qwen2", {{"sliding_window", 2048}, {"use_sliding_window", true},
                                         {"max_window_layers", 0}});
  CHECK(all.sliding_window == 2048);
  CHECK(all.window_attn_skip_freq == 0);
  // layer_types speaks only under use_sliding_window; max_window_layers defaults to 28.
  CHECK(import("qwen2", {{"use_sliding_window", true}}).sliding_window == 0);
  CHECK(import("qwen3", {{"sliding_window", 128},
                         {"layer_types", std::vector<std::string>(4, "sliding_attention")}})
            .sliding_window == 0);
  const ModelSpec alternate =
      import("qwen3", {{"sliding_window", 128}, {"use_sliding_window", true},
                       {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}});
  CHECK(alternate.sliding_window == 128);
  CHECK(alternate.window_attn_skip_freq == 2);
  CHECK(import("qwen3", {{"sliding_window", 128}, {"use_sliding_window", true},
                         {"layer_types", std::vector<std::string>(4, "full_attention")}})
            .sliding_window == 0);
  // The first layers whole and the rest windowed is no pattern stepsim expresses.
  CHECK_THROWS_WITH(import("qwen2", {{"sliding_window", 2048}, {"use_sliding_window", true}, {"max_window_layers", 2}}),
                    Catch::Contains("max_window_layers") && Catch::Contains("window_attn_skip_freq"));
  CHECK_THROWS_WITH(import("qwen3", {{"sliding_window", 128}, {"use_sliding_window", true},
                                     {"layer_types", {"sliding_attention", "full"}}}),
                    Catch::Contains("layer_types"));
}

TEST_CASE("sliding windows refuse what is not modelled, naming the path", "[attention]")
{
  nlohmann::json doc                  = windowed_model(1024, 0);
  doc["parallelism"]["context"]       = 2;
  doc["platform"]["node_groups"][0]["count"] = 2;
  CHECK_THAT(testing::input_problems([&] { scenario_from_json(doc); }),
             Catch::Contains("parallelism.context: 2 with model.sliding_window 1024"));
  CHECK_THAT(testing::input_problems([&] { scenario_from_json(windowed_model(0, 2)); }),
             Catch::Contains("model.window_attn_skip_freq: 2 picks the layers"));
  CHECK_THAT(testing::input_problems([&] { scenario_from_json(windowed_model(1024, 1)); }),
             Catch::Contains("model.window_attn_skip_freq"));
}
