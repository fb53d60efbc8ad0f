// MosaicML llm-foundry (Composer on PyTorch FSDP) as its MPT benchmarks run: FSDP FULL_SHARD and
// FlashAttention.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

FrameworkProfile llm_foundry()
{
  FrameworkProfile p;
  p.attention           = "flash";
  p.overlap_grad_reduce = true;
  p.bucket_parameters   = 0;
  p.context_bytes       = frameworks::kPyTorchCudaContextBytes;
  p.sources = {"attention: scripts/train/yamls/pretrain/mpt-7b.yaml (attn_config.attn_impl flash)",
               "overlap_grad_reduce: fsdp_config FULL_SHARD through PyTorch FSDP's post-backward hooks"};
  return p;
}

const bool registered = FrameworkRegistry::add(
    "llm-foundry", "MosaicML llm-foundry: Composer on PyTorch FSDP with FlashAttention", llm_foundry());

} // namespace
} // namespace stepsim
