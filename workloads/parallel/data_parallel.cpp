#include "workloads/parallel/data_parallel.hpp"

#include "workloads/models/transformer.hpp"

#include <fmt/format.h>

namespace stepsim {

DataParallelPlan data_parallel_plan(const Scenario& s, int members)
{
  const auto& p = s.parallelism;
  DataParallelPlan plan;
  plan.replicas                 = members > 1;
  plan.gradient_op              = p.zero_stage >= 1 ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce;
  plan.reduce_every_micro_batch = p.zero_stage >= 2;
  plan.gather_parameters        = p.zero_stage >= 3 && plan.replicas;
  plan.gather_for_backward      = plan.gather_parameters && p.reshard_after_forward;
  plan.gather_blocks_compute =
      FrameworkRegistry::get(s.training.framework, "training.framework").parameter_gather_blocks_compute;
  plan.host_cache               = plan.gather_for_backward && p.host_cache;
  const bool distributed_optimizer = (p.zero_stage == 1 || p.zero_stage == 2) && plan.replicas;
  plan.gather_updated_weights   = distributed_optimizer && !p.overlap_param_gather;
  plan.gather_at_first_use      = distributed_optimizer && p.overlap_param_gather;
  plan.gather_all_at_start      = plan.gather_at_first_use && p.align_param_gather;
  plan.offload_optimizer        = p.offload_optimizer;
  const auto& framework             = FrameworkRegistry::get(s.training.framework, "training.framework");
  plan.gather_per_tensor            = plan.gather_parameters && framework.gather_per_tensor;
  plan.persistent_elements          = plan.gather_per_tensor ? framework.persistent_parameter_elements : 0;
  plan.gather_again_after_recompute = plan.gather_for_backward && framework.gather_again_after_recompute;
  plan.per_rank_copies              = plan.gather_parameters && framework.per_rank_copies;
  plan.gather_calls_per_rank        = framework.gather_calls_per_rank;
  plan.scatter_calls_per_rank       = framework.scatter_calls_per_rank;
  // Gradients are reduced as they are accumulated: training.gradient_precision.
  plan.gradient_bytes  = gradient_element_bytes(s.training.precision, s.training.gradient_precision);
  plan.parameter_bytes = stored_element_bytes(s.training.precision); // an fp8 run gathers bf16 weights
  return plan;
}

double optimizer_bytes_per_parameter(const TrainingSpec& t)
{
  return t.optimizer == "adam" ? 4 * 4 + 3 * 4 + 2 : 4 * 3 + 4 * 2;
}

DataParallelLowering::DataParallelLowering(const Scenario& s, std::vector<Work>& works)
    : DataParallelLowering(s, works, s.parallelism.data * s.parallelism.context, "optimizer")
{
}

DataParallelLowering::DataParallelLowering(const Scenario& s, std::vector<Work>& works, int members, std::string name)
    : s_(s), works_(works), plan_(data_parallel_plan(s, members)), n_(members), name_(std::move(name))
{
}

void DataParallelLowering::begin_rank(ProgramBuilder& builder, int group, int stage)
{
  builder_ = &builder;
  group_   = group;
  stage_   = stage;
  deferred_.clear();
  pending_         = Bucket{};
  step_parameters_ = 0;
  last_data_ = last_offload_ = ProgramBuilder::kNone;
  kept_.clear();
  cached_.clear();
}

TaskId DataParallelLowering::collective(Stream stream, CollectiveOp op, double bytes, Pass pass, int micro_batch,
                                        int chunk, TaskId after)
{
  return builder_->add(collective_task(stream, op, group_, bytes, pass, micro_batch, chunk), after);
}

TaskId DataParallelLowering::host_copy(Stream stream, double bytes, Pass pass, int micro_batch, int chunk, TaskId after)
{
  return builder_->add(host_copy_task(stream, bytes, pass, micro_batch, chunk), after);
}

// --- ZeRO-3 / FSDP parameter gathers ---------------------------------------------------------

void DataParallelLowering::begin_pass(const PipeOp& op, Pass pass, const std::vector<ParameterUnit>& units)
{
  op_    = op;
  pass_  = pass;
  units_ = units;
  gathers_.assign(units.size(), ProgramBuilder::kNone);
  issued_.assign(units.size(), 0);
  const size_t chunk = static_cast<size_t>(op.chunk);
  if (kept_.size() <= chunk) {
    kept_.resize(chunk + 1);
    cached_.resize(chunk + 1);
  }
  if (kept_[chunk].size() < units.size()) {
    kept_[chunk].resize(units.size(), ProgramBuilder::kNone);
    cached_[chunk].resize(units.size(), ProgramBuilder::kNone);
  }
}

TaskId DataParallelLowering::gather(int index, TaskId issue_after)
{
  if (index < 0 || static_cast<size_t>(index) >= units_.size())
    return ProgramBuilder::kNone;
  const size_t i = static_cast<size_t>(index);
  if (issued_[i])
    return gathers_[i];
  issued_[i] = 1;
  if (units_[i].parameters <= 0)
    return gathers_[i] = ProgramBuilder::kNone;
  // Units by their forward position, so that forward and backward passes find the same unit.
  const size_t unit = pass_ == Pass::Forward ? i : units_.size() - 1 - i;
  TaskId& kept      = kept_[static_cast<size_t>(op_.chunk)][unit];
  TaskId& cached    = cached_[static_cast<size_t>(op_.chunk)][unit];
  if (!plan_.gather_for_backward && kept != ProgramBuilder::kNone)
    return gathers_[i] = kept; // still gathered since its first use in this update
  const double bytes = units_[i].parameters * gathered_bytes(units_[i]);
  TaskId ready;
  if (plan_.host_cache && cached != ProgramBuilder::kNone) {
    // FCDP: reloaded from host memory over the host link, once the host copy exists.
    ready = host_copy(Stream::HostToDevice, bytes, pass_, op_.micro_batch, op_.chunk, cached);
    builder_->depends(ready, issue_after);
  } else {
    ready = gather_tensors(units_[i], issue_after);
    // The recomputed forward gathered and released them; the backward gathers them again.
    if (plan_.gather_again_after_recompute && pass_ != Pass::Forward && units_[i].recomputed)
      ready = gather_tensors(units_[i], ready);
    if (plan_.host_cache)
      cached = host_copy(Stream::DeviceToHost, bytes, pass_, op_.micro_batch, op_.chunk, ready);
  }
  if (!plan_.gather_for_backward)
    kept = ready;
  return gathers_[i] = ready;
}

double DataParallelLowering::gathered_bytes(const ParameterUnit& unit) const
{
  return unit.gathered_element_bytes > 0 ? unit.gathered_element_bytes : plan_.parameter_bytes;
}

std::vector<double> DataParallelLowering::moved_tensors(double parameters, const std::vector<double>* tensors) const
{
  if (!plan_.gather_per_tensor || tensors == nullptr || tensors->empty())
    return {parameters};
  return *tensors;
}

TaskId DataParallelLowering::gather_tensors(const ParameterUnit& unit, TaskId after)
{
  TaskId last = after;
  for (double elements : moved_tensors(unit.parameters, unit.tensors)) {
    if (elements <= 0 || elements < plan_.persistent_elements) // kept whole on every rank
      continue;
    const double bytes = elements * gathered_bytes(unit);
    last = collective(Stream::ParamGather, CollectiveOp::AllGather, bytes, pass_, op_.micro_batch, op_.chunk, last);
    if (plan_.per_rank_copies) // out of the flat buffer into each rank's tensor of the list
      last = per_rank_copies("all_gather_copies", bytes, plan_.gather_calls_per_rank, pass_, last);
  }
  return last;
}

void DataParallelLowering::scatter_tensors(double parameters, const std::vector<double>* tensors, TaskId after,
                                           bool last)
{
  // Every tensor's gradient is reduced, persistent ones too: their optimizer state is sharded.
  for (double elements : moved_tensors(parameters, tensors)) {
    if (elements <= 0)
      continue;
    const double bytes = elements * plan_.gradient_bytes;
    // Each rank's chunk of the list copied into the flat buffer first.
    const TaskId ready =
        plan_.per_rank_copies
            ? per_rank_copies("reduce_scatter_copies", bytes, plan_.scatter_calls_per_rank, Pass::Backward, after)
            : after;
    reduce(Bucket{bytes, elements, ready, last}, ready);
  }
}

TaskId DataParallelLowering::per_rank_copies(const char* name, double bytes, double calls_per_rank, Pass pass,
                                             TaskId after)
{
  auto [it, fresh] = copy_works_.try_emplace({name, bytes}, -1);
  if (fresh) {
    Kernel copies   = memory_kernel(name, 2 * bytes); // each chunk read and written once
    copies.launches = n_ * calls_per_rank;
    works_.push_back(Work{name, {copies}, 0});
    it->second = static_cast<int>(works_.size() - 1);
  }
  return builder_->add(compute_task(it->second, pass, op_.micro_batch, op_.chunk), after);
}

TaskId DataParallelLowering::unit_parameters(int index, TaskId previous)
{
  if (!plan_.gather_parameters && !plan_.gather_at_first_use)
    return ProgramBuilder::kNone;
  // A framework that fetches synchronously issues each unit's gather when the compute before it
  // has finished, and the unit's compute waits for it: nothing is prefetched.
  if (plan_.gather_blocks_compute)
    return gather(index, previous);
  // Megatron-Core with align_param_gather: the schedule dispatches a chunk's gathers all at once
  // (DistributedDataParallel.start_param_sync, from the pipeline schedule's param_sync_func, on
  // every stage at the same time), and the forward hook only waits for its bucket
  // (finish_param_sync with skip_next_bucket_dispatch): issued back to back on the gather stream
  // from the step's start, not each when the unit before starts computing.
  if (plan_.gather_all_at_start) {
    if (index == 0)
      for (size_t i = 0; i < units_.size(); ++i)
        gather(static_cast<int>(i), ProgramBuilder::kNone);
    return gather(index, ProgramBuilder::kNone);
  }
  // A pass's first unit is issued as soon as the gather stream is free (after the previous
  // pass's prefetches); every later one when the unit before it starts computing.
  const TaskId mine = gather(index, ProgramBuilder::kNone);
  gather(index + 1, previous);
  return mine;
}

// --- gradients --------------------------------------------------------------------------------

void DataParallelLowering::gradients_ready(const PipeOp& op, double parameters, TaskId produced_by, bool last,
                                           const std::vector<double>* tensors)
{
  if (last)
    step_parameters_ += parameters;
  if (!plan_.replicas || parameters <= 0 || !(last || plan_.reduce_every_micro_batch))
    return;
  op_ = op;
  if (plan_.gather_parameters) { // FSDP reduce-scatters each unit's gradients as backward produces them
    scatter_tensors(parameters, tensors, produced_by, last);
    return;
  }
  pending_.bytes += parameters * plan_.gradient_bytes;
  pending_.parameters += parameters;
  pending_.last = last;
  if (produced_by != ProgramBuilder::kNone)
    pending_.ready = produced_by;
  if (pending_.bytes >= s_.parallelism.bucket_bytes)
    flush_bucket();
}

void DataParallelLowering::end_backward(bool) { flush_bucket(); }

void DataParallelLowering::flush_bucket()
{
  if (pending_.bytes > 0) {
    if (plan_.reduce_every_micro_batch)
      reduce(pending_, pending_.ready);
    else
      deferred_.push_back(pending_);
  }
  pending_ = Bucket{};
}

void DataParallelLowering::reduce(const Bucket& b, TaskId ready)
{
  const int micro_batch = plan_.reduce_every_micro_batch ? op_.micro_batch : -1;
  const int chunk       = plan_.reduce_every_micro_batch ? op_.chunk : 0;
  last_data_ = collective(Stream::Data, plan_.gradient_op, b.bytes, Pass::Backward, micro_batch, chunk, ready);
  if (plan_.offload_optimizer && b.last) { // the step's reduced shard leaves for the host
    const double shard = b.bytes / (plan_.gradient_op == CollectiveOp::ReduceScatter ? n_ : 1);
    last_offload_ = host_copy(Stream::DeviceToHost, shard, Pass::Backward, micro_batch, chunk, last_data_);
  }
}

TaskId DataParallelLowering::reduce_gradients(TaskId last_compute)
{
  for (const Bucket& b : deferred_) {
    const TaskId ready = s_.parallelism.overlap_grad_reduce && b.ready != ProgramBuilder::kNone ? b.ready : last_compute;
    reduce(b, ready);
  }
  deferred_.clear();
  return last_data_;
}

// --- the optimizer step -----------------------------------------------------------------------

TaskId DataParallelLowering::step(TaskId after)
{
  const bool sharded = s_.parallelism.zero_stage >= 1 && plan_.replicas;
  const double shard = step_parameters_ / (sharded ? n_ : 1);
  Work work{fmt::format("{}_stage{}", name_, stage_),
            {memory_kernel(name_ + "_step", shard * optimizer_bytes_per_parameter(s_.training))},
            0};
  TaskId done;
  if (plan_.offload_optimizer) {
    // The node's GPUs step their shards on its CPU at the same time, so each gets its share of
    // the CPU's memory bandwidth.
    const auto& groups  = s_.platform.node_groups;
    const auto& placed  = s_.platform.stage_groups;
    const size_t g      = placed.empty() ? 0 : static_cast<size_t>(placed.at(static_cast<size_t>(stage_)));
    work.name           = fmt::format("cpu_{}_stage{}", name_, stage_);
    work.host_memory_Bps = groups.at(g).host.memory_bandwidth_Bps / groups.at(g).gpus_per_node;
    works_.push_back(std::move(work));
    TaskId cpu = builder_->add(compute_task(static_cast<int>(works_.size() - 1), Pass::Optimizer, -1, 0, Stream::Host),
                               after);
    builder_->depends(cpu, last_offload_);
    done = host_copy(Stream::HostToDevice, shard * plan_.parameter_bytes, Pass::Optimizer, -1, 0, cpu);
  } else {
    works_.push_back(std::move(work));
    done = builder_->add(compute_task(static_cast<int>(works_.size() - 1), Pass::Optimizer), after);
  }
  if (plan_.gather_updated_weights) // the distributed optimizer gathers the updated weights back
    collective(Stream::Data, CollectiveOp::AllGather, step_parameters_ * plan_.parameter_bytes, Pass::Optimizer, -1, 0,
               done);
  // The next update starts afresh (PipeDream lowers several).
  deferred_.clear();
  pending_         = Bucket{};
  step_parameters_ = 0;
  last_offload_    = ProgramBuilder::kNone;
  kept_.clear();
  cached_.clear();
  return done;
}

} // namespace stepsim
