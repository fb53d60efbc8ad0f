#include "workloads/lower.hpp"

#include "workloads/block_tasks.hpp"
#include "workloads/model_plan.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/parallel/context_parallel.hpp"
#include "workloads/parallel/data_parallel.hpp"
#include "workloads/parallel/layout.hpp"
#include "workloads/models/moe.hpp"
#include "workloads/schedules/schedule.hpp"
#include "workloads/models/transformer.hpp"
#include "sim/core/framework.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace stepsim {

// Whether one GPU's flows may take bandwidth from another's on a link neither owns alone: a
// shared medium (Wi-Fi), links thinned above the leaves (oversubscription), fabrics whose links
// carry many nodes' routes (torus, dragonfly, custom), chiplet meshes and PCIe trees, fewer NICs
// than GPUs. On the others (non-blocking fat-trees and rails of NVSwitch nodes with a NIC per GPU)
// the peers' flows meet the simulated ones only on links that mirror the simulated ranks' own,
// which the reduced replay loads alike: no copies are listed, and the platform stays as small.
bool peers_may_contend(const PlatformSpec& p)
{
  const NetworkSpec& n = p.network;
  if (n.topology != "fat_tree" && n.topology != "rail_optimized")
    return true;
  if (n.oversubscription > 1 || (n.topology == "fat_tree" && n.levels == 3 && n.core_oversubscription > 1))
    return true;
  for (const auto& g : p.node_groups)
    if (g.intra_node.type != "nvswitch" || g.nic.count < g.gpus_per_node)
      return true;
  return false;
}

namespace {

class Lowering {
public:
  explicit Lowering(const Scenario& s)
      : s_(s), framework_(FrameworkRegistry::get(s.training.framework, "training.framework")), layout_(s.parallelism),
        p_(s.parallelism.pipeline), v_(s.parallelism.virtual_stages)
  {
    for (const auto& [precision, bytes] : framework_.gradient_accumulation_bytes_per_parameter)
      if (precision == s.training.precision)
        accumulation_bytes_per_parameter_ = bytes;
    w_.world_size = layout_.world_size();
    w_.stages     = p_;
    w_.pipeline_transfers_sync_host = framework_.pipeline_transfer_synchronizes_host;
    // The model's kind plans its blocks and adds their works (workloads/models/model_kind.hpp).
    ModelPlan plan = model_kind(s.model).plan(s, w_.works);
    plan_          = std::move(plan.stages);
    custom_        = std::move(plan.block_kinds);
    ring_          = plan.ring;
    attention_backward_weight_ = plan.attention_backward_weight;
    moe_layers_    = plan.moe_layers;
    moe_           = plan.moe;
    tied_embedding_parameters_ = plan.tied_embedding_parameters;
    // ZeRO with MoE: the experts' gradients, optimizer states and (ZeRO-3 / FSDP) parameters are
    // sharded over their expert-data-parallel group as the dense ones are over theirs
    // (workloads/parallel/data_parallel.hpp): ZeRO-1/2's gradient reduce-scatters in buckets
    // during backward and, with overlap_param_gather, the updated shards gathered per layer at
    // its first forward, as Megatron-Core's distributed optimizer keeps the experts' buffers
    // beside the dense ones (megatron/core/distributed/distributed_data_parallel.py:
    // expert_parallel_buffers and expert_parallel_bucket_groups over the expert-data-parallel
    // group, synchronised and gathered with the dense bucket groups); ZeRO-3 gathers them per unit.
    experts_sharded_ = moe_layers_ && s.parallelism.zero_stage >= 1;
    schedule_     = &ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
    shape_        = PipelineShape{p_, static_cast<int>(s.micro_batches_per_replica()), v_};
    // Without a flush (PipeDream) no step starts from an empty pipeline: lay out enough steps
    // before the measured one to fill the pipeline (p micro-batches) and as many after it to keep
    // it full to the measured step's end.
    lowered_shape_ = shape_;
    if (!schedule_->flushes) {
      const int fill    = (p_ + shape_.micro_batches - 1) / shape_.micro_batches;
      w_.steps          = 2 * fill + 1;
      w_.measured_step  = fill;
      lowered_shape_.micro_batches *= w_.steps;
    }
    per_update_ = schedule_->micro_batches_per_update > 0 ? schedule_->micro_batches_per_update : shape_.micro_batches;
  }

  Workload run()
  {
    // Reserved up front: a growing vector would copy every graph built so far.
    w_.ranks.reserve(s_.simulation.fidelity == "full" ? layout_.world_size() : p_);
    reduced_ = s_.simulation.fidelity != "full";
    // The copies' ranks are built into the platform (ranks_in_use), and SimGrid 3.32 creates each
    // link in time linear in the links already built (Engine::link_by_name_or_null searches every
    // zone): the whole of a 16,384-GPU platform takes a minute. Above kShadowedWorld the shadows
    // replay the simulated ranks' own groups only (Workload::copies_left_out).
    const bool contend   = reduced_ && peers_may_contend(s_.platform);
    w_.peers_may_contend = contend;
    w_.copies_left_out = contend && layout_.world_size() > kShadowedWorld;
    list_copies_       = contend && !w_.copies_left_out;
    if (!reduced_) {
      for (int r = 0; r < layout_.world_size(); ++r)
        lower_rank(r);
    } else {
      for (int stage = 0; stage < p_; ++stage)
        lower_rank(layout_.rank_of({0, 0, 0, stage}));
    }
    return std::move(w_);
  }

