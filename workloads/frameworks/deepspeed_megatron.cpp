// Megatron-DeepSpeed (MT-NLG, BLOOM): Megatron's layers under DeepSpeed's engine and pipeline, ZeRO
// stage 1 or 2 for the data-parallel part. DeepSpeed reduces gradients after backward unless
// overlap_comm is set, in buckets of reduce_bucket_size elements.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "deepspeed-megatron", "Megatron-DeepSpeed: DeepSpeed pipeline (blocking sends) and ZeRO 1/2, gradients reduced after backward",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = false,
        .bucket_parameters = 5e8,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .pipeline_send_blocks_compute = true,
        // bf16: hp_grad += lp_grad in fp32 for every parameter after each micro-batch (read 2 + 4
        // bytes, write 4); fp16: autograd's AccumulateGrad adds each micro-batch's fp16 gradient
        // into param.grad (read 2 + 2, write 2).
        .gradient_accumulation_bytes_per_parameter = {{"bf16", 10}, {"fp16", 6}},
        .sources = {"pipeline_send_blocks_compute: deepspeed/runtime/pipe/p2p.py (send(): asserts async_op == "
                    "False and calls dist.send, whose NCCL work makes the compute stream wait), called from "
                    "deepspeed/runtime/pipe/engine.py (_exec_send_activations, _exec_send_grads)",
                    "gradient_accumulation: deepspeed/runtime/pipe/engine.py (_exec_backward_pass: "
                    "optimizer.update_hp_grads(clear_lp_grads=False) after every micro-batch with bf16), "
                    "deepspeed/runtime/bf16_optimizer.py (update_hp_grads: hp_grad.data.add_(lp.grad.data.to(hp_grad.dtype)))",
                    "overlap_grad_reduce, bucket: deepspeed/runtime/zero/config.py (overlap_comm defaults to "
                    "stage == 3; "
                    "reduce_bucket_size 5e8 elements)",
                    "attention: megatron/model/fused_softmax.py in Megatron-DeepSpeed (FusedScaleMaskSoftmax)"}});

} // namespace
} // namespace stepsim
