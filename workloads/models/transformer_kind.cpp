// The decoder-only transformer (GPT, Llama, Mixtral-style MoE blocks) as a model kind
// (workloads/models/model_kind.hpp): its fields, FLOPs, memory footprint and the blocks the
// lowering walks. The kernels of each block are in transformer.cpp, the MoE blocks in moe.cpp.
#include "workloads/models/latent_attention.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/models/transformer.hpp"

#include "sim/core/framework.hpp"
#include "sim/input/hf_config.hpp"
#include "sim/input/limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace stepsim {

using namespace limits;

// Korthikanti et al. 2022 (arXiv:2205.05198, §4.1), term by term, in bytes of a 16-bit layer
// per s·b (tokens of the micro-batch), split into what every tensor rank keeps whole and what it
// keeps a 1/t shard of. Their 34·sbh is this for a GPT layer (kv = h, ffn = 4h, GeLU, dropout);
// grouped-query attention, SwiGLU, another FFN width and a model without dropout are counted as
// they are.
struct LayerTerms {
  double whole, sharded;
};

// An fp8 run (Transformer Engine's recipe, training.precision "fp8") keeps the input of each
// linear layer for its weight gradient as the FP8 copy its GEMM took, one byte an element, not
// the 16-bit input (TransformerEngine transformer_engine/pytorch/module/linear.py, _Linear.forward:
// `saved_inputmat = inputmat` after the cast to FP8, or its FP8 transpose; layernorm_linear.py,
// _LayerNormLinear.forward: `ln_out` allocated as uint8 under fp8 and saved; under sequence
// parallelism the local shard, gathered again in backward). The norms' inputs, the attention's
// own q, k, v and output (its fused kernel's, in 16 bits) and the activation's input stay 16-bit.
// torchao's float8 saves the 16-bit input (FrameworkProfile::fp8_dynamic_scaling).
bool keeps_fp8_inputs(const Scenario& s)
{
  return s.training.precision == "fp8" &&
         !FrameworkRegistry::get(s.training.framework, "training.framework").fp8_dynamic_scaling;
}

// The MLP block without its norm: fc1's input, the activation's input (SwiGLU: gate and up) and
// fc2's input, and the dropout mask; under fp8 fc1's and fc2's inputs at one byte.
LayerTerms mlp_activation_terms(const ModelSpec& m, bool fp8)
{
  const double h = m.hidden_size, f = m.ffn_hidden_size;
  const double mask  = m.dropout > 0 ? 1 : 0;
  const double input = fp8 ? 1 : 2; // bytes of a linear layer's saved input
  return {input + mask, (m.mlp == "swiglu" ? 4 : 2) * f / h + input * f / h};
}

bool selective_by_op(const Scenario& s)
{
  return s.training.recompute == "selective" &&
         FrameworkRegistry::get(s.training.framework, "training.framework").selective_recompute == "op";
}

double layer_activation_bytes(const Scenario& s)
{
  const auto& m   = s.model;
  const double sq = double(m.seq_length) / s.parallelism.context;
  const double b  = s.training.micro_batch_size;
  const double h  = m.hidden_size;
  const double a  = m.num_attention_heads;
  const double t  = s.parallelism.tensor;
  const bool sp   = s.parallelism.sequence_parallel;
  const double sbh = sq * b * h;
  // The query's and the attention output's width, and the key's (or the value's), as shares of
  // h (1 and query_groups / heads unless model.head_dim sets another head width).
  const double q  = attention_width(m) / h;
  const double kv = kv_width(m) / h;
  if (s.training.recompute == "full") // only each layer's input is kept
    return 2 * sbh / (sp ? t : 1);
  if (selective_by_op(s)) {
    // torchtitan's per-op policy (FrameworkProfile::selective_recompute "op") keeps, in 16 bits,
    // the block's input (sequence-sharded under tensor parallelism), the query and value
    // projections' outputs, the attention's output (its per-row log-sum-exp, 4/head_dim of it, is
    // left out) and the gate projection's (fc1's, ungated) on the tensor shard, and a gated MLP's
    // down projection's whole output (its 7th matmul; an ungated MLP's fc2 is its 6th, not kept),
    // plus the reduce-scatter's shard after it with tensor > 1.
    const double f        = m.ffn_hidden_size / h;
    const double down     = m.mlp == "swiglu" ? 2 : 0;
    return sbh * (2 / (sp ? t : 1) + (2 * q + 2 * kv + 2 * q + 2 * f) / t + down + (t > 1 ? 2 / t : 0));
  }
  // The 5as/h term is the attention scores and their dropout mask; selective recompute and fused
  // (flash) attention do not keep them.
  const bool keeps_scores = s.training.recompute == "none" && s.training.attention == "standard";
  // Ulysses (workloads/parallel/ulysses.hpp) scores heads/(t·u) heads over the ring's s/r tokens,
  // 5·b·(a/(t·u))·(s/r)² bytes: u times the ring's one (s/cp)² block of all a/t heads (cp = u·r).
  const int ulysses       = s.parallelism.ulysses_degree;
  const double scores     = keeps_scores ? 5 * a * sq / h * ulysses : 0;
  const double experts    = moe_activation_delta_bytes(s); // a MoE layer's experts instead of its MLP
  // Attention: the two norms' inputs, QKV's input and the dropout mask whole; Q, K and V (K and
  // V of the query groups only), and the output projection's input, sharded.
  const double mask      = m.dropout > 0 ? 1 : 0;
  const bool fp8         = keeps_fp8_inputs(s);
  const LayerTerms mlp   = mlp_activation_terms(m, fp8);
  // Under torch.autocast (FrameworkProfile::eager_autocast) LayerNorm saves its fp32 input (4
  // bytes each, not 2), and the attention output is saved twice: the fused attention's own
  // (batch, heads, sequence, head_dim) and the contiguous copy the output projection takes.
  const bool autocast = runs_under_autocast(s);
  // Under fp8 QKV's input at one byte, and the output projection keeps its FP8 input beside the
  // fused attention's 16-bit output (which the 16-bit count shares between the two).
  double whole           = (autocast ? 8 : 4) + (fp8 ? 1 : 2) + mask + mlp.whole;
  // Ulysses keeps Q, K and V as the attention holds them (head shards of the whole sequence: the
  // same bytes), but its output twice: the fused attention saves it in head shards for its
  // backward (flash-attn's forward saves q, k, v, out), and the output projection its input, the
  // all-to-all's result in sequence shards (deepspeed/sequence/layer.py: the output's
  // _SeqAllToAll saves nothing of its own). Selective recompute keeps neither of the core's.
  const bool second_output = ulysses > 1 && s.training.recompute == "none" && s.training.attention == "flash";
  double sharded           = 2 * q + 2 * kv + 2 * kv + 2 * q + (fp8 ? q : 0) + (second_output ? 2 * q : 0) +
                             (autocast ? 2 * q : 0) + mlp.sharded;
  // Multi-head latent attention keeps its latents on each rank's own tokens and the heads' query,
  // key, value and output (latent_attention.hpp); the down projections' input (the input norm's
  // output) once in 16 bits, or as each one's FP8 copy.
  if (latent_attention(m)) {
    const LatentAttentionBytes latent = latent_attention_activation_bytes(m, 2, fp8 ? 1 : 2);
    whole   = 4 + 2 + mask + mlp.whole + latent.whole / h;
    sharded = latent.sharded / h + mlp.sharded;
  }
  if (sp)
    return sbh / t * (whole + sharded + scores) + experts;
  return sbh * (whole + sharded / t + scores / t) + experts;
}

