// A training framework's behaviour, as a profile registered by name (training.framework): what a
// Megatron-LM, Megatron-Core, DeepSpeed or FSDP run does that the scenario does not spell out. A
// profile is plain data; each is one file in workloads/frameworks/ that names the framework source
// every behaviour was read from. The parser takes the profile's defaults for the fields a scenario
// leaves out (sim/input/scenario_parse.cpp); the memory model takes what the framework holds beside
// the model (sim/job_plan.cpp).
#pragma once

#include "sim/core/registry.hpp"

#include <string>
#include <utility>
#include <vector>

namespace stepsim {

struct FrameworkProfile {
  // Defaults for what the run leaves to the framework.
  std::string attention    = "flash"; // training.attention: fused (FlashAttention) or scores materialised
  bool overlap_grad_reduce = true;    // parallelism.overlap_grad_reduce
  // parallelism.bucket_size: bucket_bytes when set (PyTorch DDP caps buckets in bytes); else, in
  // parameters at the training precision's element size, max(bucket_parameters,
  // bucket_parameters_per_rank × data-parallel ranks) (Megatron-Core grows its buckets with the
  // group); all zero = one bucket for all gradients.
  double bucket_bytes               = 0;
  double bucket_parameters          = 0;
  double bucket_parameters_per_rank = 0;
  // Memory per GPU the framework's process holds beside the model's tensors: the CUDA context
  // with the kernels and library handles it loads, bytes.
  double context_bytes = 0;

