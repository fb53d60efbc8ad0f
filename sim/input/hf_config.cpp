#include "sim/input/hf_config.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

namespace stepsim {

namespace {
int get_int(const nlohmann::json& c, const char* key, Problems& problems, std::optional<int> fallback = std::nullopt)
{
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (!fallback)
      problems.add(key, "missing in the HuggingFace config (expected a positive integer)");
    return fallback.value_or(1);
  }
  // Beyond an int the value would be truncated (4,294,967,300 layers read as 4); the model's own
  // bounds (sim/input/limits.hpp) then apply to what is read.
  if (!it->is_number_integer() || it->get<long long>() <= 0 ||
      it->get<long long>() > std::numeric_limits<int>::max()) {
    problems.add(key, fmt::format("expected a positive integer of at most {} in the HuggingFace config, got {}",
                                  std::numeric_limits<int>::max(), it->dump()));
    return fallback.value_or(1);
  }
  return it->get<int>();
}

// A string field; absent or null gives `fallback`.
std::string get_text(const nlohmann::json& c, const char* key, Problems& problems, const std::string& fallback)
{
  auto it = c.find(key);
  if (it == c.end() || it->is_null())
    return fallback;
  if (!it->is_string()) {
    problems.add(key, fmt::format("expected a string in the HuggingFace config, got {}", it->dump()));
    return fallback;
  }
  return it->get<std::string>();
}

// A probability in [0, 1); absent or null gives `fallback`.
double get_probability(const nlohmann::json& c, const char* key, Problems& problems, double fallback)
{
  auto it = c.find(key);
  if (it == c.end() || it->is_null())
    return fallback;
  if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() < 1)) {
    problems.add(key, fmt::format("expected a probability in [0, 1) in the HuggingFace config, got {}", it->dump()));
    return fallback;
  }
  return it->get<double>();
}

bool get_bool(const nlohmann::json& c, const char* key, Problems& problems, bool fallback)
{
  auto it = c.find(key);
  if (it == c.end() || it->is_null())
    return fallback;
  if (!it->is_boolean()) {
    problems.add(key, fmt::format("expected true or false in the HuggingFace config, got {}", it->dump()));
    return fallback;
  }
  return it->get<bool>();
}

bool given(const nlohmann::json& c, const char* key) { return c.contains(key) && !c[key].is_null(); }

