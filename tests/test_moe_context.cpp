// Context parallelism (ring attention) and mixture of experts (expert parallelism): the bytes the
// lowering puts on the ring and in the all-to-alls against their closed forms, the expert groups,
// Mixtral's parameter count, MoE model FLOPs, and step time against the context degree.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "workloads/stage_memory.hpp"
#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "workloads/parallel/context_parallel.hpp"
#include "workloads/lower.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/models/transformer.hpp"

#include <catch2/catch.hpp>

#include <set>

using namespace stepsim;
using testing::Traffic;
using testing::traffic;

namespace {

// A Llama-style model with grouped-query attention on single-GPU nodes.
nlohmann::json llama_like(int tensor, int context, int data, int micro_batches)
{
  nlohmann::json doc = testing::small_scenario(1, data, micro_batches);
  doc["model"]       = {{"num_layers", 4},       {"hidden_size", 1024}, {"num_attention_heads", 16},
                        {"num_query_groups", 4}, {"seq_length", 8192},  {"vocab_size", 32000},
                        {"mlp", "swiglu"},       {"norm", "rmsnorm"}};
  doc["parallelism"]["tensor"]  = tensor;
  doc["parallelism"]["context"] = context;
  doc["platform"]["node_groups"][0]["count"] = tensor * context * data;
  return doc;
}

nlohmann::json moe_like(int expert, int data, int tensor, int micro_batches)
{
  nlohmann::json doc = llama_like(tensor, 1, data, micro_batches);
  doc["model"]["seq_length"]  = 2048;
  doc["model"]["num_experts"] = 8;
  doc["model"]["moe_top_k"]   = 2;
  doc["parallelism"]["expert"] = expert;
  if (tensor > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  return doc;
}


} // namespace

TEST_CASE("context-parallel ring: forward sends 2(cp-1)·b·(s/cp)·kv·e per layer, backward twice that", "[context]")
{
  const int cp = GENERATE(2, 4);
  const int t  = GENERATE(1, 2);
  const int m  = 3, layers = 4;
  nlohmann::json doc = llama_like(t, cp, 1, m);
  if (t > 1)
    doc["parallelism"]["sequence_parallel"] = true;
  doc["training"]["recompute"] = "full";
  const Scenario s = scenario_from_json(doc);
  const Workload w = lower(s);
  REQUIRE(w.ranks.size() == 1);
  const auto& r = w.ranks[0];

  const double b = 1, seq = 8192, kv = 1024.0 / 16 * 4, e = 2;
  const double forward = 2.0 * (cp - 1) * b * (seq / cp) * kv / t * e; // per layer and micro-batch
  CAPTURE(cp, t);
  const Traffic f = traffic(r, TaskKind::Send, Stream::Context, Pass::Forward);
  CHECK(f.tasks == layers * m * (cp - 1));
  CHECK(f.bytes == Approx(layers * m * forward));
  // Full recompute passes K/V around again.
  CHECK(traffic(r, TaskKind::Send, Stream::Context, Pass::Recompute).bytes == Approx(layers * m * forward));
  const Traffic bw = traffic(r, TaskKind::Send, Stream::Context, Pass::Backward);
  CHECK(bw.tasks == layers * m * cp);
  CHECK(bw.bytes == Approx(layers * m * 2 * forward));
  // Every send has its receive from the previous rank of the ring, of the same size.
  CHECK(traffic(r, TaskKind::Recv, Stream::ContextRecv, Pass::Forward).bytes == Approx(f.bytes));
  CHECK(traffic(r, TaskKind::Recv, Stream::ContextRecv, Pass::Backward).bytes == Approx(bw.bytes));
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.stream == Stream::Context)
      CHECK(task.peer == t); // rank (tensor 0, context 1): the next of the ring
    if (task.stream == Stream::ContextRecv)
      CHECK(task.peer == t * (cp - 1)); // context cp-1: the previous
  }
  CHECK(ring_forward_bytes_per_layer(s) == Approx(forward));
}

TEST_CASE("context-parallel attention runs cp blocks of (s/cp)²/2 causal work per layer", "[context]")
{
  const int cp     = GENERATE(1, 2, 4);
  const Scenario s = scenario_from_json(llama_like(1, cp, 1, 1));
  const Workload w = lower(s);
  double attention = 0;
  const auto& r    = w.ranks[0];
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.kind == TaskKind::Compute && task.pass == Pass::Forward)
      for (const Kernel& k : w.works[static_cast<size_t>(task.work)].kernels)
        if (k.kind == KernelKind::Attention)
          attention += k.flops();
  }
  // Causal attention over the whole sequence is split evenly over the ring: 1/cp of it per rank.
  const double seq = 8192, heads = 16, head_dim = 64, layers = 4;
  CAPTURE(cp);
  CHECK(attention == Approx(layers * 2 * 2 * seq * seq * head_dim * heads * 0.5 / cp));
}

