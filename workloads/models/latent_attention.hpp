// Multi-head latent attention (MLA: DeepSeek-AI, "DeepSeek-V2", arXiv:2405.04434, §2.1; DeepSeek-V3,
// arXiv:2412.19437, §2.1.1) as Megatron-Core runs it (megatron/core/transformer/
// multi_latent_attention.py, MLASelfAttention):
//  - linear_q_down_proj (hidden → q_lora_rank) and linear_kv_down_proj (hidden → kv_lora_rank +
//    qk_rope_head_dim) are TELinear with parallel_mode "duplicated": whole on every tensor rank,
//    run on the rank's own tokens (its sequence shard under sequence parallelism);
//  - q_layernorm and kv_layernorm (RMSNorm) over the latents, fused with the up projections
//    (TELayerNormColumnParallelLinear);
//  - linear_q_up_proj (q_lora_rank → heads × (head_dim + qk_rope_head_dim)) and linear_kv_up_proj
//    (kv_lora_rank → heads × (head_dim + v_head_dim)), column-parallel over the heads; without a
//    query latent, linear_q_proj (hidden → heads × (head_dim + qk_rope_head_dim));
//  - the rotary embedding on the query's and the shared key's qk_rope_head_dim parts
//    (fused_apply_mla_rope_for_q / _for_kv write the query, key and value the core takes);
//  - the core over queries and keys of head_dim + qk_rope_head_dim and values of v_head_dim
//    (k_channels and v_channels), and linear_proj (heads × v_head_dim → hidden), row-parallel.
// The model's norm is RMSNorm and its linear layers have no biases (DeepSeek's).
#pragma once

#include "sim/core/scenario.hpp"

#include <vector>

namespace stepsim {

inline bool latent_attention(const ModelSpec& m) { return m.kv_lora_rank > 0; }

// One head's query (and key) width and its value width: head_dim + qk_rope_head_dim and
// v_head_dim under MLA; head_dim both otherwise.
double query_head_dim(const ModelSpec& m);
double value_head_dim(const ModelSpec& m);

// Multiply-accumulates per token of one layer's attention projections (down, up and output; the
// latents' norms are not GEMMs): Megatron's num_floating_point_operations counts the same terms
// under multi_latent_attention (q_lora_rank × (hidden + heads × q_head_dim), kv_lora_rank ×
// (hidden + heads × (qk_head_dim + v_head_dim)), hidden × qk_pos_emb_head_dim, heads × v_head_dim ×
// hidden), less its "+ 1" per latent for the norms.
double latent_attention_projection_macs(const ModelSpec& m);

// Parameters of one layer's attention (without the input norm) on one tensor rank: the down
// projections and the latents' norms whole, the up and output projections split over tensor;
// and the same by tensor, in the order a framework gathering tensor by tensor meets them.
double latent_attention_parameters_per_rank(const ModelSpec& m, int tensor);
std::vector<double> latent_attention_parameter_tensors(const ModelSpec& m, int tensor);

// Bytes per token one layer's attention keeps for backward at `e` bytes an element (`input`
// bytes for an input a GEMM saves: 1 under Transformer Engine's FP8), in two parts as
// transformer_kind.cpp's LayerTerms: `whole`, what each rank computes on its own tokens (the
// latents, their norms' outputs and the shared rotary key: a sequence shard under sequence
// parallelism, all the tokens without it), and `sharded`, the heads' query, key, value and output
// (split over tensor). The block's input norm is the caller's.
struct LatentAttentionBytes {
  double whole, sharded;
};
LatentAttentionBytes latent_attention_activation_bytes(const ModelSpec& m, double e, double input);

} // namespace stepsim
