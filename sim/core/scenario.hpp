// The scenario: what a user asks stepsim to predict. Plain data, already checked and converted
// to SI units (bytes, seconds, bytes per second) by parse_scenario (sim/input/scenario_parse.hpp); nothing downstream re-reads
// the JSON.
#pragma once

#include "sim/core/federated.hpp"
#include "sim/core/framework.hpp"
#include "sim/core/kernel.hpp"
#include "sim/core/nccl_env.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace stepsim {

// One entry of model.layers (architecture "layers"; workloads/models/layer_list.hpp), either by figures
// or by kernels. Figures and sizes are per sample; kernels are those of one micro-batch
// (training.micro_batch_size samples), since stepsim cannot tell which dimension of a shape is
// the batch.
struct LayerSpec {
  std::string name;
  int repeat = 1; // the same layer this many times in a row
  double parameters       = 0;  // count; from parameter_bytes at the training precision when given so
  double parameter_bytes  = -1; // -1: given as a count
  double activation_bytes = 0;  // the output sent on when a stage boundary follows the layer
  double saved_bytes      = 0;  // what the layer keeps for its backward
  bool by_kernels         = false;
  // Figures (by_kernels false). backward_weight_flops < 0: the backward was given as one figure
  // (backward_flops, held in backward_input_flops), which a split-backward schedule cannot split.
  double forward_flops = 0, backward_input_flops = 0, backward_weight_flops = -1;
  double forward_memory_bytes = 0, backward_input_memory_bytes = 0, backward_weight_memory_bytes = 0;
  // Kernels (by_kernels true); element bytes are set by the training precision when lowered.
  std::vector<Kernel> forward, backward_input, backward_weight;
  // The samples the kernels were written for (kernels.micro_batch_size): their shapes cannot be
  // rescaled, so the scenario's micro-batch must equal it.
  long long kernels_micro_batch = 0;
};

struct ModelSpec {
  std::string name;
  int num_layers          = 0;
  int hidden_size         = 0;
  int num_attention_heads = 0;
  int num_query_groups    = 0; // grouped-query attention; equal to the heads for plain multi-head
  // Each attention head's width (Megatron's --kv-channels, HuggingFace's head_dim); 0 = hidden_size
  // / num_attention_heads. Qwen3, Gemma and GPT-OSS set another: Qwen3-30B-A3B's 32 heads of 128
  // over a hidden size of 2048 make the query and the attention's output 4096 wide.
  int head_dim            = 0;
  // Multi-head latent attention (DeepSeek-V2 and V3; Megatron-Core's --multi-latent-attention;
  // workloads/models/latent_attention.hpp) where kv_lora_rank > 0: keys and values are projected
  // up from a kv_lora_rank-wide latent (plus a qk_rope_head_dim-wide rotary key shared by the
  // heads), queries from a q_lora_rank-wide one (0: from the hidden state directly). Each head's
  // query and key are head_dim (DeepSeek's qk_nope_head_dim, Megatron's --qk-head-dim) +
  // qk_rope_head_dim wide, its value v_head_dim (0: head_dim).
  int q_lora_rank      = 0;
  int kv_lora_rank     = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim       = 0;
  // Sliding-window attention (Mistral 7B v0.1, Gemma 2 and 3, GPT-OSS): a query attends to at
  // most sliding_window keys, itself and the ones before it (HuggingFace's sliding_window;
  // Megatron-Core's --window-size L,0 is L + 1 of them); 0 = the whole causal sequence.
  // window_attn_skip_freq (Megatron-Core's): every N-th layer (the N-th, 2N-th, ...) attends over
  // the whole sequence, the others in the window (GPT-OSS and Gemma 2 alternate, N = 2; Gemma 3,
  // N = 6); 0 = every layer in the window.
  int sliding_window        = 0;
  int window_attn_skip_freq = 0;
  int ffn_hidden_size     = 0;
  int seq_length          = 0;
  int vocab_size          = 0;
  std::string mlp         = "gelu";      // gelu | swiglu
  std::string norm        = "layernorm"; // layernorm | rmsnorm
  bool tied_embeddings    = true;
  // Hidden (residual) dropout probability: Megatron-LM's --hidden-dropout default 0.1
  // (megatron/training/arguments.py). 0 is a model trained without it (Llama: the reference
  // model.py and HuggingFace's modeling_llama.py have no residual dropout), which keeps no masks
  // and adds its residuals without one.
  double dropout          = 0.1;
  int num_experts         = 0; // 0 = dense
  int moe_top_k           = 2;
  // Tokens each expert processes, as a multiple of the balanced share tokens·top_k/experts
  // (Megatron pads each expert's input to this capacity; 1.0 = perfectly balanced routing).
  double moe_capacity_factor = 1.0;
  int moe_ffn_hidden_size    = 0; // each expert's FFN width; 0 = ffn_hidden_size
  // Shared experts (DeepSeek-MoE, Qwen2-MoE; workloads/models/moe.hpp): dense FFNs that every
  // token goes through beside its top_k routed experts; 0 = none. Each one's FFN width (0 = the
  // routed experts' width), and Qwen2-MoE's sigmoid gate (hidden → 1) on their output.
  int moe_shared_experts                = 0;
  int moe_shared_expert_ffn_hidden_size = 0;
  bool moe_shared_expert_gate           = false;
  // The layers of a mixture of experts that keep a dense MLP, ffn_hidden_size wide
  // (moe_layer() below): the first first_dense_layers (DeepSeek-V2/V3's first_k_dense_replace),
  // and beyond them each layer whose index from 0 moe_layer_freq does not divide (Megatron-Core's
  // integer --moe-layer-freq, DeepSeek's moe_layer_freq). moe_layer_pattern, one entry a layer
  // (1 MoE, 0 dense), is Megatron-Core's list form of --moe-layer-freq and replaces both; empty =
  // none given.
  int first_dense_layers = 0;
  int moe_layer_freq     = 1;
  std::vector<int> moe_layer_pattern;
  // "transformer", a built-in CNN ("resnet50", "resnet101", "vgg16"; workloads/models/cnn.hpp), which
  // uses only the two fields below and leaves the transformer's sizes at 0, or "layers": the
  // list in `layers` (with seq_length as tokens per sample, 0 for none, and input_bytes).
  std::string architecture = "transformer";
  int image_size           = 224; // square input images, pixels per side
  int num_classes          = 1000;
  std::vector<LayerSpec> layers;
  double input_bytes = 0; // per sample, what the first layer reads (kept under full recompute)
  // Sizes that only one model kind has, read and checked by that kind (workloads/models/), by
  // their field names under `model`, so that a new kind needs no field here.
  std::map<std::string, double> kind_fields;
};

