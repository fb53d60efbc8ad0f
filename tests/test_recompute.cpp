// Which layers a full recompute rebuilds (training.recompute_every, recompute_method,
// recompute_num_layers) and how many at once, and what a framework's selective recompute rebuilds
// (FrameworkProfile::selective_recompute): the layers marked in the plan, the recomputed tasks in
// the lowered graph, the memory kept, the FLOPs, the step time, and the inputs refused. The
// expected figures are written out here from torchtitan's and Megatron's policies, not taken from
// the code under test.
#include "support.hpp"

#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/stage_memory.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <list>
#include <map>
#include <string>
#include <vector>

using namespace stepsim;

namespace {

// Compute tasks of the given pass on the lowered scenario's first simulated rank, by work name.
std::map<std::string, int> tasks_by_work(const Scenario& s, Pass pass)
{
  const Workload w = lower(s);
  std::map<std::string, int> out;
  const auto& r = w.ranks.front();
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& t = r.graph[v];
    if (t.kind == TaskKind::Compute && t.pass == pass && t.work >= 0)
      ++out[w.works[static_cast<size_t>(t.work)].name];
  }
  return out;
}

// The works of the scenario's lowering by name; the lowering is kept in `kept`, which the map
// points into.
std::map<std::string, const Work*> works_by_name(const nlohmann::json& doc, std::list<Workload>& kept)
{
  kept.push_back(lower(scenario_from_json(doc)));
  std::map<std::string, const Work*> by_name;
  for (const Work& w : kept.back().works)
    by_name.emplace(w.name, &w);
  return by_name;
}

double step_time(const nlohmann::json& doc)
{
  const std::string path = testing::write_temp_file("recompute.json", doc.dump());
  const auto r           = testing::run_stepsim("run " + path + " --json -");
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output).at("step_time_s").get<double>();
}

// A Llama-shaped model (grouped-query attention, SwiGLU, RMSNorm, no dropout) on small_scenario's GPUs.
nlohmann::json llama(int pipeline)
{
  nlohmann::json doc = testing::small_scenario(pipeline, 1, 2);
  doc["model"] = {{"num_layers", 4 * pipeline}, {"hidden_size", 1024}, {"num_attention_heads", 16},
                  {"num_query_groups", 4},       {"seq_length", 2048},  {"vocab_size", 32000},
                  {"ffn_hidden_size", 2816},     {"mlp", "swiglu"},     {"norm", "rmsnorm"},
                  {"dropout", 0.0}}; // Llama's (a scenario's default is Megatron's 0.1)
  return doc;
}

} // namespace

