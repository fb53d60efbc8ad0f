// Replaying recorded traces (`stepsim replay`, sim/trace_replay.hpp): a 2-rank data-parallel step
// written here as PyTorch profiler (Kineto) JSON and as Chakra .et files, whose right answers are
// known: the recorded all-reduce takes what the network model gives on the platform, so a replay
// on that platform must give the recorded step; re-timed for another device only the compute
// changes, by the kernel model's ratio; the Chakra trace of the same step gives the same step.
#include "support.hpp"

#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "tools/driver/collective_bench.hpp"
#include "workloads/traces/et_def.pb.h"
#include "workloads/traces/recorded_trace.hpp"

#include <google/protobuf/util/delimited_message_util.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace stepsim;
using namespace stepsim::testing;
using nlohmann::json;

namespace {

const std::string kSource   = STEPSIM_SOURCE_DIR;
const std::string kPlatform = kSource + "/configs/traces/dp2-platform.json";

// The step, in microseconds: forward GEMM, weight-gradient GEMM, the gradients' all-reduce (100 MB
// of fp32 on a communication stream), the optimizer; the CPU leaves `gap` between them.
struct Step {
  double forward = 1500, backward = 3000, optimizer = 400, gap = 10;
  double allreduce = 0; // recorded duration
  double elements  = 25e6;
  bool sync_events = true; // cuda_sync "Stream Wait Event"s (enable_cuda_sync_events)
  double total() const { return forward + backward + allreduce + optimizer + 3 * gap; }
};

// What the network model gives for the step's all-reduce on the example platform.
double allreduce_us(const Step& step)
{
  const Scenario s = platform_scenario("", kPlatform, 0);
  return time_collective(s.platform, {0, 1}, CollectiveOp::AllReduce, step.elements * 4, s.simulation.collective_algorithm,
                         s.simulation.network_fidelity == "analytic", s.simulation.nccl_protocol)
             .seconds *
         1e6;
}

json cpu_op(const std::string& name, double ts, double dur, int external, json extra = json::object())
{
  extra["External id"] = external;
  return {{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 4242}, {"tid", 4242}, {"ts", ts}, {"dur", dur}, {"args", extra}};
}
json runtime(const std::string& name, double ts, int correlation, int external)
{
  return {{"ph", "X"},   {"cat", "cuda_runtime"}, {"name", name}, {"pid", 4242},
          {"tid", 4242}, {"ts", ts},              {"dur", 4},     {"args", {{"cbid", 211}, {"correlation", correlation}, {"External id", external}}}};
}
json kernel(const std::string& name, double ts, double dur, int stream, int correlation, int external)
{
  return {{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", 0}, {"tid", stream}, {"ts", ts}, {"dur", dur},
          {"args",
           {{"External id", external}, {"queued", 0}, {"device", 0}, {"context", 1}, {"stream", stream},
            {"correlation", correlation}, {"registers per thread", 128}, {"shared memory", 0}, {"grid", {1, 1, 1}},
            {"block", {128, 1, 1}}}}};
}
json wait(double ts, int stream, int on_stream, int record_correlation, int correlation)
{
  return {{"ph", "X"}, {"cat", "cuda_sync"}, {"name", "Stream Wait Event"}, {"pid", 0}, {"tid", stream}, {"ts", ts}, {"dur", 0},
          {"args",
           {{"cuda_sync_kind", "Stream Wait Event"}, {"wait_on_stream", on_stream},
            {"wait_on_cuda_event_record_corr_id", record_correlation}, {"wait_on_cuda_event_id", 1}, {"stream", stream},
            {"correlation", correlation}, {"device", 0}, {"context", 1}}}};
}

// One rank's trace as torch.profiler exports it (the events stepsim reads, and a few it skips).
json kineto_trace(int rank, const Step& s, const std::string& ranks = "[0, 1]")
{
  const double t0 = 1'700'000'000'000.0 + rank * 37; // the ranks' clocks differ
  const double bwd = t0 + s.forward + s.gap, ar = bwd + s.backward + s.gap, opt = ar + s.allreduce + s.gap;
  json bf16_gemm = {{"Input Dims", {{4096, 8192}, {8192, 8192}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}};
  json wgrad     = {{"Input Dims", {{8192, 4096}, {4096, 8192}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}};
  json comms     = {{"Collective name", "allreduce"}, {"dtype", "Float"}, {"In msg nelems", s.elements},
                {"Out msg nelems", s.elements},  {"In split size", "[]"}, {"Out split size", "[]"},
                {"Global rank start", 0}, {"Global rank stride", 1}, {"Group size", 2},
                {"Process Group Name", "0"},     {"Process Group Description", "default_pg"},
                {"Process Group Ranks", ranks},  {"Rank", rank}};
  json events = json::array({
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "GPU 0"}}}},
      cpu_op("aten::mm", t0 - 30, 40, 1, bf16_gemm),
      runtime("cudaLaunchKernel", t0 - 20, 101, 1),
      kernel("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32", t0, s.forward, 7, 101, 1),
      cpu_op("aten::mm", bwd - 30, 40, 2, wgrad),
      runtime("cudaLaunchKernel", bwd - 20, 102, 2),
      kernel("sm80_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x32", bwd, s.backward, 7, 102, 2),
      runtime("cudaEventRecord", bwd - 15, 103, 0),
      runtime("cudaStreamWaitEvent", bwd - 12, 104, 0),
      cpu_op("record_param_comms", bwd - 10, 30, 4, comms),
      runtime("cudaLaunchKernel", bwd - 5, 105, 4),
      kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", ar, s.allreduce, 20, 105, 4),
      runtime("cudaEventRecord", bwd, 106, 0),
      runtime("cudaStreamWaitEvent", bwd + 3, 107, 0),
      cpu_op("aten::_foreach_add_", bwd + 5, 30, 5),
      runtime("cudaLaunchKernel", bwd + 10, 108, 5),
      kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::TensorListMetadata<2>>", opt,
             s.optimizer, 7, 108, 5),
  });
  if (s.sync_events) {
    events.push_back(wait(ar - s.gap, 20, 7, 103, 104));
    events.push_back(wait(opt - s.gap, 7, 20, 106, 107));
  }
  return {{"schemaVersion", 1},
          {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA A100-SXM4-80GB"}}}},
          {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
          {"traceEvents", events}};
}

std::string folder(const std::string& name)
{
  auto dir = std::filesystem::temp_directory_path() / ("stepsim-traces-" + std::to_string(getpid())) / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string write(const std::string& path, const std::string& text)
{
  std::ofstream(path) << text;
  return path;
}

std::string kineto_files(const std::string& name, const Step& s)
{
  const std::string dir = folder(name);
  return write(dir + "/rank0.json", kineto_trace(0, s).dump()) + " " + write(dir + "/rank1.json", kineto_trace(1, s).dump());
}

// One rank's Chakra trace of the same step, with the generated classes (Chakra's protolib.py
// encodeMessage: each message after its length as a varint).
std::string chakra_file(const std::string& path, int rank, const Step& s, bool cycle = false, bool missing = false,
                        long long comm_type = ChakraProtoMsg::ALL_REDUCE)
{
  std::ofstream out(path, std::ios::binary);
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  google::protobuf::util::SerializeDelimitedToOstream(metadata, &out);
  const double t0 = 1'700'000'000'000.0 + rank * 37;
  auto node       = [&](uint64_t id, const std::string& name, ChakraProtoMsg::NodeType type, double start, double dur,
                  std::vector<uint64_t> deps) {
    ChakraProtoMsg::Node n;
    n.set_id(id);
    n.set_name(name);
    n.set_type(type);
    n.set_start_time_micros(static_cast<uint64_t>(start));
    n.set_duration_micros(static_cast<uint64_t>(dur));
    for (auto d : deps)
      n.add_data_deps(d);
    auto* a = n.add_attr();
    a->set_name("is_cpu_op");
    a->set_bool_val(false);
    return n;
  };
  const double bwd = t0 + s.forward + s.gap, ar = bwd + s.backward + s.gap, opt = ar + s.allreduce + s.gap;
  std::vector<ChakraProtoMsg::Node> nodes;
  // A host op that launched the forward: no time, its dependency kept.
  ChakraProtoMsg::Node host = node(10, "aten::mm", ChakraProtoMsg::COMP_NODE, t0 - 30, 40, {});
  host.mutable_attr(0)->set_bool_val(true);
  nodes.push_back(host);
  nodes.push_back(node(1, "sm80_xmma_gemm_fwd", ChakraProtoMsg::COMP_NODE, t0, s.forward, cycle ? std::vector<uint64_t>{10, 2} : std::vector<uint64_t>{10}));
  nodes.push_back(node(2, "sm80_xmma_gemm_wgrad", ChakraProtoMsg::COMP_NODE, bwd, s.backward, {1}));
  ChakraProtoMsg::Node coll = node(3, "ncclDevKernel_AllReduce", ChakraProtoMsg::COMM_COLL_NODE, ar, s.allreduce,
                                   missing ? std::vector<uint64_t>{2, 99} : std::vector<uint64_t>{2});
  auto* type = coll.add_attr();
  type->set_name("comm_type");
  type->set_int64_val(comm_type);
  auto* size = coll.add_attr();
  size->set_name("comm_size");
  size->set_int64_val(static_cast<int64_t>(s.elements * 4));
  auto* pg = coll.add_attr();
  pg->set_name("pg_name");
  pg->set_string_val("0");
  nodes.push_back(coll);
  nodes.push_back(node(4, "multi_tensor_apply_kernel", ChakraProtoMsg::COMP_NODE, opt, s.optimizer, {3}));
  for (const auto& n : nodes)
    google::protobuf::util::SerializeDelimitedToOstream(n, &out);
  return path;
}

// Chakra traces node by node.
ChakraProtoMsg::Node et_node(uint64_t id, const std::string& name, ChakraProtoMsg::NodeType type,
                             std::vector<uint64_t> deps = {}, double duration_us = 0)
{
  ChakraProtoMsg::Node n;
  n.set_id(id);
  n.set_name(name);
  n.set_type(type);
  n.set_duration_micros(static_cast<uint64_t>(duration_us));
  for (auto d : deps)
    n.add_data_deps(d);
  return n;
}
ChakraProtoMsg::Node with(ChakraProtoMsg::Node n, const std::string& name, long long value)
{
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(value);
  return n;
}
ChakraProtoMsg::Node with(ChakraProtoMsg::Node n, const std::string& name, const std::string& value)
{
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_string_val(value);
  return n;
}
std::string write_et(const std::string& path, const std::vector<ChakraProtoMsg::Node>& nodes)
{
  std::ofstream out(path, std::ios::binary);
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  google::protobuf::util::SerializeDelimitedToOstream(metadata, &out);
  for (const auto& n : nodes)
    google::protobuf::util::SerializeDelimitedToOstream(n, &out);
  return path;
}
ChakraProtoMsg::Node all_reduce(uint64_t id, const std::string& group, std::vector<uint64_t> deps, double bytes)
{
  return with(with(with(et_node(id, "all_reduce_" + group, ChakraProtoMsg::COMM_COLL_NODE, deps), "comm_type",
                        ChakraProtoMsg::ALL_REDUCE),
                   "comm_size", static_cast<long long>(bytes)),
              "pg_name", group);
}

json replay(const std::string& arguments)
{
  const std::string out = folder("out") + "/replay.json";
  std::filesystem::remove(out);
  const CommandResult r = run_stepsim("replay " + arguments + " --json " + out + " --quiet");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return json::parse(read_text_file(out));
}

double kernel_us(const Kernel& k, const std::string& device)
{
  const auto& model = ComputeModelRegistry::get("kernel", "test");
  return model.kernel_seconds(k, load_device(device, "test"), "bf16") * 1e6;
}

// Runs `replay` on bad input: exit 2, every `expected` text in the message, no library's text.
void refused(const std::string& arguments, const std::vector<std::string>& expected)
{
  const CommandResult r = run_stepsim("replay " + arguments);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("error: ") != std::string::npos);
  for (const auto& e : expected)
    CHECK(r.output.find(e) != std::string::npos);
  CHECK(r.output.find("terminate") == std::string::npos);
  CHECK(r.output.find("json.exception") == std::string::npos);
  CHECK(r.output.find("[libprotobuf") == std::string::npos);
}

} // namespace

