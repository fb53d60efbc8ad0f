// Data parallelism in the lowering: how gradients are reduced (all-reduce in buckets, or ZeRO's
// reduce-scatter), ZeRO-3 / FSDP parameter all-gathers per unit with prefetch of the next unit,
// FCDP's host cache of gathered parameters, and the optimizer step (on the GPU, or on the CPU
// with ZeRO-Offload). lower.cpp walks the passes and calls it around each unit (one layer: the
// unit FSDP wraps); it adds its tasks to the rank's graph through the rank's ProgramBuilder.
//
// Per step, on a data-parallel group of n ranks, for a stage of Ψ parameters per rank, m
// micro-batches and e-byte elements (ring bytes sent per rank = (n-1)/n of each buffer, twice for
// an all-reduce):
//   ZeRO 0   all-reduce of the gradients once per step (buckets as backward produces them)
//   ZeRO 1   reduce-scatter once per step, all-gather of the updated weights after the step
//   ZeRO 2   reduce-scatter of every micro-batch's gradients (they are sharded), all-gather after
//   ZeRO 3   per unit: all-gather before forward and (reshard_after_forward) before backward of
//            every micro-batch, reduce-scatter after its backward; reshard_after_forward false
//            gathers each unit once per step and keeps it; no all-gather after the step. A
//            framework may gather and reduce a unit tensor by tensor (DeepSpeed's hooks) and
//            gather it again after a recomputed forward (FrameworkProfile).
//   FCDP     ZeRO 3 where only the first gather of a unit in a step crosses the network: it is
//            copied to host memory and every later gather is a host-to-GPU copy.
//   Offload  each reduced gradient shard goes GPU→host; the CPU steps the shard; the updated
//            e-byte weights come back host→GPU before the all-gather (ZeRO 1/2).
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"
#include "workloads/schedules/schedule.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stepsim {

// What the scenario's data-parallel plan does; plain data, decided once per scenario.
struct DataParallelPlan {
  bool replicas               = false; // more than one data-parallel replica: gradients are reduced
  CollectiveOp gradient_op    = CollectiveOp::AllReduce;
  bool reduce_every_micro_batch = false; // ZeRO 2/3: sharded gradients, reduced as produced
  bool gather_parameters      = false; // ZeRO 3 / FSDP
  bool gather_for_backward    = false; // reshard_after_forward
  bool gather_blocks_compute  = false; // the framework fetches each unit synchronously: no prefetch
  bool host_cache             = false; // FCDP
  bool gather_updated_weights = false; // ZeRO 1/2 distributed optimizer, after the step
  bool gather_at_first_use    = false; // ZeRO 1/2 with overlap_param_gather: per unit, at its first forward
  bool gather_all_at_start    = false; // and align_param_gather: every unit's dispatched when the step starts
  bool offload_optimizer      = false; // ZeRO-Offload
  // ZeRO-3 tensor by tensor (FrameworkProfile::gather_per_tensor): tensors of fewer elements
  // than persistent_elements stay whole on every rank and are neither gathered nor scattered.
  bool gather_per_tensor      = false;
  double persistent_elements  = 0;
  bool gather_again_after_recompute = false; // FrameworkProfile
  bool per_rank_copies        = false;       // FrameworkProfile: list-form collectives
  double gather_calls_per_rank  = 1;         // FrameworkProfile: host calls per rank's entry
  double scatter_calls_per_rank = 1;
  double gradient_bytes       = 2;     // per element, as reduced
  double parameter_bytes      = 2;     // per element, as gathered and computed with
};

// A unit whose parameters ZeRO-3 / FSDP gathers (one layer): its parameters per rank, the
// tensors they are in (Layer::tensors; null or empty = one tensor), and whether its forward is
// recomputed inside its backward.
struct ParameterUnit {
  double parameters                  = 0;
  const std::vector<double>* tensors = nullptr;
  bool recomputed                    = false;
  double gathered_element_bytes      = 0; // 0: DataParallelPlan::parameter_bytes
};

// `members`: the size of the group the parameters are replicated over (data × context for dense
// parameters, the expert-data-parallel group for a MoE layer's experts).
DataParallelPlan data_parallel_plan(const Scenario& s, int members);

// Bytes moved through memory per parameter by one optimizer update of its shard (mixed-precision
// Adam: fp32 master weight, gradient and two moments read; weight and moments written; the
// low-precision copy written).
double optimizer_bytes_per_parameter(const TrainingSpec& t);