  Workload run_one(int rank)
  {
    lower_rank(rank);
    return std::move(w_);
  }

private:
  // --- groups -------------------------------------------------------------------------------
  struct GroupDef {
    std::string name;
    std::vector<int> ranks;
  };

  // The group `make` gives at coordinate `c`, registered once by name. In reduced fidelity also
  // its copies: the groups `make` gives at the coordinates that the representative at `c` stands
  // for (Group::copies), whose collectives run at the same time as its own.
  template <class Make> int group(const RankCoord& c, Make make)
  {
    GroupDef def = make(c);
    if (auto it = group_ids_.find(def.name); it != group_ids_.end())
      return it->second;
    const int id         = static_cast<int>(w_.groups.size());
    group_ids_[def.name] = id;
    w_.groups.push_back(Group{def.name, std::move(def.ranks), {}, false, 0, {}});
    if (list_copies_) {
      std::set<std::string> seen{w_.groups.back().name};
      for_each_stand_in(c, [&](const RankCoord& peer) {
        GroupDef copy = make(peer);
        if (seen.insert(copy.name).second)
          w_.groups[static_cast<size_t>(id)].copies.push_back(std::move(copy.ranks));
      });
    }
    return id;
  }

  // The coordinates a representative at `c` stands for in reduced fidelity: its stage's other
  // tensor, context and data indices, with the offset from `c` that maps one onto the other.
  template <class F> void for_each_stand_in(const RankCoord& c, F f) const
  {
    for (int d = 0; d < layout_.data; ++d)
      for (int cp = 0; cp < layout_.context; ++cp)
        for (int t = 0; t < layout_.tensor; ++t)
          if (t != c.tensor || cp != c.context || d != c.data)
            f(RankCoord{t, cp, d, c.pipeline});
  }

  // Rank `rank` moved by the offset that takes the representative at `from` to `to` (the plan's
  // symmetry: tensor, context and data indices shift, wrapping around, the stage stays).
  int image(int rank, const RankCoord& from, const RankCoord& to) const
  {
    const RankCoord x = layout_.coord_of(rank);
    const auto shift  = [](int v, int a, int b, int n) { return ((v + b - a) % n + n) % n; };
    return layout_.rank_of({shift(x.tensor, from.tensor, to.tensor, layout_.tensor),
                            shift(x.context, from.context, to.context, layout_.context),
                            shift(x.data, from.data, to.data, layout_.data), x.pipeline});
  }

  // A representative (tensor, context and data index 0) is simulated in reduced fidelity.
  static bool representative(const RankCoord& c) { return c.tensor == 0 && c.context == 0 && c.data == 0; }

  // Reduced fidelity: the same transfer between the ranks this rank stands for
  // (Workload::transfer_copies), without the images that are replayed anyway.
  void transfer_copies(int src, int dst)
  {
    if (!list_copies_)
      return;
    auto [it, fresh] = w_.transfer_copies.try_emplace({src, dst});
    if (!fresh)
      return;
    for_each_stand_in(coord_, [&](const RankCoord& peer) {
      const int a = image(src, coord_, peer);
      const int b = dst < 0 ? -1 : image(dst, coord_, peer);
      if (!representative(layout_.coord_of(a)) && (b < 0 || !representative(layout_.coord_of(b))))
        it->second.emplace_back(a, b);
    });
  }

  int tensor_group(const RankCoord& c)
  {
    return group(c, [&](const RankCoord& x) {
      return GroupDef{fmt::format("tensor/pp{}/dp{}/cp{}", x.pipeline, x.data, x.context),
                      layout_.group(layout_.rank_of(x), {Axis::Tensor})};
    });
  }

  // Gradients are reduced over data × context parallel peers.
  int data_group(const RankCoord& c)
  {
    return group(c, [&](const RankCoord& x) {
      return GroupDef{fmt::format("data/pp{}/tp{}", x.pipeline, x.tensor),
                      layout_.group(layout_.rank_of(x), {Axis::Context, Axis::Data})};
    });
  }

  // Ulysses' all-to-alls (workloads/parallel/ulysses.hpp): ulysses_degree consecutive context
  // ranks, all of them for Ulysses, one group of USP's.
  int ulysses_group(const RankCoord& c)
  {
    return group(c, [&](const RankCoord& x) {
      const int u = s_.parallelism.ulysses_degree, first = ulysses_group_first(x.context, u);
      std::vector<int> ranks;
      for (int k = 0; k < u; ++k)
        ranks.push_back(layout_.rank_of({x.tensor, first + k, x.data, x.pipeline}));
      return GroupDef{fmt::format("ulysses/pp{}/dp{}/tp{}/cp{}", x.pipeline, x.data, x.tensor, first / u),
                      std::move(ranks)};
    });
  }