// A head's width: head_dim, else hidden_size / num_attention_heads (which then divides).
inline double attention_head_dim(const ModelSpec& m)
{
  return m.head_dim > 0 ? double(m.head_dim) : double(m.hidden_size) / m.num_attention_heads;
}
// The query's (and the attention output's) width, heads × head_dim: the hidden size unless
// head_dim says otherwise (Megatron's query_projection_size = kv_channels × num_attention_heads).
inline double attention_width(const ModelSpec& m)
{
  return m.head_dim > 0 ? double(m.head_dim) * m.num_attention_heads : double(m.hidden_size);
}
// The key's (and the value's) width, query groups × head_dim (kv_projection_size).
inline double kv_width(const ModelSpec& m)
{
  return m.head_dim > 0 ? double(m.head_dim) * m.num_query_groups
                        : double(m.hidden_size) / m.num_attention_heads * m.num_query_groups;
}

// Layer `index` (from 0) attends in the sliding window (ModelSpec::sliding_window), as
// Megatron-Core picks its layers: window_attn_skip_freq N makes layer numbers (index + 1) that N
// divides attend over the whole sequence (megatron/core/transformer/utils.py,
// is_layer_window_attention, layer numbers from 1).
inline bool windowed_layer(const ModelSpec& m, long long index)
{
  return m.sliding_window > 0 && (m.window_attn_skip_freq == 0 || (index + 1) % m.window_attn_skip_freq != 0);
}