TEST_CASE("a partial full recompute rebuilds every k-th layer (torchtitan) or the first N of each chunk (Megatron's "
          "block method)")
{
  nlohmann::json doc                 = llama(2); // 8 layers, 4 per stage, 2 micro-batches
  doc["training"]["recompute"]       = "full";
  const Scenario full                = scenario_from_json(doc);
  doc["training"]["recompute_every"] = 3; // torchtitan counts blocks from 1: the 3rd and 6th
  const Scenario every               = scenario_from_json(doc);
  doc["training"].erase("recompute_every");
  doc["training"]["recompute_num_layers"] = 3; // Megatron: layers 0-2 of each stage's chunk
  const Scenario block                    = scenario_from_json(doc);
  doc["training"].erase("recompute_num_layers");
  doc["training"]["recompute"] = "none";
  const Scenario none          = scenario_from_json(doc);

  CHECK(every.layer_recomputed(2, 2));
  CHECK(every.layer_recomputed(5, 1));
  CHECK_FALSE(every.layer_recomputed(3, 3));
  CHECK(every.recomputed_layers_on_stage(0) == 1);
  CHECK(every.recomputed_layers_on_stage(1) == 1);
  CHECK(every.recomputed_layer_share() == Approx(2.0 / 8));
  CHECK(block.recomputed_layers_on_stage(0) == 3);
  CHECK(block.recomputed_layers_on_stage(1) == 3);
  CHECK(block.recomputed_layer_share() == Approx(6.0 / 8));
  CHECK(full.recomputed_layer_share() == 1);
  CHECK(none.recomputed_layer_share() == 0);

  // The lowered graph re-runs the forward of those layers only, once per micro-batch.
  CHECK(tasks_by_work(every, Pass::Recompute)["attention_recompute"] == 1 * 2);
  CHECK(tasks_by_work(block, Pass::Recompute)["mlp_recompute"] == 3 * 2);
  CHECK(tasks_by_work(full, Pass::Recompute)["attention_recompute"] == 4 * 2);
  CHECK(tasks_by_work(none, Pass::Recompute).empty());

  // Memory: a recomputed layer keeps its input (2 bytes a token and hidden unit), the others all
  // their activations; one recomputed layer is rebuilt whole in its backward.
  const double input = 2.0 * 2048 * 1024, kept = layer_activation_bytes(none);
  const int in_flight = 2;
  CHECK(stage_memory(full, 0, in_flight).activations - stage_memory(none, 0, in_flight).activations ==
        Approx(4 * (input - kept) * in_flight + kept));
  CHECK(stage_memory(block, 0, in_flight).activations - stage_memory(none, 0, in_flight).activations ==
        Approx(3 * (input - kept) * in_flight + kept));
  CHECK(stage_memory(every, 0, in_flight).activations - stage_memory(none, 0, in_flight).activations ==
        Approx(1 * (input - kept) * in_flight + kept));

  // Hardware FLOPs: the recomputed layers' forward again, in proportion; the head never.
  const double again = hardware_flops_per_step(full) - hardware_flops_per_step(none);
  CHECK(hardware_flops_per_step(every) - hardware_flops_per_step(none) == Approx(again * 2 / 8));
  CHECK(hardware_flops_per_step(block) - hardware_flops_per_step(none) == Approx(again * 6 / 8));
  CHECK(model_flops_per_step(every) == Approx(model_flops_per_step(none)));

  // The step: slower than none, faster than all.
  doc["training"]["recompute"] = "none";
  const double t_none          = step_time(doc);
  doc["training"]["recompute"] = "full";
  const double t_full          = step_time(doc);
  doc["training"]["recompute_every"] = 2;
  const double t_half                = step_time(doc);
  CHECK(t_none < t_half);
  CHECK(t_half < t_full);
}

namespace {

// The works of the recompute and backward tasks of micro-batch 0 on the first simulated rank, in
// the order the lowering made them.
std::vector<std::string> backward_order(const Scenario& s)
{
  const Workload w = lower(s);
  std::vector<std::string> out;
  const auto& r = w.ranks.front();
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& t = r.graph[v];
    if (t.kind == TaskKind::Compute && t.micro_batch == 0 && t.work >= 0 &&
        (t.pass == Pass::Recompute || t.pass == Pass::Backward))
      out.push_back(w.works[static_cast<size_t>(t.work)].name);
  }
  return out;
}

} // namespace

