// `stepsim replay TRACE_FILES... --platform FILE`: replay a recorded step (PyTorch profiler or
// Chakra traces, one file per rank) on a scenario's platform: compute as recorded (or re-timed for
// another device), communication re-timed by the network model (sim/trace_replay.hpp).
#include "sim/trace_replay.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <memory>

namespace stepsim {
namespace {

struct ReplayCommandOptions {
  TraceReplayOptions replay;
  std::string json_out;
  bool quiet = false;
};

int run(const ReplayCommandOptions& o)
{
  const TraceReplayReport report = replay_traces(o.replay);
  if (o.json_out == "-")
    fmt::print("{}\n", to_json(report).dump(2));
  else if (!o.json_out.empty())
    write_text_file(o.json_out, to_json(report).dump(2) + "\n");
  if (!o.quiet && o.json_out != "-")
    fmt::print("{}", to_table(report));
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<ReplayCommandOptions>();
  sub.add_option("TRACE_FILES", o->replay.files,
                 "one trace per rank: PyTorch profiler (Kineto) JSON or Chakra .et files, told apart by content")
      ->required();
  sub.add_option("--platform", o->replay.platform_file,
                 "scenario or platform file whose platform (and simulation settings) replays the traces")
      ->required();
  sub.add_option("--set", o->replay.sets, "override a field of the platform file: path=value (repeatable)");
  sub.add_option("--device", o->replay.device,
                 "re-time compute for this device of configs/devices (default: each rank's GPU on the platform)");
  sub.add_option("--recorded-on", o->replay.recorded_on,
                 "the device the traces were recorded on (default: each rank's GPU on the platform); where it "
                 "differs from the target, compute is re-timed by the kernel model");
  sub.add_option("--json", o->json_out, "write the result as JSON to this file (- = standard output, no table)");
  sub.add_flag("--quiet,-q", o->quiet, "print nothing (use with --json)");
  sub.footer("Examples:\n"
             "  stepsim replay configs/traces/dp2-kineto/rank0.json configs/traces/dp2-kineto/rank1.json \\\n"
             "      --platform configs/traces/dp2-platform.json\n"
             "  stepsim replay configs/traces/dp2-kineto/rank*.json --platform configs/traces/dp2-platform.json \\\n"
             "      --set platform.node_groups.0.gpu=H100-SXM --recorded-on A100-SXM4-80GB   # on H100s\n"
             "  stepsim replay trace.0.et trace.1.et --platform configs/scenarios/default.json --json replay.json");
  return [o] { return run(*o); };
}

const bool registered = CommandRegistry::add(
    "replay", "replay recorded traces (PyTorch profiler, Chakra) on a platform, communication re-timed",
    Command{setup});

} // namespace
} // namespace stepsim
