#include "workloads/lower.hpp"

#include "workloads/cnn.hpp"
#include "workloads/layout.hpp"
#include "workloads/schedule.hpp"
#include "workloads/transformer.hpp"

#include <fmt/format.h>

#include <map>

namespace stepsim {

namespace {

// Gradients are reduced in the training precision (Megatron's default for fp16); fp32 training
// reduces fp32 gradients.
double gradient_bytes(const TrainingSpec& t)
{
  return element_bytes(t.precision) == 4 ? 4 : 2;
}

// Bytes moved through memory per parameter by one optimizer update of its shard (mixed precision
// Adam: fp32 master weight, gradient, two moments read; weight and moments written; low-precision
// copy of the weight written).
double optimizer_bytes_per_parameter(const TrainingSpec& t)
{
  return t.optimizer == "adam" ? 4 * 4 + 3 * 4 + 2 : 4 * 3 + 4 * 2;
}

// The model as the lowering walks it: per virtual stage, a list of layers; a layer is one or more
// blocks, each a compute work that a tensor-parallel collective may follow. A transformer's first
// virtual stage starts with the embedding and its last ends with the head; a CNN's layers are its
// modules. Work indices point into Workload::works; -1 = none.
struct Block {
  int forward = -1, backward = -1, recompute = -1;
  int backward_input = -1, backward_weight = -1; // schedules that split backward (ZB-H1)
  bool reduce_forward = false, reduce_backward = false; // tensor-parallel collective after it
};

struct Layer {
  std::vector<Block> blocks;
  double parameters = 0;   // per rank; their gradients join the data-parallel buckets
  bool recomputed  = false; // full recompute re-runs its forward before its backward
};

struct VirtualStage {
  std::vector<Layer> layers;
  double output_bytes = 0; // per rank: the activation sent to the next virtual stage
};

class Lowering {
public:
  explicit Lowering(const Scenario& s)
      : s_(s), layout_(s.parallelism), p_(s.parallelism.pipeline), v_(s.parallelism.virtual_stages)
  {
    w_.world_size = layout_.world_size();
    w_.stages     = p_;
    plan_         = is_cnn(s.model) ? cnn_plan() : transformer_plan();
    schedule_     = &ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
    shape_        = PipelineShape{p_, static_cast<int>(s.micro_batches_per_replica()), v_};
  }