double dense_mlp_activation_bytes(const Scenario& s)
{
  const auto& m        = s.model;
  const double t       = s.parallelism.tensor;
  const double sb      = double(s.training.micro_batch_size) * m.seq_length / s.parallelism.context;
  const double h       = m.hidden_size;
  const LayerTerms mlp = mlp_activation_terms(m, keeps_fp8_inputs(s));
  if (s.parallelism.sequence_parallel)
    return (mlp.whole + mlp.sharded) * sb * h / t;
  return sb * h * (mlp.whole + mlp.sharded / t);
}

namespace {

// Keys a query attends to, summed over the layers, as Megatron's FLOP count takes them: the
// sequence in a layer of whole causal attention, min(window, sequence) in a windowed one (the
// count of Megatron-Bridge's performance scripts, swa_context = min(effective_window, seq)).
double attended_keys_over_layers(const ModelSpec& m, double seq)
{
  if (m.sliding_window == 0 || m.sliding_window >= seq)
    return m.num_layers * seq;
  const long long full = m.window_attn_skip_freq > 0 ? m.num_layers / m.window_attn_skip_freq : 0;
  return double(full) * seq + double(m.num_layers - full) * m.sliding_window;
}

// The width of the attention's two products per token and key, QKᵀ and PV, as one: the query's
// (heads × head_dim), or under latent attention the mean of the query's (heads × (head_dim +
// qk_rope_head_dim)) and the value's (heads × v_head_dim).
double core_width(const ModelSpec& m)
{
  return latent_attention(m) ? m.num_attention_heads * (query_head_dim(m) + value_head_dim(m)) / 2
                             : attention_width(m);
}

// `expert_share`: of the top_k expert passes per token, the share the experts run. Model FLOPs
// count min(1, capacity factor) (Megatron's count: no capacity padding, no router; a capacity
// below 1 drops the overflowing tokens, which are then not computed); hardware FLOPs count the
// capacity factor itself, padding included, as the experts' GEMMs are sized (moe.hpp).
double forward_flops_per_token(const ModelSpec& m, double seq, double expert_share)
{
  double h      = m.hidden_size;
  double q      = attention_width(m); // Megatron's query_projection_size (kv_channels × heads)
  double kv     = kv_width(m);
  const double gated = m.mlp == "swiglu" ? 3.0 : 2.0;
  // A MoE layer's MLP FLOPs: its top_k experts. Shared experts run on every token, capacity or
  // not; their gate, like the router, is not counted (Megatron's num_floating_point_operations,
  // megatron/training/training.py: "# Shared Experts." adds moe_shared_expert_intermediate_size ×
  // the gated-linear multiplier per MoE layer). A dense layer's (a mixture of experts' too,
  // ModelSpec::first_dense_layers: Megatron's count sums the two kinds by moe_layer_pattern), the
  // MLP's.
  const double moe_layers   = double(moe_layer_count(m));
  const double dense_layers = m.num_layers - moe_layers;
  const double moe_mlp      = is_moe(m) ? gated * h * expert_ffn_hidden_size(m) * m.moe_top_k * expert_share +
                                         gated * h * shared_experts_ffn_hidden_size(m)
                                       : 0.0;
  const double dense_mlp    = gated * h * m.ffn_hidden_size;
  const bool windows        = m.sliding_window > 0 && m.sliding_window < seq; // keys differ from layer to layer
  // The attention's projections (latent attention's down, up and output ones: Megatron's count
  // under multi_latent_attention) and its core, QKᵀ and PV over `core` wide heads.
  const double projections = latent_attention(m) ? latent_attention_projection_macs(m) : h * (q + 2 * kv) + q * h;
  const double core        = core_width(m);
  // Each kind's layers, summed where there are any.
  auto over_layers = [&](double layers, double mlp) {
    if (layers == 0)
      return 0.0;
    return windows ? layers * 2.0 * (projections + mlp) : layers * (2.0 * (projections + mlp) + 4.0 * seq * core);
  };
  const double layers = over_layers(moe_layers, moe_mlp) + over_layers(dense_layers, dense_mlp);
  if (windows)
    return layers + 4.0 * core * attended_keys_over_layers(m, seq) + 2.0 * h * m.vocab_size;
  return layers + 2.0 * h * m.vocab_size;
}

// A pipeline stage's layers by kind, over all its chunks (the model's layers in virtual-stage
// order): MoE layers and a mixture of experts' dense ones (moe_layer; every layer of a dense
// model is dense), and how many of each a full recompute rebuilds.
struct StageLayerKinds {
  int moe = 0, dense = 0, moe_recomputed = 0, dense_recomputed = 0;
};

StageLayerKinds stage_layer_kinds(const Scenario& s, int stage)
{
  StageLayerKinds out;
  const int p     = s.parallelism.pipeline;
  long long first = 0; // the model's index of each chunk's first layer
  for (int vs = 0; vs < p * s.parallelism.virtual_stages; ++vs) {
    const int n = s.layers_in_virtual_stage(vs);
    if (vs % p == stage)
      for (int j = 0; j < n; ++j) {
        const bool rebuilt = s.layer_recomputed(first + j, j);
        if (moe_layer(s.model, first + j)) {
          ++out.moe;
          out.moe_recomputed += rebuilt ? 1 : 0;
        } else {
          ++out.dense;
          out.dense_recomputed += rebuilt ? 1 : 0;
        }
      }
    first += n;
  }
  return out;
}

class Transformer final : public ModelKind {
public:
  void read(JsonReader& r, ModelSpec& m, const std::string& base_dir) const override
  {
  bool import_failed = false;
  if (r.has("hf_config")) {
    std::string file = r.text("hf_config");
    std::filesystem::path p(file);
    if (p.is_relative())
      p = std::filesystem::path(base_dir) / p;
    try {
      m = import_hf_config(read_json_file(p.string()));
    } catch (const InputError& e) {
      for (const auto& problem : e.problems())
        r.problems().add(r.path_of("hf_config"), problem);
      import_failed = true;
    }
  }
  // Fields given next to hf_config override what the import read.
  bool imported  = r.has("hf_config");
  auto from_file = [&](int imported_value) -> std::optional<long long> {
    return imported ? std::optional<long long>(imported_value) : std::nullopt;
  };
  m.name                = r.text("name", m.name.empty() ? std::string("model") : m.name);
  m.num_layers          = static_cast<int>(r.integer("num_layers", from_file(m.num_layers), 1, kMaxLayers));
  m.hidden_size         = static_cast<int>(r.integer("hidden_size", from_file(m.hidden_size), 1, kMaxWidth));
  m.num_attention_heads =
      static_cast<int>(r.integer("num_attention_heads", from_file(m.num_attention_heads), 1, kMaxWidth));
  m.seq_length = static_cast<int>(r.integer("seq_length", from_file(m.seq_length), 1, kMaxTokens));
  m.vocab_size = static_cast<int>(r.integer("vocab_size", from_file(m.vocab_size), 1, kMaxTokens));
  m.ffn_hidden_size  = static_cast<int>(
      r.integer("ffn_hidden_size", imported ? m.ffn_hidden_size : 4LL * m.hidden_size, 1, 4 * kMaxWidth));
  m.num_query_groups = static_cast<int>(r.integer(
      "num_query_groups", m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads, 1, kMaxWidth));
  // Absent: hidden_size / num_attention_heads (0), or the HuggingFace config's head_dim.
  m.head_dim = static_cast<int>(r.integer("head_dim", m.head_dim, 1, kMaxWidth));
  // Multi-head latent attention (ModelSpec::kv_lora_rank; latent_attention.hpp).
  m.kv_lora_rank     = static_cast<int>(r.integer("kv_lora_rank", m.kv_lora_rank, 1, kMaxWidth));
  m.q_lora_rank      = static_cast<int>(r.integer("q_lora_rank", m.q_lora_rank, 1, kMaxWidth));
  m.qk_rope_head_dim = static_cast<int>(r.integer("qk_rope_head_dim", m.qk_rope_head_dim, 1, kMaxWidth));
  m.v_head_dim       = static_cast<int>(r.integer("v_head_dim", m.v_head_dim, 1, kMaxWidth));
  // Absent: the whole causal sequence (0), or the HuggingFace config's sliding window.
  m.sliding_window = static_cast<int>(r.integer("sliding_window", m.sliding_window, 1, kMaxTokens));
  m.window_attn_skip_freq =
      static_cast<int>(r.integer("window_attn_skip_freq", m.window_attn_skip_freq, 2, kMaxLayers));
  if (m.window_attn_skip_freq > 0 && m.sliding_window == 0 && !r.problems().about(r.path_of("sliding_window")))
    r.problems().add(r.path_of("window_attn_skip_freq"),
                     fmt::format("{} picks the layers that attend over the whole sequence among windowed ones, and "
                                 "model.sliding_window is not given",
                                 m.window_attn_skip_freq));
  m.mlp             = r.text("mlp", m.mlp, {"gelu", "swiglu"});
  m.norm            = r.text("norm", m.norm, {"layernorm", "rmsnorm"});
  m.tied_embeddings = r.boolean("tied_embeddings", m.tied_embeddings);
  m.dropout         = r.number("dropout", m.dropout, 0);
  if (m.dropout >= 1)
    r.problems().add(r.path_of("dropout"), fmt::format("{} is a probability: expected a value in [0, 1)", m.dropout));
  m.num_experts     = static_cast<int>(r.integer("num_experts", m.num_experts, 0, kMaxExperts));
  m.moe_top_k       = static_cast<int>(r.integer("moe_top_k", m.moe_top_k, 1, kMaxExperts));
  m.moe_capacity_factor = r.number("moe_capacity_factor", 1.0, 0, true);
  m.moe_ffn_hidden_size =
      static_cast<int>(r.integer("moe_ffn_hidden_size", m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size,
                                 1, 4 * kMaxWidth));
  // Shared experts (workloads/models/moe.hpp); 0 for the width reads as the routed experts'.
  m.moe_shared_experts = static_cast<int>(r.integer("moe_shared_experts", m.moe_shared_experts, 0, kMaxExperts));
  m.moe_shared_expert_ffn_hidden_size = static_cast<int>(
      r.integer("moe_shared_expert_ffn_hidden_size", m.moe_shared_expert_ffn_hidden_size, 1, 4 * kMaxWidth));
  m.moe_shared_expert_gate = r.boolean("moe_shared_expert_gate", m.moe_shared_expert_gate);
  // The layers that keep a dense MLP (ModelSpec::first_dense_layers, moe_layer_freq; moe_layer()):
  // Megatron-Core's --moe-layer-freq is an integer, or a list of one 0 (dense) or 1 (MoE) per layer.
  m.first_dense_layers = static_cast<int>(r.integer("first_dense_layers", m.first_dense_layers, 0, kMaxLayers));
  const nlohmann::json* freq = r.has("moe_layer_freq") ? r.raw("moe_layer_freq") : nullptr;
  if (freq != nullptr && freq->is_array()) {
    m.moe_layer_pattern.clear();
    for (size_t i = 0; i < freq->size(); ++i) {
      const nlohmann::json& kind = (*freq)[i];
      if (!kind.is_number_integer() || (kind.get<long long>() != 0 && kind.get<long long>() != 1)) {
        r.problems().add(fmt::format("{}[{}]", r.path_of("moe_layer_freq"), i),
                         fmt::format("expected 0 (a dense layer) or 1 (a MoE layer), got {}", kind.dump()));
        m.moe_layer_pattern.clear();
        break;
      }
      m.moe_layer_pattern.push_back(kind.get<int>());
    }
    if (freq->empty())
      r.problems().add(r.path_of("moe_layer_freq"), "expected an integer, or a list of one 0 or 1 per layer");
  } else {
    if (freq != nullptr) // an integer given next to hf_config replaces the config's pattern
      m.moe_layer_pattern.clear();
    m.moe_layer_freq = static_cast<int>(r.integer("moe_layer_freq", m.moe_layer_freq, 1, kMaxLayers));
  }
  r.reject_unknown_keys();
  if (imported && !import_failed) { // values the import read did not pass through the bounds above
    const std::pair<const char*, std::pair<long long, long long>> fields[] = {
        {"num_layers", {m.num_layers, kMaxLayers}},       {"hidden_size", {m.hidden_size, kMaxWidth}},
        {"num_attention_heads", {m.num_attention_heads, kMaxWidth}}, {"seq_length", {m.seq_length, kMaxTokens}},
        {"vocab_size", {m.vocab_size, kMaxTokens}},       {"ffn_hidden_size", {m.ffn_hidden_size, 4 * kMaxWidth}},
        {"num_query_groups", {m.num_query_groups, kMaxWidth}}, {"num_experts", {m.num_experts, kMaxExperts}},
        {"moe_top_k", {m.moe_top_k, kMaxExperts}},       {"head_dim", {m.head_dim > 0 ? m.head_dim : 1, kMaxWidth}},
        {"sliding_window", {m.sliding_window > 0 ? m.sliding_window : 1, kMaxTokens}},
        {"moe_ffn_hidden_size", {m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : 1, 4 * kMaxWidth}},
        {"moe_shared_expert_ffn_hidden_size",
         {m.moe_shared_expert_ffn_hidden_size > 0 ? m.moe_shared_expert_ffn_hidden_size : 1, 4 * kMaxWidth}},
        {"kv_lora_rank", {m.kv_lora_rank > 0 ? m.kv_lora_rank : 1, kMaxWidth}},
        {"q_lora_rank", {m.q_lora_rank > 0 ? m.q_lora_rank : 1, kMaxWidth}},
        {"qk_rope_head_dim", {m.qk_rope_head_dim > 0 ? m.qk_rope_head_dim : 1, kMaxWidth}},
        {"v_head_dim", {m.v_head_dim > 0 ? m.v_head_dim : 1, kMaxWidth}}};
    for (const auto& [name, bounds] : fields)
      if (bounds.first < (std::string(name) == "num_experts" ? 0 : 1) || bounds.first > bounds.second)
        r.problems().add(r.path_of("hf_config"), fmt::format("{} {} from the HuggingFace config is outside [1, {}]",
                                                             name, bounds.first, bounds.second));
  }

  const bool shape_read = !r.problems().about(r.path_of("hidden_size")) &&
                          !r.problems().about(r.path_of("num_attention_heads"));
  // Without head_dim the heads split the hidden size; with it the query is heads × head_dim wide,
  // whatever the hidden size (Megatron's --kv-channels).
  if (shape_read && m.head_dim == 0 && m.hidden_size > 0 && m.num_attention_heads > 0 &&
      m.hidden_size % m.num_attention_heads != 0)
    r.problems().add(r.path_of("hidden_size"),
                     fmt::format("{} is not divisible by num_attention_heads {} (give model.head_dim for heads of "
                                 "another width)",
                                 m.hidden_size, m.num_attention_heads));
  if (m.head_dim > 0 && 1LL * m.head_dim * m.num_attention_heads > kMaxWidth)
    r.problems().add(r.path_of("head_dim"), fmt::format("{} × num_attention_heads {} is more than {}, the widest "
                                                         "attention stepsim takes",
                                                         m.head_dim, m.num_attention_heads, kMaxWidth));
  if (m.num_query_groups > m.num_attention_heads)
    r.problems().add(r.path_of("num_query_groups"), fmt::format("{} is more than num_attention_heads {}",
                                                                 m.num_query_groups, m.num_attention_heads));
  else if (m.num_query_groups > 0 && m.num_attention_heads % m.num_query_groups != 0)
    r.problems().add(r.path_of("num_query_groups"), fmt::format("num_attention_heads {} is not divisible by {}",
                                                                 m.num_attention_heads, m.num_query_groups));
  // Latent attention's fields without its key-value latent; with it, the head widths it cannot
  // take from the hidden size (DeepSeek-V3's 128 heads of 128 + 64 over a hidden size of 7168),
  // one key and value per head, and DeepSeek's RMSNorm without biases.
  for (const char* key : {"q_lora_rank", "qk_rope_head_dim", "v_head_dim"})
    if (m.kv_lora_rank == 0 && r.has(key))
      r.problems().add(r.path_of(key), "needs multi-head latent attention: model.kv_lora_rank is 0");
  if (m.kv_lora_rank > 0) {
    if (m.head_dim == 0)
      r.problems().add(r.path_of("head_dim"), "expected with multi-head latent attention (model.kv_lora_rank): each "
                                              "head's query and key width without the rotary part (DeepSeek's "
                                              "qk_nope_head_dim)");
    if (m.qk_rope_head_dim == 0)
      r.problems().add(r.path_of("qk_rope_head_dim"), "expected with multi-head latent attention "
                                                      "(model.kv_lora_rank): the rotary part of each head's query "
                                                      "and key (DeepSeek's qk_rope_head_dim)");
    if (m.num_query_groups != m.num_attention_heads && !r.problems().about(r.path_of("num_query_groups")))
      r.problems().add(r.path_of("num_query_groups"),
                       fmt::format("{}: multi-head latent attention projects a key and a value for each of the {} "
                                   "heads",
                                   m.num_query_groups, m.num_attention_heads));
    if (m.norm != "rmsnorm")
      r.problems().add(r.path_of("norm"), fmt::format("\"{}\": multi-head latent attention is lowered as DeepSeek's "
                                                      "models run it, with RMSNorm and no biases; expected rmsnorm",
                                                      m.norm));
  }
  // Expert fields mean nothing to a dense model: a scenario that gives them meant a MoE.
  for (const char* key : {"moe_top_k", "moe_capacity_factor", "moe_ffn_hidden_size", "moe_shared_experts",
                          "moe_shared_expert_ffn_hidden_size", "moe_shared_expert_gate", "first_dense_layers",
                          "moe_layer_freq"})
    if (m.num_experts == 0 && r.has(key))
      r.problems().add(r.path_of(key), "needs a mixture-of-experts model: model.num_experts is 0");
  // A shared expert's width or gate without shared experts would be read and then ignored.
  for (const char* key : {"moe_shared_expert_ffn_hidden_size", "moe_shared_expert_gate"})
    if (m.num_experts > 0 && m.moe_shared_experts == 0 && r.has(key))
      r.problems().add(r.path_of(key), "needs shared experts: model.moe_shared_experts is 0");
  // The dense layers' pattern: a list names every layer, and leaves no first layers to add; a
  // mixture of experts keeps at least one MoE layer (a model of dense layers only has num_experts 0).
  const bool layers_read = !r.problems().about(r.path_of("num_layers")) && !r.problems().about(r.path_of("moe_layer_freq"));
  // (A pattern the HuggingFace config gave is named by hf_config.)
  const char* pattern_key = r.has("moe_layer_freq") || !imported ? "moe_layer_freq" : "hf_config";
  if (m.num_experts > 0 && layers_read) {
    if (!m.moe_layer_pattern.empty() && m.moe_layer_pattern.size() != static_cast<size_t>(m.num_layers))
      r.problems().add(r.path_of(pattern_key),
                       fmt::format("lists {} layers, and model.num_layers is {}: expected one 0 or 1 per layer",
                                   m.moe_layer_pattern.size(), m.num_layers));
    else if (!m.moe_layer_pattern.empty() && r.has("first_dense_layers"))
      r.problems().add(r.path_of("first_dense_layers"),
                       "model.moe_layer_freq lists every layer's kind: give the first layers' 0s in that list");
    else if (moe_layer_count(m) == 0)
      r.problems().add(r.path_of(r.has("first_dense_layers") ? "first_dense_layers" : pattern_key),
                       fmt::format("leaves none of the {} layers a MoE layer: a model of dense layers has "
                                   "model.num_experts 0",
                                   m.num_layers));
  }
  if (m.num_experts > 0 && m.moe_top_k > m.num_experts)
    r.problems().add(r.path_of("moe_top_k"), fmt::format("{} is more than num_experts {}", m.moe_top_k, m.num_experts));
  else if (m.num_experts > 0 && m.moe_capacity_factor * m.moe_top_k > m.num_experts)
    r.problems().add(r.path_of("moe_capacity_factor"),
                     fmt::format("{} × moe_top_k {} is more than num_experts {}: an expert would take more than every "
                                 "token",
                                 m.moe_capacity_factor, m.moe_top_k, m.num_experts));
  }