TEST_CASE("a Kineto trace replayed on the platform it was recorded on gives the recorded step", "[traces]")
{
  Step s;
  s.allreduce = allreduce_us(s);
  REQUIRE(s.allreduce > 1000); // the all-reduce is a large part of the step: a replay that lost it would show
  for (bool sync : {true, false}) {
    SECTION(sync ? "with the cuda_sync events" : "without them (cross-stream order inferred)")
    {
      s.sync_events = sync;
      const json r  = replay(kineto_files(sync ? "sync" : "nosync", s) + " --platform " + kPlatform);
      CHECK(r["format"] == "kineto");
      CHECK(r["recorded_step_time_s"].get<double>() * 1e6 == Approx(s.total()).epsilon(1e-7)); // ts near 1.7e12 us
      CHECK(r["step_time_s"].get<double>() * 1e6 == Approx(s.total()).epsilon(0.02));
      for (const auto& rank : r["ranks"]) {
        CHECK(rank["replayed"]["compute_s"].get<double>() * 1e6 ==
              Approx(s.forward + s.backward + s.optimizer).epsilon(1e-9));
        CHECK(rank["replayed"]["comm_s"].get<double>() * 1e6 == Approx(s.allreduce).epsilon(0.02));
        CHECK(rank["replayed"]["exposed_comm_s"].get<double>() == Approx(rank["recorded"]["exposed_comm_s"].get<double>()).epsilon(0.02));
      }
    }
  }
  SECTION("an all-reduce recorded slower than the network model's is re-timed")
  {
    Step slow     = s;
    slow.allreduce = 2 * s.allreduce;
    const json r   = replay(kineto_files("slow", slow) + " --platform " + kPlatform);
    CHECK(r["recorded_step_time_s"].get<double>() * 1e6 == Approx(slow.total()).epsilon(1e-7));
    CHECK(r["step_time_s"].get<double>() * 1e6 == Approx(s.total()).epsilon(0.02));
  }
}

