// PyTorch FullyShardedDataParallel: each wrapped unit all-gathered before use and its gradients
// reduce-scattered from its post-backward hook, so the reduction overlaps the rest of backward.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "pytorch-fsdp", "PyTorch FSDP: per-unit gathers, reduce-scatter during backward, fused attention",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_parameters = 0, // one reduce-scatter per wrapped unit, not buckets
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"overlap_grad_reduce: torch/distributed/fsdp/_runtime_utils.py (_post_backward_hook "
                    "reduce-scatters "
                    "each unit's gradients as backward reaches it; backward_prefetch BACKWARD_PRE)",
                    "attention: torch.nn.functional.scaled_dot_product_attention"}});

} // namespace
} // namespace stepsim
