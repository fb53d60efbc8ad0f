// Plain PyTorch run eagerly under torch.autocast (automatic mixed precision) over fp32
// parameters: nn.Linear, nn.LayerNorm and F.scaled_dot_product_attention as a model written
// against torch.nn calls them (nanoGPT, Hugging Face), DistributedDataParallel for data
// parallelism. What autocast and eager execution add to a fused Megatron-style layer is listed
// at FrameworkProfile::eager_autocast and lowered in workloads/models/transformer.cpp.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "pytorch-autocast",
    "plain PyTorch, eager, torch.autocast over fp32 parameters: fp32 norms and residual stream, weight casts, DDP",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_bytes = 25e6, // DDP's bucket_cap_mb
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .fp32_gradients_for = {"bf16", "fp16"},
        .eager_autocast = true,
        .sources = {
            "eager_autocast: aten/src/ATen/autocast_mode.cpp (KERNEL_CUDA(layer_norm, fp32), "
            "KERNEL_CUDA(native_layer_norm, fp32): LayerNorm runs in fp32 and returns fp32; linear, addmm and "
            "matmul are on the lower_precision_fp list, so their inputs are cast down; cached_cast keeps the casts "
            "of fp32 weights until the outermost autocast region exits (clear_cache), once per forward); "
            "torch/nn/modules/linear.py (F.linear: bias added in the GEMM's epilogue, its gradient a reduction "
            "over the tokens in backward); nanoGPT model.py CausalSelfAttention.forward "
            "(y.transpose(1, 2).contiguous().view(B, T, C) after scaled_dot_product_attention)",
            "fp32_gradients_for: the parameters are fp32 (torch.autocast casts copies), so their .grad and DDP's "
            "all-reduce are fp32",
            "memory: torch/optim/optimizer.py (Optimizer.zero_grad, set_to_none=True by default since PyTorch 2.0: "
            "gradients freed after each step, allocated again by backward's AccumulateGrad); "
            "torch/nn/functional.py (cross_entropy: log_softmax then nll_loss, log_softmax's output saved for "
            "backward); torch.optim.AdamW keeps exp_avg and exp_avg_sq beside the fp32 parameters, no master copy",
            "overlap_grad_reduce, bucket: torch/nn/parallel/distributed.py (DistributedDataParallel, "
            "bucket_cap_mb=25, buckets all-reduced from autograd hooks during backward)",
            "attention: torch.nn.functional.scaled_dot_product_attention (flash backend on bf16/fp16 CUDA tensors)"}});

} // namespace
} // namespace stepsim