TEST_CASE("Megatron's uniform method keeps one input per group of N layers and rebuilds the group at once")
{
  nlohmann::json doc           = llama(2); // 8 layers, 4 per stage, 2 micro-batches
  doc["training"]["recompute"] = "full";
  const Scenario full          = scenario_from_json(doc);
  doc["training"]["recompute_method"] = "uniform";
  const Scenario uniform_1            = scenario_from_json(doc); // --recompute-num-layers defaults to 1
  doc["training"]["recompute_num_layers"] = 2;
  const Scenario uniform_2                = scenario_from_json(doc);
  doc["training"]["recompute_num_layers"] = 3; // groups of layers 0-2 and 3 on each stage
  const Scenario uniform_3                = scenario_from_json(doc);
  doc["training"]["recompute_method"]     = "block";
  doc["training"].erase("recompute_num_layers");
  const Scenario block_default = scenario_from_json(doc); // block's first layer of each chunk
  doc["training"].erase("recompute_method");
  doc["training"]["recompute"] = "none";
  const Scenario none          = scenario_from_json(doc);

  // Every layer is rebuilt, as under a per-layer full recompute: the same FLOPs and tasks.
  for (const Scenario* u : {&uniform_1, &uniform_2, &uniform_3}) {
    CHECK(u->recomputed_layers_on_stage(0) == 4);
    CHECK(u->recomputed_layer_share() == 1);
    CHECK(hardware_flops_per_step(*u) == Approx(hardware_flops_per_step(full)));
    CHECK(tasks_by_work(*u, Pass::Recompute) == tasks_by_work(full, Pass::Recompute));
  }
  CHECK(block_default.recomputed_layers_on_stage(0) == 1);
  CHECK(uniform_2.recompute_checkpoints_on_stage(1) == 2);
  CHECK(uniform_3.recompute_checkpoints_on_stage(1) == 2);
  CHECK(uniform_3.layers_rebuilt_at_once(1) == 3);

  // The backward of a stage: per layer, its forward again then its backward (last layer first);
  // in groups of 2, the group's two forwards, first layer first, then both backwards.
  const std::string ar = "attention_recompute", mr = "mlp_recompute", ab = "attention_backward",
                    mb = "mlp_backward";
  const std::vector<std::string> per_layer = {ar, mr, mb, ab, ar, mr, mb, ab, ar, mr, mb, ab, ar, mr, mb, ab};
  const std::vector<std::string> in_pairs  = {ar, mr, ar, mr, mb, ab, mb, ab, ar, mr, ar, mr, mb, ab, mb, ab};
  auto layers_only = [](std::vector<std::string> works) { // the embedding's backward is not a layer's
    works.erase(std::remove_if(works.begin(), works.end(),
                               [](const std::string& w) { return w.rfind("embedding", 0) == 0; }),
                works.end());
    return works;
  };
  CHECK(layers_only(backward_order(full)) == per_layer);
  CHECK(layers_only(backward_order(uniform_1)) == per_layer);
  CHECK(layers_only(backward_order(uniform_2)) == in_pairs);

  // Memory: a group keeps its first layer's input (2 bytes a token and hidden unit) per
  // micro-batch in flight, and its whole group is rebuilt at once in its backward.
  const double input = 2.0 * 2048 * 1024, kept = layer_activation_bytes(none);
  const int in_flight = 2;
  auto activations    = [&](const Scenario& s) { return stage_memory(s, 0, in_flight).activations; };
  CHECK(activations(uniform_1) == Approx(activations(full)));
  CHECK(activations(uniform_2) - activations(none) == Approx((2 * input - 4 * kept) * in_flight + 2 * kept));
  CHECK(activations(uniform_3) - activations(none) == Approx((2 * input - 4 * kept) * in_flight + 3 * kept));
  // Grouping pays only where the checkpoints outweigh the layers rebuilt together: with 4 layers
  // and 2 micro-batches in flight, 4 inputs fewer cost a whole layer more; with 32 in flight, 64
  // inputs fewer do not.
  CHECK(activations(uniform_2) > activations(full));
  CHECK(stage_memory(uniform_2, 0, 32).activations < stage_memory(full, 0, 32).activations);

  // The step: as slow as a per-layer full recompute (the same work, in another order).
  doc["training"]["recompute"]            = "full";
  const double t_full                     = step_time(doc);
  doc["training"]["recompute_method"]     = "uniform";
  doc["training"]["recompute_num_layers"] = 2;
  CHECK(step_time(doc) == Approx(t_full).epsilon(0.01));
}

TEST_CASE("partial recompute is refused where it names nothing: without full recompute, both at once, or outside "
          "the transformer")
{
  nlohmann::json doc                 = llama(1);
  doc["training"]["recompute_every"] = 2;
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_every: chooses the layers a full "
                                                             "recompute rebuilds, but training.recompute is \"none\""));
  doc["training"]["recompute"]            = "full";
  doc["training"]["recompute_num_layers"] = 2;
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_num_layers: give recompute_every"));
  doc["training"].erase("recompute_num_layers");
  doc["training"]["recompute_method"] = "uniform";
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_method: give recompute_every"));
  doc["training"].erase("recompute_every");
  doc["training"]["recompute_method"] = "groups";
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_method"));
  doc["training"]["recompute_method"]     = "uniform";
  doc["training"]["recompute_num_layers"] = 2;
  doc["parallelism"]["zero_stage"]        = 3;
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_method: \"uniform\" with "
                                                             "recompute_num_layers 2 rebuilds layers in groups"));
  doc["parallelism"].erase("zero_stage");
  doc["training"]["recompute"] = "selective";
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_method: chooses the layers a full "
                                                             "recompute rebuilds, but training.recompute is "
                                                             "\"selective\""));
  doc["training"]["recompute"] = "full";
  doc["training"].erase("recompute_method");
  doc["training"].erase("recompute_num_layers");
  doc["training"]["recompute_every"] = 0;
  CHECK_THROWS_WITH(scenario_from_json(doc), Catch::Contains("training.recompute_every"));
  doc["training"]["recompute_every"] = 2;
  doc["model"] = {{"architecture", "resnet50"}};
  CHECK_THROWS_WITH(scenario_from_json(doc),
                    Catch::Contains("training.recompute_every: picks the transformer layers a full recompute rebuilds"));
}