// The expert fields of the Llama-family types (modeling_mixtral.py, MixtralSparseMoeBlock;
// modeling_qwen2_moe.py, Qwen2MoeSparseMoeBlock; modeling_qwen3_moe.py, Qwen3MoeSparseMoeBlock).
// A mixture-of-experts type must name its experts in full: HuggingFace would fill a missing field
// from its config class's defaults (Qwen2MoeConfig's are Qwen1.5-MoE-A2.7B's 60 experts, top 4),
// which describe another model, and stepsim used to import such a config as a dense model. A field
// the type's model does not read is refused too, since the model it describes would not be the one
// HuggingFace builds.
void import_experts(const nlohmann::json& c, const std::string& type, ModelSpec& m, Problems& problems)
{
  const bool mixtral = type == "mixtral", qwen2_moe = type == "qwen2_moe";
  const bool moe     = mixtral || qwen2_moe || type == "qwen3_moe";
  if (!moe) {
    for (const char* key : {"num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "shared_expert_intermediate_size", "n_shared_experts"})
      if (given(c, key))
        problems.add(key, fmt::format("a {} config has no experts (HuggingFace's {} model ignores the field); a "
                                      "mixture of experts is model_type \"mixtral\", \"qwen2_moe\" or \"qwen3_moe\"",
                                      type, type));
    return;
  }
  auto required = [&](const char* key, const char* what) {
    if (!given(c, key)) {
      problems.add(key, fmt::format("missing in the HuggingFace config: a {} config must name its experts in full "
                                    "({}); HuggingFace's default would be another model's",
                                    type, what));
      return 1;
    }
    return get_int(c, key, problems);
  };
  auto ignored = [&](const char* key, const std::string& why) {
    if (given(c, key))
      problems.add(key, fmt::format("HuggingFace's {} model does not read it: {}", type, why));
  };
  const char* experts_key = mixtral ? "num_local_experts" : "num_experts";
  ignored(mixtral ? "num_experts" : "num_local_experts",
          fmt::format("a {} config gives its number of experts as {}", type, experts_key));
  m.num_experts = required(experts_key, "the number of experts");
  m.moe_top_k   = required("num_experts_per_tok", "the experts each token is routed to");
  if (mixtral) // Mixtral's experts are intermediate_size wide
    ignored("moe_intermediate_size", "its experts are intermediate_size wide");
  else
    m.moe_ffn_hidden_size = required("moe_intermediate_size", "each expert's FFN width");
  // Qwen2-MoE's one shared expert of shared_expert_intermediate_size with its sigmoid gate
  // (Qwen2MoeSparseMoeBlock: shared_expert, shared_expert_gate = Linear(hidden_size, 1)); the
  // other types have none. DeepSeek's n_shared_experts belongs to model types not imported here.
  if (qwen2_moe) {
    m.moe_shared_experts                = 1;
    m.moe_shared_expert_ffn_hidden_size = required("shared_expert_intermediate_size", "the shared expert's width");
    m.moe_shared_expert_gate            = true;
  } else {
    ignored("shared_expert_intermediate_size", fmt::format("a {} model has no shared expert", type));
  }
  ignored("n_shared_experts", "it has no such field (DeepSeek's has; give shared experts in the scenario as "
                              "model.moe_shared_experts)");
  // Qwen's MoE types may keep some layers dense (Qwen2MoeDecoderLayer and Qwen3MoeDecoderLayer: a
  // dense MLP of intermediate_size where the layer index is in mlp_only_layers or (index + 1) is
  // not a multiple of decoder_sparse_step): stepsim's list of layer kinds
  // (ModelSpec::moe_layer_pattern), written only where some layer stays dense.
  if (!mixtral) {
    const int step = given(c, "decoder_sparse_step") ? get_int(c, "decoder_sparse_step", problems) : 1;
    std::set<long long> dense;
    if (given(c, "mlp_only_layers")) {
      const auto& list = c["mlp_only_layers"];
      if (!list.is_array())
        problems.add("mlp_only_layers", fmt::format("expected a list of layer indices, got {}", list.dump()));
      else
        for (const auto& index : list) {
          if (!index.is_number_integer() || index.get<long long>() < 0 || index.get<long long>() >= m.num_layers) {
            problems.add("mlp_only_layers", fmt::format("{} is no layer index: expected integers in [0, {}) "
                                                        "(num_hidden_layers {})",
                                                        index.dump(), m.num_layers, m.num_layers));
            break;
          }
          dense.insert(index.get<long long>());
        }
    }
    if (step != 1 || !dense.empty()) {
      m.moe_layer_pattern.assign(static_cast<size_t>(m.num_layers), 0);
      for (long long i = 0; i < m.num_layers; ++i)
        m.moe_layer_pattern[static_cast<size_t>(i)] = !dense.count(i) && (i + 1) % step == 0 ? 1 : 0;
    }
  }
}

// Sliding-window attention as HuggingFace's models apply it (ModelSpec::sliding_window). Mistral
// windows every layer by sliding_window, 4,096 where the config leaves it out (MistralConfig's
// default; null: none); Mixtral's default is none (MixtralConfig). The Qwen types window only
// under use_sliding_window (false by default), and then the layers from max_window_layers on
// (Qwen2Config and Qwen3Config: layer_types "sliding_attention" where use_sliding_window and
// i >= max_window_layers, a window of 4,096 and max_window_layers 28 where the config leaves them
// out); a config that lists layer_types (transformers 4.53 and later write them) is read from the
// list. stepsim windows every layer, or all but every N-th (window_attn_skip_freq); any other
// pattern is refused.
void import_sliding_window(const nlohmann::json& c, const std::string& type, ModelSpec& m, Problems& problems)
{
  const bool mistral = type == "mistral", mixtral = type == "mixtral";
  const bool qwen    = type.rfind("qwen", 0) == 0;
  if (!mistral && !mixtral && !qwen)
    return;
  auto window = [&]() { return get_int(c, "sliding_window", problems, 4096); }; // Qwen's configs' default
  if (mistral || mixtral) {
    if (!c.contains("sliding_window"))
      m.sliding_window = mistral ? 4096 : 0;
    else if (!c["sliding_window"].is_null())
      m.sliding_window = window();
    return;
  }
  // Qwen's attention takes config.sliding_window, which its config sets to None unless
  // use_sliding_window (Qwen3Config.__post_init__), whatever layer_types says.
  if (!get_bool(c, "use_sliding_window", problems, false))
    return;
  // Which layers (from 0) attend in the window.
  std::vector<bool> windowed(static_cast<size_t>(std::max(m.num_layers, 0)), false);
  if (given(c, "layer_types")) {
    const auto& types = c["layer_types"];
    if (!types.is_array() || types.size() != windowed.size()) {
      problems.add("layer_types", fmt::format("expected a list of {} layer types (num_hidden_layers) in the "
                                              "HuggingFace config, got {}",
                                              windowed.size(), types.dump()));
      return;
    }
    for (size_t i = 0; i < windowed.size(); ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention") {
        problems.add("layer_types", fmt::format("entry {} is {}: expected \"sliding_attention\" or "
                                                "\"full_attention\"",
                                                i, types[i].dump()));
        return;
      }
      windowed[i] = types[i] == "sliding_attention";
    }
  } else {
    // The first layer that windows (0: all of them); 28 where the config leaves it out, as
    // Qwen2Config, Qwen2MoeConfig, Qwen3Config and Qwen3MoeConfig default it.
    int from = 28;
    if (given(c, "max_window_layers")) {
      const auto& v = c["max_window_layers"];
      if (!v.is_number_integer() || v.get<long long>() < 0) {
        problems.add("max_window_layers",
                     fmt::format("expected an integer >= 0 in the HuggingFace config, got {}", v.dump()));
        return;
      }
      from = static_cast<int>(std::min<long long>(v.get<long long>(), m.num_layers));
    }
    from = std::min(from, m.num_layers);
    for (size_t i = 0; i < windowed.size(); ++i)
      windowed[i] = static_cast<int>(i) >= from;
  }
  const auto count = std::count(windowed.begin(), windowed.end(), true);
  if (count == 0)
    return;
  m.sliding_window = window();
  if (count == static_cast<long long>(windowed.size()))
    return;
  // Every N-th layer whole (window_attn_skip_freq N): the first whole layer's number is N.
  const int n = static_cast<int>(std::find(windowed.begin(), windowed.end(), false) - windowed.begin()) + 1;
  for (size_t i = 0; i < windowed.size(); ++i)
    if (windowed[i] != (n < 2 || (i + 1) % static_cast<size_t>(n) != 0)) {
      problems.add(given(c, "layer_types") ? "layer_types" : "max_window_layers",
                   fmt::format("these layers window their attention in a pattern stepsim does not express: it "
                               "windows every layer, or all but every N-th (model.window_attn_skip_freq)"));
      return;
    }
  m.window_attn_skip_freq = n;
}
} // namespace