  Workload run()
  {
    // Reserved up front: a growing vector would copy every graph built so far.
    w_.ranks.reserve(s_.simulation.fidelity == "full" ? layout_.world_size() : p_);
    if (s_.simulation.fidelity == "full") {
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
  // --- the model, per virtual stage -------------------------------------------------------------
  int add_work(std::string name, std::vector<Kernel> kernels)
  {
    if (kernels.empty())
      return -1;
    w_.works.push_back(Work{std::move(name), std::move(kernels), 0});
    return static_cast<int>(w_.works.size() - 1);
  }

  std::vector<VirtualStage> transformer_plan()
  {
    const TransformerWorks t = add_transformer_works(s_, w_.works);
    const bool full = s_.training.recompute == "full";
    Block attention{t.attention_forward, t.attention_backward, t.attention_recompute, t.attention_backward_input,
                    t.attention_backward_weight, true, true};
    Block mlp{t.mlp_forward, t.mlp_backward, t.mlp_recompute, t.mlp_backward_input, t.mlp_backward_weight, true, true};
    // The vocabulary-parallel embedding all-reduces its output; the head all-reduces its input
    // gradient. Neither is recomputed.
    Layer embedding{{Block{t.embedding_forward, t.embedding_backward, -1, t.embedding_backward, -1, true, false}},
                    embedding_parameters_per_rank(s_.model, layout_.tensor), false};
    Layer head{{Block{t.head_forward, t.head_backward, -1, t.head_backward, -1, false, true}}, head_parameters(), false};
    Layer layer{{attention, mlp}, layer_parameters_per_rank(s_.model, layout_.tensor), full};

    std::vector<VirtualStage> plan(static_cast<size_t>(p_ * v_));
    for (int vs = 0; vs < p_ * v_; ++vs) {
      auto& layers = plan[vs].layers;
      if (vs == 0)
        layers.push_back(embedding);
      layers.insert(layers.end(), static_cast<size_t>(s_.layers_in_virtual_stage(vs)), layer);
      if (vs == p_ * v_ - 1)
        layers.push_back(head);
      plan[vs].output_bytes = activation_bytes(s_) / layout_.tensor; // Megatron's scatter/gather across tensor peers
    }
    return plan;
  }

  std::vector<VirtualStage> cnn_plan()
  {
    const auto layers   = cnn_layers(s_.model, double(s_.training.micro_batch_size), element_bytes(s_.training.precision));
    const auto split    = cnn_stage_split(s_, layers);
    const bool full     = s_.training.recompute == "full";
    std::vector<VirtualStage> plan(split.size());
    size_t next = 0;
    for (size_t vs = 0; vs < split.size(); ++vs) {
      for (int i = 0; i < split[vs] && next < layers.size(); ++i, ++next) {
        const CnnLayer& l = layers[next];
        std::vector<Kernel> backward = l.backward_input;
        backward.insert(backward.end(), l.backward_weight.begin(), l.backward_weight.end());
        Block b;
        b.forward         = add_work(l.name + "_forward", l.forward);
        b.backward        = add_work(l.name + "_backward", backward);
        b.recompute       = full ? add_work(l.name + "_recompute", l.forward) : -1;
        b.backward_input  = add_work(l.name + "_backward_input", l.backward_input);
        b.backward_weight = add_work(l.name + "_backward_weight", l.backward_weight);
        plan[vs].layers.push_back(Layer{{b}, l.parameters, full});
        plan[vs].output_bytes = l.output_bytes;
      }
    }
    return plan;
  }

  // --- groups -------------------------------------------------------------------------------
  int group(const std::string& name, std::vector<int> ranks)
  {
    auto it = group_ids_.find(name);
    if (it != group_ids_.end())
      return it->second;
    w_.groups.push_back(Group{name, std::move(ranks)});
    return group_ids_[name] = static_cast<int>(w_.groups.size() - 1);
  }

  int tensor_group(const RankCoord& c)
  {
    std::vector<int> ranks;
    for (int t = 0; t < layout_.tensor; ++t)
      ranks.push_back(layout_.rank_of({t, c.context, c.data, c.pipeline}));
    return group(fmt::format("tensor/pp{}/dp{}/cp{}", c.pipeline, c.data, c.context), ranks);
  }

  // Gradients are reduced over data × context parallel peers.
  int data_group(const RankCoord& c)
  {
    std::vector<int> ranks;
    for (int d = 0; d < layout_.data; ++d)
      for (int cp = 0; cp < layout_.context; ++cp)
        ranks.push_back(layout_.rank_of({c.tensor, cp, d, c.pipeline}));
    return group(fmt::format("data/pp{}/tp{}", c.pipeline, c.tensor), ranks);
  }

  int embedding_group(const RankCoord& c)
  {
    return group(fmt::format("embedding/tp{}/dp{}/cp{}", c.tensor, c.data, c.context),
                 {layout_.rank_of({c.tensor, c.context, c.data, 0}), layout_.rank_of({c.tensor, c.context, c.data, p_ - 1})});
  }

  // --- tasks --------------------------------------------------------------------------------
  TaskId compute(int work, Pass pass, const PipeOp& op, TaskId after)
  {
    Task t;
    t.kind        = TaskKind::Compute;
    t.stream      = Stream::Compute;
    t.pass        = pass;
    t.work        = work;
    t.micro_batch = op.micro_batch;
    t.chunk       = op.chunk;
    TaskId id     = builder_->add(t);
    builder_->depends(id, after);
    return id;
  }

  TaskId collective(Stream stream, CollectiveOp op, int group_id, double bytes, Pass pass, const PipeOp& pipe_op,
                    TaskId after)
  {
    Task t;
    t.kind        = TaskKind::Collective;
    t.stream      = stream;
    t.op          = op;
    t.group       = group_id;
    t.bytes       = bytes;
    t.pass        = pass;
    t.micro_batch = pipe_op.micro_batch;
    t.chunk       = pipe_op.chunk;
    TaskId id     = builder_->add(t);
    builder_->depends(id, after);
    return id;
  }

  TaskId point_to_point(TaskKind kind, Stream stream, int peer, int tag, double bytes, Pass pass, const PipeOp& op,
                        TaskId after)
  {
    Task t;
    t.kind        = kind;
    t.stream      = stream;
    t.peer        = peer;
    t.tag         = tag;
    t.bytes       = bytes;
    t.pass        = pass;
    t.micro_batch = op.micro_batch;
    t.chunk       = op.chunk;
    TaskId id     = builder_->add(t);
    builder_->depends(id, after);
    return id;
  }

  // One tensor-parallel block: with sequence parallelism an all-gather before and a
  // reduce-scatter after the compute, otherwise one all-reduce after it.
  TaskId block(int work, Pass pass, const PipeOp& op, TaskId after, bool reduce = true)
  {
    if (work < 0)
      return after;
    if (!reduce)
      return compute(work, pass, op, after);
    const bool tp = layout_.tensor > 1;
    const bool sp = s_.parallelism.sequence_parallel;
    const double bytes = activation_bytes(s_);
    if (tp && sp)
      after = collective(Stream::Tensor, CollectiveOp::AllGather, tp_group_, bytes, pass, op, after);
    after = compute(work, pass, op, after);
    if (tp)
      after = collective(Stream::Tensor, sp ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce, tp_group_, bytes,
                         pass, op, after);
    return after;
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
    for (const Layer& layer : plan_[vs].layers)
      for (const Block& b : layer.blocks)
        after = block(b.forward, Pass::Forward, op, after, b.reduce_forward);
    if (vs < last_virtual_stage())
      point_to_point(TaskKind::Send, Stream::SendNext, rank_of_virtual_stage(vs + 1), tag(op.micro_batch, vs, false),
                     plan_[vs].output_bytes, Pass::Forward, op, after);
  }

  void backward(const PipeOp& op, bool last_for_chunk)
  {
    const int vs      = virtual_stage(op.chunk);
    const bool split  = schedule_->splits_backward;
    const Pass pass   = split ? Pass::BackwardInput : Pass::Backward;
    const bool grads  = last_for_chunk && !split; // weight gradients of the step are complete after this pass
    TaskId after      = ProgramBuilder::kNone;
    if (vs < last_virtual_stage())
      after = point_to_point(TaskKind::Recv, Stream::RecvNext, rank_of_virtual_stage(vs + 1), tag(op.micro_batch, vs, true),
                             plan_[vs].output_bytes, pass, op, after);
    const auto& layers = plan_[vs].layers;
    for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
      if (layer->recomputed)
        for (const Block& b : layer->blocks)
          after = block(b.recompute, Pass::Recompute, op, after, b.reduce_forward);
      for (auto b = layer->blocks.rbegin(); b != layer->blocks.rend(); ++b)
        after = block(split ? b->backward_input : b->backward, pass, op, after, b->reduce_backward);
      if (grads)
        gradients_ready(layer->parameters, after);
    }
    if (vs > 0)
      point_to_point(TaskKind::Send, Stream::SendPrev, rank_of_virtual_stage(vs - 1), tag(op.micro_batch, vs - 1, true),
                     plan_[vs - 1].output_bytes, pass, op, after);
    if (grads)
      flush_bucket();
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
      if (last_for_chunk)
        gradients_ready(layer->parameters, after);
    }
    if (last_for_chunk)
      flush_bucket();
  }

