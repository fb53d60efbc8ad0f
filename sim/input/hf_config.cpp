#include "sim/input/hf_config.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <limits>
#include <set>

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
} // namespace

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
    m.num_layers          = get_int(c, "num_hidden_layers", problems);
    m.hidden_size         = get_int(c, "hidden_size", problems);
    m.num_attention_heads = get_int(c, "num_attention_heads", problems);
    m.num_query_groups    = get_int(c, "num_key_value_heads", problems, m.num_attention_heads);
    m.ffn_hidden_size     = get_int(c, "intermediate_size", problems);
    m.seq_length          = get_int(c, "max_position_embeddings", problems, 4096);
    m.vocab_size          = get_int(c, "vocab_size", problems);
    m.mlp                 = "swiglu";
    m.norm                = "rmsnorm";
    m.tied_embeddings     = get_bool(c, "tie_word_embeddings", problems, false);
    // These models have no residual dropout (modeling_llama.py, modeling_mistral.py, modeling_qwen2.py:
    // the decoder layer adds its residuals as they are; attention_dropout applies to the scores).
    m.dropout = 0;
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
    // The transformer kind takes the head dimension as hidden_size / num_attention_heads; a
    // config that sets another (Qwen3-0.6B: 1024 / 16 heads, head_dim 128) would be costed wrong.
    if (c.contains("head_dim") && !c["head_dim"].is_null() && m.num_attention_heads > 0) {
      const int head_dim = get_int(c, "head_dim", problems);
      if (head_dim > 0 && 1LL * head_dim * m.num_attention_heads != m.hidden_size)
        problems.add("head_dim", fmt::format("{} differs from hidden_size / num_attention_heads = {} / {}, the head "
                                             "dimension stepsim's transformer assumes; give the model's shape in "
                                             "the scenario instead",
                                             head_dim, m.hidden_size, m.num_attention_heads));
    }
    const bool moe_type = type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe";
    for (const char* key : {"num_local_experts", "num_experts"})
      if (!moe_type && c.contains(key) && !c[key].is_null())
        problems.add(key, fmt::format("a {} config has no experts (HuggingFace's {} model ignores the field); a "
                                      "mixture of experts is model_type \"mixtral\", \"qwen2_moe\" or \"qwen3_moe\"",
                                      type, type));
    if (moe_type && (c.contains("num_local_experts") || c.contains("num_experts"))) {
      m.num_experts = get_int(c, c.contains("num_local_experts") ? "num_local_experts" : "num_experts", problems);
      m.moe_top_k   = get_int(c, "num_experts_per_tok", problems, 2);
      if (c.contains("moe_intermediate_size"))
        m.moe_ffn_hidden_size = get_int(c, "moe_intermediate_size", problems);
    }
  } else if (problems.empty()) { // a model_type that is no string is already reported
    problems.add("model_type", fmt::format("\"{}\" is not a supported HuggingFace model type; expected one of "
                                           "\"llama\", \"mistral\", \"mixtral\", \"qwen2\", \"qwen2_moe\", \"qwen3\", "
                                           "\"qwen3_moe\", \"gpt2\"",
                                           type));
  }
  problems.throw_if_any();
  return m;
}

} // namespace stepsim