TEST_CASE("MoE all-to-all: each rank's buffer is b·(s/cp/t)·top_k·capacity·h·e, twice per layer and pass", "[moe]")
{
  const int ep       = GENERATE(2, 4);
  const int t        = GENERATE(1, 2);
  const double cf    = GENERATE(1.0, 1.25);
  const int m = 2, layers = 4;
  nlohmann::json doc = moe_like(ep, 4, t, m);
  doc["model"]["moe_capacity_factor"] = cf;
  const Scenario s = scenario_from_json(doc);
  const Workload w = lower(s);
  const auto& r    = w.ranks[0];
  const double buffer = 1.0 * 2048 / t * 2 * cf * 1024 * 2;
  CAPTURE(ep, t, cf);
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    const Traffic a2a = traffic(r, TaskKind::Collective, Stream::Expert, pass);
    CHECK(a2a.tasks == 2 * layers * m);
    CHECK(a2a.bytes == Approx(2.0 * layers * m * buffer));
  }
  CHECK(moe_all_to_all_bytes(s) == Approx(buffer));
  // Bytes a rank sends per MoE layer and micro-batch, forward: dispatch and combine, each
  // (ep-1)/ep of the buffer with the ring's all-to-all.
  const auto& ring = CollectiveRegistry::get("ring", "test");
  CHECK(2 * bytes_sent_per_member(ring, CollectiveOp::AllToAll, ep, moe_all_to_all_bytes(s)) ==
        Approx(2.0 * (ep - 1) / ep * buffer));
  // The all-to-all group: `ep` ranks of the data dimension, same tensor index.
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph)))
    if (r.graph[v].stream == Stream::Expert) {
      const auto& g = w.groups[static_cast<size_t>(r.graph[v].group)];
      CHECK(g.ranks.size() == static_cast<size_t>(ep));
      CHECK(g.ranks[1] == t); // data index 1, tensor 0
      break;
    }
}

TEST_CASE("MoE gradients: experts reduce over data×context/expert ranks, dense parameters over all", "[moe]")
{
  const Scenario s = scenario_from_json(moe_like(4, 8, 1, 2));
  const Workload w = lower(s);
  const auto& r    = w.ranks[0];
  double expert_bytes = 0, dense_bytes = 0;
  std::set<size_t> expert_group_sizes;
  for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
    const Task& task = r.graph[v];
    if (task.kind != TaskKind::Collective || task.stream != Stream::Data || task.op != CollectiveOp::AllReduce)
      continue;
    const Group& g = w.groups[static_cast<size_t>(task.group)];
    if (g.name.rfind("expert_data", 0) == 0) {
      expert_bytes += task.bytes;
      expert_group_sizes.insert(g.ranks.size());
    } else {
      dense_bytes += task.bytes;
      CHECK(g.ranks.size() == 8u);
    }
  }
  // 8 experts over 4 expert ranks: 2 per rank, each 3·h·ffn (SwiGLU), 2-byte gradients.
  const double per_layer = 2.0 * 3 * 1024 * 4096;
  CHECK(expert_bytes == Approx(4 * per_layer * 2));
  CHECK(expert_group_sizes == std::set<size_t>{2});
  // Tied embeddings: the word embedding is the only parameter outside the layers.
  const double dense = 4 * (layer_parameters_per_rank(s.model, 1, 4) - per_layer) +
                       embedding_parameters_per_rank(s.model, 1);
  CHECK(dense_bytes == Approx(dense * 2).epsilon(0.001));
  // The expert groups partition the data ranks.
  Layout l(s.parallelism);
  CHECK(expert_group_ranks(l, 5) == std::vector<int>{4, 5, 6, 7});
  CHECK(expert_data_group_ranks(l, 5) == std::vector<int>{1, 5});
}