  // Behaviours the lowering follows (workloads/lower.cpp); none of them is a scenario field.
  // The pipeline send is a blocking call: the compute that follows it on the sending rank waits
  // until the transfer has finished (false: sends run on their own streams beside compute).
  bool pipeline_send_blocks_compute = false;
  // After each pipeline send or receive the host waits until the GPU has finished everything it
  // was given (torch.cuda.synchronize after batch_isend_irecv), so the kernels after it are issued
  // only from then on: what the host ran ahead is lost. Matters only where issuing the kernels
  // takes time (the device calibration's host_launch_s).
  bool pipeline_transfer_synchronizes_host = false;
  // After every micro-batch's backward, a bandwidth-bound pass over the stage's parameters that
  // adds the micro-batch's gradients into the accumulated ones, in bytes moved per parameter, by
  // training precision ("bf16", "fp16", ...); a precision not listed has no such pass (its
  // gradients are accumulated inside the weight-gradient GEMMs, or the model runs one micro-batch).
  std::vector<std::pair<std::string, double>> gradient_accumulation_bytes_per_parameter = {};
  // Tensor-parallel communication overlapped with the GEMMs beside it (sequence parallel only):
  // each all-gather or reduce-scatter is cut into chunks that the GEMM consumes or produces one
  // at a time, so only one chunk waits in the open. All-gathers are cut into as many chunks as
  // tensor-parallel ranks (a ring exchange); reduce-scatters into tensor_overlap_reduce_chunks
  // (0: as many as tensor-parallel ranks). The default of parallelism.tensor_comm_overlap.
  // ZeRO-3 / FSDP: a unit's parameters are fetched synchronously when its forward or backward
  // begins, so the gather waits for the compute before it and the compute waits for the gather
  // (false: the next unit's gather is issued as the current one starts, beside its compute).
  bool parameter_gather_blocks_compute = false;
  // ZeRO-3: parameters are gathered one tensor at a time, as hooks on every module fetch their
  // own (DeepSpeed), instead of one flat all-gather per unit (FSDP's flat parameter); a tensor
  // of fewer elements than persistent_parameter_elements is never partitioned (every rank keeps
  // it whole) and is never gathered. Each tensor's gradient is reduce-scattered on its own.
  bool gather_per_tensor               = false;
  double persistent_parameter_elements = 0;
  // Full recompute re-runs a unit's forward inside its backward. Hooks on every forward
  // (DeepSpeed) gather the unit's parameters for the recomputed forward, release them after it
  // and gather them again for the backward (false: one gather serves both).
  bool gather_again_after_recompute = false;
  // The framework calls the list forms of all_gather and reduce_scatter (one tensor per rank):
  // PyTorch's ProcessGroupNCCL flattens the list into one buffer and copies each rank's chunk
  // in (reduce-scatter) or out (all-gather), one copy per rank, each a launch of its own.
  bool per_rank_copies = false;
  // Host calls made for each rank's entry of such a list, the copy's launch among them: the
  // framework's own as it builds the list (a view per rank, ...) and PyTorch's as it copies the
  // entry in or out (the view of the flat buffer, the copy). Each is timed as one launch (the
  // device's kernel_overhead): the host issues them one after another between synchronous
  // gathers, and the GPU's copies finish faster than the host issues them.
  double gather_calls_per_rank  = 1;
  double scatter_calls_per_rank = 1;
  // Training precisions whose gradients the framework accumulates and reduces in fp32
  // (training.gradient_precision's default); any other keeps them in the training precision.
  std::vector<std::string> fp32_gradients_for = {};
  bool tensor_comm_overlap          = false;
  double tensor_overlap_reduce_chunks = 1;
  // The fused-attention implementation the framework calls (training.attention_kernel's
  // default); empty: the device's common figure.
  std::string attention_kernel = "";
  // A column-parallel linear's backward overlaps its tensor-parallel collectives with its GEMMs
  // (Megatron-LM since 2022): with sequence parallelism the input's all-gather runs beside the
  // dgrad GEMM and the dgrad's reduce-scatter beside the wgrad GEMM; without it the dgrad's
  // all-reduce runs beside the wgrad GEMM. false: each waits for the compute before it and the
  // compute after waits for it.
  bool tensor_backward_overlap      = false;
  // Plain PyTorch modules run eagerly under torch.autocast over fp32 parameters (a 16-bit
  // training precision only). Each forward casts every weight down (the cast cache lives for one
  // autocast region) and each weight's gradient is cast back to fp32 as backward reaches it;
  // LayerNorm is on autocast's fp32 list, so the residual stream and the norms are fp32 and the
  // input of every linear layer after a norm is cast down; biases' gradients are reductions of
  // their own; the attention output is transposed to (batch, sequence, hidden) by a copy and the
  // query, key and value gradients back into one tensor by another (workloads/models/transformer.cpp).
  // Its memory (workloads/models/transformer_kind.cpp, models/memory.cpp): fp32 parameters with no
  // master copy, LayerNorm's fp32 inputs, the attention output saved twice, the loss's logits at
  // 12 bytes each, and gradients freed after each step (zero_grad(set_to_none=True)), so with one
  // micro-batch a step they are allocated only as backward frees the activations.
  bool eager_autocast = false;
  // The model's own PyTorch modules run op by op, none fused (torchtitan's Llama without
  // torch.compile, norm_type "rmsnorm"), in the training precision: RMSNorm as PyTorch ops in fp32
  // (a cast up, pow, mean, a multiply, a cast down, the weight's multiply), rotary embeddings as
  // complex multiplies in fp32 on the query and the key, grouped-query attention's keys and
  // values repeated to every head, the attention output transposed by a copy, and SwiGLU as silu
  // then a multiply; each op a kernel that reads and writes whole tensors, forward and backward
  // (workloads/models/transformer.cpp).
  bool eager_ops = false;
  // What training.recompute "selective" rebuilds in backward. "attention": the attention core
  // (Megatron's --recompute-granularity selective, Korthikanti 2022). "op": torchtitan's per-op
  // policy (activation_checkpoint mode "selective", selective_ac_option "op"): each transformer
  // block is checkpointed with the outputs of its attention and of every other matmul kept (the
  // first, third, ... of the block: the query, value, gate and down projections), and the rest
  // rebuilt before its backward: the norms, the key and output projections, the rotary embedding,
  // the up projection and the activation (workloads/models/transformer.cpp).
  std::string selective_recompute = "attention";
  // A recomputed forward stops once it has rebuilt every tensor backward needs: PyTorch's
  // non-reentrant checkpoint (torch.utils.checkpoint, use_reentrant=False; early stop on by
  // default since PyTorch 2.1, pytorch/pytorch#96866) raises _StopRecomputationError as the last
  // saved tensor is packed, and a linear layer packs its input before its GEMM runs (autograd saves an
  // op's inputs before it redispatches to the kernel). A transformer block's last
  // op, the MLP's down projection (fc2) and the residual add after it, is then not recomputed,
  // unless a dropout after it keeps a mask (workloads/models/transformer.cpp). Megatron's and
  // DeepSpeed's reentrant checkpoints re-run the whole forward.
  bool recompute_stops_early = false;
  // FP8 as torchao's float8 training runs it (Float8Linear, tensorwise dynamic scaling: torchtitan's
  // model.converters "float8"), not as Transformer Engine does. Each cast takes its scale from the
  // tensor's own absolute maximum, a reduction over the whole tensor before the cast can start
  // (Transformer Engine's delayed scaling takes it from earlier steps' history), so no norm or
  // activation kernel writes FP8 directly. Each linear layer saves its bf16 input, not an FP8 copy
  // (matmul_with_hp_or_float8_args: ctx.save_for_backward(input_hp, weight_hp_t)), and casts it
  // again, column-major, for its weight gradient; the output gradient is cast once for both of
  // its GEMMs; the weights are cast in forward and again in backward unless they were gathered in
  // FP8 (parallelism.fsdp.float8_all_gather). Modelled compiled (training.compile), as torchtitan
  // runs it: Inductor folds each absolute maximum into the kernel that produces the tensor, except
  // a saved input's, which backward reads again (workloads/models/transformer.cpp).
  bool fp8_dynamic_scaling = false;
  // A MoE layer's local experts run their GEMMs as one launch per expert, each expert's tokens a
  // GEMM of its own (Transformer Engine's GroupedLinear: general_grouped_gemm issues one cuBLAS
  // GEMM per expert over a few streams), not as one grouped kernel for all of them (CUTLASS's
  // grouped GEMM, Megatron's legacy GroupedMLP). Each launch pays the device's kernel overhead
  // (workloads/models/moe.cpp).
  bool expert_gemm_per_expert = false;
  // A MoE layer's forward stops the host until the GPU has routed its tokens: the dispatcher
  // copies the token counts per expert to the host, which sizes the all-to-all's splits and the
  // grouped GEMMs from them (Megatron-Core's dropless alltoall dispatcher, cuda_sync_point), so
  // what the host had issued ahead is lost and the layer's later kernels are issued from then on.
  // Matters only where issuing kernels takes time (the device calibration's host_launch_s).
  bool moe_dispatch_synchronizes_host = false;
  // What each behaviour above was read from: "behaviour: file (function), version".
  std::vector<std::string> sources;
};

using FrameworkRegistry = Registry<FrameworkProfile>;

// What a job may use of a device's memory: all of it less what the framework's process holds
// beside the model. The memory check (sim/job_plan.cpp) and the stage split that must pass it
// (topologies/placement.cpp) both take this.
// Bytes of one gradient element as the run accumulates and reduces it (fp8 runs keep 16-bit ones).
inline double gradient_element_bytes(const std::string& precision, const std::string& gradient_precision)
{
  if (gradient_precision == "fp32" || precision == "fp32" || precision == "tf32")
    return 4;
  return 2;
}

inline double usable_memory_bytes(double device_bytes, const FrameworkProfile& framework)
{
  return device_bytes > framework.context_bytes ? device_bytes - framework.context_bytes : 0.0;
}

// The profile a scenario names when it names none (README, "Framework profiles").
inline constexpr const char* kDefaultFramework = "generic";

} // namespace stepsim