  // All-gather context parallelism (workloads/parallel/context_parallel.hpp): the rank's context
  // ranks, all of them.
  int context_group(const RankCoord& c)
  {
    return group(c, [&](const RankCoord& x) {
      std::vector<int> ranks;
      for (int k = 0; k < layout_.context; ++k)
        ranks.push_back(layout_.rank_of({x.tensor, k, x.data, x.pipeline}));
      return GroupDef{fmt::format("context/pp{}/dp{}/tp{}", x.pipeline, x.data, x.tensor), std::move(ranks)};
    });
  }

  int embedding_group(const RankCoord& c)
  {
    return group(c, [&](const RankCoord& x) {
      return GroupDef{fmt::format("embedding/tp{}/dp{}/cp{}", x.tensor, x.data, x.context),
                      {layout_.rank_of({x.tensor, x.context, x.data, 0}), layout_.rank_of({x.tensor, x.context, x.data, p_ - 1})}};
    });
  }

  // --- tasks --------------------------------------------------------------------------------
  TaskId compute(int work, Pass pass, const PipeOp& op, TaskId after)
  {
    const TaskId id = builder_->add(compute_task(work, pass, op.micro_batch, op.chunk), after);
    if (blocking_send_ != ProgramBuilder::kNone) { // the framework's send returned only once it was done
      builder_->depends(id, blocking_send_);
      blocking_send_ = ProgramBuilder::kNone;
    }
    return id;
  }

  // A pipeline send; with a framework whose send blocks, the rank's next compute waits for it.
  void send(Stream stream, int peer, int tag, double bytes, Pass pass, const PipeOp& op, TaskId after)
  {
    const TaskId id = point_to_point(TaskKind::Send, stream, peer, tag, bytes, pass, op, after);
    if (framework_.pipeline_send_blocks_compute)
      blocking_send_ = id;
  }

  TaskId collective(Stream stream, CollectiveOp op, int group_id, double bytes, Pass pass, const PipeOp& pipe_op,
                    TaskId after)
  {
    return builder_->add(collective_task(stream, op, group_id, bytes, pass, pipe_op.micro_batch, pipe_op.chunk), after);
  }

  TaskId point_to_point(TaskKind kind, Stream stream, int peer, int tag, double bytes, Pass pass, const PipeOp& op,
                        TaskId after)
  {
    // A send's images; a receive from a rank that is not simulated is itself one of the images
    // of this rank's own send (a ring's), so it adds none.
    if (kind == TaskKind::Send)
      transfer_copies(layout_.rank_of(coord_), peer);
    return builder_->add(point_to_point_task(kind, stream, peer, tag, bytes, pass, op.micro_batch, op.chunk), after);
  }

  // One tensor-parallel block: with sequence parallelism an all-gather before and a
  // reduce-scatter after the compute, otherwise one all-reduce after it.
  TaskId block(int work, Pass pass, const PipeOp& op, TaskId after, bool reduce = true, bool float8_gather = false)
  {
    if (work < 0)
      return after;
    const BlockKind kind = static_cast<size_t>(work) < custom_.size() ? custom_[work] : BlockKind::Dense;
    if (kind != BlockKind::Dense && kind >= BlockKind::MoeForward)
      return custom_block(kind, pass, op, after);
    if (!reduce)
      return compute(work, pass, op, after);
    const bool tp = layout_.tensor > 1;
    const bool sp = s_.parallelism.sequence_parallel;
    const double bytes = activation_bytes(s_);
    const double gathered = gathered_bytes(bytes, float8_gather);
    if (tp && sp && kind == BlockKind::Dense && s_.parallelism.tensor_comm_overlap)
      return overlapped_block(work, pass, op, after, bytes, gathered);
    if (tp && sp)
      after = collective(Stream::Tensor, CollectiveOp::AllGather, tp_group_, gathered, pass, op, after);
    after = kind == BlockKind::Dense ? compute(work, pass, op, after) : custom_block(kind, pass, op, after);
    if (tp)
      after = collective(Stream::Tensor, sp ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce, tp_group_, bytes,
                         pass, op, after);
    return after;
  }