// Layer `index` (from 0) of a mixture of experts routes its tokens to experts; the others keep a
// dense MLP (ModelSpec::first_dense_layers, moe_layer_freq, moe_layer_pattern). As Megatron-Core
// builds its layers (megatron/core/models/gpt/gpt_layer_specs.py, get_moe_layer_pattern: "1 if
// (i % config.moe_layer_freq == 0)", or the list as given) and DeepSeek's modeling_deepseek.py
// (DeepseekV3DecoderLayer: MoE where layer_idx >= first_k_dense_replace and layer_idx %
// moe_layer_freq == 0). False for every layer of a dense model.
inline bool moe_layer(const ModelSpec& m, long long index)
{
  if (m.num_experts <= 0)
    return false;
  if (!m.moe_layer_pattern.empty())
    return index >= 0 && index < static_cast<long long>(m.moe_layer_pattern.size()) &&
           m.moe_layer_pattern[static_cast<size_t>(index)] != 0;
  return index >= m.first_dense_layers && index % m.moe_layer_freq == 0;
}
// How many of the model's layers are MoE layers.
inline long long moe_layer_count(const ModelSpec& m)
{
  long long n = 0;
  for (long long i = 0; i < m.num_layers; ++i)
    n += moe_layer(m, i) ? 1 : 0;
  return n;
}

// training.input: the data loader that feeds each data-parallel replica, as PyTorch's DataLoader
// runs it (sim/host_side.cpp, sim/engine/input_replay.hpp). Off unless given.
struct InputPipelineSpec {
  bool enabled        = false;
  int workers         = 2; // worker processes per loading rank (DataLoader num_workers)
  int prefetch_factor = 2; // batches each worker keeps in flight (DataLoader's default, 2)
  double sample_bytes = 0; // read from the source per sample
  double decode_cpu_s = 0; // CPU seconds per sample: decode, augment, collate
  std::string source  = "nvme"; // nvme: the node's local disk; storage: platform.storage, shared by all nodes
  double device_bytes = -1;     // copied to the GPU per sample; -1: derived from the model
};

// training.checkpoint: the model and optimizer state written every `every_steps` steps
// (sim/host_side.cpp, sim/engine/checkpoint_replay.hpp). every_steps 0: none.
struct CheckpointSpec {
  int every_steps     = 0;
  std::string mode    = "sync";    // sync: training waits for the write; async: for a copy to host memory
  std::string layout  = "sharded"; // sharded: every rank writes what it holds; gathered: one rank writes all
};

struct TrainingSpec {
  long long global_batch_size = 0;
  long long micro_batch_size  = 1;
  std::string precision       = "bf16";  // fp32 | tf32 | fp16 | bf16 | fp8
  std::string recompute       = "none";  // none | selective | full
  // Which layers a "full" recompute rebuilds (Scenario::layer_recomputed); the defaults, all:
  // every k-th layer of the model, counted from the first, as torchtitan's checkpoint_wrapper
  // counts its transformer blocks (activation_checkpoint.selective_ac_option = k, "selective
  // layer"); or the first N layers of each pipeline chunk, as Megatron's --recompute-method block
  // --recompute-num-layers N (0: every layer).
  int recompute_every      = 1;
  int recompute_num_layers = 0;
  // Consecutive layers one checkpoint covers (Megatron's --recompute-method uniform
  // --recompute-num-layers N): each group of N layers of a chunk keeps only its first layer's
  // input, and rebuilds all N at once before their backward. 1: one checkpoint per layer.
  int recompute_group = 1;
  std::string attention       = "flash"; // flash (fused) | standard (scores materialised)
  std::string optimizer       = "adam";
  // What gradients are accumulated and reduced in: "fp32", or 16-bit ("bf16", "fp16"). Megatron
  // turns on --accumulate-allreduce-grads-in-fp32 for bf16; FSDP takes MixedPrecision's
  // reduce_dtype. Empty: the training precision's own size (what a scenario built in code gets).
  std::string gradient_precision;
  // The fused-attention implementation (flash attention only): "flash-attention-1",
  // "flash-attention-2", "flash-attention-3", "cudnn", or empty for the device's common figure;
  // the profile's default.
  std::string attention_kernel;
  // The framework profile that fills in what the scenario leaves to the framework
  // (sim/core/framework.hpp, workloads/frameworks/).
  std::string framework = kDefaultFramework;
  // torch.compile over a model the framework otherwise runs op by op (FrameworkProfile::eager_ops):
  // Inductor fuses each chain of elementwise ops into one kernel (torchtitan's training.compile).
  bool compile = false;
  InputPipelineSpec input;
  CheckpointSpec checkpoint;
  // A round of federated learning instead of a data-centre step (sim/core/federated.hpp).
  FederatedSpec federated;
};

