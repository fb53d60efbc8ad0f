// FLOPs per step, as the model's kind counts them (workloads/models/model_kind.hpp).
#include "workloads/lower.hpp"
#include "workloads/models/model_kind.hpp"

namespace stepsim {

double model_flops_per_step(const Scenario& s)
{
  return model_kind(s.model).model_flops_per_step(s);
}

double hardware_flops_per_step(const Scenario& s)
{
  return model_kind(s.model).hardware_flops_per_step(s);
}

} // namespace stepsim
