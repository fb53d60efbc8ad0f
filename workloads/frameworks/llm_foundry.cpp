// MosaicML llm-foundry (Composer on PyTorch FSDP) as its MPT benchmarks run: FSDP FULL_SHARD and
// FlashAttention.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "llm-foundry", "MosaicML llm-foundry: Composer on PyTorch FSDP with FlashAttention",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_parameters = 0,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .attention_kernel = "flash-attention-2",
        .sources = {"attention_kernel: llmfoundry/models/layers/attention.py (flash_attn_fn: flash_attn's "
                    "flash_attn_varlen_func, FlashAttention-2 from flash-attn 2.x)",
                    "attention: scripts/train/yamls/pretrain/mpt-7b.yaml (attn_config.attn_impl flash)",
                    "overlap_grad_reduce: fsdp_config FULL_SHARD through PyTorch FSDP's post-backward hooks"}});

} // namespace
} // namespace stepsim
