// torchgpipe (Kim et al. 2020): GPipe on one host, micro-batches through nn.Sequential partitions;
// no data parallelism of its own.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

FrameworkProfile torchgpipe()
{
  FrameworkProfile p;
  p.attention           = "standard";
  p.overlap_grad_reduce = true;
  p.bucket_bytes        = 25e6; // DDP's bucket_cap_mb
  p.context_bytes       = frameworks::kPyTorchCudaContextBytes;
  p.sources = {"torchgpipe/gpipe.py (GPipe: partitions of an nn.Sequential, checkpoint='except_last'); data "
               "parallelism, if any, is PyTorch DDP's (torch/nn/parallel/distributed.py, bucket_cap_mb=25)"};
  return p;
}

const bool registered =
    FrameworkRegistry::add("torchgpipe", "torchgpipe: GPipe over nn.Sequential partitions on one host", torchgpipe());

} // namespace
} // namespace stepsim
