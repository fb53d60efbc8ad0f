// DeepSpeed ZeRO stage 3 as of 2021 (v0.3 to v0.5, the SC'21 comparison's): parameters gathered
// per module by hooks, synchronously, and gradients reduce-scattered as backward produces them
// (overlap_comm is on by default at stage 3).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "deepspeed-zero3", "DeepSpeed ZeRO-3: parameters gathered per module, gradients reduce-scattered during backward",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = true,
        .bucket_parameters = 5e8,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .parameter_gather_blocks_compute = true,
        .sources = {"parameter_gather_blocks_compute: deepspeed/runtime/zero/stage3.py (fetch_sub_module, 'This call "
                    "is blocking'; _synchronize_communication waits on every handle, then comm_stream.synchronize() and "
                    "torch.cuda.synchronize()) and deepspeed/runtime/zero/partition_parameters.py (_allgather_param: "
                    "torch.cuda.synchronize() before each torch.distributed.all_gather), v0.3.x; PR #1188: 'the async "
                    "version is not async at all, because each all_gather calls torch.cuda.synchronize()'",
                    "overlap_grad_reduce, bucket: deepspeed/runtime/zero/config.py (overlap_comm defaults to "
                    "stage == 3; "
                    "reduce_bucket_size 5e8 elements; stage3_prefetch_bucket_size 5e7 elements)",
                    "attention: the Megatron layers it ran (Narayanan et al. 2021, Table 2)"}});

} // namespace
} // namespace stepsim