TEST_CASE("torchtitan's selective recompute is its per-op policy: the attention and every other matmul kept, the "
          "rest rebuilt")
{
  // torchtitan/parallelisms/parallelize_llama.py (checkpoint_wrapper, selective_ac_option "op"):
  // aten.mm and the flash attention are saved except every second mm of a block. A Llama block's
  // mms in order: wq, wk, wv, wo, w1, w3, w2; wk, wo and w3 are rebuilt, with the norms, the
  // rotary embedding, repeat_kv, the output copy and the activation.
  nlohmann::json doc                   = llama(1);
  doc["training"]["micro_batch_size"]  = 2;
  doc["training"]["global_batch_size"] = 2;
  doc["training"]["framework"]         = "torchtitan";
  const double tokens = 2.0 * 2048, h = 1024, kv = 256, ffn = 2816, layers = 4;
  std::list<Workload> kept;
  auto works = [&](const std::string& recompute, const std::string& framework) {
    doc["training"]["recompute"] = recompute;
    doc["training"]["framework"] = framework;
    return works_by_name(doc, kept);
  };
  auto gemm_flops = [](const Work& w, const std::string& name) {
    double f = 0;
    for (const Kernel& k : w.kernels)
      if (k.name == name)
        f += k.flops();
    return f;
  };
  const auto none = works("none", "torchtitan");
  const auto op   = works("selective", "torchtitan");
  const Work& attention = *op.at("attention_backward");
  const Work& mlp       = *op.at("mlp_backward");
  CHECK(gemm_flops(attention, "key_recompute") == Approx(2 * tokens * h * kv));
  CHECK(gemm_flops(attention, "attention_out_recompute") == Approx(2 * tokens * h * h));
  CHECK(gemm_flops(mlp, "fc1_up_recompute") == Approx(2 * tokens * h * ffn));
  // Nothing else is a matmul again: the attention's output is kept, not recomputed.
  CHECK(attention.flops() - none.at("attention_backward")->flops() == Approx(2 * tokens * h * (kv + h)));
  CHECK(mlp.flops() - none.at("mlp_backward")->flops() == Approx(2 * tokens * h * ffn));
  for (const char* name : {"input_norm_recompute", "rotary_embedding_recompute", "repeat_kv_recompute",
                           "attention_output_copy_recompute"}) {
    INFO(name);
    CHECK(gemm_flops(attention, name) == 0);
    CHECK(std::count_if(attention.kernels.begin(), attention.kernels.end(),
                        [&](const Kernel& k) { return k.name == name && k.bytes > 0; }) == 1);
  }
  // Megatron's selective recompute re-runs the attention core instead.
  const auto megatron_none = works("none", "megatron-lm-2022");
  const auto megatron      = works("selective", "megatron-lm-2022");
  const Work& forward = *megatron_none.at("attention_forward");
  const double core   = forward.flops() - gemm_flops(forward, "qkv") - gemm_flops(forward, "attention_out");
  CHECK(core > 0);
  CHECK(megatron.at("attention_backward")->flops() - megatron_none.at("attention_backward")->flops() == Approx(core));
  CHECK(megatron.at("mlp_backward")->flops() == Approx(megatron_none.at("mlp_backward")->flops()));

  // What each block keeps, 16-bit: its input, wq's, wv's and the attention's outputs, w1's and w2's.
  doc["training"]["recompute"] = "selective";
  doc["training"]["framework"] = "torchtitan";
  const Scenario s             = scenario_from_json(doc);
  CHECK(layer_activation_bytes(s) == Approx(tokens * 2 * (h + h + kv + h + ffn + h)));
  doc["training"]["recompute"] = "none";
  const Scenario s_none        = scenario_from_json(doc);
  CHECK(hardware_flops_per_step(s) - hardware_flops_per_step(s_none) ==
        Approx(tokens * layers * 2 * h * (kv + h + ffn)));
  CHECK(model_flops_per_step(s) == Approx(model_flops_per_step(s_none)));
}