  void check(const Scenario& s, Problems& problems) const override
  {
    const auto& m = s.model;
    const auto& p = s.parallelism;
    // Latent attention as Megatron-Core runs it: not split over a context-parallel ring, nor
    // lowered as eager PyTorch ops or torchao's float8 casts.
    if (latent_attention(m)) {
      const FrameworkProfile& profile = FrameworkRegistry::get(s.training.framework, "training.framework");
      if (p.context > 1)
        problems.add("parallelism.context", fmt::format("{}: multi-head latent attention (model.kv_lora_rank) is "
                                                        "not lowered with context parallelism; use 1",
                                                        p.context));
      if (profile.eager_ops || runs_under_autocast(s) || (s.training.precision == "fp8" && profile.fp8_dynamic_scaling))
        problems.add("training.framework",
                     fmt::format("\"{}\": multi-head latent attention (model.kv_lora_rank) is lowered as "
                                 "Megatron-Core runs it (fused kernels, Transformer Engine's FP8), not as this "
                                 "framework's eager ops or casts; use megatron-core, nemo or generic",
                                 s.training.framework));
    }
    if (selective_by_op(s) && is_moe(m))
      problems.add("training.recompute",
                   fmt::format("\"selective\" under {} is its per-op policy, which stepsim lowers for dense layers; "
                               "model.num_experts is {}: use none or full",
                               s.training.framework, m.num_experts));
    if (s.training.recompute_every > m.num_layers && m.num_layers > 0)
      problems.add("training.recompute_every",
                   fmt::format("{} rebuilds one layer in {}, and model.num_layers is {}: none would be rebuilt "
                               "(use recompute \"none\")",
                               s.training.recompute_every, s.training.recompute_every, m.num_layers));
    if (p.stage_layers.empty() && p.stage_layers_auto && m.num_layers > 0 &&
        m.num_layers < 1LL * p.pipeline * p.virtual_stages)
      problems.add("parallelism.stage_layers",
                   fmt::format("\"auto\" needs at least one layer per virtual stage: model.num_layers {} < pipeline {} × "
                               "virtual_stages {}",
                               m.num_layers, p.pipeline, p.virtual_stages));
  }

