// The model as the lowering walks it, as a model kind (workloads/models/model_kind.hpp) plans
// it: per virtual stage, a list of layers; a layer is one or more blocks, each a compute work
// that a tensor-parallel collective may follow. A transformer's first virtual stage starts with
// the embedding and its last ends with the head; a CNN's layers are its modules. Work indices
// point into Workload::works; -1 = none. Plain data: the kind fills it, workloads/lower.cpp turns
// it into tasks without asking which kind made it.
#pragma once

#include "sim/core/task_graph.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/parallel/context_parallel.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace stepsim {

struct Block {
  int forward = -1, backward = -1, recompute = -1;
  int backward_input = -1, backward_weight = -1; // schedules that split backward (ZB-H1)
  bool reduce_forward = false, reduce_backward = false; // tensor-parallel collective after it
  // torchao's float8 tensor parallelism: the block's sequence-parallel all-gathers carry FP8, one
  // byte an element (the input cast before it is gathered, the output gradient cast to e5m2
  // before it is); its reduce-scatters stay 16-bit.
  bool float8_gather = false;
};

struct Layer {
  std::vector<Block> blocks;
  double parameters = 0;   // per rank; their gradients join the data-parallel buckets
  double expert_parameters = 0; // per rank, a MoE layer's experts: reduced over their own group
  bool recomputed  = false; // full recompute re-runs its forward before its backward
  // The dense parameters per rank by tensor (weights, biases, norms), for a framework that
  // gathers and reduces them tensor by tensor (FrameworkProfile::gather_per_tensor); empty: the
  // layer's parameters are one tensor.
  std::vector<double> tensors = {};
  // Bytes per parameter as ZeRO-3 / FSDP gathers them; 0: the run's (DataParallelPlan::
  // parameter_bytes). torchao's float8 all-gather sends a block's linear weights in FP8.
  double gathered_element_bytes = 0;
  // The layers its backward rebuilds first, counted back from itself: 1, itself; a uniform group's
  // last layer, the group (training.recompute_group); 0, a layer its group's last one rebuilds.
  int recompute_span = 1;
};

// Blocks whose lowering is more than one compute task between tensor-parallel collectives, keyed
// by the work that stands for them: context-parallel ring attention (workloads/parallel/context_parallel.hpp,
// inside the tensor collectives) and a MoE layer (workloads/models/moe.hpp, with its own).
enum class BlockKind : uint8_t { Dense, RingForward, RingBackward, RingBackwardInput, MoeForward, MoeBackward, MoeBackwardInput };

struct VirtualStage {
  std::vector<Layer> layers;
  double output_bytes = 0; // per rank: the activation sent to the next virtual stage
};

struct ModelPlan {
  std::vector<VirtualStage> stages; // pipeline × virtual_stages of them, in virtual-stage order
  // Per work (index into Workload::works), the custom block it stands for; shorter than the works
  // when the last ones are all Dense.
  std::vector<BlockKind> block_kinds;
  // Context-parallel ring attention (ring.context > 1; the lowering sets the neighbours per rank)
  // and the work of the attention's weight gradients, which need no ring.
  RingAttention ring;
  int attention_backward_weight = -1;
  // MoE layers (the lowering sets the groups per rank); false for a dense model.
  bool moe_layers = false;
  MoeBlock moe;
  // Parameters per rank of tied input and output embeddings, whose gradients the first and last
  // pipeline stages all-reduce with each other; 0 when the model ties none.
  double tied_embedding_parameters = 0;
};

// Adds a work of these kernels and returns its index; -1 (none) for no kernels.
inline int add_work(std::vector<Work>& works, std::string name, std::vector<Kernel> kernels)
{
  if (kernels.empty())
    return -1;
  works.push_back(Work{std::move(name), std::move(kernels), 0});
  return static_cast<int>(works.size() - 1);
}

} // namespace stepsim