TEST_CASE("MoE under ZeRO-1: the experts' gradients reduce-scattered over their expert-data group, their shards "
          "gathered at first use with overlap_param_gather, after the step without it",
          "[moe]")
{
  // Megatron-Core's distributed optimizer keeps the experts' buffers beside the dense ones, over
  // the expert-data-parallel group (distributed_data_parallel.py, expert_parallel_bucket_groups).
  for (const bool overlap : {true, false}) {
    INFO("overlap_param_gather " << overlap);
    nlohmann::json doc                          = moe_like(4, 8, 1, 2);
    doc["parallelism"]["zero_stage"]            = 1;
    doc["parallelism"]["overlap_param_gather"]  = overlap;
    const Scenario s = scenario_from_json(doc);
    const Workload w = lower(s);
    const auto& r    = w.ranks[0];
    double scattered = 0, reduced = 0, gathered_in_forward = 0, gathered_after_step = 0;
    for (auto v : boost::make_iterator_range(boost::vertices(r.graph))) {
      const Task& task = r.graph[v];
      if (task.kind != TaskKind::Collective || task.group < 0 ||
          w.groups[static_cast<size_t>(task.group)].name.rfind("expert_data", 0) != 0)
        continue;
      CHECK(w.groups[static_cast<size_t>(task.group)].ranks.size() == 2u);
      if (task.op == CollectiveOp::ReduceScatter)
        scattered += task.bytes;
      if (task.op == CollectiveOp::AllReduce)
        reduced += task.bytes;
      if (task.op == CollectiveOp::AllGather)
        (task.pass == Pass::Optimizer ? gathered_after_step : gathered_in_forward) += task.bytes;
    }
    // 8 experts over 4 expert ranks: 2 per rank per layer, each 3·h·ffn (SwiGLU), 2-byte
    // gradients and weights, 4 layers.
    const double experts = 4 * 2.0 * 3 * 1024 * 4096;
    CHECK(reduced == 0);
    CHECK(scattered == Approx(experts * 2));
    CHECK((overlap ? gathered_in_forward : gathered_after_step) == Approx(experts * 2));
    CHECK((overlap ? gathered_after_step : gathered_in_forward) == 0);
  }
}

TEST_CASE("Mixtral 8x7B from its HuggingFace config has 46.7 B parameters, 12.9 B active", "[moe]")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  doc["model"]       = {{"hf_config", std::string(STEPSIM_SOURCE_DIR) + "/configs/models/mixtral-8x7b.json"}};
  const Scenario s   = scenario_from_json(doc);
  CHECK(s.model.num_experts == 8);
  CHECK(s.model.moe_top_k == 2);
  CHECK(model_parameters(s.model) == Approx(46.7e9).epsilon(0.01));
  // Active parameters per token (Mistral's announcement: 12.9 B): 2 of the 8 experts.
  const double inactive = s.model.num_layers * expert_parameters_per_rank(s.model, 1, 1) * 6 / 8;
  CHECK(model_parameters(s.model) - inactive == Approx(12.9e9).epsilon(0.01));
}

TEST_CASE("MoE model FLOPs count top_k experts per token, not all of them", "[moe]")
{
  nlohmann::json dense_doc = llama_like(1, 1, 1, 1);
  nlohmann::json moe_doc   = dense_doc;
  moe_doc["model"]["num_experts"] = 8;
  moe_doc["model"]["moe_top_k"]   = 2;
  const Scenario dense = scenario_from_json(dense_doc);
  const Scenario moe   = scenario_from_json(moe_doc);
  const double tokens = 8192, layers = 4, h = 1024, ffn = 4096;
  // Each token's second expert adds one more SwiGLU MLP: 3 matrices, 2 FLOPs per MAC, × 3 for
  // forward and backward.
  CHECK(model_flops_per_step(moe) - model_flops_per_step(dense) == Approx(3 * tokens * layers * 2 * 3 * h * ffn));
  moe_doc["model"]["num_experts"] = 16;
  CHECK(model_flops_per_step(scenario_from_json(moe_doc)) == Approx(model_flops_per_step(moe)));
  // The lowered experts' GEMMs run capacity × top_k tokens' worth of the dense MLP, whatever ep.
  for (int ep : {1, 2, 4}) {
    nlohmann::json d = moe_like(ep, 4, 1, 1);
    d["model"]["moe_capacity_factor"] = 1.5;
    const Scenario s = scenario_from_json(d);
    const Workload w = lower(s);
    double experts = 0;
    for (const Work& work : w.works)
      if (work.name == "moe_experts_forward")
        for (const Kernel& k : work.kernels)
          experts += k.flops();
    CAPTURE(ep);
    CHECK(experts == Approx(1.5 * 2 * 2048 * 2 * 3 * h * ffn));
  }
}