  double layer_count(const ModelSpec& m) const override { return m.num_layers; }

  double model_flops_per_step(const Scenario& s) const override
  {
    double tokens = double(s.training.global_batch_size) * s.model.seq_length;
    const double experts_run = std::min(1.0, s.model.moe_capacity_factor);
    return 3.0 * tokens * forward_flops_per_token(s.model, s.model.seq_length, experts_run);
  }

  double hardware_flops_per_step(const Scenario& s) const override
  {
    double tokens  = double(s.training.global_batch_size) * s.model.seq_length;
    double forward = tokens * forward_flops_per_token(s.model, s.model.seq_length, s.model.moe_capacity_factor);
    if (s.training.recompute == "full") { // the recomputed layers' forward again; not the head
      const ModelSpec& m = s.model;
      const double head  = tokens * 2.0 * m.hidden_size * m.vocab_size;
      const double share = s.recomputed_layer_share();
      // A checkpoint that stops early does not rebuild a dense block's fc2 (FrameworkProfile::
      // recompute_stops_early, workloads/models/transformer.cpp).
      // A MoE layer's experts are not cut; a mixture of experts' dense layers are.
      const double dense_layers = m.num_layers - double(moe_layer_count(m));
      const bool stops_early =
          FrameworkRegistry::get(s.training.framework, "training.framework").recompute_stops_early &&
          m.dropout == 0 && dense_layers > 0;
      const double fc2 = stops_early ? tokens * dense_layers * 2.0 * m.hidden_size * m.ffn_hidden_size : 0.0;
      if (share == 1 && fc2 == 0)
        return 4.0 * forward - head;
      return 3.0 * forward + share * (forward - head - fc2);
    }
    if (selective_by_op(s)) { // the key, output and up projections again (workloads/models/transformer.cpp)
      const ModelSpec& m = s.model;
      const double kv    = kv_width(m);
      const double up    = m.mlp == "swiglu" ? double(m.ffn_hidden_size) : 0.0;
      return 3.0 * forward + tokens * m.num_layers * 2.0 * m.hidden_size * (kv + attention_width(m) + up);
    }
    if (s.training.recompute == "selective")
      return s.model.sliding_window > 0 && s.model.sliding_window < s.model.seq_length
                 ? 3.0 * forward + tokens * 4.0 * attended_keys_over_layers(s.model, s.model.seq_length) *
                                       core_width(s.model)
                 : 3.0 * forward + tokens * s.model.num_layers * 4.0 * s.model.seq_length * core_width(s.model);
    return 3.0 * forward;
  }