TEST_CASE("re-timed for another device, only the compute of a Kineto trace changes", "[traces]")
{
  Step s;
  s.allreduce        = allreduce_us(s);
  const std::string files = kineto_files("retime", s);
  const json same    = replay(files + " --platform " + kPlatform);
  const json h100    = replay(files + " --platform " + kPlatform + " --recorded-on A100-SXM4-80GB --device H100-SXM");
  // GEMMs by the kernel model's ratio, the optimizer (no shape) by the memory bandwidth's.
  const double forward  = s.forward * kernel_us(gemm("aten::mm", 4096, 8192, 8192, 2), "H100-SXM") /
                         kernel_us(gemm("aten::mm", 4096, 8192, 8192, 2), "A100-SXM4-80GB");
  const double backward = s.backward * kernel_us(gemm("aten::mm", 8192, 8192, 4096, 2), "H100-SXM") /
                          kernel_us(gemm("aten::mm", 8192, 8192, 4096, 2), "A100-SXM4-80GB");
  const double optimizer = s.optimizer * load_device("A100-SXM4-80GB", "test").memory_bandwidth_Bps /
                           load_device("H100-SXM", "test").memory_bandwidth_Bps;
  REQUIRE(forward < 0.8 * s.forward); // the H100 is faster: the check below can fail
  for (size_t i = 0; i < 2; ++i) {
    const json& a = same["ranks"][i]["replayed"];
    const json& b = h100["ranks"][i]["replayed"];
    CHECK(h100["ranks"][i]["gpu"] == "H100-SXM");
    CHECK(b["comm_s"].get<double>() == Approx(a["comm_s"].get<double>()).epsilon(1e-9));
    CHECK(b["compute_s"].get<double>() * 1e6 == Approx(forward + backward + optimizer).epsilon(1e-9));
  }
  CHECK(h100["step_time_s"].get<double>() * 1e6 ==
        Approx(forward + backward + optimizer + 3 * s.gap + same["ranks"][0]["replayed"]["comm_s"].get<double>() * 1e6)
            .epsilon(1e-6));
}