  double head_parameters() const
  {
    return s_.model.tied_embeddings ? 0.0 : double(s_.model.vocab_size) * s_.model.hidden_size / layout_.tensor;
  }

  // --- data-parallel gradient reduction in buckets -----------------------------------------
  struct Bucket {
    double bytes = 0;
    TaskId ready = ProgramBuilder::kNone;
  };

  void gradients_ready(double parameters, TaskId produced_by)
  {
    pending_.bytes += parameters * gradient_bytes(s_.training);
    if (produced_by != ProgramBuilder::kNone)
      pending_.ready = produced_by;
    stage_parameters_ += parameters;
    if (pending_.bytes >= s_.parallelism.bucket_bytes)
      flush_bucket();
  }

  void flush_bucket()
  {
    if (pending_.bytes > 0)
      buckets_.push_back(pending_);
    pending_ = Bucket{};
  }

  void reduce_gradients_and_step(TaskId last_compute)
  {
    const bool sharded = s_.parallelism.zero_stage >= 1;
    const bool dp      = layout_.data * layout_.context > 1;
    const PipeOp none{PipeOp::Type::B, -1, 0};
    TaskId after = ProgramBuilder::kNone;
    for (const auto& b : buckets_) {
      if (!dp)
        break;
      TaskId ready = s_.parallelism.overlap_grad_reduce && b.ready != ProgramBuilder::kNone ? b.ready : last_compute;
      after = collective(Stream::Data, sharded ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce, data_group(coord_),
                         b.bytes, Pass::Backward, none, ready);
    }
    if (p_ > 1 && !is_cnn(s_.model) && s_.model.tied_embeddings && (stage_ == 0 || stage_ == p_ - 1)) {
      double bytes = double(s_.model.vocab_size) * s_.model.hidden_size / layout_.tensor * gradient_bytes(s_.training);
      after = collective(Stream::Data, CollectiveOp::AllReduce, embedding_group(coord_), bytes, Pass::Backward, none,
                         last_compute);
    }
    double shard = stage_parameters_ / (sharded ? layout_.data * layout_.context : 1);
    w_.works.push_back(Work{fmt::format("optimizer_stage{}", stage_),
                            {memory_kernel("optimizer_step", shard * optimizer_bytes_per_parameter(s_.training))},
                            0});
    TaskId step = compute(static_cast<int>(w_.works.size() - 1), Pass::Optimizer, none, after);
    if (sharded && dp) // the distributed optimizer gathers the updated weights back
      collective(Stream::Data, CollectiveOp::AllGather, data_group(coord_),
                 stage_parameters_ * element_bytes(s_.training.precision), Pass::Optimizer, none, step);
  }