// The sizes the Llama-family types and DeepSeek's name alike (num_hidden_layers, hidden_size,
// num_attention_heads, intermediate_size, max_position_embeddings, vocab_size,
// tie_word_embeddings), and what their models share: a SwiGLU MLP, RMSNorm and no residual
// dropout (modeling_llama.py, modeling_mistral.py, modeling_qwen2.py, modeling_deepseek.py: the
// decoder layer adds its residuals as they are; attention_dropout applies to the scores).
void import_gated_decoder(const nlohmann::json& c, ModelSpec& m, Problems& problems)
{
  m.num_layers          = get_int(c, "num_hidden_layers", problems);
  m.hidden_size         = get_int(c, "hidden_size", problems);
  m.num_attention_heads = get_int(c, "num_attention_heads", problems);
  m.ffn_hidden_size     = get_int(c, "intermediate_size", problems);
  m.seq_length          = get_int(c, "max_position_embeddings", problems, 4096);
  m.vocab_size          = get_int(c, "vocab_size", problems);
  m.mlp                 = "swiglu";
  m.norm                = "rmsnorm";
  m.tied_embeddings     = get_bool(c, "tie_word_embeddings", problems, false);
  m.dropout             = 0;
}

// DeepSeek-V2 and V3 (modeling_deepseek.py; transformers' deepseek_v3): multi-head latent
// attention (DeepseekV3Attention: q_a_proj to q_lora_rank, or q_proj where q_lora_rank is null;
// kv_a_proj_with_mqa to kv_lora_rank + qk_rope_head_dim; heads of qk_nope_head_dim +
// qk_rope_head_dim and values of v_head_dim), RMSNorm, SwiGLU, and DeepSeekMoE: n_routed_experts
// of moe_intermediate_size, num_experts_per_tok of them per token, n_shared_experts beside them
// (DeepseekV3MoE.shared_experts, one MLP of moe_intermediate_size × n_shared_experts), in the
// layers from first_k_dense_replace on whose index moe_layer_freq divides; the others a dense MLP
// of intermediate_size. The multi-token prediction layers (num_nextn_predict_layers) are not part
// of the model HuggingFace builds, nor of stepsim's.
void import_deepseek(const nlohmann::json& c, ModelSpec& m, Problems& problems)
{
  import_gated_decoder(c, m, problems);
  m.num_query_groups = m.num_attention_heads; // a key and a value per head (MLA)
  if (given(c, "num_key_value_heads") && get_int(c, "num_key_value_heads", problems) != m.num_attention_heads)
    problems.add("num_key_value_heads", fmt::format("{}: multi-head latent attention projects a key and a value "
                                                    "for each of the {} heads; expected {}",
                                                    c["num_key_value_heads"].dump(), m.num_attention_heads,
                                                    m.num_attention_heads));
  if (get_text(c, "hidden_act", problems, "silu") != "silu")
    problems.add("hidden_act", fmt::format("{}: DeepSeek's experts and MLPs are SwiGLU; expected \"silu\"",
                                           c["hidden_act"].dump()));
  m.kv_lora_rank     = get_int(c, "kv_lora_rank", problems);
  m.q_lora_rank      = given(c, "q_lora_rank") ? get_int(c, "q_lora_rank", problems) : 0; // null: no query latent
  m.head_dim         = get_int(c, "qk_nope_head_dim", problems);
  m.qk_rope_head_dim = get_int(c, "qk_rope_head_dim", problems);
  m.v_head_dim       = get_int(c, "v_head_dim", problems);
  if (!given(c, "n_routed_experts")) // a DeepSeek config without experts is a dense model
    return;
  auto required = [&](const char* key, const char* what) {
    if (!given(c, key)) {
      problems.add(key, fmt::format("missing in the HuggingFace config: a DeepSeek MoE config must name its "
                                    "experts in full ({})",
                                    what));
      return 1;
    }
    return get_int(c, key, problems);
  };
  m.num_experts         = get_int(c, "n_routed_experts", problems);
  m.moe_top_k           = required("num_experts_per_tok", "the experts each token is routed to");
  m.moe_ffn_hidden_size = required("moe_intermediate_size", "each expert's FFN width");
  m.moe_shared_experts  = given(c, "n_shared_experts") ? get_int(c, "n_shared_experts", problems) : 0;
  if (given(c, "first_k_dense_replace")) {
    const auto& k = c["first_k_dense_replace"];
    if (!k.is_number_integer() || k.get<long long>() < 0 || k.get<long long>() > m.num_layers)
      problems.add("first_k_dense_replace",
                   fmt::format("expected an integer in [0, {}] (num_hidden_layers), got {}", m.num_layers, k.dump()));
    else
      m.first_dense_layers = k.get<int>();
  }
  m.moe_layer_freq = given(c, "moe_layer_freq") ? get_int(c, "moe_layer_freq", problems) : 1;
}

