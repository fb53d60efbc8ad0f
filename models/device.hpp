// A GPU (or accelerator) from the device catalogue in configs/devices/NAME.json: datasheet
// figures, each with its source in the file, and the calibration of the kernel cost model.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace stepsim {

struct DeviceCalibration {
  // Best fraction of the dense peak a large GEMM reaches (maximum achievable matmul FLOP/s).
  double gemm_efficiency = 0.8;
  // K (and M, N) at which a GEMM reaches half its large-shape efficiency per tile.
  double gemm_half_k = 256;
  // Fraction of the peak a fused attention kernel reaches on long sequences.
  double attention_efficiency = 0.6;
  // Backward's efficiency as a fraction of forward's (FlashAttention's backward recomputes the
  // scores and runs five matmuls with more synchronisation): 1 where one figure serves both.
  double attention_backward_ratio = 1.0;
  // Head dimension at which a fused attention kernel reaches half its efficiency: its tiles are
  // head_dim deep, so a short head does less work per load (factor d / (d + this)); 0: none.
  double attention_half_head_dim = 0.0;
  // Fraction of the memory bandwidth that bandwidth-bound kernels reach.
  double memory_efficiency = 0.8;
  // Time a kernel costs beyond its work (launch and tail), seconds.
  double kernel_overhead_s = 4e-6;
  // Host (CPU) time the framework spends on each kernel it issues: its Python module code, the
  // PyTorch dispatcher and the launch call. The host issues a rank's kernels one after another
  // and runs ahead of the GPU, so this costs time only where the kernels are issued more slowly
  // than they run (small layers). Per framework and device: a framework's calibration file
  // (configs/calibration/DEVICE.FRAMEWORK.json) or simulation.host_launch_overhead; 0 (every
  // shipped device): the host always keeps ahead.
  double host_launch_s = 0;
  // Host time each training step outside its micro-batches that every GPU waits for: the train
  // loop's Python between one step's synchronising weight update and the next step's first kernel
  // (the optimizer's host side, logging, the data iterator, the garbage collector), whose
  // slowest rank holds back all others at the next collective. It cannot be read from a
  // framework's source; a framework's calibration file fits it on that framework's published
  // runs (tools/calibrate/fit_step_overhead.py), simulation.step_host_overhead replaces it.
  // 0: none.
  double step_host_s = 0;
  // gemm_efficiency at one precision where it differs from the common figure (a measured
  // calibration fits one per dtype: fp32 on CUDA cores is not tf32 or fp8 on tensor cores).
  std::map<std::string, double> gemm_efficiency_by_dtype;
  // attention_efficiency of one fused-attention implementation where it differs from the common
  // figure ("flash-attention-1", "flash-attention-2", "flash-attention-3", "cudnn"): on Hopper, FlashAttention-2
  // reaches about a third of the peak and cuDNN's fused attention about half.
  std::map<std::string, double> attention_efficiency_by_kernel;
  // attention_backward_ratio and attention_half_head_dim of one implementation where a
  // measurement fitted them for it (`stepsim calibrate fit` on rows whose file names the kernel
  // that ran them): the common ones describe the common figure's kernel, not every kernel.
  struct AttentionShape {
    double backward_ratio = 1.0;
    double half_head_dim  = 0.0;
  };
  std::map<std::string, AttentionShape> attention_shape_by_kernel;
  // Fraction by which compute kernels slow while a collective's kernels run beside them on the
  // same GPU (SMs and memory bandwidth taken by NCCL): compute takes 1/(1-f) times as long.
  double comm_compute_interference = 0;
  std::string source;

  double attention_efficiency_of(const std::string& implementation) const
  {
    auto it = attention_efficiency_by_kernel.find(implementation);
    return it == attention_efficiency_by_kernel.end() ? attention_efficiency : it->second;
  }