  double stage_parameters(const Scenario& s, int stage) const override
  {
    const int p      = s.parallelism.pipeline;
    const int t      = s.parallelism.tensor;
    const StageLayerKinds kinds = stage_layer_kinds(s, stage);
    double params = 0;
    if (kinds.moe > 0)
      params += double(kinds.moe) *
                layer_parameters_per_rank(s.model, t, s.parallelism.expert, expert_tensor_size(s.parallelism));
    if (kinds.dense > 0)
      params += double(kinds.dense) * layer_parameters_per_rank(dense_layer_model(s.model), t);
    if (stage == 0)
      params += embedding_parameters_per_rank(s.model, t);
    if (stage == p - 1) // the final norm, and the output layer or the last stage's copy of the tied embeddings
      params += (s.model.tied_embeddings && p == 1 ? 0 : double(s.model.vocab_size) * s.model.hidden_size / t) +
                s.model.hidden_size;
    return params;
  }

  ModelFootprint footprint(const Scenario& s, int stage, int micro_batches_in_flight) const override
  {
    ModelFootprint f;
    f.parameters    = stage_parameters(s, stage);
    f.element_bytes = element_bytes(s.training.precision) == 4 ? 4 : 2;
    f.optimizer_bytes_per_parameter = s.training.optimizer == "adam" ? 12 : 8; // fp32 master weights and moments
    // Under torch.autocast the parameters are the fp32 copy: no master weights beside them.
    const bool autocast = runs_under_autocast(s);
    if (autocast) {
      f.element_bytes                 = 4;
      f.optimizer_bytes_per_parameter = s.training.optimizer == "adam" ? 8 : 4;
    }
    // (Sharded apart from the dense parameters wherever their data-parallel groups differ.)
    const StageLayerKinds kinds = stage_layer_kinds(s, stage);
    if (is_moe(s.model) && (s.parallelism.expert > 1 || expert_tensor_size(s.parallelism) != s.parallelism.tensor))
      f.expert_parameters = kinds.moe * expert_parameters_per_rank(s.model, expert_tensor_size(s.parallelism),
                                                                   s.parallelism.expert);
    const int p            = s.parallelism.pipeline;
    // A recomputed layer keeps its input, the others all they save (a partial full recompute:
    // training.recompute_every, recompute_num_layers); one recomputed layer is rebuilt in full
    // during its backward. Megatron's uniform method keeps one input per group of layers and
    // rebuilds the whole group at once (training.recompute_group). A mixture of experts' dense
    // layers keep a dense layer's (dense_layer_scenario: for a dense model, the model's own).
    Scenario whole           = s;
    whole.training.recompute = "none";
    const Scenario dense       = dense_layer_scenario(s);
    const Scenario dense_whole = dense_layer_scenario(whole);
    const double recomputed  = s.recomputed_layers_on_stage(stage);
    const double checkpoints = s.recompute_checkpoints_on_stage(stage);
    const double per_layer   = layer_activation_bytes(s);
    const bool full          = s.training.recompute == "full";
    const double kept_moe    = kinds.moe == 0 ? 0.0 : full ? layer_activation_bytes(whole) : per_layer;
    const double kept_dense  = kinds.dense == 0 ? 0.0 : layer_activation_bytes(full ? dense_whole : dense);
    f.activations = (per_layer * checkpoints + kept_moe * (kinds.moe - kinds.moe_recomputed) +
                     kept_dense * (kinds.dense - kinds.dense_recomputed)) *
                    micro_batches_in_flight;
    if (recomputed > 0) // the widest of the layers rebuilt at once
      f.activations += s.layers_rebuilt_at_once(stage) *
                       std::max(kinds.moe_recomputed > 0 ? layer_activation_bytes(whole) : 0.0,
                                kinds.dense_recomputed > 0 ? layer_activation_bytes(dense_whole) : 0.0);
    // The logits of the vocabulary shard at the loss: fp32 in Megatron's fused cross entropy (4 bytes
    // each); under autocast the 16-bit logits cast to fp32, log_softmax's fp32 output and, as
    // backward begins, its fp32 gradient (cross_entropy = log_softmax + nll_loss): 12. torchtitan's
    // eager loss is the same chain (components/loss.py, cross_entropy_loss:
    // F.cross_entropy(pred.flatten(0, 1).float(), ...); train.py frees pred before backward), which
    // training.compile compiles with the model: a fused kernel that keeps the 16-bit logits and
    // writes their 16-bit gradient, 4.
    const auto& profile   = FrameworkRegistry::get(s.training.framework, "training.framework");
    const bool fp32_chain = autocast || (profile.eager_ops && !s.training.compile);
    if (stage == p - 1)
      f.activations += (fp32_chain ? 12.0 : 4.0) * s.training.micro_batch_size * s.model.seq_length /
                       s.parallelism.context * s.model.vocab_size / s.parallelism.tensor;
    double largest = 0;
    if (kinds.moe > 0 || kinds.dense == 0)
      largest = layer_parameters_per_rank(s.model, s.parallelism.tensor, s.parallelism.expert,
                                          expert_tensor_size(s.parallelism));
    if (kinds.dense > 0)
      largest = std::max(largest, layer_parameters_per_rank(dense_layer_model(s.model), s.parallelism.tensor));
    if (stage == 0)
      largest = std::max(largest, embedding_parameters_per_rank(s.model, s.parallelism.tensor));
    if (stage == p - 1)
      largest = std::max(largest, double(s.model.vocab_size) * s.model.hidden_size / s.parallelism.tensor);
    f.largest_unit = largest;
    // Tensors as a framework that gathers tensor by tensor fetches them (MoE layers do not list theirs).
    auto widest = [](const std::vector<double>& tensors) {
      return tensors.empty() ? 0.0 : *std::max_element(tensors.begin(), tensors.end());
    };
    // (A mixture of experts' dense layers list theirs.)
    const bool dense_layers = moe_layer_count(s.model) < s.model.num_layers;
    const std::vector<double> layer_tensors =
        dense_layers ? layer_parameter_tensors(dense_layer_model(s.model), s.parallelism.tensor) : std::vector<double>{};
    if (!layer_tensors.empty()) {
      f.largest_tensor = kinds.dense > 0 ? widest(layer_tensors) : 0.0;
      if (stage == 0)
        f.largest_tensor = std::max(f.largest_tensor, widest(embedding_parameter_tensors(s.model, s.parallelism.tensor)));
      if (stage == p - 1)
        f.largest_tensor =
            std::max(f.largest_tensor, double(s.model.vocab_size) * s.model.hidden_size / s.parallelism.tensor);
    }
    return f;
  }