  // A sequence-parallel block whose collectives the framework overlaps with its GEMMs
  // (FrameworkProfile::tensor_comm_overlap), as Transformer Engine's userbuffers run them
  // (transformer_engine/pytorch/module/base.py, initialize_ub: ring_exchange for qkv_fprop,
  // fc1_fprop, proj_dgrad and fc2_dgrad; pipeline for proj_fprop and fc2_fprop; bulk for
  // qkv_dgrad, qkv_wgrad, fc1_dgrad and fc1_wgrad):
  // - an all-gather by ring exchange feeds the GEMM one chunk at a time, starting from the chunk
  //   the rank holds (common/comm_gemm_overlap/comm_gemm_overlap.cpp, split_overlap_ag: chunk
  //   (tp_id - i) % tp_size at step i), so none of it is waited for before the GEMM starts;
  // - a pipelined reduce-scatter leaves chunk by chunk as the GEMM produces them, and only the last
  //   of tensor_overlap_reduce_chunks is waited for;
  // - backward, the gradient's all-gather runs by ring exchange beside the row-parallel dgrad, the
  //   input's all-gather (the weight gradient needs the whole sequence again) in bulk beside the
  //   column-parallel dgrad, and the dgrad's reduce-scatter in bulk beside the weight gradient
  //   (backward_block). A backward split from its weight gradients (zero-bubble schedules) has
  //   no weight gradient to hide the reduce-scatter behind, and waits for it.
  // The hidden collectives run on their own stream (tensor_overlap) and slow compute by the
  // device's interference factor; the block ends when its compute and all of them have.
  TaskId overlapped_block(int work, Pass pass, const PipeOp& op, TaskId after, double bytes, double gathered)
  {
    // The compute first: a layer's first task is what waits for its ZeRO-3 gather (forward()).
    const TaskId computed = compute(work, pass, op, after);
    std::vector<TaskId> hidden;
    const auto beside = [&](CollectiveOp c, double b) {
      hidden.push_back(collective(Stream::TensorOverlap, c, tp_group_, b, pass, op, after));
    };
    double waited_scatter = 0; // bytes of reduce-scatter waited for after the compute
    if (pass == Pass::Forward || pass == Pass::Recompute) {
      const double chunks = framework_.tensor_overlap_reduce_chunks > 0 ? framework_.tensor_overlap_reduce_chunks
                                                                        : double(layout_.tensor);
      const double last   = 1.0 / std::max(1.0, chunks);
      beside(CollectiveOp::AllGather, gathered);
      if (last < 1)
        beside(CollectiveOp::ReduceScatter, bytes * (1 - last));
      waited_scatter = bytes * last;
    } else { // a backward without its weight gradients (backward_block lowers a whole one)
      beside(CollectiveOp::AllGather, gathered); // the output gradient, for the row-parallel dgrad
      waited_scatter = bytes;
    }
    TaskId done = computed;
    if (waited_scatter > 0)
      done = collective(Stream::Tensor, CollectiveOp::ReduceScatter, tp_group_, waited_scatter, pass, op, done);
    else
      done = compute(overlap_wait_work(), pass, op, done);
    for (TaskId h : hidden)
      builder_->depends(done, h);
    return done;
  }

  // A block's whole backward (dgrad and wgrad). Where the framework overlaps the tensor-parallel
  // backward with the GEMMs, it runs as the dgrad part, then the wgrad part beside the dgrad's
  // collective:
  // - Megatron-LM's column-parallel linear (FrameworkProfile::tensor_backward_overlap;
  //   LinearWithGradAccumulationAndAsyncCommunication.backward): with sequence parallelism the
  //   input's all-gather runs beside the dgrad GEMM and the dgrad's reduce-scatter beside the
  //   wgrad GEMM, both async_op=True; without it the dgrad's all-reduce runs beside the wgrad GEMM
  //   (--async-tensor-model-parallel-allreduce). The output gradient's all-gather of a
  //   row-parallel linear (_ReduceScatterToSequenceParallelRegion.backward) stays blocking.
  // - Transformer Engine's userbuffers (tensor_comm_overlap): the output gradient's all-gather too
  //   runs beside the dgrad (ring exchange, see overlapped_block).
  // Every other block runs as block() lowers it.
  TaskId backward_block(const Block& b, const PipeOp& op, TaskId after)
  {
    const bool tp    = layout_.tensor > 1;
    const bool sp    = s_.parallelism.sequence_parallel;
    const bool dense = b.backward >= 0 && !(static_cast<size_t>(b.backward) < custom_.size() &&
                                            custom_[static_cast<size_t>(b.backward)] != BlockKind::Dense);
    const bool te    = sp && s_.parallelism.tensor_comm_overlap;
    if (!b.reduce_backward || !tp || !dense || b.backward_input < 0 || b.backward_weight < 0 ||
        !(te || framework_.tensor_backward_overlap))
      return block(b.backward, Pass::Backward, op, after, b.reduce_backward, b.float8_gather);
    const Pass pass       = Pass::Backward;
    const double bytes    = activation_bytes(s_);
    const double gathered = gathered_bytes(bytes, b.float8_gather);
    if (sp && !te) // blocking, before anything else of the block
      after = collective(Stream::Tensor, CollectiveOp::AllGather, tp_group_, gathered, pass, op, after);
    // The dgrad before the collectives beside it: a layer's first task is what waits for its
    // ZeRO-3 gather (backward()).
    const TaskId dgrad = compute(b.backward_input, pass, op, after);
    std::vector<TaskId> hidden;
    if (te)
      hidden.push_back(collective(Stream::TensorOverlap, CollectiveOp::AllGather, tp_group_, gathered, pass, op, after));
    TaskId input_gathered = ProgramBuilder::kNone;
    if (sp) {
      input_gathered = collective(Stream::TensorOverlap, CollectiveOp::AllGather, tp_group_, gathered, pass, op, after);
      hidden.push_back(input_gathered);
    }
    hidden.push_back(collective(Stream::TensorOverlap, sp ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce,
                                tp_group_, bytes, pass, op, dgrad));
    const TaskId wgrad = compute(b.backward_weight, pass, op, dgrad);
    if (input_gathered != ProgramBuilder::kNone)
      builder_->depends(wgrad, input_gathered); // the wgrad GEMM reads the gathered input
    const TaskId done = compute(overlap_wait_work(), pass, op, wgrad);
    for (TaskId h : hidden)
      builder_->depends(done, h);
    return done;
  }