TEST_CASE("torchtitan's published Llama 2 70B on 64 A100 80GB: selective op fits at local batch 1 and not at 2")
{
  // pytorch/torchtitan docs/performance.md (041336434916bdc0f88c1f89fda176fd3c2092e4): "Since the
  // 70B training with local batch size 2 will cause an OOM error when selective activation
  // checkpointing is used, we report the local batch size 1 case instead."
  const std::string file =
      std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/held-out/torchtitan_llama2_70b_64xa100_bs1_selop.json";
  const auto fits = testing::run_stepsim("run " + file + " --json -");
  REQUIRE(fits.exit_code == 0);
  CHECK(nlohmann::json::parse(fits.output).at("fits_in_memory").get<bool>());
  const auto oom = testing::run_stepsim("run " + file +
                                        " --set training.micro_batch_size=2 --set training.global_batch_size=128");
  CHECK(oom.exit_code == 2);
  CHECK(oom.output.find("does not fit in memory") != std::string::npos);
}

TEST_CASE("a per-op selective policy is refused where stepsim does not lower it: mixture-of-experts layers, a dit")
{
  nlohmann::json doc              = llama(1);
  doc["training"]["recompute"]    = "selective";
  doc["training"]["framework"]    = "torchtitan";
  doc["model"]["num_experts"]     = 4;
  doc["model"]["moe_top_k"]       = 2;
  CHECK_THROWS_WITH(scenario_from_json(doc),
                    Catch::Contains("training.recompute: \"selective\" under torchtitan is its per-op policy"));
  // Under Megatron's profile a MoE model's selective recompute is the attention core's.
  doc["training"]["framework"] = "megatron-lm-2022";
  CHECK_NOTHROW(scenario_from_json(doc));

  nlohmann::json dit = nlohmann::json::parse(
      testing::read_text_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/dit-video-latte-xl.json"));
  dit["training"]["recompute"] = "selective";
  CHECK_NOTHROW(scenario_from_json(dit));
  dit["training"]["framework"] = "torchtitan";
  CHECK_THROWS_WITH(scenario_from_json(dit),
                    Catch::Contains("training.recompute: \"selective\" under torchtitan is its per-op policy"));
}

TEST_CASE("torchtitan's recomputed forward stops early: a block's fc2 is not rebuilt, as PyTorch's non-reentrant "
          "checkpoint stops once backward's tensors are back")
{
  // torch/utils/checkpoint.py: the recomputation raises _StopRecomputationError when the last tensor
  // the forward saved is packed again; fc2 packs its input before its GEMM runs, and the residual
  // add after it saves nothing. Megatron's reentrant CheckpointFunction re-runs the whole forward.
  nlohmann::json doc                   = llama(1);
  doc["training"]["recompute"]         = "full";
  doc["training"]["micro_batch_size"]  = 2;
  doc["training"]["global_batch_size"] = 2;
  const double tokens = 2.0 * 2048, h = 1024, ffn = 2816, layers = 4;
  std::list<Workload> kept;
  auto works = [&](const std::string& framework) {
    doc["training"]["framework"] = framework;
    return works_by_name(doc, kept);
  };
  auto has = [](const Work& w, const std::string& kernel) {
    return std::any_of(w.kernels.begin(), w.kernels.end(), [&](const Kernel& k) { return k.name == kernel; });
  };
  const auto titan = works("torchtitan");
  CHECK_FALSE(has(*titan.at("mlp_recompute"), "fc2"));
  CHECK_FALSE(has(*titan.at("mlp_recompute"), "residual_add"));
  CHECK(has(*titan.at("mlp_recompute"), "fc1"));
  CHECK(titan.at("mlp_forward")->flops() - titan.at("mlp_recompute")->flops() == Approx(2 * tokens * h * ffn));
  CHECK(titan.at("attention_recompute")->flops() == Approx(titan.at("attention_forward")->flops()));
  const auto megatron = works("megatron-lm-2022");
  CHECK(megatron.at("mlp_recompute")->flops() == Approx(megatron.at("mlp_forward")->flops()));

  // Hardware FLOPs: one fc2 fewer per recomputed layer.
  auto hardware = [&](const std::string& framework, const std::string& recompute) {
    doc["training"]["framework"] = framework;
    doc["training"]["recompute"] = recompute;
    return hardware_flops_per_step(scenario_from_json(doc));
  };
  CHECK(hardware("torchtitan", "full") - hardware("torchtitan", "none") ==
        Approx(hardware("megatron-lm-2022", "full") - hardware("megatron-lm-2022", "none") -
               tokens * layers * 2 * h * ffn));

  // A dropout after fc2 keeps a mask, so fc2 runs again.
  doc["model"]["dropout"]      = 0.1;
  doc["training"]["recompute"] = "full";
  CHECK(has(*works("torchtitan").at("mlp_recompute"), "fc2"));
}
