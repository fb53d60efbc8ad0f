// A kind of model: everything stepsim needs to know about a model that depends on its
// architecture, behind one interface, registered under the names `model.architecture` takes.
// Each kind is one file in this folder (transformer.cpp with its MoE blocks, cnn.cpp,
// layer_list.cpp, ...) that registers itself with one line; nothing outside this folder asks
// which kind a model is.
//
// Contract:
// - read() takes the `model` object, whose `architecture` is already read, and reads the kind's
//   own fields; problems go into the reader with their JSON paths.
// - check() sees a parsed scenario whose model is of this kind and adds what the kind cannot run
//   (a plan it does not split, a stage split that does not add up), each with its JSON path.
// - The rest see a checked scenario. FLOPs are per step; parameters and bytes per rank; stages
//   are pipeline stages (all their virtual stages together).
#pragma once

#include "sim/core/registry.hpp"
#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"
#include "models/memory.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/scenario_parse.hpp"
#include "workloads/model_plan.hpp"

#include <memory>
#include <string>
#include <vector>

namespace stepsim {


// The whole model's parameters (no parallelism: each weight once), and those one token goes
// through in a step (a mixture of experts' top_k routed experts of its num_experts; a dense model's
// all). Each kind states what it counts beside its implementation.
struct ParameterCounts {
  double total = 0, active = 0;
};

class ModelKind {
public:
  virtual ~ModelKind() = default;
  virtual void read(JsonReader& model, ModelSpec& m, const std::string& base_dir) const = 0;
  virtual void check(const Scenario& s, Problems& problems) const = 0;
  // Layers one micro-batch passes through, for the bound on what a scenario may lower.
  virtual double layer_count(const ModelSpec& m) const = 0;
  // Megatron's accounting: attention scores over the whole sequence, backward twice the forward
  // (or the FLOPs a layer list gives). Hardware FLOPs count recompute.
  virtual double model_flops_per_step(const Scenario& s) const = 0;
  virtual double hardware_flops_per_step(const Scenario& s) const = 0;
  virtual double stage_parameters(const Scenario& s, int stage) const = 0;
  virtual ModelFootprint footprint(const Scenario& s, int stage, int micro_batches_in_flight) const = 0;
  // The report's layer count per stage: 0 for kinds whose layers are modules, not blocks.
  virtual int reported_layers(const Scenario& s, int stage) const = 0;
  // The report's `parameters` and `active_parameters`.
  virtual ParameterCounts parameter_counts(const Scenario& s) const = 0;
  // The blocks to lower, with their works added to `works`.
  virtual ModelPlan plan(const Scenario& s, std::vector<Work>& works) const = 0;
  // Bytes of one sample as the data loader hands it to the GPU (training.input.device_bytes when
  // not given): by default a language model's token ids and labels, int64 each (Megatron's
  // get_batch, megatron/training/utils.py, copies both to the GPU).
  virtual double loaded_bytes_per_sample(const Scenario& s) const { return 2.0 * 8.0 * s.model.seq_length; }
};

using ModelKindRegistry = Registry<std::shared_ptr<const ModelKind>>;

// The kind of `m` (by its architecture, which the parser has checked against the registry).
const ModelKind& model_kind(const ModelSpec& m);
// Reads the `model` object: its architecture, then the kind's own fields.
void read_model(JsonReader& model, ModelSpec& m, const std::string& base_dir);
// What the parser asks of the registered kinds (sim/input/scenario_parse.hpp).
ModelHooks model_hooks();

} // namespace stepsim