  // Bytes of a sequence-parallel all-gather of `bytes` of 16-bit activations: half as many in
  // FP8 (Block::float8_gather; torchao's scale is one scalar per tensor).
  double gathered_bytes(double bytes, bool float8_gather) const
  {
    return float8_gather ? bytes / stored_element_bytes(s_.training.precision) : bytes;
  }

  // The wait of the compute stream for the overlapped collectives' streams (CUDA events, no
  // kernel): a compute task of no work.
  int overlap_wait_work()
  {
    if (overlap_wait_work_ < 0) {
      w_.works.push_back(Work{"tensor_overlap_wait", {}, 0});
      overlap_wait_work_ = static_cast<int>(w_.works.size() - 1);
    }
    return overlap_wait_work_;
  }

  // The tasks of a custom block, for the pass at hand (workloads/block_tasks.hpp).
  class PassTasks final : public BlockTasks {
  public:
    PassTasks(Lowering& l, Pass pass, const PipeOp& op) : l_(l), pass_(pass), op_(op) {}
    TaskId compute(int work, TaskId after) override { return l_.compute(work, pass_, op_, after); }
    TaskId collective(Stream stream, CollectiveOp op, int group, double bytes, TaskId after) override
    {
      return l_.collective(stream, op, group, bytes, pass_, op_, after);
    }
    TaskId point_to_point(TaskKind kind, Stream stream, int peer, int tag, double bytes, TaskId after) override
    {
      return l_.point_to_point(kind, stream, peer, tag, bytes, pass_, op_, after);
    }
    void depends(TaskId later, TaskId earlier) override
    {
      if (later != ProgramBuilder::kNone && earlier != ProgramBuilder::kNone && later != earlier &&
          !l_.builder_->waits_for(later, earlier))
        l_.builder_->depends(later, earlier);
    }

  private:
    Lowering& l_;
    Pass pass_;
    PipeOp op_;
  };

  TaskId custom_block(BlockKind kind, Pass pass, const PipeOp& op, TaskId after)
  {
    PassTasks tasks(*this, pass, op);
    switch (kind) {
    case BlockKind::RingForward: return ring_attention_forward(ring_, tasks, after, ring_tag_);
    case BlockKind::RingBackward: // the weight gradients need no ring
      return compute(attention_backward_weight_, pass, op, ring_attention_backward(ring_, tasks, after, ring_tag_));
    case BlockKind::RingBackwardInput: return ring_attention_backward(ring_, tasks, after, ring_tag_);
    case BlockKind::MoeForward: return moe_forward(moe_, tasks, after);
    case BlockKind::MoeBackward: return moe_backward(moe_, tasks, after, false);
    case BlockKind::MoeBackwardInput: return moe_backward(moe_, tasks, after, true);
    case BlockKind::Dense: break;
    }
    return after;
  }

  // Per rank: its context ring neighbours and expert groups.
  void begin_rank_blocks()
  {
    ring_tag_ = 0;
    if (s_.parallelism.context > 1) {
      // Under USP each ring takes one rank of every Ulysses group (workloads/parallel/ulysses.hpp).
      const int cp = s_.parallelism.context, u = s_.parallelism.ulysses_degree;
      ring_.next   = layout_.rank_of({coord_.tensor, ring_next(coord_.context, cp, u), coord_.data, coord_.pipeline});
      ring_.prev   = layout_.rank_of({coord_.tensor, ring_prev(coord_.context, cp, u), coord_.data, coord_.pipeline});
      ring_.ulysses.group = u > 1 ? ulysses_group(coord_) : -1;
      ring_.gather_group  = ring_.all_gather ? context_group(coord_) : -1;
    }
    if (!moe_layers_)
      return;
    // Expert layers number the ranks their own way (workloads/parallel/layout.hpp): their groups are named
    // by the expert coordinates.
    const int ep       = s_.parallelism.expert;
    const auto experts = [&](const RankCoord& x) { return layout_.experts().coords_of(layout_.rank_of(x)); };
    const auto at      = [](const AxisCoords& e, Axis a) { return e[static_cast<size_t>(a)]; };
    const auto tensor  = expert_tensor_group_ranks(layout_, layout_.rank_of(coord_));
    // An expert-layer group at x, named by the stage and two of its expert coordinates.
    const auto expert_def = [&](const RankCoord& x, const char* name, Axis a, Axis b, auto ranks_of) {
      const AxisCoords e = experts(x);
      return GroupDef{fmt::format(fmt::runtime(name), at(e, Axis::Pipeline), at(e, a), at(e, b)),
                      ranks_of(layout_, layout_.rank_of(x))};
    };
    moe_.tensor_group  = layout_.experts().size(Axis::Tensor) == 1 ? -1
                         : tp_group_ >= 0 && tensor == w_.groups[static_cast<size_t>(tp_group_)].ranks
                             ? tp_group_
                             : group(coord_, [&](const RankCoord& x) {
                                 return expert_def(x, "expert_tensor/pp{}/ep{}/edp{}", Axis::Expert, Axis::Data,
                                                   expert_tensor_group_ranks);
                               });
    moe_.shared_tensor_group = tp_group_; // shared experts are dense: the dense tensor group's collectives
    moe_.expert_group  = ep > 1 ? group(coord_,
                                        [&](const RankCoord& x) {
                                          return expert_def(x, "expert/pp{}/tp{}/ep{}", Axis::Tensor, Axis::Data,
                                                            expert_group_ranks);
                                        })
                                : -1;
    const int replicas = layout_.experts().size(Axis::Data);
    expert_data_group_ = replicas > 1 ? group(coord_,
                                              [&](const RankCoord& x) {
                                                return expert_def(x, "expert_data/pp{}/tp{}/e{}", Axis::Tensor,
                                                                  Axis::Expert, expert_data_group_ranks);
                                              })
                                      : -1;
    experts_.begin_rank(expert_data_group_, stage_);
  }

