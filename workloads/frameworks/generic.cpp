// "generic": the default profile, for a scenario that names no framework. It keeps the defaults
// stepsim had before profiles existed, which are PyTorch's own: fused attention (SDPA), and
// DistributedDataParallel's gradient buckets all-reduced as backward fills them.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    kDefaultFramework, "PyTorch defaults: fused attention, DDP buckets reduced during backward",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_bytes = 100e6, // stepsim's bucket before profiles: 25e6 fp32 gradients
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"overlap_grad_reduce, bucket: torch/nn/parallel/distributed.py (DistributedDataParallel, "
                    "buckets reduced from autograd hooks during backward)",
                    "attention: torch.nn.functional.scaled_dot_product_attention (fused kernels)"}});

} // namespace
} // namespace stepsim
