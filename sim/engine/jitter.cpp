#include "sim/engine/jitter.hpp"

#include <cmath>
#include <cstdint>

namespace stepsim::engine {

double jitter_factor(unsigned seed, double sigma, int rank, TaskId task)
{
  // Box-Muller on two uniforms from a SplitMix64 stream keyed by (seed, rank, task): the same
  // noise on every run and platform, independent of the order tasks happen to start in.
  auto next = [](uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z          = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z          = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  uint64_t state   = (uint64_t(seed) << 40) ^ (uint64_t(rank) << 24) ^ uint64_t(task) * 0x100000001B3ULL;
  const double u1  = (double(next(state) >> 11) + 0.5) / 9007199254740992.0;
  const double u2  = (double(next(state) >> 11) + 0.5) / 9007199254740992.0;
  const double z   = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  const double sig = sigma;
  return std::exp(sig * z - 0.5 * sig * sig);
}

} // namespace stepsim::engine