  int virtual_stage(int chunk) const { return chunk * p_ + stage_; }
  int last_virtual_stage() const { return p_ * v_ - 1; }
  int rank_of_virtual_stage(int vs) const
  {
    return layout_.rank_of({coord_.tensor, coord_.context, coord_.data, vs % p_});
  }
  int tag(int micro_batch, int boundary, bool gradient) const
  {
    return (micro_batch * (p_ * v_) + boundary) * 2 + (gradient ? 1 : 0);
  }

  // --- passes -------------------------------------------------------------------------------
  void forward(const PipeOp& op)
  {
    const int vs  = virtual_stage(op.chunk);
    TaskId after  = ProgramBuilder::kNone;
    if (vs > 0)
      after = point_to_point(TaskKind::Recv, Stream::RecvPrev, rank_of_virtual_stage(vs - 1), tag(op.micro_batch, vs - 1, false),
                             plan_[vs - 1].output_bytes, Pass::Forward, op, after);
    const auto& layers = plan_[vs].layers;
    dp_.begin_pass(op, Pass::Forward, unit_parameters(layers, false, false));
    if (experts_sharded_)
      expert_dp_.begin_pass(op, Pass::Forward, unit_parameters(layers, false, true));
    for (size_t i = 0; i < layers.size(); ++i) {
      const TaskId gathered = dp_.unit_parameters(static_cast<int>(i), after);
      const TaskId experts  = experts_sharded_ ? expert_dp_.unit_parameters(static_cast<int>(i), after) : ProgramBuilder::kNone;
      const TaskId first    = builder_->size();
      for (const Block& b : layers[i].blocks)
        after = block(b.forward, Pass::Forward, op, after, b.reduce_forward, b.float8_gather);
      if (first < builder_->size()) {
        builder_->depends(first, gathered);
        builder_->depends(first, experts);
      }
    }
    if (vs < last_virtual_stage())
      send(Stream::SendNext, rank_of_virtual_stage(vs + 1), tag(op.micro_batch, vs, false), plan_[vs].output_bytes,
           Pass::Forward, op, after);
  }

  void backward(const PipeOp& op, bool last_for_chunk)
  {
    const int vs      = virtual_stage(op.chunk);
    const bool split  = schedule_->splits_backward;
    const Pass pass   = split ? Pass::BackwardInput : Pass::Backward;
    const bool grads  = !split; // this pass produces the weight gradients
    TaskId after      = ProgramBuilder::kNone;
    if (vs < last_virtual_stage())
      after = point_to_point(TaskKind::Recv, Stream::RecvNext, rank_of_virtual_stage(vs + 1), tag(op.micro_batch, vs, true),
                             plan_[vs].output_bytes, pass, op, after);
    const auto& layers = plan_[vs].layers;
    dp_.begin_pass(op, pass, unit_parameters(layers, true, false));
    if (experts_sharded_)
      expert_dp_.begin_pass(op, pass, unit_parameters(layers, true, true));
    for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
      const int unit        = static_cast<int>(layer - layers.rbegin());
      const TaskId gathered = dp_.unit_parameters(unit, after);
      const TaskId experts  = experts_sharded_ ? expert_dp_.unit_parameters(unit, after) : ProgramBuilder::kNone;
      const TaskId first    = builder_->size();
      if (layer->recomputed) // the group it closes, in forward order (Layer::recompute_span)
        for (int k = layer->recompute_span - 1; k >= 0; --k)
          for (const Block& b : (layer + k)->blocks)
            after = block(b.recompute, Pass::Recompute, op, after, b.reduce_forward, b.float8_gather);
      for (auto b = layer->blocks.rbegin(); b != layer->blocks.rend(); ++b)
        after = split ? block(b->backward_input, pass, op, after, b->reduce_backward, b->float8_gather)
                      : backward_block(*b, op, after);
      if (first < builder_->size()) {
        builder_->depends(first, gathered);
        builder_->depends(first, experts);
      }
      if (grads)
        gradients_ready(op, *layer, after, last_for_chunk);
    }
    if (grads)
      after = accumulate_gradients(op, layers, after);
    if (vs > 0)
      send(Stream::SendPrev, rank_of_virtual_stage(vs - 1), tag(op.micro_batch, vs - 1, true),
           plan_[vs - 1].output_bytes, pass, op, after);
    if (grads)
      end_backward(last_for_chunk);
  }

