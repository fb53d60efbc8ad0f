// The scenario: what a user asks stepsim to predict. Plain data, already checked and converted
// to SI units (bytes, seconds, bytes per second) by parse_scenario; nothing downstream re-reads
// the JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim {

struct ModelSpec {
  std::string name;
  int num_layers          = 0;
  int hidden_size         = 0;
  int num_attention_heads = 0;
  int num_query_groups    = 0; // grouped-query attention; equal to the heads for plain multi-head
  int ffn_hidden_size     = 0;
  int seq_length          = 0;
  int vocab_size          = 0;
  std::string mlp         = "gelu";      // gelu | swiglu
  std::string norm        = "layernorm"; // layernorm | rmsnorm
  bool tied_embeddings    = true;
  int num_experts         = 0; // 0 = dense
  int moe_top_k           = 2;
  // "transformer", or a built-in CNN ("resnet50", "resnet101", "vgg16"; workloads/cnn.hpp), which
  // uses only the two fields below and leaves the transformer's sizes at 0.
  std::string architecture = "transformer";
  int image_size           = 224; // square input images, pixels per side
  int num_classes          = 1000;
};

struct TrainingSpec {
  long long global_batch_size = 0;
  long long micro_batch_size  = 1;
  std::string precision       = "bf16";  // fp32 | tf32 | fp16 | bf16 | fp8
  std::string recompute       = "none";  // none | selective | full
  std::string attention       = "flash"; // flash (fused) | standard (scores materialised)
  std::string optimizer       = "adam";
};

struct ParallelSpec {
  int tensor             = 1;
  int pipeline           = 1;
  int data               = 1;
  int context            = 1;
  int expert             = 1;
  int virtual_stages     = 1;
  std::string schedule   = "1f1b";
  bool sequence_parallel = false;
  int zero_stage         = 0;
  double bucket_bytes    = 25e6 * 4; // gradient bucket for the data-parallel all-reduce
  bool overlap_grad_reduce = true;
  // Layers of each virtual stage (pipeline × virtual_stages entries, in virtual-stage order);
  // empty = the same number everywhere. Llama 3 ran 126 layers on 16 stages with one fewer on
  // the first and the last.
  std::vector<int> stage_layers;
};

struct IntraNodeSpec {
  std::string type     = "nvswitch";
  double bandwidth_Bps = 300e9; // per GPU, per direction
  double latency_s     = 1e-6;  // GPU to GPU
};

struct NicSpec {
  int count            = 8;
  double bandwidth_Bps = 25e9; // per NIC, per direction
  double latency_s     = 2e-6; // NIC to NIC through the fabric, switches included
};

struct NodeGroupSpec {
  int count         = 1;
  std::string gpu;
  int gpus_per_node = 8;
  IntraNodeSpec intra_node;
  NicSpec nic;
};

struct NetworkSpec {
  std::string topology   = "fat_tree";
  double oversubscription = 1.0; // >1 thins the links above the leaf switches
  int leaf_radix          = 32;  // nodes (per rail) under one leaf switch
};

struct PlatformSpec {
  std::vector<NodeGroupSpec> node_groups;
  NetworkSpec network;
  int total_gpus() const;
};

struct SimulationSpec {
  // reduced: one representative rank per pipeline stage stands for its tensor, context and data
  // parallel peers, which behave the same on a symmetric platform. full: every rank.
  std::string fidelity             = "reduced";
  std::string collective_algorithm = "ring";
  std::string compute_model        = "kernel";
  // Simulate even when a stage needs more memory than the device has (`stepsim run
  // --allow-oom`); otherwise that is an input error naming the memory breakdown.
  bool allow_oom = false;
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

  long long micro_batches_per_replica() const
  {
    return training.global_batch_size / (training.micro_batch_size * parallelism.data);
  }
};

// Checks and converts a scenario document; throws InputError with every problem found.
// `base_dir` resolves relative paths inside it (model.hf_config).
Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir = ".");

} // namespace stepsim