  int reported_layers(const Scenario& s, int stage) const override { return s.layers_on_stage(stage); }

  // Active: what one token's forward reads, by the convention model cards count it: the attention,
  // the norms, the router, the shared experts (with their gate) and top_k of the num_experts routed
  // experts of every layer, and the embeddings and the output layer (the word embedding once when
  // tied), though a token reads one row of the embedding. Qwen names its model by it:
  // Qwen1.5-MoE-A2.7B (huggingface.co/Qwen/Qwen1.5-MoE-A2.7B, README.md: "14.3B parameters in total
  // and 2.7B activated parameters") counts 2.69 B this way and 2.07 B without the two 0.31 B
  // vocabulary matrices (the blog's "2.0B non-embedding"); Mixtral 8x7B's 12.9 B active of 46.7 B
  // (Mistral AI, "Mixtral of experts", 2023) is the same count (tests/test_shared_experts.cpp).
  ParameterCounts parameter_counts(const Scenario& s) const override
  {
    const ModelSpec& m = s.model;
    const double total = model_parameters(m);
    const double idle  = is_moe(m) ? double(moe_layer_count(m)) *
                                         (m.num_experts - std::min(m.moe_top_k, m.num_experts)) *
                                         routed_expert_parameters(m)
                                   : 0;
    return {total, total - idle};
  }

