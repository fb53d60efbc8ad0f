#include "sim/core/rank_order.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace stepsim {

namespace {

constexpr std::array<const char*, kAxes> kTokens = {"tp", "cp", "ep", "dp", "pp"};

size_t at(Axis a) { return static_cast<size_t>(a); }

std::vector<Axis> without(std::vector<Axis> order, Axis a)
{
  order.erase(std::remove(order.begin(), order.end(), a), order.end());
  return order;
}

} // namespace

std::vector<Axis> rank_order_axes(const ParallelSpec& p)
{
  const std::string& order   = p.rank_order;
  const std::string expected = "expected tp, cp, ep, dp and pp, each at most once, joined by '-', innermost first, "
                               "like \"tp-cp-ep-dp-pp\"";
  std::vector<Axis> axes;
  size_t start = 0;
  while (start <= order.size()) {
    const size_t end        = std::min(order.find('-', start), order.size());
    const std::string token = order.substr(start, end - start);
    const auto it           = std::find(kTokens.begin(), kTokens.end(), token);
    if (it == kTokens.end())
      throw std::invalid_argument(fmt::format("unknown axis \"{}\" in \"{}\": {}", token, order, expected));
    const Axis a = static_cast<Axis>(it - kTokens.begin());
    if (std::find(axes.begin(), axes.end(), a) != axes.end())
      throw std::invalid_argument(fmt::format("\"{}\" appears twice in \"{}\": {}", token, order, expected));
    axes.push_back(a);
    start = end + 1;
  }
  const std::pair<Axis, int> degrees[] = {
      {Axis::Tensor, p.tensor}, {Axis::Context, p.context}, {Axis::Data, p.data}, {Axis::Pipeline, p.pipeline}};
  for (const auto& [a, degree] : degrees) {
    if (std::find(axes.begin(), axes.end(), a) != axes.end())
      continue;
    if (degree > 1)
      throw std::invalid_argument(fmt::format("\"{}\" is missing from \"{}\" but its degree is {}: {}", kTokens[at(a)],
                                              order, degree, expected));
    axes.push_back(a);
  }
  if (std::find(axes.begin(), axes.end(), Axis::Expert) == axes.end())
    axes.insert(std::find(axes.begin(), axes.end(), Axis::Data), Axis::Expert);
  return axes;
}

RankGrid::RankGrid(std::vector<Axis> order, const AxisCoords& sizes) : order_(std::move(order))
{
  sizes_.fill(1);
  strides_.fill(0);
  for (Axis a : order_) {
    sizes_[at(a)]   = sizes[at(a)];
    strides_[at(a)] = world_;
    world_ *= sizes[at(a)];
  }
}

AxisCoords RankGrid::coords_of(int rank) const
{
  AxisCoords c{};
  for (Axis a : order_) {
    c[at(a)] = rank % sizes_[at(a)];
    rank /= sizes_[at(a)];
  }
  return c;
}

int RankGrid::rank_of(const AxisCoords& c) const
{
  int rank = 0;
  for (Axis a : order_)
    rank += c[at(a)] * strides_[at(a)];
  return rank;
}

std::vector<int> RankGrid::group(int rank, std::initializer_list<Axis> varying) const
{
  std::vector<Axis> axes; // the varying axes, innermost first
  int members = 1;
  for (Axis a : order_)
    if (std::find(varying.begin(), varying.end(), a) != varying.end()) {
      axes.push_back(a);
      members *= sizes_[at(a)];
    }
  AxisCoords c = coords_of(rank);
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(members));
  for (int i = 0; i < members; ++i) {
    int rest = i;
    for (Axis a : axes) {
      c[at(a)] = rest % sizes_[at(a)];
      rest /= sizes_[at(a)];
    }
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

RankGrid dense_grid(const ParallelSpec& p)
{
  return RankGrid(without(rank_order_axes(p), Axis::Expert), {p.tensor, p.context, 1, p.data, p.pipeline});
}

// Megatron's expert RankGenerator numbers a stage's tensor × context × data ranks as expert
// tensor (innermost), expert, expert-data: with the experts' own tensor size the expert groups
// take ranks of the dense tensor group (expert_tensor below tensor) or of several (above it).
RankGrid expert_grid(const ParallelSpec& p)
{
  const int etp         = expert_tensor_size(p);
  const int expert_data = p.tensor * p.context * p.data / std::max(1, etp * p.expert);
  return RankGrid(without(rank_order_axes(p), Axis::Context), {etp, 1, p.expert, expert_data, p.pipeline});
}

std::string rank_order_problem(const ParallelSpec& p)
{
  const RankGrid dense  = dense_grid(p);
  const RankGrid expert = expert_grid(p);
  const int expert_data = expert.size(Axis::Data);
  if (p.pipeline > 1 && expert_data != p.data && !p.rank_order.ends_with("pp")) {
    if (expert_tensor_size(p) != p.tensor)
      return fmt::format("\"{}\" does not put pp outermost, so the expert layers' data-parallel size (tensor {} × "
                         "data {} × context {} / (expert_tensor {} × expert {}) = {}) must equal data {}, as Megatron "
                         "requires",
                         p.rank_order, p.tensor, p.data, p.context, expert_tensor_size(p), p.expert, expert_data,
                         p.data);
    return fmt::format("\"{}\" does not put pp outermost, so the expert layers' data-parallel size (data {} × context "
                       "{} / expert {} = {}) must equal data {}, as Megatron requires",
                       p.rank_order, p.data, p.context, p.expert, expert_data, p.data);
  }
  for (int rank = 0; rank < dense.world_size(); ++rank) {
    if (dense.coords_of(rank)[at(Axis::Pipeline)] != 0)
      continue;
    const auto a = dense.group(rank, {Axis::Pipeline});
    const auto b = expert.group(rank, {Axis::Pipeline});
    if (a != b)
      return fmt::format("under \"{}\" the pipeline group of rank {} is {} for dense layers but {} for expert layers "
                         "(numbered without cp, with ep {} and expert data {}): a stage must hold the same ranks for "
                         "both, as Megatron requires; move cp next to dp or pp outermost",
                         p.rank_order, rank, fmt::join(a, ","), fmt::join(b, ","), p.expert, expert_data);
  }
  return "";
}

} // namespace stepsim
