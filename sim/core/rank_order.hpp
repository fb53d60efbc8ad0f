// How global ranks are numbered from the parallel plan's coordinates: parallelism.rank_order,
// Megatron-LM's RankGenerator order ("tp-cp-ep-dp-pp" by default, innermost first). The first axis
// varies fastest, so consecutive ranks (which share a node) differ in it: the default keeps
// tensor-parallel peers on one node and puts pipeline stages farthest apart.
//
// Megatron numbers ranks twice with the same order string (megatron/core/parallel_state.py):
//   - dense layers: tp, cp, dp, pp (ep dropped, it has size 1 there);
//   - expert layers: tp, ep, expert-data, pp, where expert-data = data × context / expert takes
//     dp's place and cp is dropped, so expert groups are carved out of the data × context ranks.
// It refuses an order under which the two numberings give different pipeline groups, since a
// stage must hold the same ranks for both; so does stepsim (rank_order_problem).
#pragma once

#include "sim/core/scenario.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace stepsim {

enum class Axis : uint8_t { Tensor, Context, Expert, Data, Pipeline };
inline constexpr int kAxes = 5;
using AxisCoords = std::array<int, kAxes>; // indexed by Axis

// The axes of p.rank_order ("tp-cp-ep-dp-pp"), innermost first, completed as Megatron's
// RankGenerator does: an axis may be left out only when its degree is 1 (it is then outermost,
// where it changes nothing); ep, when left out, sits just inside dp, where Megatron's orders put
// it. Throws std::invalid_argument saying what is expected (unknown or repeated axis, a missing
// axis of degree above 1).
std::vector<Axis> rank_order_axes(const ParallelSpec& p);

// Ranks laid out over axes of given sizes in a given order (axes not in the order have size 1).
class RankGrid {
public:
  RankGrid(std::vector<Axis> order, const AxisCoords& sizes);
  int world_size() const { return world_; }
  int size(Axis a) const { return sizes_[static_cast<size_t>(a)]; }
  int stride(Axis a) const { return strides_[static_cast<size_t>(a)]; }
  AxisCoords coords_of(int rank) const;
  int rank_of(const AxisCoords& c) const;
  // The ranks that share every coordinate of `rank` but those of `varying`, in Megatron's order
  // (the varying axis that comes first in the rank order varies fastest): a group's ring order.
  std::vector<int> group(int rank, std::initializer_list<Axis> varying) const;

private:
  std::vector<Axis> order_;
  AxisCoords sizes_{}, strides_{};
  int world_ = 1;
};

// The dense layers' numbering (tp, cp, dp, pp) and the expert layers' (tp, ep, expert-data, pp).
RankGrid dense_grid(const ParallelSpec& p);
RankGrid expert_grid(const ParallelSpec& p);

// Why the order cannot number a mixture-of-experts plan (Megatron's own checks), or "" when it can.
std::string rank_order_problem(const ParallelSpec& p);

} // namespace stepsim
