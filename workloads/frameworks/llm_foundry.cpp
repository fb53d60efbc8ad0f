// MosaicML llm-foundry (Composer on PyTorch FSDP) as its published MPT benchmark tables ran it
// (2023): FSDP FULL_SHARD and first-generation fused attention. What that stack reached on the
// H100 and the A100 is fitted on those tables (configs/calibration/DEVICE.llm-foundry.json); a run
// on today's llm-foundry (FlashAttention-2, newer PyTorch) sets training.attention_kernel and is
// not what those figures describe.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "llm-foundry", "MosaicML llm-foundry as its published MPT tables ran it (2023): PyTorch FSDP, FlashAttention 1",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_parameters = 0,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .attention_kernel = "flash-attention-1",
        .sources = {"attention_kernel: scripts/train/benchmarking/README.md at 061f2c7c (the tables' runs: Composer "
                    "on PyTorch 1.13, by its note 'Update tables with torch 2.0 after next Composer release') with "
                    "scripts/train/yamls/pretrain/mpt-*.yaml (attn_impl triton: "
                    "llmfoundry/models/layers/flash_attn_triton.py; or flash: flash-attn 1.x); later releases call "
                    "FlashAttention-2 (llmfoundry/models/layers/attention.py, flash_attn_varlen_func)",
                    "attention: scripts/train/yamls/pretrain/mpt-7b.yaml (attn_config.attn_impl flash)",
                    "overlap_grad_reduce: fsdp_config FULL_SHARD through PyTorch FSDP's post-backward hooks"}});

} // namespace
} // namespace stepsim