  ModelPlan plan(const Scenario& s, std::vector<Work>& works) const override
  {
    ModelPlan out;
    const int tensor = s.parallelism.tensor;
    const int p = s.parallelism.pipeline, v = s.parallelism.virtual_stages;
    const TransformerWorks t = add_transformer_works(s, works);
    const bool full = s.training.recompute == "full";
    Block attention{t.attention_forward, t.attention_backward, t.attention_recompute, t.attention_backward_input,
                    t.attention_backward_weight, true, true};
    Block mlp{t.mlp_forward, t.mlp_backward, t.mlp_recompute, t.mlp_backward_input, t.mlp_backward_weight, true, true};
    Block dense_mlp = mlp; // a mixture of experts' dense layers keep it (moe_layer)
    // torchtitan turns on torchao's float8 tensor parallelism with its tensorwise float8
    // (parallelize_llama.py: enable_float8_tensorwise_tp, Float8ColwiseParallel,
    // Float8RowwiseParallel, PrepareFloat8ModuleInput from torchao/float8/float8_tensor_parallel.py).
    const bool float8_tensor_parallel =
        s.training.precision == "fp8" && s.parallelism.tensor > 1 && s.parallelism.sequence_parallel &&
        FrameworkRegistry::get(s.training.framework, "training.framework").fp8_dynamic_scaling;
    attention.float8_gather = mlp.float8_gather = dense_mlp.float8_gather = float8_tensor_parallel;
    auto& custom = out.block_kinds;
    custom.assign(works.size(), BlockKind::Dense);
    double experts = 0;
    if (s.parallelism.context > 1) {
      out.ring.works                = t.attention_parts;
      out.attention_backward_weight = t.attention_backward_weight;
      out.ring.context              = ring_degree(s.parallelism); // context / ulysses_degree
      out.ring.kv_bytes             = ring_kv_bytes(s);
      out.ring.ulysses              = ulysses_exchange(s); // Ulysses' all-to-alls (degree 1: none)
      out.ring.all_gather           = s.parallelism.context_attention == "all_gather";
      custom[t.attention_forward] = custom[t.attention_recompute] = BlockKind::RingForward;
      custom[t.attention_backward]       = BlockKind::RingBackward;
      custom[t.attention_backward_input] = BlockKind::RingBackwardInput;
    }
    if (is_moe(s.model)) { // the experts replace the MLP; its tensor collectives are their own
      out.moe_layers           = true;
      out.moe.works            = add_moe_works(s, works);
      out.moe.expert           = s.parallelism.expert;
      out.moe.tensor           = expert_tensor_size(s.parallelism);
      out.moe.all_to_all_bytes = moe_all_to_all_bytes(s);
      out.moe.shared_gather_bytes = activation_bytes(s); // the shared experts' gathered input (moe.hpp)
      const MoeWorks& m        = out.moe.works;
      mlp = Block{m.router_forward, m.experts_backward, m.router_forward, m.experts_backward_input, m.weight_backward,
                  false, false};
      custom.resize(works.size(), BlockKind::Dense);
      custom[m.router_forward]         = BlockKind::MoeForward;
      custom[m.experts_backward]       = BlockKind::MoeBackward;
      custom[m.experts_backward_input] = BlockKind::MoeBackwardInput;
      experts = expert_parameters_per_rank(s.model, expert_tensor_size(s.parallelism), s.parallelism.expert);
    }
    // The vocabulary-parallel embedding all-reduces its output; the head all-reduces its input
    // gradient. Neither is recomputed.
    Layer embedding{{Block{t.embedding_forward, t.embedding_backward, -1, t.embedding_backward, -1, true, false}},
                    embedding_parameters_per_rank(s.model, tensor), 0, false,
                    embedding_parameter_tensors(s.model, tensor)};
    const double head_parameters =
        s.model.tied_embeddings ? 0.0 : double(s.model.vocab_size) * s.model.hidden_size / tensor;
    Layer head{{Block{t.head_forward, t.head_backward, -1, t.head_backward, -1, false, true}}, head_parameters, 0, false};
    const double layer_parameters =
        layer_parameters_per_rank(s.model, tensor, s.parallelism.expert, expert_tensor_size(s.parallelism));
    Layer layer{{attention, mlp}, layer_parameters - experts, experts, full, layer_parameter_tensors(s.model, tensor)};
    // A mixture of experts' dense layers (ModelSpec::first_dense_layers, moe_layer_freq): the
    // attention and the dense MLP, their parameters all dense ones.
    const ModelSpec dense_model = dense_layer_model(s.model);
    Layer dense_layer{{attention, dense_mlp}, layer_parameters_per_rank(dense_model, tensor), 0, full,
                      layer_parameter_tensors(dense_model, tensor)};
    // torchao's float8 all-gather: a block's parameters are its linear weights but for two norm
    // vectors, and they travel in FP8 (the embedding and the output layer, left out of the float8
    // conversion, in 16 bits).
    if (s.parallelism.float8_all_gather)
      layer.gathered_element_bytes = dense_layer.gathered_element_bytes = 1;
    // Sliding-window attention (model.sliding_window): a windowed layer runs the attention works
    // with each fused attention kernel cut to the band of keys its queries see, W·s − W(W−1)/2
    // query-key pairs over a sequence of s instead of the causal s²/2, as FlashAttention's and
    // cuDNN's sliding-window kernels skip the blocks outside the band (flash_attn_func's
    // window_size=(W−1, 0); Transformer Engine's window_size). Unfused attention still
    // materialises all s² scores and masks them. The layers windowed_layer() leaves out attend
    // over the whole sequence.
    Layer windowed       = layer;
    Layer dense_windowed = dense_layer;
    const bool windows = s.model.sliding_window > 0 && s.model.sliding_window < s.model.seq_length;
    if (windows) {
      const double w = s.model.sliding_window;
      auto windowed_work = [&](int work) {
        if (work < 0)
          return work;
        Work copy    = works[static_cast<size_t>(work)];
        bool changed = false;
        for (Kernel& k : copy.kernels)
          if (k.kind == KernelKind::Attention && w < k.m) {
            k.n      = w - w * (w - 1) / (2 * k.m); // keys per query on average
            k.causal = false;
            changed  = true;
          }
        if (!changed)
          return work;
        copy.name += "_windowed";
        works.push_back(std::move(copy));
        return static_cast<int>(works.size() - 1);
      };
      Block& a         = windowed.blocks[0];
      a.forward        = windowed_work(a.forward);
      a.backward       = windowed_work(a.backward);
      a.recompute      = windowed_work(a.recompute);
      a.backward_input = windowed_work(a.backward_input);
      dense_windowed.blocks[0] = a; // the same attention block
    }
    const bool dense_layers = !is_moe(s.model) || moe_layer_count(s.model) < s.model.num_layers;

    out.stages.resize(static_cast<size_t>(p * v));
    long long first = 0; // the model's index of the chunk's first layer
    for (int vs = 0; vs < p * v; ++vs) {
      auto& layers = out.stages[vs].layers;
      if (vs == 0)
        layers.push_back(embedding);
      const int n = s.layers_in_virtual_stage(vs);
      const int g = s.training.recompute_group;
      for (int j = 0; j < n; ++j) { // a partial full recompute rebuilds some of them (training.recompute_every)
        const bool dense = is_moe(s.model) && dense_layers && !moe_layer(s.model, first + j);
        const bool window = windows && windowed_layer(s.model, first + j);
        Layer& l = dense ? (window ? dense_windowed : dense_layer) : (window ? windowed : layer);
        l.recomputed = full && s.layer_recomputed(first + j, j);
        // Uniform groups are rebuilt at their last layer's backward, the first layer first.
        l.recompute_span = j % g == g - 1 || j == n - 1 ? j % g + 1 : 0;
        layers.push_back(l);
      }
      first += n;
      if (vs == p * v - 1)
        layers.push_back(head);
      out.stages[vs].output_bytes = activation_bytes(s) / tensor; // Megatron's scatter/gather across tensor peers
    }
    if (s.model.tied_embeddings) // the first and last stages keep a copy each
      out.tied_embedding_parameters = double(s.model.vocab_size) * s.model.hidden_size / tensor;
    return out;
  }
};

const bool registered = ModelKindRegistry::add(
    "transformer", "decoder-only transformer (GPT, Llama), with mixture-of-experts blocks when model.num_experts > 0",
    std::make_shared<Transformer>());

} // namespace

} // namespace stepsim
