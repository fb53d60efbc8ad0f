// The CUDA context every PyTorch-based framework holds on each GPU before its first tensor.
#pragma once

namespace stepsim::frameworks {

// 723 MiB: the device memory a PyTorch process holds after its first CUDA call, before any
// tensor of size (x = torch.randn(1).cuda() takes the process from 0 to 723 MiB; PyTorch forum,
// "What is the reason for pytorch's GPU memory floor?",
// https://discuss.pytorch.org/t/what-is-the-reason-for-pytorchs-gpu-memory-floor/73021). CUDA's
// lazy module loading (11.7+) lowers it on newer stacks; one figure until a device measures it.
inline constexpr double kPyTorchCudaContextBytes = 723.0 * 1024 * 1024;

} // namespace stepsim::frameworks