TEST_CASE("a long-sequence run gets faster with the context degree when compute dominates", "[context]")
{
  double previous = 0;
  for (int cp : {1, 2, 4}) {
    nlohmann::json doc = llama_like(1, cp, 1, 4);
    doc["model"]["seq_length"] = 32768;
    doc["model"]["num_layers"] = 2;
    doc["platform"]["node_groups"][0]["count"]          = 1;
    doc["platform"]["node_groups"][0]["gpus_per_node"] = cp;
    doc["platform"]["node_groups"][0]["nic"]["count"]  = 1;
    const Report r = simulate_isolated(scenario_from_json(doc));
    CAPTURE(cp, r.step_time_s, r.comm_s, r.exposed_comm_s);
    if (cp > 1) {
      CHECK(r.step_time_s < previous);
      CHECK(r.step_time_s > previous / 2.2); // not better than the compute split
      CHECK(r.comm_s > 0);
      CHECK(r.exposed_comm_s < 0.5 * r.comm_s); // the ring hides behind the attention blocks
    }
    previous = r.step_time_s;
  }
}

TEST_CASE("full fidelity replays the context ring and the expert all-to-alls like the reduced one", "[context][moe]")
{
  nlohmann::json doc = moe_like(2, 2, 1, 2);
  doc["parallelism"]["context"] = 2;
  doc["platform"]["node_groups"][0]["count"] = 4;
  // Links slow enough that the ring and the all-to-alls show in the step time.
  doc["platform"]["node_groups"][0]["nic"] = {{"count", 1}, {"bandwidth", "25GBps"}, {"latency", "2us"}};
  const Scenario reduced = scenario_from_json(doc);
  doc["simulation"]["fidelity"] = "full";
  const Scenario full = scenario_from_json(doc);
  const Report a = simulate_isolated(reduced);
  const Report b = simulate_isolated(full);
  CHECK(a.comm_s > 0.05 * a.step_time_s);
  CHECK(b.step_time_s == Approx(a.step_time_s).epsilon(0.02));
  CHECK(b.comm_s == Approx(a.comm_s).epsilon(0.05));
}