ModelSpec import_hf_config(const nlohmann::json& c)
{
  Problems problems;
  ModelSpec m;
  if (!c.is_object())
    throw InputError({"expected a JSON object in the HuggingFace config"});
  std::string type = get_text(c, "model_type", problems, "");
  m.name           = get_text(c, "_name_or_path", problems, type.empty() ? std::string("hf-model") : type);
  if (type == "gpt2") {
    m.num_layers          = get_int(c, "n_layer", problems);
    m.hidden_size         = get_int(c, "n_embd", problems);
    m.num_attention_heads = get_int(c, "n_head", problems);
    m.num_query_groups    = m.num_attention_heads;
    m.ffn_hidden_size     = get_int(c, "n_inner", problems, 4 * m.hidden_size);
    m.seq_length          = get_int(c, "n_positions", problems, 1024);
    m.vocab_size          = get_int(c, "vocab_size", problems);
    m.mlp                 = "gelu";
    m.norm                = "layernorm";
    m.tied_embeddings     = true;
    m.dropout             = get_probability(c, "resid_pdrop", problems, 0.1); // GPT2Config's default
  } else if (type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2" || type == "qwen2_moe" ||
             type == "qwen3" || type == "qwen3_moe") {
    import_gated_decoder(c, m, problems);
    m.num_query_groups = get_int(c, "num_key_value_heads", problems, m.num_attention_heads);
    // The MLP is gated (SwiGLU); the activation inside it has the FLOPs of any other, but a name
    // HuggingFace does not know is a config that would not load (transformers/activations.py,
    // ACT2CLS).
    static const std::set<std::string> activations = {
        "gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh", "gelu_accurate", "laplace",
        "leaky_relu", "linear", "mish", "quick_gelu", "relu", "relu2", "relu6", "sigmoid", "silu", "swish", "tanh",
        "prelu", "xielu"};
    const std::string act = get_text(c, "hidden_act", problems, "silu");
    if (!activations.count(act))
      problems.add("hidden_act", fmt::format("\"{}\" is no activation HuggingFace knows (transformers/activations.py); "
                                             "expected e.g. \"silu\"", act));
    // A head's width where the config sets one (Qwen3, Mistral-NeMo: HuggingFace's head_dim, which
    // modeling_qwen3.py's Qwen3Attention takes as getattr(config, "head_dim", hidden_size //
    // num_attention_heads)): Qwen3-0.6B's 16 heads of 128 over a hidden size of 1024.
    if (c.contains("head_dim") && !c["head_dim"].is_null())
      m.head_dim = get_int(c, "head_dim", problems);
    import_experts(c, type, m, problems);
    import_sliding_window(c, type, m, problems);
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    import_deepseek(c, m, problems);
  } else if (problems.empty()) { // a model_type that is no string is already reported
    problems.add("model_type", fmt::format("\"{}\" is not a supported HuggingFace model type; expected one of "
                                           "\"llama\", \"mistral\", \"mixtral\", \"qwen2\", \"qwen2_moe\", \"qwen3\", "
                                           "\"qwen3_moe\", \"deepseek_v2\", \"deepseek_v3\", \"gpt2\"",
                                           type));
  }
  problems.throw_if_any();
  return m;
}

} // namespace stepsim