  void weight(const PipeOp& op, bool last_for_chunk)
  {
    const int vs       = virtual_stage(op.chunk);
    TaskId after       = ProgramBuilder::kNone;
    const auto& layers = plan_[vs].layers;
    for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
      for (auto b = layer->blocks.rbegin(); b != layer->blocks.rend(); ++b)
        if (b->backward_weight >= 0)
          after = compute(b->backward_weight, Pass::BackwardWeight, op, after);
      gradients_ready(op, *layer, after, last_for_chunk);
    }
    accumulate_gradients(op, layers, after);
    end_backward(last_for_chunk);
  }

  // The framework's pass that adds a micro-batch's weight gradients into the accumulated ones
  // (FrameworkProfile::gradient_accumulation_bytes_per_parameter): bandwidth-bound, over every
  // parameter of the virtual stage, after its backward.
  TaskId accumulate_gradients(const PipeOp& op, const std::vector<Layer>& layers, TaskId after)
  {
    if (accumulation_bytes_per_parameter_ <= 0)
      return after;
    const int vs = virtual_stage(op.chunk);
    auto [it, fresh] = accumulation_works_.try_emplace(vs, -1);
    if (fresh) {
      double parameters = 0;
      for (const Layer& l : layers)
        parameters += l.parameters + l.expert_parameters;
      it->second = add_work(w_.works, fmt::format("gradient_accumulation_vs{}", vs),
                            {memory_kernel("gradient_accumulation", parameters * accumulation_bytes_per_parameter_)});
    }
    return it->second < 0 ? after : compute(it->second, Pass::Backward, op, after);
  }

  // A layer's weight gradients are ready: its dense parameters' join the data-parallel buckets,
  // its experts' their own reduction (sharded per unit under ZeRO-3, like the dense ones).
  void gradients_ready(const PipeOp& op, const Layer& layer, TaskId produced_by, bool last_for_chunk)
  {
    dp_.gradients_ready(op, layer.parameters, produced_by, last_for_chunk, &layer.tensors);
    if (experts_sharded_)
      expert_dp_.gradients_ready(op, layer.expert_parameters, produced_by, last_for_chunk);
    else
      experts_.ready(layer.expert_parameters, produced_by, last_for_chunk);
  }

  void end_backward(bool last_for_chunk)
  {
    dp_.end_backward(last_for_chunk);
    if (experts_sharded_)
      expert_dp_.end_backward(last_for_chunk);
  }

  // --- data parallelism (workloads/parallel/data_parallel.hpp) -------------------------------------
  // Each layer is a unit whose parameters ZeRO-3 / FSDP gathers, listed in the pass's order: its
  // dense parameters over the data-parallel group, or (`experts`) its experts' over their
  // expert-data-parallel group.
  static std::vector<ParameterUnit> unit_parameters(const std::vector<Layer>& layers, bool backward, bool experts)
  {
    std::vector<ParameterUnit> units;
    for (const Layer& l : layers)
      units.push_back(experts ? ParameterUnit{l.expert_parameters, nullptr, l.recomputed}
                              : ParameterUnit{l.parameters, &l.tensors, l.recomputed, l.gathered_element_bytes});
    if (backward)
      std::reverse(units.begin(), units.end());
    return units;
  }


  void flush_bucket() { end_backward(true); }

  void reduce_gradients_and_step(TaskId last_compute)
  {
    const PipeOp none{PipeOp::Type::B, -1, 0};
    TaskId after = dp_.reduce_gradients(last_compute);
    if (p_ > 1 && tied_embedding_parameters_ > 0 && (stage_ == 0 || stage_ == p_ - 1)) {
      double bytes = tied_embedding_parameters_ * dp_.plan().gradient_bytes;
      after = collective(Stream::Data, CollectiveOp::AllReduce, embedding_group(coord_), bytes, Pass::Backward, none,
                         last_compute);
    }
    PassTasks tasks(*this, Pass::Optimizer, none);
    if (experts_sharded_) {
      const TaskId reduced = expert_dp_.reduce_gradients(last_compute);
      const TaskId done    = expert_dp_.step(reduced == ProgramBuilder::kNone ? after : reduced);
      builder_->depends(done, after); // the dense step still waits for the dense reductions
      after = done;
    } else {
      after = experts_.reduce_and_step(tasks, w_.works, after, last_compute);
    }
    dp_.step(after);
  }

  void lower_rank(int rank)
  {
    coord_            = layout_.coord_of(rank);
    stage_            = coord_.pipeline;
    tp_group_         = layout_.tensor > 1 ? tensor_group(coord_) : -1;
    begin_rank_blocks();
    blocking_send_    = ProgramBuilder::kNone;
    w_.ranks.emplace_back();
    w_.ranks.back().rank  = rank;
    w_.ranks.back().stage = stage_;
    ProgramBuilder builder(w_.ranks.back());
    builder_ = &builder;
    dp_.begin_rank(builder, dp_.plan().replicas ? data_group(coord_) : -1, stage_);
    if (experts_sharded_)
      expert_dp_.begin_rank(builder, expert_data_group_, stage_);

    std::vector<PipeOp> order = schedule_->order(stage_, lowered_shape_);
    // Weight updates: one per step, or one per micro-batch (PipeDream), over every lowered step.
    // The pass after which each update's weight gradients of each chunk are complete, and the
    // pass that completes the update over all chunks.
    const PipeOp::Type grad_pass = schedule_->splits_backward ? PipeOp::Type::W : PipeOp::Type::B;
    const int updates            = lowered_shape_.micro_batches / per_update_;
    std::vector<size_t> last_grad_pass(static_cast<size_t>(updates) * v_, 0);
    std::vector<size_t> update_done(static_cast<size_t>(updates), 0);
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i].type == grad_pass) {
        const int u = order[i].micro_batch / per_update_;
        last_grad_pass[static_cast<size_t>(u) * v_ + order[i].chunk] = i;
        update_done[u] = std::max(update_done[u], i);
      }

    for (size_t i = 0; i < order.size(); ++i) {
      const PipeOp& op = order[i];
      const int u      = op.micro_batch / per_update_;
      const bool last  = last_grad_pass[static_cast<size_t>(u) * v_ + op.chunk] == i;
      switch (op.type) {
      case PipeOp::Type::F: forward(op); break;
      case PipeOp::Type::B: backward(op, last); break;
      case PipeOp::Type::W: weight(op, last); break;
      }
      if (update_done[u] == i && u + 1 < updates) { // an update before the last: reduce, step, start afresh
        flush_bucket();
        reduce_gradients_and_step(last_compute_task());
        end_update(u);
      }
    }
    flush_bucket();
    reduce_gradients_and_step(last_compute_task());
    end_update(updates - 1);
    builder.finish();
    builder_ = nullptr;
    // The stage's other ranks copy to their own hosts at the same time (offload, FCDP).
    const auto& g = w_.ranks.back().graph;
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (g[v].kind == TaskKind::HostCopy) {
        transfer_copies(rank, -1);
        break;
      }
  }

  // Marks the end of a lowered step when update `u` is its last (only when several are lowered).
  void end_update(int u)
  {
    const size_t n = builder_->size();
    if (w_.steps > 1 && ((u + 1) * per_update_) % shape_.micro_batches == 0 && n > 0)
      w_.ranks.back().step_ends.push_back(n - 1);
  }

  TaskId last_compute_task() const
  {
    for (auto v = builder_->size(); v > 0; --v)
      if (builder_->task(v - 1).stream == Stream::Compute)
        return v - 1;
    return ProgramBuilder::kNone;
  }

  const Scenario& s_;
  const FrameworkProfile& framework_;
  double accumulation_bytes_per_parameter_ = 0; // the framework's, at the run's precision
  std::map<int, int> accumulation_works_;       // per virtual stage, its gradient-accumulation work
  int overlap_wait_work_ = -1;                  // overlap_wait_work(), once added
  Layout layout_;
  const int p_, v_;
  Workload w_;
  std::vector<VirtualStage> plan_;
  const PipelineSchedule* schedule_ = nullptr;
  PipelineShape shape_;         // one step
  PipelineShape lowered_shape_; // every lowered step (several without a flush)
  int per_update_ = 1;          // micro-batches per weight update
  std::map<std::string, int> group_ids_;
  bool reduced_     = false; // one representative per stage stands for its peers (run(), not run_one())
  bool list_copies_ = false; // Group::copies and Workload::transfer_copies (reduced, where peers may contend)

  // Per rank being lowered.
  RankCoord coord_;
  int stage_     = 0;
  int tp_group_  = -1;
  ProgramBuilder* builder_ = nullptr;
  TaskId blocking_send_    = ProgramBuilder::kNone; // a blocking send the next compute waits for
  DataParallelLowering dp_{s_, w_.works};
  // Context-parallel ring attention and MoE layers (from the model's plan, per rank by
  // begin_rank_blocks); custom_ maps a work to the block it stands for.
  std::vector<BlockKind> custom_;
  RingAttention ring_;
  int attention_backward_weight_ = -1;
  int ring_tag_                  = 0;
  bool moe_layers_ = false;
  MoeBlock moe_;
  double tied_embedding_parameters_ = 0;
  ExpertGradients experts_{s_};
  bool experts_sharded_  = false; // set with the plan
  int expert_data_group_ = -1;
  DataParallelLowering expert_dp_{s_, w_.works, layout_.experts().size(Axis::Data), "expert_optimizer"};
};

} // namespace

Workload lower(const Scenario& s)
{
  return Lowering(s).run();
}

Workload lower_one_rank(const Scenario& s, int rank)
{
  return Lowering(s).run_one(rank);
}

} // namespace stepsim
