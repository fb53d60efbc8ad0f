// torchgpipe (Kim et al. 2020): GPipe on one host, micro-batches through nn.Sequential partitions;
// no data parallelism of its own.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "torchgpipe", "torchgpipe: GPipe over nn.Sequential partitions on one host",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = true,
        .bucket_bytes = 25e6, // DDP's bucket_cap_mb
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"torchgpipe/gpipe.py (GPipe: partitions of an nn.Sequential, checkpoint='except_last'); data "
                    "parallelism, if any, is PyTorch DDP's (torch/nn/parallel/distributed.py, bucket_cap_mb=25)"}});

} // namespace
} // namespace stepsim