struct ParallelSpec {
  int tensor             = 1;
  int pipeline           = 1;
  int data               = 1;
  int context            = 1;
  // How attention runs over the `context` ranks (workloads/parallel/context_parallel.hpp,
  // sim/input/context_parse.hpp): "ring" (K/V blocks passed around a ring, Megatron-LM's p2p),
  // "ulysses" (DeepSpeed-Ulysses: all-to-alls turn sequence shards into head shards around the
  // attention), "usp" (Ulysses inside groups of ulysses_degree ranks, the ring across them) or
  // "all_gather" (K and V all-gathered over the context ranks before attention, dK and dV
  // reduce-scattered after it: Llama 3's context parallelism, Transformer Engine's
  // cp_comm_type "all_gather"). ulysses_degree is the size of the all-to-all groups: 1 for ring
  // and all_gather, context for ulysses, as read for usp; the ring then has context /
  // ulysses_degree ranks.
  std::string context_attention = "ring";
  int ulysses_degree            = 1;
  int expert             = 1;
  // The tensor-parallel size of the experts (Megatron-Core's --expert-tensor-parallel-size): each
  // expert's FFN is split over this many ranks, and the expert-parallel groups are carved out of
  // tensor × context × data / expert_tensor ranks; 0 = the dense layers' tensor size (Megatron's
  // default). A MoE layer's tokens are then all-gathered and reduce-scattered over the expert
  // tensor group, not the dense one (workloads/models/moe.hpp).
  int expert_tensor      = 0;
  int virtual_stages     = 1;
  std::string schedule   = "1f1b";
  bool sequence_parallel = false;
  // The sequence-parallel all-gathers and reduce-scatters cut into chunks that the GEMMs beside
  // them consume or produce (Megatron-Core's --tp-comm-overlap through Transformer Engine's
  // userbuffers, torchtitan's async tensor parallelism); the profile's default
  // (FrameworkProfile::tensor_comm_overlap, workloads/lower.cpp overlapped_block).
  bool tensor_comm_overlap = false;
  int zero_stage         = 0;
  double bucket_bytes    = 25e6 * 4; // gradient bucket for the data-parallel all-reduce
  bool overlap_grad_reduce = true;
  // The distributed optimizer's gather of the updated weights, bucket by bucket as the next
  // forward first reaches them instead of all at once after the step (Megatron-Core's
  // --overlap-param-gather; zero_stage 1 or 2).
  bool overlap_param_gather = false;
  // With overlap_param_gather: every pipeline stage dispatches all of its chunks' gathers when
  // the step starts, instead of each bucket's from the forward hook of the one before
  // (Megatron-Core's align_param_gather: on in Megatron-LM's arguments since --no-align-param-gather
  // replaced --delay-param-gather, off by default, in August 2024; the published Megatron-Core
  // 0.8 runs of July 2024 had it off).
  bool align_param_gather = false;
  // Layers of each virtual stage (pipeline × virtual_stages entries, in virtual-stage order);
  // empty = the same number everywhere. Llama 3 ran 126 layers on 16 stages with one fewer on
  // the first and the last.
  std::vector<int> stage_layers;
  // "stage_layers": "auto": the driver fills stage_layers by each stage's device speed
  // (heterogeneous pipelines; topologies/placement.hpp).
  bool stage_layers_auto = false;
  // ZeRO-3 / FSDP (zero_stage 3, parallelism.fsdp): parameters sharded over the data-parallel
  // group and all-gathered per unit (one transformer layer) before use, the next unit's gather
  // issued when a unit's compute starts; gradients reduce-scattered per unit.
  // reshard_after_forward: FULL_SHARD / ZeRO-3 (gather again for backward); false keeps the
  // stage's gathered parameters until backward (SHARD_GRAD_OP, as Llama 3 trained).
  bool reshard_after_forward = true;
  // FCDP: gathered parameters are cached in host memory after their first gather and reloaded
  // over the host link instead of all-gathered again.
  bool host_cache = false;
  // torchao's FSDP float8 all-gather (torchtitan's float8.enable_fsdp_float8_all_gather): the
  // float8 linear layers' weights are cast before they are gathered and travel at one byte each;
  // the other parameters (norms, the embedding, the output layer) at the training's 16 bits.
  bool float8_all_gather = false;
  // ZeRO-Offload: gradients go to the host, the optimizer steps on the CPU, the updated
  // low-precision weights come back; optimizer states leave GPU memory.
  bool offload_optimizer = false;
  // How ranks are numbered from the plan's coordinates, innermost first (Megatron's RankGenerator
  // order; sim/core/rank_order.hpp).
  std::string rank_order = "tp-cp-ep-dp-pp";
};

