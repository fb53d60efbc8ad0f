// DeepSpeed ZeRO stage 3 as of 2021 (v0.3 to v0.5, the SC'21 comparison's): parameters gathered
// tensor by tensor by hooks on every module, synchronously, with PyTorch's list-form all_gather;
// gradients reduce-scattered tensor by tensor as backward produces them (overlap_comm is on by
// default at stage 3). Under full recompute the recomputed forward fetches and releases a layer's
// parameters, and its backward fetches them again.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "deepspeed-zero3", "DeepSpeed ZeRO-3 (2021): parameters gathered tensor by tensor, synchronously; gradients reduce-scattered during backward",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = true,
        .bucket_parameters = 5e8,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .parameter_gather_blocks_compute = true,
        .gather_per_tensor               = true,
        .persistent_parameter_elements   = 1e5,
        .gather_again_after_recompute    = true,
        .per_rank_copies                 = true,
        .gather_calls_per_rank           = 4,
        .scatter_calls_per_rank          = 4,
        .sources = {"gather_per_tensor: deepspeed/runtime/zero/partition_parameters.py (_all_gather: one "
                    "_allgather_param per parameter of the module being fetched; _reduce_scatter_gradients: one "
                    "_reduce_scatter_gradient per parameter), v0.3.x-v0.5",
                    "persistent_parameter_elements: deepspeed/runtime/zero/config.py (stage3_param_persistence_threshold, "
                    "default 1e5 elements: smaller parameters are not partitioned), v0.3.13+",
                    "gather_again_after_recompute: deepspeed/runtime/zero/stage3.py (pre_sub_module_forward_function "
                    "fetches, post_sub_module_forward_function releases, pre_sub_module_backward_function fetches: "
                    "the checkpointed layer's recomputed forward runs the forward hooks again)",
                    "per_rank_copies: partition_parameters.py (_allgather_param: torch.distributed.all_gather over a "
                    "list of world_size narrowed partitions; _reduce_scatter_gradient: torch.distributed.reduce_scatter "
                    "over a list of world_size narrowed gradient views) and torch/csrc/distributed/c10d/"
                    "ProcessGroupNCCL.cpp (allgather: 'Copy the flattened output tensors to the outputs', one copy_ per "
                    "list entry; reduce_scatter: each input copied into the flattened buffer)",
                    "gather_calls_per_rank: partition_parameters.py (_allgather_param: flat_tensor.narrow and "
                    "torch.distributed.get_rank(group=...) for each of world_size partitions) and ProcessGroupNCCL.cpp "
                    "(allgather: recordStream, outputFlattened[i][j] and copy_ for each); scatter_calls_per_rank: "
                    "partition_parameters.py (_reduce_scatter_gradient: param.grad.view(-1).narrow for each rank) and "
                    "ProcessGroupNCCL.cpp (reduce_scatter: inputFlattened[i][j] and copy_ for each), PyTorch 1.8; "
                    "recordStream, a lookup under the allocator's lock, is not counted",
                    "parameter_gather_blocks_compute: deepspeed/runtime/zero/stage3.py (fetch_sub_module, 'This call "
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
