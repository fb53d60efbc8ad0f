// `stepsim list` and `stepsim devices`: what the registries and the device catalogue hold.
#include "models/collectives/collective.hpp"
#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "topologies/preset.hpp"
#include "tools/stepsim/command.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/schedules/schedule.hpp"
#include "workloads/traces/recorded_trace.hpp"

#include <fmt/format.h>

namespace stepsim {
namespace {

template <class R> void print_registry(const char* title)
{
  fmt::print("{}:\n", title);
  for (const auto& [name, item] : R::all())
    fmt::print("  {:<20} {}\n", name, item.description);
}

int list()
{
  print_registry<ScheduleRegistry>("schedules (parallelism.schedule)");
  print_registry<CollectiveRegistry>("collective algorithms (simulation.collective_algorithm)");
  print_registry<FabricRegistry>("fabrics (platform.network.topology)");
  print_registry<NodeTypeRegistry>("node types (platform.node_groups[].intra_node.type)");
  print_registry<ComputeModelRegistry>("compute models (simulation.compute_model)");
  print_registry<FrameworkRegistry>("framework profiles (training.framework)");
  print_registry<ModelKindRegistry>("model kinds (model.architecture)");
  print_registry<TraceFormatRegistry>("recorded trace formats (stepsim replay, told by each file's content)");
  fmt::print("platform presets (platform.preset; configs/platforms/):\n");
  for (const auto& name : platform_preset_names())
    fmt::print("  {:<20} {}\n", name, platform_preset_summary(name));
  return 0;
}

int devices()
{
  for (const auto& name : device_names()) {
    Device d = load_device(name, "device");
    fmt::print("  {:<20} {:>7.1f} TFLOP/s bf16  {:>6.0f} GB  {:>6.0f} GB/s  {:>4} SMs{}\n", name, d.peak("bf16") / 1e12,
               d.memory_bytes / 1e9, d.memory_bandwidth_Bps / 1e9, d.sm_count,
               d.calibration_of.empty() ? "" : "  calibrated as " + d.calibration_of);
  }
  return 0;
}

const bool registered_list = CommandRegistry::add(
    "list", "list schedules, collective algorithms, fabrics, cost models, trace formats",
    Command{[](CLI::App&) -> std::function<int()> { return list; }});
const bool registered_devices = CommandRegistry::add(
    "devices", "list the device catalogue", Command{[](CLI::App&) -> std::function<int()> { return devices; }});

} // namespace
} // namespace stepsim