  // The backward share and head-dimension fill of one implementation: its own where fitted,
  // else the common ones.
  AttentionShape attention_shape_of(const std::string& implementation) const
  {
    auto it = attention_shape_by_kernel.find(implementation);
    return it == attention_shape_by_kernel.end() ? AttentionShape{attention_backward_ratio, attention_half_head_dim}
                                                 : it->second;
  }

  // The efficiency one attention kernel runs at: the implementation's figure, backward's share
  // of it, and the head dimension's fill.
  double attention_efficiency_of(const std::string& implementation, bool backward, double head_dim) const
  {
    const AttentionShape shape = attention_shape_of(implementation);
    return attention_efficiency_of(implementation) * (backward ? shape.backward_ratio : 1.0) *
           (head_dim / (head_dim + shape.half_head_dim));
  }

  double gemm_efficiency_at(const std::string& precision) const
  {
    auto it = gemm_efficiency_by_dtype.find(precision);
    return it == gemm_efficiency_by_dtype.end() ? gemm_efficiency : it->second;
  }
};

struct Device {
  std::string name;
  std::map<std::string, double> peak_flops; // dense, per precision ("fp32", "tf32", "fp16", "bf16", "fp8")
  double memory_bytes         = 0;
  double memory_bandwidth_Bps = 0;
  int sm_count                = 0;
  double l2_bytes             = 0;
  double nvlink_bandwidth_Bps = 0; // per direction, all links together
  double host_link_bandwidth_Bps = 0;
  // NVLink SHARP: the NVSwitch of this GPU's nodes reduces in the switch (third-generation
  // NVSwitch: H100, H200, B200), so NCCL can run all-reduces as NVLS (models/collectives/nvls.cpp).
  bool nvls = false;
  double tdp_w  = 0;
  double idle_w = 0;
  DeviceCalibration calibration;
  // The device whose calibration this one takes (the same silicon with other links or memory):
  // empty when it has its own.
  std::string calibration_of;
  // Precisions the device has no units for but its software runs anyway, each at the rate of
  // a precision it does have (bf16 on a V100 runs on the CUDA cores, at the fp32 rate). Only
  // what the device file states: a precision neither native nor listed is refused.
  std::map<std::string, std::string> emulated;

  // Whether the device runs a precision natively (a peak in its file) or by emulation.
  bool runs(const std::string& precision) const;
  // What it runs, for messages: "fp32, fp16 and bf16 (emulated at the fp32 rate)".
  std::string precisions_run() const;
  // Peak FLOP/s at a precision the device runs (an emulated one at its stand-in's rate); where it
  // runs neither, the next precision it has (only for internal callers such as FlashAttention's
  // bf16 inside an fp8 run: scenarios are checked with runs() first).
  double peak(const std::string& precision) const;
};

// The folder holding devices/, scenarios/ and the other shipped configs: $STEPSIM_CONFIG_DIR if
// set, else the source tree's configs/.
std::string config_dir();
std::vector<std::string> device_names();
// The catalogue name a device is asked for by: itself, or the catalogue device whose name or
// "product_names" (as NVML prints them: nvidia-smi, torch.cuda.get_device_name, the nccl-tests
// header) it is, whatever the case, separators and vendor word; an unknown name comes back as it is.
std::string catalogue_device_name(const std::string& name);
// The key names are compared by: lower case, one space for each run of spaces, hyphens and
// underscores, without a leading "NVIDIA", "Tesla", "GeForce", "AMD" or "Instinct".
std::string device_name_key(const std::string& name);
// Loads configs/devices/NAME.json and, when present, configs/calibration/NAME.json. An unknown name
// is an InputError at `path` that lists the closest names.
Device load_device(const std::string& name, const std::string& path);
// The same where a training framework runs on it: configs/calibration/NAME.FRAMEWORK.json, when
// present, is laid over the device's calibration. It holds what a program (tools/calibrate/
// fit_runs.py --framework) fitted on that framework's published runs on the device: the GEMM
// throughput and the attention kernel its software stack reached there.
Device load_device(const std::string& name, const std::string& framework, const std::string& path);

} // namespace stepsim