  void lower_rank(int rank)
  {
    coord_            = layout_.coord_of(rank);
    stage_            = coord_.pipeline;
    tp_group_         = layout_.tensor > 1 ? tensor_group(coord_) : -1;
    buckets_.clear();
    pending_          = Bucket{};
    stage_parameters_ = 0;
    w_.ranks.push_back(RankProgram{rank, stage_, {}});
    ProgramBuilder builder(w_.ranks.back());
    builder_ = &builder;

    std::vector<PipeOp> order = schedule_->order(stage_, shape_);
    // The pass after which each chunk's weight gradients are complete.
    const PipeOp::Type grad_pass = schedule_->splits_backward ? PipeOp::Type::W : PipeOp::Type::B;
    std::vector<size_t> last_grad_pass(v_, 0);
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i].type == grad_pass)
        last_grad_pass[order[i].chunk] = i;

    for (size_t i = 0; i < order.size(); ++i) {
      const PipeOp& op = order[i];
      const bool last  = last_grad_pass[op.chunk] == i;
      switch (op.type) {
      case PipeOp::Type::F: forward(op); break;
      case PipeOp::Type::B: backward(op, last); break;
      case PipeOp::Type::W: weight(op, last); break;
      }
    }
    flush_bucket();
    reduce_gradients_and_step(last_compute_task());
    builder_ = nullptr;
  }

  TaskId last_compute_task() const
  {
    const auto& g = w_.ranks.back().graph;
    for (auto v = boost::num_vertices(g); v > 0; --v)
      if (g[v - 1].stream == Stream::Compute)
        return v - 1;
    return ProgramBuilder::kNone;
  }

  const Scenario& s_;
  Layout layout_;
  const int p_, v_;
  Workload w_;
  std::vector<VirtualStage> plan_;
  const PipelineSchedule* schedule_ = nullptr;
  PipelineShape shape_;
  std::map<std::string, int> group_ids_;

  // Per rank being lowered.
  RankCoord coord_;
  int stage_     = 0;
  int tp_group_  = -1;
  ProgramBuilder* builder_ = nullptr;
  std::vector<Bucket> buckets_;
  Bucket pending_;
  double stage_parameters_ = 0;
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