// The experts' tensor-parallel size (ParallelSpec::expert_tensor, else the dense layers').
inline int expert_tensor_size(const ParallelSpec& p) { return p.expert_tensor > 0 ? p.expert_tensor : p.tensor; }

// The inside of a node; `type` names a builder in topologies/nodes/*.cpp (NodeTypeRegistry).
struct IntraNodeSpec {
  std::string type     = "nvswitch";
  double bandwidth_Bps = 300e9; // per direction: per GPU (switch types), per NVLink (dgx1_cube_mesh),
                                // per PCIe x16 link (pcie, pcie_switch), per mesh link (chiplet_mesh)
  double latency_s     = 1e-6;  // GPU to GPU over one hop (one mesh link for chiplet_mesh)
  int gpus_per_switch  = 2;     // pcie_switch: GPUs (and one NIC) under each PCIe switch
  std::vector<int> mesh;        // chiplet_mesh: {rows, columns} of chiplets, rows x columns = gpus_per_node
  // Whether NCCL may reduce in the NVSwitch (NVLS inside a node, NVLS-tree across nodes) where
  // the switch and the GPU can: false as under NCCL_NVLS_ENABLE=0, which some clouds' NCCL
  // profiles set (configs/platforms/gcp-a3-mega.json).
  bool nvls = true;
  // Whether RCCL may run its MSCCL programs on an AMD node whose GPUs are joined pairwise
  // (xgmi_mesh): an 8-GPU all-reduce of up to 16 MiB as an all-pairs exchange
  // (models/collectives/msccl.cpp). On by default, as RCCL_MSCCL_ENABLE is; false as under
  // RCCL_MSCCL_ENABLE=0, which AMD's Megatron-LM image for ROCm sets.
  bool msccl = true;
};

// The node's CPU host ("nodeN-cpu"): its memory, and the host (PCIe) link of each GPU to it.
struct HostSpec {
  double link_bandwidth_Bps   = 0;     // per GPU, per direction; 0 = the device's host_link_bandwidth
  double link_latency_s       = 1e-6;  // GPU to host memory
  double memory_bandwidth_Bps = 204.8e9; // all GPUs' host traffic together: 8 channels of DDR4-3200
  // For training.input: the node's CPU cores (0 = not given) and its local NVMe disk.
  int cpu_cores             = 0;
  double nvme_bandwidth_Bps = 0; // read bandwidth of the node's local disks together; 0 = not given
  double nvme_latency_s     = 100e-6;
  // The vendor of the node's CPUs: NCCL's tuner caps LL's bandwidth across nodes by it (AMD
  // hosts get lower caps; v2.20.3 src/graph/tuning.cc llMaxBws). "intel", "amd", "arm" or
  // "other"; every vendor but AMD takes NCCL's first row, so "intel" is the default.
  std::string cpu_vendor = "intel";
};

struct NicSpec {
  int count            = 8;
  double bandwidth_Bps = 25e9; // per NIC, per direction
  double latency_s     = 2e-6; // NIC to NIC through the fabric, switches included
  int ports            = 1;    // NICs of the node this one stands for (sim/input/platform_parse.cpp lay_out_nics)
  // What the NICs speak (sim/input/platform_parse.hpp nic_kind_names): infiniband, roce, efa,
  // efa-v2, efa-v3 (AWS EFA's generations), tcpx, tcpxo, ethernet. Each has its own achieved
  // bandwidth and per-step latency (configs/calibration/links.json "nic_kinds"), applied where
  // the platform takes its achieved bandwidths (topologies/nodes/node_type.cpp
  // with_achieved_bandwidth).
  std::string kind = "infiniband";
  // What the NIC kind's step costs beyond InfiniBand's (its network plugin's proxy and protocol:
  // EFA, TCPX/TCPXO, TCP; 0 for InfiniBand and RoCE), set where the platform takes its achieved
  // figures (with_achieved_bandwidth), which leave it out of latency_s: each transfer across the
  // NIC owes it once its bytes are in (sim/core/link_bandwidth.hpp kNicTransportProperty), except
  // a ring's steps after its first, which pay it once per crossing of the ring's data path, as
  // NCCL's tuner charges a ring's network latency (models/collectives/collective.hpp
  // PathCost::transport_s).
  double transport_latency_s = 0;
};