TEST_CASE("MoE and context parallelism refuse plans Megatron refuses, naming the path", "[moe][context]")
{
  auto problems = [](nlohmann::json doc) {
    try {
      validate(scenario_from_json(doc));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json doc = moe_like(4, 4, 1, 1);
  doc["parallelism"]["expert"] = 3;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.expert: 3 does not divide data 4"));
  doc = moe_like(4, 4, 2, 1);
  doc["parallelism"]["sequence_parallel"] = false;
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.sequence_parallel"));
  doc = moe_like(4, 4, 1, 1);
  doc["model"]["moe_capacity_factor"] = 5;
  CHECK_THAT(problems(doc), Catch::Contains("model.moe_capacity_factor"));
  doc = llama_like(1, 4, 1, 1);
  doc["model"]["seq_length"] = 8196; // divisible by 4, not by 8
  CHECK_THAT(problems(doc), Catch::Contains("parallelism.context: model.seq_length 8196 is not divisible by 2 × context 4"));
  CHECK(problems(moe_like(4, 4, 2, 1)).empty());
}

TEST_CASE("MoE memory: experts are sharded over their expert-data group, activations follow top_k", "[moe]")
{
  nlohmann::json doc = moe_like(4, 8, 1, 1);
  doc["parallelism"]["zero_stage"] = 1;
  const Scenario s   = scenario_from_json(doc);
  const MemoryBreakdown m = stage_memory(s, 0, 1, 1);
  const double experts = 4 * expert_parameters_per_rank(s.model, 1, 4);
  const double psi     = stage_parameters(s, 0);
  // Adam's 12 bytes per parameter: dense ones over 8 ranks, the experts over 8/4 = 2.
  CHECK(m.optimizer == Approx(12 * ((psi - experts) / 8 + experts / 2)));
  CHECK(m.weights == Approx(2 * psi));
  // Doubling top_k doubles the experts' token copies.
  doc["model"]["moe_top_k"] = 4;
  const double more = layer_activation_bytes(scenario_from_json(doc)) - layer_activation_bytes(s);
  const double copies = 2048.0 * 2; // two more copies of each token
  CHECK(more == Approx(copies * 2 * (1024 + 2 * 4096 + 4096)));
}

TEST_CASE("MoE FLOPs: a capacity below 1 drops tokens from both counts; padding above 1 is hardware FLOPs only",
          "[moe]")
{
  const nlohmann::json base = moe_like(2, 4, 1, 1);
  auto flops = [&](double capacity) {
    nlohmann::json d                    = base;
    d["model"]["moe_capacity_factor"] = capacity;
    const Scenario s                    = scenario_from_json(d);
    return std::pair{model_flops_per_step(s), hardware_flops_per_step(s)};
  };
  const auto half = flops(0.5), one = flops(1.0), padded = flops(1.5);
  CHECK(padded.first == Approx(one.first).epsilon(1e-12)); // padding computes no model FLOPs
  CHECK(half.first < one.first);
  CHECK(one.first - half.first == Approx(2 * (one.first - flops(0.75).first))); // linear in the tokens kept
  // The hardware runs what the experts' GEMMs are sized for: linear in the capacity on both sides of 1.
  CHECK(padded.second - one.second == Approx(one.second - half.second));
}

TEST_CASE("MFU and HFU stay at most 1 when a capacity factor drops tokens", "[moe]")
{
  const std::string out = testing::write_temp_file("moe-capacity.json", "");
  const auto result     = testing::run_stepsim(std::string("run ") + STEPSIM_SOURCE_DIR +
                                           "/configs/scenarios/mixtral-8x7b-ep.json --set model.moe_capacity_factor=0.25 "
                                           "--quiet --json " +
                                           out);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto r = nlohmann::json::parse(testing::read_text_file(out));
  CHECK(r["mfu"].get<double>() <= 1.0);
  CHECK(r["hfu"].get<double>() <= 1.0);
  CHECK(r["mfu"].get<double>() > 0);
}

TEST_CASE("MoE under Transformer Engine's FP8: the experts' casts, FP8 saved inputs, one GEMM launch per expert",
          "[moe]")
{
  nlohmann::json doc = moe_like(4, 4, 1, 1);
  doc["platform"]["node_groups"][0]["gpu"] = "H100-SXM";
  doc["training"]["precision"]             = "fp8";
  doc["training"]["framework"]             = "megatron-core";
  const Scenario s = scenario_from_json(doc);
  const Workload w = lower(s);
  auto kernels_named = [&](const Workload& of, const std::string& name) {
    std::vector<Kernel> found;
    for (const Work& work : of.works)
      for (const Kernel& k : work.kernels)
        if (k.name == name)
          found.push_back(k);
    return found;
  };
  // 8 experts over 4 ranks: 2 local experts, each of b × 2048 × 2 × 4 / 8 = b × 2048 token copies.
  const double copies = 2 * 2048.0 * s.training.micro_batch_size;
  const std::vector<std::pair<std::string, double>> casts = {{"expert_fc1_input_fp8_cast", 1024},
                                                             {"expert_fc2_input_fp8_cast", 4096},
                                                             {"expert_fc2_output_grad_fp8_cast", 1024},
                                                             {"expert_fc1_output_grad_fp8_cast", 2 * 4096}};
  for (const auto& [name, width] : casts) {
    CAPTURE(name);
    const auto found = kernels_named(w, name);
    REQUIRE(!found.empty());
    CHECK(found.front().bytes == Approx(copies * width * 4)); // bf16 read, FP8 and its transpose written
  }
  // Transformer Engine's GroupedLinear issues one cuBLAS GEMM per local expert.
  for (const char* gemm : {"expert_fc1", "expert_fc2", "expert_fc1_dgrad", "expert_fc2_wgrad"}) {
    CAPTURE(gemm);
    CHECK(kernels_named(w, gemm).front().launches == 2);
  }
  // A bf16 run casts nothing; a profile without per-expert GEMMs launches one grouped GEMM.
  nlohmann::json bf16               = doc;
  bf16["training"]["precision"]     = "bf16";
  bf16["training"]["framework"]     = "megatron-lm-2022";
  const Workload plain              = lower(scenario_from_json(bf16));
  CHECK(kernels_named(plain, "expert_fc1_input_fp8_cast").empty());
  CHECK(kernels_named(plain, "expert_fc1").front().launches == 1);
  // The experts' saved GEMM inputs at one byte: fc1's (hidden) and fc2's (FFN) per token copy,
  // against two bytes under bf16 with the same framework.
  nlohmann::json core_bf16           = doc;
  core_bf16["training"]["precision"] = "bf16";
  // (moe_activation_delta_bytes is what the experts keep less the dense MLP's, which FP8 changes too.)
  const Scenario b     = scenario_from_json(core_bf16);
  const double fp8_kept  = moe_activation_delta_bytes(s) + dense_mlp_activation_bytes(s);
  const double bf16_kept = moe_activation_delta_bytes(b) + dense_mlp_activation_bytes(b);
  CHECK(bf16_kept - fp8_kept == Approx(copies * (1024 + 4096)));
}