class DataParallelLowering {
public:
  DataParallelLowering(const Scenario& s, std::vector<Work>& works);
  // Parameters replicated over `members` ranks whose optimizer work is named `name`
  // ("expert_optimizer": a MoE layer's experts under ZeRO-3, over their expert-data group).
  DataParallelLowering(const Scenario& s, std::vector<Work>& works, int members, std::string name);
  const DataParallelPlan& plan() const { return plan_; }

  // A new rank: its tasks go through `builder`; `group` is its data-parallel group (-1 = none).
  void begin_rank(ProgramBuilder& builder, int group, int stage);

  // A forward or backward pass of one chunk starts; `units` lists its units (parameters per
  // rank, unsharded) in the order the pass runs them.
  void begin_pass(const PipeOp& op, Pass pass, const std::vector<ParameterUnit>& units);
  // Unit `index` of the pass is about to compute; `previous` is the task it follows (the end of
  // the unit before). Issues its gather if not yet issued and prefetches the next unit's, issued
  // once `previous` is done, i.e. when this unit starts. Returns the task the unit's first
  // compute must also wait for (kNone when its parameters are at hand).
  TaskId unit_parameters(int index, TaskId previous);

  // A unit's backward produced its weight gradients (`last`: the step's last for its chunk);
  // `tensors` as ParameterUnit::tensors.
  void gradients_ready(const PipeOp& op, double parameters, TaskId produced_by, bool last,
                       const std::vector<double>* tensors = nullptr);
  // A backward (or weight) pass ended (`last`: the step's last for its chunk).
  void end_backward(bool last);

  // The reductions left for the end of the step; returns the last data-parallel task (kNone
  // when none), which the optimizer waits for.
  TaskId reduce_gradients(TaskId last_compute);
  // The optimizer step of this rank's shard and what follows it; `after`: every reduction done.
  // Ends the update: the next one starts with empty buckets and no gathered parameters. Returns
  // the optimizer step's last task.
  TaskId step(TaskId after);

private:
  struct Bucket {
    double bytes = 0, parameters = 0;
    TaskId ready = ProgramBuilder::kNone;
    bool last    = false; // holds the step's last gradients of its parameters
  };
  TaskId collective(Stream stream, CollectiveOp op, double bytes, Pass pass, int micro_batch, int chunk, TaskId after);
  TaskId host_copy(Stream stream, double bytes, Pass pass, int micro_batch, int chunk, TaskId after);
  TaskId gather(int index, TaskId issue_after);
  // The collectives of one gather of a unit's parameters (each after the one before; returns
  // the last task, or `after` when nothing is moved), or of one reduction of its gradients: one
  // per tensor under gather_per_tensor (persistent ones not gathered), one in all otherwise;
  // with per_rank_copies, each with its copies.
  TaskId gather_tensors(const ParameterUnit& unit, TaskId after);
  void scatter_tensors(double parameters, const std::vector<double>* tensors, TaskId after, bool last);
  std::vector<double> moved_tensors(double parameters, const std::vector<double>* tensors) const;
  double gathered_bytes(const ParameterUnit& unit) const; // per parameter, as gathered
  // PyTorch's copies of a list-form collective of `bytes` (the whole buffer), one per rank, and
  // the host calls around each: calls_per_rank launches per rank.
  TaskId per_rank_copies(const char* name, double bytes, double calls_per_rank, Pass pass, TaskId after);
  void flush_bucket();
  void reduce(const Bucket& b, TaskId ready);

  const Scenario& s_;
  std::vector<Work>& works_;
  DataParallelPlan plan_;
  int n_ = 1; // data-parallel degree (data × context, or the expert-data group's size)
  std::string name_ = "optimizer";

  // Per rank.
  ProgramBuilder* builder_ = nullptr;
  int group_ = -1, stage_ = 0;
  std::vector<Bucket> deferred_; // per-step reductions, issued at the end of the step
  Bucket pending_;
  double step_parameters_ = 0;
  TaskId last_data_       = ProgramBuilder::kNone;
  TaskId last_offload_    = ProgramBuilder::kNone;
  // ZeRO 3: which units hold gathered parameters (reshard_after_forward false) or have a host
  // copy (FCDP) in this update, by chunk and unit in forward order; the copy that fills it.
  std::vector<std::vector<TaskId>> kept_, cached_;
  // The pass in progress.
  PipeOp op_{PipeOp::Type::F, -1, 0};
  Pass pass_ = Pass::Forward;
  std::vector<ParameterUnit> units_;
  // The works of per_rank_copies, by name and bytes, shared by every rank.
  std::map<std::pair<std::string, double>, int> copy_works_;
  std::vector<TaskId> gathers_;
  std::vector<char> issued_;
};

} // namespace stepsim
