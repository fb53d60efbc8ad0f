#include "models/compute_model.hpp"

namespace stepsim {

void assign_work_seconds(Workload& workload, const Device& device, const ComputeModel& model,
                         const std::string& precision)
{
  for (auto& work : workload.works) {
    work.seconds = 0;
    for (const auto& k : work.kernels)
      work.seconds += model.kernel_seconds(k, device, precision);
  }
}

} // namespace stepsim