struct NodeGroupSpec {
  int count         = 1;
  std::string gpu;
  int gpus_per_node = 8;
  IntraNodeSpec intra_node;
  NicSpec nic;
  HostSpec host;
  // What one of its GPUs costs per hour, for the planner's cost objective; 0 = not given.
  double price_per_gpu_hour = 0;
};

// Links between the routers of a generated fabric (torus, dragonfly); 0 bandwidth = the
// bandwidth of one node's NICs together.
struct FabricLinkSpec {
  double bandwidth_Bps = 0;
  double latency_s     = 0.5e-6;
};

struct TorusSpec {
  std::vector<int> dimensions; // routers along each dimension; one node per router
  FabricLinkSpec link;
};

// SimGrid's dragonfly: groups of chassis of routers, `nodes_per_router` nodes on each router;
// each `*_links` is how many parallel links join two elements of that level.
struct DragonflySpec {
  int groups = 0, group_links = 1;
  int chassis = 1, chassis_links = 1;
  int routers = 1, router_links = 1;
  int nodes_per_router = 1;
  FabricLinkSpec link;
};

// A custom fabric (network.topology "custom"): named switches, the nodes hanging from each (by
// their NICs), and the links between switches; routes follow the shortest path.
struct SwitchSpec {
  std::string name;
  std::vector<int> nodes; // node indices, in node_groups order
};
struct SwitchLinkSpec {
  std::string from, to; // switch names
  double bandwidth_Bps = 0;
  double latency_s     = 0;
};

// network.topology "wifi": the nodes of the `stations` node groups are one-GPU devices sharing
// the air of one access point at `rate_Bps` each (one 802.11 rate level); the other groups (the
// edge server) hang off the access point by their NICs (Ethernet).
struct WifiSpec {
  std::vector<int> stations = {0};
  double rate_Bps  = 0;
  double latency_s = 0;
};

struct NetworkSpec {
  std::string topology   = "fat_tree";
  double oversubscription = 1.0; // >1 thins the links above the leaf switches (fat_tree, rail_optimized)
  int leaf_radix          = 32;  // nodes (per rail) under one leaf switch
  // fat_tree: 2 (leaves under one core) or 3 (leaves grouped in pods of pod_radix leaves, pods
  // under the core; core_oversubscription > 1 thins the pods' uplinks).
  int levels                   = 2;
  int pod_radix                = 8;
  double core_oversubscription = 1.0;
  TorusSpec torus;
  DragonflySpec dragonfly;
  std::vector<SwitchSpec> switches;  // custom
  std::vector<SwitchLinkSpec> links; // custom
  WifiSpec wifi;
  // The switches reduce in the network (InfiniBand SHARP: Quantum HDR/NDR switches with the SHARP
  // plugin, NCCL_COLLNET_ENABLE=1): NCCL's CollNet algorithm can run. Off unless the platform says so.
  bool sharp = false;
};

// platform.storage: a shared network file system (Lustre, GPFS, NFS) that training.input reads
// from and training.checkpoint writes to; its bandwidth is shared by every node.
struct StorageSpec {
  double bandwidth_Bps      = 0; // aggregate, per direction; 0 = not given
  double latency_s          = 0;
  double node_bandwidth_Bps = 0; // each node's link to it; 0 = the node's NICs together
};

struct PlatformSpec {
  std::string preset; // the configs/platforms/ preset it was expanded from, "" for none
  std::vector<NodeGroupSpec> node_groups;
  NetworkSpec network;
  StorageSpec storage;
  // placement.stages: the node group each pipeline stage runs on; empty = ranks fill the groups'
  // GPUs in rank order (under the default rank_order pipeline is outermost, so early stages land
  // on the first group).
  std::vector<int> stage_groups;
  // NCCL's environment on these machines (platform.nccl_env): what NCCL_ALGO, NCCL_PROTO,
  // NCCL_NVLS_ENABLE and NCCL_COLLNET_ENABLE leave to NCCL's tuner.
  NcclEnv nccl_env;
  int total_gpus() const;
};