TEST_CASE("a Chakra trace of the step gives the step of the Kineto trace", "[traces]")
{
  Step s;
  s.allreduce             = std::round(allreduce_us(s)); // Chakra's times are whole microseconds
  const std::string dir   = folder("chakra");
  const json kineto       = replay(kineto_files("kineto-vs-chakra", s) + " --platform " + kPlatform);
  const std::string files = chakra_file(dir + "/dp.0.et", 0, s) + " " + chakra_file(dir + "/dp.1.et", 1, s);
  const json chakra       = replay(files + " --platform " + kPlatform);
  CHECK(chakra["format"] == "chakra");
  CHECK(chakra["recorded_step_time_s"].get<double>() == Approx(kineto["recorded_step_time_s"].get<double>()).epsilon(1e-9));
  CHECK(chakra["step_time_s"].get<double>() == Approx(kineto["step_time_s"].get<double>()).epsilon(1e-9));
  CHECK(chakra["ranks"][1]["replayed"]["comm_s"].get<double>() ==
        Approx(kineto["ranks"][1]["replayed"]["comm_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE("communication follows the platform, compute the recording", "[traces]")
{
  Step s;
  s.allreduce             = allreduce_us(s);
  const std::string files = kineto_files("faster-nic", s);
  const json base         = replay(files + " --platform " + kPlatform);
  const json fast         = replay(files + " --platform " + kPlatform + " --set platform.node_groups.0.nic.bandwidth=400Gbps");
  const double comm       = base["ranks"][0]["replayed"]["comm_s"].get<double>();
  const double faster     = fast["ranks"][0]["replayed"]["comm_s"].get<double>();
  CHECK(faster < 0.5 * comm); // four times the bandwidth: a 100 MB ring is bandwidth-bound
  CHECK(fast["ranks"][0]["replayed"]["compute_s"].get<double>() ==
        Approx(base["ranks"][0]["replayed"]["compute_s"].get<double>()).epsilon(1e-12));
  CHECK(fast["step_time_s"].get<double>() == Approx(base["step_time_s"].get<double>() - comm + faster).epsilon(1e-9));
}

TEST_CASE("an NCCL kernel's own collective args suffice, as Kineto copies them there", "[traces]")
{
  Step s;
  s.allreduce = allreduce_us(s);
  std::string files;
  const std::string dir = folder("own-args");
  for (int r = 0; r < 2; ++r) {
    json t     = kineto_trace(r, s);
    json& comm = t["traceEvents"][9]; // record_param_comms, moved onto the kernel (output_json.cpp handleActivity)
    for (const auto& key : {"Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size",
                            "Process Group Name", "Process Group Ranks"})
      t["traceEvents"][11]["args"][key] = comm["args"][key];
    comm = json{{"ph", "X"}, {"cat", "cpu_op"}, {"name", "nccl:all_reduce"}, {"pid", 4242}, {"tid", 4242},
                {"ts", comm["ts"]}, {"dur", comm["dur"]}, {"args", {{"External id", 4}}}};
    files += write(dir + "/rank" + std::to_string(r) + ".json", t.dump()) + " ";
  }
  const json r = replay(files + "--platform " + kPlatform);
  CHECK(r["step_time_s"].get<double>() * 1e6 == Approx(s.total()).epsilon(0.02));
  CHECK(r["ranks"][0]["replayed"]["comm_s"].get<double>() * 1e6 == Approx(s.allreduce).epsilon(0.02));
}

TEST_CASE("Chakra sends and receives are replayed as transfers", "[traces]")
{
  const std::string dir = folder("p2p");
  auto p2p = [](uint64_t id, ChakraProtoMsg::NodeType type, long long src, long long dst, std::vector<uint64_t> deps) {
    return with(with(with(with(et_node(id, type == ChakraProtoMsg::COMM_SEND_NODE ? "send" : "recv", type, deps),
                               "comm_src", src),
                          "comm_dst", dst),
                     "comm_tag", 5),
                "comm_size", 100'000'000LL);
  };
  const std::string a = write_et(dir + "/p.0.et", {p2p(1, ChakraProtoMsg::COMM_SEND_NODE, 0, 1, {}),
                                                   p2p(2, ChakraProtoMsg::COMM_RECV_NODE, 1, 0, {1})});
  const std::string b = write_et(dir + "/p.1.et", {p2p(1, ChakraProtoMsg::COMM_RECV_NODE, 0, 1, {}),
                                                   p2p(2, ChakraProtoMsg::COMM_SEND_NODE, 1, 0, {1})});
  const json r = replay(a + " " + b + " --platform " + kPlatform);
  // 100 MB each way, one after the other, over 100 Gb/s NICs (12.5 GB/s before the achieved
  // fraction): at least 16 ms.
  CHECK(r["step_time_s"].get<double>() > 0.016);
  CHECK(r["step_time_s"].get<double>() < 0.03);
}

TEST_CASE("Chakra nodes without durations are timed by the kernel model from their FLOPs", "[traces]")
{
  const std::string dir = folder("flops");
  const double flops    = 2.0 * 4096 * 8192 * 8192;
  std::vector<std::string> files;
  for (int r = 0; r < 2; ++r)
    files.push_back(write_et(dir + "/f." + std::to_string(r) + ".et",
                             {with(et_node(1, "gemm", ChakraProtoMsg::COMP_NODE), "num_ops", static_cast<long long>(flops)),
                              all_reduce(2, "0", {1}, 1e6),
                              with(et_node(3, "gemm2", ChakraProtoMsg::COMP_NODE, {2}), "num_ops", static_cast<long long>(flops))}));
  const json r = replay(files[0] + " " + files[1] + " --platform " + kPlatform);
  CHECK(r["recorded_step_time_s"].get<double>() == 0); // no times recorded
  CHECK(r["ranks"][0]["replayed"]["compute_s"].get<double>() * 1e6 ==
        Approx(2 * kernel_us(opaque_kernel("gemm", flops), "A100-SXM4-80GB")).epsilon(1e-9));
}

TEST_CASE("malformed traces are refused with the file and the event or node", "[traces]")
{
  Step s;
  s.allreduce           = 8000;
  const std::string dir = folder("bad");
  const std::string good0 = write(dir + "/good0.json", kineto_trace(0, s).dump());
  const std::string good1 = write(dir + "/good1.json", kineto_trace(1, s).dump());
  const std::string platform = " --platform " + kPlatform;

  SECTION("malformed JSON")
  {
    const std::string bad = write(dir + "/broken.json", "{\"traceEvents\": [ {\"ph\": \"X\",, } ]}");
    refused(good0 + " " + bad + platform, {bad, "line 1"});
  }
  SECTION("a kernel without its stream")
  {
    json t = kineto_trace(1, s);
    t["traceEvents"][3]["args"].erase("stream");
    const std::string bad = write(dir + "/nostream.json", t.dump());
    refused(good0 + " " + bad + platform, {bad, "traceEvents[3]", "sm80_xmma_gemm", "stream"});
  }
  SECTION("an NCCL kernel without its record_param_comms")
  {
    json t = kineto_trace(1, s);
    t["traceEvents"][9]["name"] = "aten::something_else";
    t["traceEvents"][9]["args"] = {{"External id", 4}};
    t["traceEvents"][10]["args"]["External id"] = 77; // nothing names it either
    t["traceEvents"][11]["args"]["External id"] = 77;
    const std::string bad = write(dir + "/nocomms.json", t.dump());
    refused(good0 + " " + bad + platform, {bad, "traceEvents[11]", "record_param_comms"});
  }
  SECTION("a collective whose group does not match across ranks")
  {
    const std::string bad = write(dir + "/group.json", kineto_trace(1, s, "[1, 0]").dump());
    refused(good0 + " " + bad + platform, {bad, "traceEvents[11]", "does not match across ranks"});
  }
  SECTION("a collective of another size on one rank")
  {
    Step other     = s;
    other.elements = 1e6;
    const std::string bad = write(dir + "/size.json", kineto_trace(1, other).dump());
    refused(good0 + " " + bad + platform, {bad, "traceEvents[11]", "100000000 bytes", "4000000 bytes"});
  }
  SECTION("more ranks than the platform has GPUs")
  {
    json t = kineto_trace(1, s);
    t.erase("distributedInfo");
    json t0 = kineto_trace(0, s);
    t0.erase("distributedInfo");
    const std::string a = write(dir + "/a.json", t0.dump()), b = write(dir + "/b.json", t.dump());
    refused(a + " " + b + " " + b + platform, {"3 trace files", "2 GPUs", kPlatform});
  }
  SECTION("fewer files than the job's world_size")
  {
    refused(good0 + platform, {good0, "a job of 2 ranks", "1 trace file was given"});
  }
  SECTION("a GEMM with a negative extent")
  {
    json t = kineto_trace(1, s);
    t["traceEvents"][1]["args"]["Input Dims"] = {{4096, -8192}, {8192, 8192}};
    const std::string bad = write(dir + "/negative.json", t.dump());
    refused(good0 + " " + bad + platform, {bad, "traceEvents[1]", "aten::mm", "Input Dims\"[0]", "extents >= 0"});
  }
  SECTION("a kernel of eight days")
  {
    Step days     = s;
    days.backward = 8 * 24 * 3600 * 1e6; // microseconds, as Kineto writes "dur"
    const std::string a = write(dir + "/days0.json", kineto_trace(0, days).dump());
    const std::string b = write(dir + "/days1.json", kineto_trace(1, days).dump());
    refused(a + " " + b + platform, {"the recorded step lasts", "a week at most"});
  }
  SECTION("a dependency on a missing node")
  {
    const std::string a = chakra_file(dir + "/m.0.et", 0, s), b = chakra_file(dir + "/m.1.et", 1, s, false, true);
    refused(a + " " + b + platform, {b, "node 3", "node 99"});
  }
  SECTION("a dependency cycle")
  {
    const std::string a = chakra_file(dir + "/c.0.et", 0, s, true), b = chakra_file(dir + "/c.1.et", 1, s);
    refused(a + " " + b + platform, {a, "cycle", "node "});
  }
  SECTION("an unknown comm_type")
  {
    const std::string a = chakra_file(dir + "/u.0.et", 0, s, false, false, 42), b = chakra_file(dir + "/u.1.et", 1, s);
    refused(a + " " + b + platform, {a, "node 3", "unknown comm_type 42"});
  }
  SECTION("ranks that wait for each other's collectives in different orders")
  {
    const std::string a = write_et(dir + "/d.0.et", {all_reduce(1, "a", {}, 1e6), all_reduce(2, "b", {1}, 1e6)});
    const std::string b = write_et(dir + "/d.1.et", {all_reduce(1, "b", {}, 1e6), all_reduce(2, "a", {1}, 1e6)});
    refused(a + " " + b + platform, {a, "deadlock"});
  }
  SECTION("a send without its receive")
  {
    auto send = with(with(with(et_node(1, "send", ChakraProtoMsg::COMM_SEND_NODE), "comm_src", 0), "comm_dst", 1),
                     "comm_size", 1000);
    const std::string a = write_et(dir + "/s.0.et", {send});
    const std::string b = write_et(dir + "/s.1.et", {et_node(1, "nothing", ChakraProtoMsg::METADATA_NODE)});
    refused(a + " " + b + platform, {a, "node 1", "no matching receive"});
  }
  SECTION("a truncated protobuf")
  {
    const std::string a = chakra_file(dir + "/t.0.et", 0, s), b = chakra_file(dir + "/t.1.et", 1, s);
    std::filesystem::resize_file(b, std::filesystem::file_size(b) - 7);
    refused(a + " " + b + platform, {b, "truncated or malformed"});
  }
  SECTION("not a trace at all, and a file that is not there")
  {
    refused(good0 + " " + dir + "/none.json" + platform, {dir + "/none.json"});
    const std::string empty = write(dir + "/empty.json", "");
    refused(good0 + " " + empty + platform, {empty, "neither"});
  }
  SECTION("a good pair passes")
  {
    const CommandResult r = run_stepsim("replay " + good0 + " " + good1 + platform);
    INFO(r.output);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("the example traces of configs/traces replay", "[traces]")
{
  const CommandResult r = run_stepsim("replay " + kSource + "/configs/traces/dp2-kineto/rank0.json " + kSource +
                                      "/configs/traces/dp2-kineto/rank1.json --platform " + kPlatform);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("step time (ms)") != std::string::npos);
  const json j = replay(kSource + "/configs/traces/dp2-kineto/rank0.json " + kSource +
                        "/configs/traces/dp2-kineto/rank1.json --platform " + kPlatform);
  CHECK(j["step_time_s"].get<double>() == Approx(j["recorded_step_time_s"].get<double>()).epsilon(0.02));
}

TEST_CASE("the example traces replay on a platform of several node groups", "[traces]")
{
  // The example platform's two nodes as two node groups of one: the same GPUs and NICs, so the
  // same step (the platform's carrier job replays nothing and was refused as a reduced-fidelity
  // plan spread over groups).
  json doc  = json::parse(testing::read_text_file(kPlatform));
  json node = doc["platform"]["node_groups"][0];
  node["count"]                  = 1;
  doc["platform"]["node_groups"] = json::array({node, node});
  const std::string split  = testing::write_temp_file("dp2-two-groups.json", doc.dump());
  const std::string traces = kSource + "/configs/traces/dp2-kineto/rank0.json " + kSource +
                             "/configs/traces/dp2-kineto/rank1.json --platform ";
  const json one = replay(traces + kPlatform), two = replay(traces + split);
  CHECK(two["step_time_s"].get<double>() == Approx(one["step_time_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE("a Kineto trace tells the host's time per kernel launch, across no synchronising call", "[traces]")
{
  // One thread launches at 0, 100, 200 and 210 us: gaps of 100, 100 and 10, whose median is 100.
  // A cudaStreamSynchronize inside each of the first two gaps makes them the GPU's time, not the
  // host's: the median of what is left, 10 us.
  auto launch = [](double ts, int correlation) { return runtime("cudaLaunchKernel", ts, correlation, correlation); };
  json events = json::array({kernel("k", 0, 5, 7, 1, 1), launch(0, 1), launch(100, 2), launch(200, 3), launch(210, 4)});
  json doc    = {{"traceEvents", events}};
  const std::string free_running = testing::write_temp_file("launch-gaps.json", doc.dump());
  const RecordedRank ahead = read_traces({free_running}).at(0);
  CHECK(ahead.host_launch_s == Approx(100e-6));
  CHECK(ahead.launch_gaps == 3);
  doc["traceEvents"].push_back(runtime("cudaStreamSynchronize", 50, 90, 0));
  doc["traceEvents"].push_back(runtime("cudaStreamSynchronize", 150, 91, 0));
  const RecordedRank synced = read_traces({testing::write_temp_file("launch-gaps-synced.json", doc.dump())}).at(0);
  CHECK(synced.host_launch_s == Approx(10e-6));
  CHECK(synced.launch_gaps == 1);
  // The replay reports it per rank, and a trace without launch calls says nothing.
  const CommandResult r = run_stepsim("replay " + kSource + "/configs/traces/dp2-kineto/rank0.json " + kSource +
                                      "/configs/traces/dp2-kineto/rank1.json --platform " + kPlatform);
  CHECK(r.output.find("host time per kernel launch") != std::string::npos);
  CHECK(r.output.find("rank 0: 15.0 us (median of 3 gaps)") != std::string::npos);
  doc["traceEvents"] = json::array({kernel("k", 0, 5, 7, 1, 1)});
  CHECK(read_traces({testing::write_temp_file("no-launches.json", doc.dump())}).at(0).host_launch_s < 0);
}
