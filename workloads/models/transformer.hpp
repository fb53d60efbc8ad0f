// A decoder-only transformer (GPT or Llama style) as kernels per tensor-parallel rank and
// micro-batch, and its parameter counts. One Work per block and pass, shared by every layer.
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"

namespace stepsim {

struct TransformerWorks {
  int attention_forward, mlp_forward;
  int attention_backward, mlp_backward;             // input and weight gradients together
  int attention_backward_input, attention_backward_weight;
  int mlp_backward_input, mlp_backward_weight;
  int embedding_forward, embedding_backward;
  int head_forward, head_backward;                  // logits and loss
  int attention_recompute, mlp_recompute;           // full recompute re-runs the forward
  // The attention block cut around its core (context > 1 only, else -1): forward = qkv, core,
  // out; backward input gradients = out, core, qkv (the weight gradients stay whole). The core is
  // one block of (seq/context)² causal attention, run once per step of the context-parallel ring.
  struct AttentionParts {
    int qkv_forward, core_forward, out_forward;
    int out_backward, core_backward, qkv_backward;
  } attention_parts;
};

// Adds the works to `works` and returns their indices.
TransformerWorks add_transformer_works(const Scenario& s, std::vector<Work>& works);

// Parameters of one layer held by one tensor-parallel rank (norms replicated), with the
// num_experts / expert experts a rank of an expert-parallel group holds in a MoE layer, each split
// over expert_tensor ranks (0: over tensor, Megatron's default).
double layer_parameters_per_rank(const ModelSpec& m, int tensor, int expert = 1, int expert_tensor = 0);
// Parameters of the whole model (embeddings once if tied).
double model_parameters(const ModelSpec& m);
double embedding_parameters_per_rank(const ModelSpec& m, int tensor);
// The same parameters by tensor, as a framework that gathers tensor by tensor sees them: a dense
// layer's norms, QKV, projection and MLP weights with their biases (they sum to
// layer_parameters_per_rank; empty for a MoE layer, whose experts are gathered as one), and the
// embedding's word and position tables.
std::vector<double> layer_parameter_tensors(const ModelSpec& m, int tensor);
std::vector<double> embedding_parameter_tensors(const ModelSpec& m, int tensor);
// Bytes of one activation tensor (micro-batch × sequence × hidden) crossing a pipeline boundary.
double activation_bytes(const Scenario& s);
// Activation bytes of one transformer layer for one micro-batch on one tensor-parallel rank
// (Korthikanti et al. 2022: sbh(34 + 5as/h), split by tensor and sequence parallelism, less under
// recompute; a MoE layer's experts in place of its MLP). transformer_kind.cpp.
double layer_activation_bytes(const Scenario& s);
// What a dense layer's MLP block keeps for backward, bytes (what a MoE layer's experts replace).
double dense_mlp_activation_bytes(const Scenario& s);
// The run keeps each linear layer's saved input as the FP8 copy its GEMM took, one byte an
// element (Transformer Engine's fp8; not torchao's float8). transformer_kind.cpp.
bool keeps_fp8_inputs(const Scenario& s);
// Bytes of one GEMM operand at the training precision (1 for fp8).
double element_bytes(const std::string& precision);
// Bytes of one element of the tensors a run keeps and sends: weights, the activations between the
// GEMMs, what pipeline, tensor, context and expert parallelism move. An fp8 run keeps them in bf16
// and casts only the GEMMs' operands (transformer.cpp); every other precision, its own.
double stored_element_bytes(const std::string& precision);
// The run is plain PyTorch under torch.autocast (FrameworkProfile::eager_autocast) in a 16-bit
// precision, the only ones autocast casts to: its lowering and memory differ from the fused ones.
bool runs_under_autocast(const Scenario& s);

} // namespace stepsim