struct SimulationSpec {
  // reduced: one representative rank per pipeline stage stands for its tensor, context and data
  // parallel peers, which behave the same on a symmetric platform. full: every rank.
  std::string fidelity             = "reduced";
  // The collective algorithm of every collective type (a name in CollectiveRegistry, or "auto":
  // chosen per collective by size, group shape and topology as NCCL's tuner does), and the
  // types forced to another one ("all_reduce" -> "tree", ...; from the object form).
  std::string collective_algorithm = "auto";
  std::map<std::string, std::string> collective_algorithm_per_op;
  // NCCL channels: parallel rings (or trees) a collective is split over. 0 = NCCL's choice per
  // group: across nodes one ring per member on each node, so the rings leave every node through
  // all its members' NICs; inside a node one ring.
  int nccl_channels = 0;
  // NCCL's protocol for every collective: "auto" (the fastest per collective, as NCCL's tuner
  // picks), or "LL", "LL128", "Simple" forced (NCCL_PROTO). models/collectives/protocol.hpp.
  std::string nccl_protocol = "auto";
  std::string compute_model        = "kernel";
  // Simulate even when a stage needs more memory than the device has (`stepsim run
  // --allow-oom`); otherwise that is an input error naming the memory breakdown.
  bool allow_oom = false;
  // flow: every transfer is a SimGrid flow sharing links with whatever else is in flight.
  // analytic: every collective and transfer takes its closed form on its path's bottleneck link,
  // contention ignored (fast sweeps).
  std::string network_fidelity = "flow";
  // What-if knobs. A straggler is a rank whose compute runs `slowdown` times longer, or a link
  // (a SimGrid link name or a kind such as "nic" or "nvswitch") whose bandwidth is divided by it.
  struct Straggler {
    int rank = -1;    // -1 when this entry names a link
    std::string link; // empty when this entry names a rank
    double slowdown = 1.0;
  };
  std::vector<Straggler> stragglers;
  // Deterministic per-kernel noise: every compute task is multiplied by exp(sigma·z), z drawn
  // from N(0,1) by a generator seeded with `jitter_seed` and the task's rank and index.
  double jitter_sigma = 0;
  unsigned jitter_seed = 1;
  // Compute slows by the device's calibration.comm_compute_interference while a collective runs
  // beside it on a communication stream (on by default); false turns the effect off.
  bool comm_compute_interference = true;
  // simulation.host_launch_overhead: the host (CPU) time the framework spends on each kernel it
  // launches, seconds, in place of the device calibration's host_launch_overhead; -1: the
  // calibration's. The replay lets no kernel end before the host has issued it.
  double host_launch_overhead_s = -1;
  // simulation.step_host_overhead: the host time each step outside its micro-batches that the
  // GPUs wait for (the device calibration's step_host_overhead), seconds; -1: the calibration's.
  double step_host_overhead_s = -1;
  // A cluster's own network calibration (`stepsim calibrate network -o FILE`), laid over
  // configs/calibration/links.json for this scenario's runs only; the path as resolved against
  // the scenario file's folder, "" for none.
  std::string network_calibration;
};

struct Scenario {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  ParallelSpec parallelism;
  PlatformSpec platform;
  SimulationSpec simulation;
  nlohmann::json source; // the document it was read from, after --set, for the report

  // Transformer layers in virtual stage `vs` (= chunk × pipeline + stage), and on pipeline stage
  // `stage` over all its chunks.
  int layers_in_virtual_stage(int vs) const;
  int layers_on_stage(int stage) const;
  // Whether a full recompute rebuilds the model's layer `layer` (from 0, in virtual-stage order),
  // the `j`-th of its chunk (training.recompute_every, recompute_num_layers); how many of a
  // stage's layers it rebuilds; their share of the model's.
  bool layer_recomputed(long long layer, int j) const;
  int recomputed_layers_on_stage(int stage) const;
  double recomputed_layer_share() const;
  // The inputs a full recompute keeps on a stage for each micro-batch in flight (one per recomputed
  // layer, or one per group of training.recompute_group), and the most layers it rebuilds at once.
  int recompute_checkpoints_on_stage(int stage) const;
  int layers_rebuilt_at_once(int stage) const;

  long long micro_batches_per_replica() const
  {
    return training.global_batch_size / (training.micro_batch_size * parallelism.data);
  }
};

} // namespace stepsim
