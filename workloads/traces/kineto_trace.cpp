// PyTorch profiler traces: the Chrome-trace JSON that torch.profiler's export_chrome_trace writes
// through Kineto, one file per rank.
//
// What is read, and where the format comes from:
// - GPU work: complete events ("ph": "X") of category "kernel", "gpu_memcpy" or "gpu_memset", with
//   "ts"/"dur" in microseconds and args "stream", "device", "correlation" and "External id"
//   (Kineto libkineto/src/CuptiActivity.cpp, GpuActivity<CUpti_ActivityKernel4>::metadataJson;
//   the "External id" is the correlation id of the CPU op the kernel is linked to, written by
//   libkineto/src/output_json.cpp, ChromeTraceLogger::handleActivity).
// - What a kernel computes: the CPU op ("cat": "cpu_op") with the kernel's External id, its name
//   (aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::matmul, aten::linear, scaled dot
//   product attention) and, when recorded with record_shapes=True, its "Input Dims" and "Input type"
//   (PyTorch torch/csrc/autograd/profiler_kineto.cpp, the TorchOp metadata: addMetadata("Input
//   Dims", shapesToStr(...)) and "Input type").
// - What an NCCL kernel communicates: the args of the record_param_comms op around its launch
//   (PyTorch torch/csrc/distributed/c10d/ParamCommsUtils.hpp, RECORD_PARAM_COMMS_DATA; key names in
//   torch/csrc/profiler/util.h: "Collective name", "dtype", "In msg nelems", "Out msg nelems",
//   "Group size", "Process Group Name", "Process Group Ranks", "Rank", "Src Rank", "Dst Rank"),
//   found by the kernel's own args (handleActivity copies them onto a kernel linked to
//   record_param_comms), the CPU op with its External
//   id, or the innermost record_param_comms on the thread that launched it (the cudaLaunchKernel
//   runtime event with the kernel's correlation id).
// - Dependencies: kernels of one stream run in order; a "Stream Wait Event" ("cat": "cuda_sync",
//   recorded with the profiler's enable_cuda_sync_events) makes the first kernel launched on its
//   "stream" after the wait wait for the last kernel launched on "wait_on_stream" before the
//   cudaEventRecord with correlation "wait_on_cuda_event_record_corr_id" (Kineto CuptiActivity.cpp,
//   eventSyncInfo and CudaSyncActivity::metadataJson). A trace without any such event says nothing
//   of what waited for what across streams: each kernel is then taken to wait for the last kernel of
//   every other stream that had ended before it started, which keeps the recorded order (a kernel
//   never overtakes what it followed) at the price of edges the program may not have had.
// - The rank: top-level "distributedInfo": {"rank": N} (Kineto output_json.cpp,
//   ChromeTraceLogger::addOnDemandDistMetadata, from the default process group's "Rank").
// - The host's time per kernel launch: the "cuda_runtime" / "cuda_driver" events of the launch
//   calls (cudaLaunchKernel, ...) and of the calls that wait for the GPU (cudaStreamSynchronize,
//   ...), with their thread ("pid"/"tid") and "ts" (Kineto CuptiActivity.cpp, RuntimeActivity).
#include "workloads/traces/recorded_trace.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

namespace stepsim {
namespace {

using nlohmann::json;

// A trace of a long step on many streams runs to a few hundred megabytes.
constexpr unsigned long long kMaxTraceBytes = 2ULL << 30;

std::string lower(std::string s)
{
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct Reader {
  const std::string& file;

  [[noreturn]] void fail(size_t index, const std::string& name, const std::string& message) const
  {
    throw InputError({fmt::format("{}: traceEvents[{}] (\"{}\"): {}", file, index, name, message)});
  }

  static const json* arg(const json& e, const char* key)
  {
    auto a = e.find("args");
    if (a == e.end() || !a->is_object())
      return nullptr;
    auto v = a->find(key);
    return v == a->end() ? nullptr : &*v;
  }

  double number(const json& e, size_t index, const std::string& name, const char* key, bool in_args) const
  {
    const json* v = nullptr;
    if (in_args)
      v = arg(e, key);
    else if (auto it = e.find(key); it != e.end())
      v = &*it;
    if (v == nullptr)
      fail(index, name, fmt::format("no {}\"{}\"", in_args ? "args." : "", key));
    if (!v->is_number())
      fail(index, name, fmt::format("{}\"{}\" is {}, expected a number", in_args ? "args." : "", key, v->dump()));
    const double x = v->get<double>();
    if (!std::isfinite(x) || std::abs(x) > 1e18)
      fail(index, name, fmt::format("{}\"{}\" is {}, expected a finite number", in_args ? "args." : "", key, v->dump()));
    return x;
  }

  // An integer arg, or `fallback` when absent.
  long long integer_arg(const json& e, size_t index, const std::string& name, const char* key, long long fallback) const
  {
    const json* v = arg(e, key);
    if (v == nullptr)
      return fallback;
    if (!v->is_number_integer())
      fail(index, name, fmt::format("args.\"{}\" is {}, expected an integer", key, v->dump()));
    return v->get<long long>();
  }
};

struct GpuEvent {
  size_t index = 0;
  const json* event = nullptr;
  std::string name;
  double ts = 0, dur = 0; // microseconds
  long long stream = 0, correlation = -1, external = -1;
};

struct CpuOp {
  size_t index = 0;
  const json* event = nullptr;
  std::string name;
  double ts = 0, dur = 0;
  std::string thread; // pid/tid
};

std::string name_of(const json& e)
{
  auto it = e.find("name");
  return it != e.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string thread_of(const json& e) { return e.value("pid", json()).dump() + "/" + e.value("tid", json()).dump(); }

// Bytes of one element of a dtype as PyTorch's record_param_comms writes it (c10::toString of the
// ScalarType: c10/core/ScalarType.h).
double dtype_bytes(const std::string& dtype)
{
  static const std::map<std::string, double> sizes = {
      {"Double", 8},        {"Float", 4},         {"Half", 2},          {"BFloat16", 2},     {"Long", 8},
      {"Int", 4},           {"Short", 2},         {"Char", 1},          {"Byte", 1},         {"Bool", 1},
      {"ComplexFloat", 8},  {"ComplexDouble", 16}, {"ComplexHalf", 4},  {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1},
      {"Float8_e4m3fnuz", 1}, {"Float8_e5m2fnuz", 1}, {"UInt16", 2},    {"UInt32", 4},       {"UInt64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// An operand's type as the profiler's "Input type" names it, as a precision and bytes.
std::pair<std::string, double> precision_of(const std::string& type)
{
  const std::string t = lower(type);
  if (t.find("bfloat16") != std::string::npos)
    return {"bf16", 2};
  if (t.find("half") != std::string::npos)
    return {"fp16", 2};
  if (t.find("float8") != std::string::npos)
    return {"fp8", 1};
  if (t == "float" || t.find("float32") != std::string::npos)
    return {"fp32", 4}; // PyTorch runs float matmuls in fp32 unless allow_tf32 is set
  if (t == "double")
    return {"fp32", 8};
  return {"bf16", 2};
}

// The dims of input `i` of a CPU op, or empty.
std::vector<double> dims_of(const json& dims, size_t i)
{
  std::vector<double> out;
  if (!dims.is_array() || i >= dims.size() || !dims[i].is_array())
    return out;
  for (const auto& d : dims[i]) {
    if (!d.is_number() || !(d.get<double>() > 0))
      return {};
    out.push_back(d.get<double>());
  }
  return out;
}

double product(const std::vector<double>& v, size_t from, size_t to)
{
  double p = 1;
  for (size_t i = from; i < to; ++i)
    p *= v[i];
  return p;
}

// The GEMM or attention the CPU op runs, from its name and "Input Dims"; none when the op is neither
// or its shapes were not recorded.
std::optional<Kernel> shape_of(const Reader& reader, const CpuOp& op, std::string& precision)
{
  const json* dims = Reader::arg(*op.event, "Input Dims");
  if (dims == nullptr)
    return std::nullopt;
  // A tensor has no negative extent: such a shape is a damaged trace, not one to replay at its
  // recorded time. (Zero extents are real: an expert that got no tokens runs an empty GEMM.)
  if (dims->is_array())
    for (size_t i = 0; i < dims->size(); ++i)
      if ((*dims)[i].is_array())
        for (const auto& d : (*dims)[i])
          if (d.is_number() && d.get<double>() < 0)
            reader.fail(op.index, op.name, fmt::format("args.\"Input Dims\"[{}] is {}, expected tensor extents >= 0", i,
                                                       (*dims)[i].dump()));
  const std::string name = op.name;
  const json* types      = Reader::arg(*op.event, "Input type");
  auto type_of           = [&](size_t i) {
    auto [p, bytes] = precision_of(types && types->is_array() && i < types->size() && (*types)[i].is_string()
                                                 ? (*types)[i].get<std::string>()
                                                 : "");
    precision = p;
    return bytes;
  };
  auto mm = [&](size_t a_index, size_t b_index, bool batched) -> std::optional<Kernel> {
    auto a = dims_of(*dims, a_index), b = dims_of(*dims, b_index);
    if (a.size() < 2 || b.size() < 2)
      return std::nullopt;
    const double bytes = type_of(a_index);
    if (batched || (a.size() >= 3 && b.size() >= 3)) // batch × (m×k)·(k×n)
      return gemm(name, a[a.size() - 2], b.back(), a.back(), bytes, product(a, 0, a.size() - 2));
    return gemm(name, product(a, 0, a.size() - 1), b.back(), a.back(), bytes); // leading dims fold into m
  };
  if (name == "aten::mm")
    return mm(0, 1, false);
  if (name == "aten::addmm")
    return mm(1, 2, false);
  if (name == "aten::bmm")
    return mm(0, 1, true);
  if (name == "aten::baddbmm")
    return mm(1, 2, true);
  if (name == "aten::matmul")
    return mm(0, 1, false);
  if (name == "aten::linear") { // input [..., in], weight [out, in]
    auto a = dims_of(*dims, 0), wt = dims_of(*dims, 1);
    if (a.empty() || wt.size() != 2)
      return std::nullopt;
    return gemm(name, product(a, 0, a.size() - 1), wt[0], a.back(), type_of(0));
  }
  const std::string l = lower(name);
  if (l.find("scaled_dot_product") != std::string::npos || l.find("flash_attention") != std::string::npos ||
      l.find("efficient_attention") != std::string::npos || l.find("cudnn_attention") != std::string::npos) {
    // Forward: query, key, value [batch, heads, seq, head_dim]; backward: the output's gradient first.
    const bool backward = l.find("backward") != std::string::npos;
    auto q = dims_of(*dims, backward ? 1 : 0), k = dims_of(*dims, backward ? 2 : 1);
    if (q.size() != 4 || k.size() != 4)
      return std::nullopt;
    // Causality is not in the shapes; the model's ratio between two devices hardly depends on it.
    Kernel kernel = attention_kernel(name, q[0] * q[1], q[2], q[3], false, backward, type_of(backward ? 1 : 0));
    kernel.n      = k[2];
    return kernel;
  }
  return std::nullopt;
}

// stepsim's collective for record_param_comms' "Collective name" (the names ProcessGroupNCCL.cpp
// passes to RECORD_PARAM_COMMS_DATA: allreduce, allreduce_coalesced, all_gather, _allgather_base,
// all_gather_into_tensor_coalesced, reduce_scatter, _reduce_scatter_base,
// reduce_scatter_tensor_coalesced, all_to_all, alltoall_base, broadcast, _broadcast_oop, reduce,
// _reduce_oop, send, recv, barrier, gather, scatter).
std::optional<RecordedOp> collective_of(const std::string& collective)
{
  std::string n;
  for (char c : lower(collective))
    if (c != '_')
      n += c;
  RecordedOp op;
  op.kind = RecordedKind::Collective;
  auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
  if (starts("allreduce") || starts("barrier"))
    op.op = CollectiveOp::AllReduce;
  else if (starts("allgather"))
    op.op = CollectiveOp::AllGather;
  else if (starts("reducescatter"))
    op.op = CollectiveOp::ReduceScatter;
  else if (starts("alltoall"))
    op.op = CollectiveOp::AllToAll;
  else if (starts("broadcast"))
    op.op = CollectiveOp::Broadcast;
  else if (starts("reduce"))
    op.op = CollectiveOp::Reduce;
  else if (starts("send"))
    op.kind = RecordedKind::Send;
  else if (starts("recv"))
    op.kind = RecordedKind::Recv;
  else
    return std::nullopt;
  return op;
}

// "Process Group Ranks": a list of ranks, written as a string "[0, 1, 2, 3]" by PyTorch
// (ParamCommsUtils.cpp) or as an array; {-1} when it is neither.
std::vector<int> ranks_of(const json& v)
{
  std::vector<int> out;
  if (v.is_array()) {
    for (const auto& r : v) {
      if (!r.is_number_integer() || r.get<long long>() < 0 || r.get<long long>() > (1 << 24))
        return {-1};
      out.push_back(r.get<int>());
    }
    return out;
  }
  if (!v.is_string())
    return {-1};
  const std::string text = v.get<std::string>();
  size_t i = text.find_first_not_of(" ");
  if (i == std::string::npos || text[i] != '[')
    return {-1};
  for (++i;;) {
    i = text.find_first_not_of(" ", i);
    if (i == std::string::npos)
      return {-1};
    if (text[i] == ']' && out.empty())
      return out;
    size_t end    = i;
    long long r   = 0;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])) && r <= (1 << 24))
      r = r * 10 + (text[end++] - '0');
    if (end == i || r > (1 << 24))
      return {-1};
    out.push_back(static_cast<int>(r));
    i = text.find_first_not_of(" ", end);
    if (i == std::string::npos)
      return {-1};
    if (text[i] == ']')
      return out;
    if (text[i] != ',')
      return {-1};
    ++i;
  }
}

// Fills the communication of NCCL kernel `k` from the args of record_param_comms event `comms`.
RecordedOp communication_of(const Reader& reader, const GpuEvent& k, const json& comms, size_t comms_index,
                            const std::string& comms_name)
{
  const json* name = Reader::arg(comms, "Collective name");
  if (name == nullptr || !name->is_string())
    reader.fail(comms_index, comms_name, "no string args.\"Collective name\"");
  auto op = collective_of(name->get<std::string>());
  if (!op)
    reader.fail(k.index, k.name,
                fmt::format("collective \"{}\" (args.\"Collective name\" of traceEvents[{}]) is none stepsim replays "
                            "(all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, send, recv, "
                            "barrier)",
                            name->get<std::string>(), comms_index));
  const json* dtype = Reader::arg(comms, "dtype");
  if (dtype == nullptr || !dtype->is_string())
    reader.fail(comms_index, comms_name, "no string args.\"dtype\"");
  const double element = dtype_bytes(dtype->get<std::string>());
  if (element <= 0)
    reader.fail(comms_index, comms_name, fmt::format("unknown args.\"dtype\" \"{}\"", dtype->get<std::string>()));
  const double in  = reader.number(comms, comms_index, comms_name, "In msg nelems", true);
  const double out = Reader::arg(comms, "Out msg nelems") ? reader.number(comms, comms_index, comms_name, "Out msg nelems", true) : in;
  if (in < 0 || out < 0)
    reader.fail(comms_index, comms_name, "a negative message size (args.\"In msg nelems\" / \"Out msg nelems\")");
  // stepsim's collective bytes are each member's whole buffer: the gathered output of an
  // all-gather, the input of a reduce-scatter.
  op->bytes = std::max({in, out, 1.0}) * element;
  if (const json* pg = Reader::arg(comms, "Process Group Name"))
    op->group = pg->is_string() ? pg->get<std::string>() : pg->dump();
  if (const json* ranks = Reader::arg(comms, "Process Group Ranks")) {
    op->group_ranks = ranks_of(*ranks);
    if (!op->group_ranks.empty() && op->group_ranks.front() < 0)
      reader.fail(comms_index, comms_name, fmt::format("args.\"Process Group Ranks\" is {}, expected a list of ranks",
                                                        ranks->dump()));
  }
  if (op->kind == RecordedKind::Send || op->kind == RecordedKind::Recv) {
    const char* key = op->kind == RecordedKind::Send ? "Dst Rank" : "Src Rank";
    op->peer        = static_cast<int>(std::clamp(reader.integer_arg(comms, comms_index, comms_name, key, -1), -1LL, 1LL << 24));
    if (op->peer < 0)
      reader.fail(comms_index, comms_name, fmt::format("a {} without its args.\"{}\"",
                                                       op->kind == RecordedKind::Send ? "send" : "receive", key));
  }
  return *op;
}

// The CUDA runtime and driver calls that launch a kernel (CUPTI's callback names, as Kineto
// writes them for "cuda_runtime" and "cuda_driver" events).
bool is_kernel_launch(const std::string& name)
{
  return name == "cudaLaunchKernel" || name == "cudaLaunchKernelExC" || name == "cuLaunchKernel" ||
         name == "cuLaunchKernelEx" || name == "cudaLaunchCooperativeKernel";
}

// Calls after which the host has waited for the GPU: a gap across one is the GPU's time, not the host's.
bool waits_for_gpu(const std::string& name)
{
  return name == "cudaDeviceSynchronize" || name == "cudaStreamSynchronize" || name == "cudaEventSynchronize" ||
         name == "cudaMemcpy" || name == "cudaStreamQuery" || name == "cuStreamSynchronize" ||
         name == "cuCtxSynchronize";
}

// The host's time per launch (RecordedRank::host_launch_s): on each thread, the gaps between
// consecutive launch calls with no synchronising call in between; their median over all threads,
// which a few long gaps (the optimizer's host work, a data-loader wait) do not move.
void host_launch_gaps(std::map<std::string, std::vector<double>>& launches,
                      std::map<std::string, std::vector<double>>& syncs, RecordedRank& rank)
{
  std::vector<double> gaps;
  for (auto& [thread, starts] : launches) {
    std::sort(starts.begin(), starts.end());
    auto& waits = syncs[thread];
    std::sort(waits.begin(), waits.end());
    for (size_t k = 1; k < starts.size(); ++k) {
      const auto wait = std::upper_bound(waits.begin(), waits.end(), starts[k - 1]);
      if (wait != waits.end() && *wait < starts[k])
        continue;
      gaps.push_back(starts[k] - starts[k - 1]);
    }
  }
  if (gaps.empty())
    return;
  const auto middle = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
  std::nth_element(gaps.begin(), middle, gaps.end());
  rank.host_launch_s = *middle * 1e-6; // Kineto's "ts" is in microseconds
  rank.launch_gaps   = static_cast<long long>(gaps.size());
}

RecordedRank read_kineto(const std::string& file)
{
  const json doc = parse_json_text(read_bounded_file(file, kMaxTraceBytes, "a trace file"), file);
  const json* events = nullptr;
  if (doc.is_array())
    events = &doc; // Chrome's array form
  else if (doc.is_object() && doc.contains("traceEvents"))
    events = &doc["traceEvents"];
  if (events == nullptr || !events->is_array())
    throw InputError({fmt::format("{}: expected a Chrome trace: an object with a \"traceEvents\" array", file)});
  const Reader reader{file};
  RecordedRank rank;
  if (doc.is_object() && doc.contains("distributedInfo") && doc["distributedInfo"].is_object()) {
    const json& info = doc["distributedInfo"];
    if (info.contains("rank")) {
      if (!info["rank"].is_number_integer() || info["rank"].get<long long>() < 0 || info["rank"].get<long long>() > (1 << 24))
        throw InputError({fmt::format("{}: distributedInfo.rank is {}, expected a rank (an integer from 0)", file,
                                      info["rank"].dump())});
      rank.stated_rank = info["rank"].get<int>();
    }
    // PyTorch's profiler writes the job's size beside the rank (torch/profiler/profiler.py,
    // _get_distributed_info: "world_size": dist.get_world_size()).
    if (info.contains("world_size")) {
      if (!info["world_size"].is_number_integer() || info["world_size"].get<long long>() < 1 ||
          info["world_size"].get<long long>() > (1 << 24))
        throw InputError({fmt::format("{}: distributedInfo.world_size is {}, expected a rank count (an integer from 1)",
                                      file, info["world_size"].dump())});
      rank.stated_world = info["world_size"].get<long long>();
    }
  }

  std::vector<GpuEvent> gpu;
  std::map<long long, CpuOp> op_of_external;                // CPU ops by External id
  std::map<std::string, std::vector<CpuOp>> comms_of_thread; // record_param_comms by thread
  std::map<long long, size_t> launch_of_correlation;        // runtime events by correlation id
  std::vector<size_t> waits;                                // "Stream Wait Event"s
  // Per thread, the start of each kernel launch call and of each call that waits for the GPU.
  std::map<std::string, std::vector<double>> launches_of_thread, syncs_of_thread;
  long long device = -1;
  size_t device_event = 0;
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object())
      throw InputError({fmt::format("{}: traceEvents[{}] is {}, expected an event object", file, i,
                                    e.is_structured() ? "not an object" : e.dump())});
    const std::string name = name_of(e);
    if (!e.contains("ph") || !e["ph"].is_string() || e["ph"].get<std::string>() != "X")
      continue; // metadata, counters, flows
    const std::string cat = e.contains("cat") && e["cat"].is_string() ? lower(e["cat"].get<std::string>()) : "";
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      GpuEvent g{i, &e, name};
      g.ts  = reader.number(e, i, name, "ts", false);
      g.dur = reader.number(e, i, name, "dur", false);
      if (g.dur < 0)
        reader.fail(i, name, fmt::format("\"dur\" is {}, expected a duration >= 0", g.dur));
      if (!Reader::arg(e, "stream"))
        reader.fail(i, name, "no args.\"stream\" (the CUDA stream the kernel ran on)");
      g.stream      = reader.integer_arg(e, i, name, "stream", 0);
      g.correlation = reader.integer_arg(e, i, name, "correlation", -1);
      g.external    = reader.integer_arg(e, i, name, "External id", -1);
      const long long d = reader.integer_arg(e, i, name, "device", -1);
      if (d >= 0 && device >= 0 && d != device)
        reader.fail(i, name, fmt::format("a kernel on GPU {} in a trace whose kernels ran on GPU {} (traceEvents[{}]); "
                                         "give one file per rank",
                                         d, device, device_event));
      if (d >= 0 && device < 0) {
        device       = d;
        device_event = i;
      }
      gpu.push_back(std::move(g));
    } else if (cat == "cpu_op" || cat == "user_annotation") {
      CpuOp op{i, &e, name, 0, 0, thread_of(e)};
      op.ts  = reader.number(e, i, name, "ts", false);
      op.dur = reader.number(e, i, name, "dur", false);
      const long long external = reader.integer_arg(e, i, name, "External id", -1);
      if (external >= 0)
        op_of_external.emplace(external, op);
      if (name == "record_param_comms" || Reader::arg(e, "Collective name"))
        comms_of_thread[op.thread].push_back(op);
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      const long long correlation = reader.integer_arg(e, i, name, "correlation", -1);
      if (correlation >= 0)
        launch_of_correlation.emplace(correlation, i);
      if (is_kernel_launch(name))
        launches_of_thread[thread_of(e)].push_back(reader.number(e, i, name, "ts", false));
      else if (waits_for_gpu(name))
        syncs_of_thread[thread_of(e)].push_back(reader.number(e, i, name, "ts", false));
    } else if (cat == "cuda_sync") {
      const json* kind = Reader::arg(e, "cuda_sync_kind");
      if ((kind && kind->is_string() && kind->get<std::string>() == "Stream Wait Event") || name == "Stream Wait Event")
        waits.push_back(i);
    }
  }
  if (gpu.empty())
    throw InputError({fmt::format("{}: no GPU kernels (events with \"cat\": \"kernel\"); record the trace with "
                                  "ProfilerActivity.CUDA",
                                  file)});
  host_launch_gaps(launches_of_thread, syncs_of_thread, rank);

  // One op per GPU event, in each stream's order.
  std::stable_sort(gpu.begin(), gpu.end(), [](const GpuEvent& a, const GpuEvent& b) {
    return std::tie(a.ts, a.correlation, a.index) < std::tie(b.ts, b.correlation, b.index);
  });
  std::map<long long, std::vector<size_t>> ops_of_stream;
  // Times from the first kernel's start: "ts" is microseconds since the epoch, where a double in
  // seconds would keep only about a tenth of a nanosecond.
  const double origin = gpu.front().ts;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const GpuEvent& g = gpu[i];
    RecordedOp op;
    op.name    = g.name;
    op.where   = fmt::format("traceEvents[{}] (\"{}\")", g.index, g.name);
    op.start_s = (g.ts - origin) * 1e-6;
    op.seconds = g.dur * 1e-6;
    const bool nccl = lower(g.name).rfind("nccl", 0) == 0;
    if (nccl) {
      // The communication's description: the kernel's own args, the CPU op with its External id,
      // or the innermost record_param_comms around its launch.
      const json* comms = nullptr;
      size_t comms_index = g.index;
      std::string comms_name = g.name;
      if (Reader::arg(*g.event, "Collective name"))
        comms = g.event;
      if (comms == nullptr && g.external >= 0) {
        auto it = op_of_external.find(g.external);
        if (it != op_of_external.end() && Reader::arg(*it->second.event, "Collective name")) {
          comms       = it->second.event;
          comms_index = it->second.index;
          comms_name  = it->second.name;
        }
      }
      if (comms == nullptr && g.correlation >= 0) {
        auto launch = launch_of_correlation.find(g.correlation);
        if (launch != launch_of_correlation.end()) {
          const json& l   = (*events)[launch->second];
          const double ts = reader.number(l, launch->second, name_of(l), "ts", false);
          auto list       = comms_of_thread.find(thread_of(l));
          const CpuOp* best = nullptr;
          if (list != comms_of_thread.end())
            for (const CpuOp& c : list->second)
              if (c.ts <= ts && ts <= c.ts + c.dur && (best == nullptr || c.ts >= best->ts))
                best = &c;
          if (best != nullptr) {
            comms       = best->event;
            comms_index = best->index;
            comms_name  = best->name;
          }
        }
      }
      if (comms == nullptr)
        reader.fail(g.index, g.name,
                    "an NCCL kernel without its record_param_comms op (args \"Collective name\", \"In msg nelems\", "
                    "\"dtype\", \"Process Group Name\"): none has its External id, and none encloses its launch");
      RecordedOp comm = communication_of(reader, g, *comms, comms_index, comms_name);
      comm.name       = op.name;
      comm.where      = op.where;
      comm.start_s    = op.start_s;
      comm.seconds    = op.seconds;
      op              = std::move(comm);
    } else if (g.external >= 0) {
      auto it = op_of_external.find(g.external);
      if (it != op_of_external.end())
        op.kernel = shape_of(reader, it->second, op.precision);
    }
    auto& stream = ops_of_stream[g.stream];
    if (!stream.empty())
      op.after.push_back(stream.back());
    stream.push_back(i);
    rank.ops.push_back(std::move(op));
  }

  if (!waits.empty()) {
    for (size_t w : waits) {
      const json& e          = (*events)[w];
      const std::string name = name_of(e);
      const long long stream = reader.integer_arg(e, w, name, "stream", -1);
      const long long source = reader.integer_arg(e, w, name, "wait_on_stream", -1);
      const long long record = reader.integer_arg(e, w, name, "wait_on_cuda_event_record_corr_id", -1);
      const long long corr   = reader.integer_arg(e, w, name, "correlation", -1);
      const double ts        = reader.number(e, w, name, "ts", false);
      const double end       = ts + (e.contains("dur") ? reader.number(e, w, name, "dur", false) : 0.0);
      auto consumers = ops_of_stream.find(stream);
      auto producers = ops_of_stream.find(source);
      if (consumers == ops_of_stream.end() || producers == ops_of_stream.end() || stream == source)
        continue; // a wait on a stream with no kernel in the trace orders nothing here
      // The consumer: the first kernel launched on the waiting stream after the wait.
      std::optional<size_t> consumer;
      for (size_t c : consumers->second) {
        const GpuEvent& g = gpu[c];
        if (corr >= 0 && g.correlation >= 0 ? g.correlation > corr : g.ts >= ts) {
          consumer = c;
          break;
        }
      }
      // The producer: the last kernel launched on the source stream before the event was recorded
      // (or, without that record's id, the last one that had ended when the wait was satisfied).
      std::optional<size_t> producer;
      for (size_t p : producers->second) {
        const GpuEvent& g = gpu[p];
        if (record >= 0 && g.correlation >= 0 ? g.correlation < record : g.ts + g.dur <= end)
          producer = p;
      }
      if (consumer && producer)
        rank.ops[*consumer].after.push_back(*producer);
    }
  } else {
    // No record of cross-stream waits: each kernel waits for the last kernel of every other stream
    // that had ended before it started (the order the recording shows).
    std::vector<std::pair<long long, std::vector<double>>> ends; // per stream, ends in stream order
    for (const auto& [stream, list] : ops_of_stream) {
      std::vector<double> e;
      for (size_t i : list)
        e.push_back(gpu[i].ts + gpu[i].dur);
      ends.emplace_back(stream, std::move(e));
    }
    for (size_t i = 0; i < gpu.size(); ++i)
      for (size_t s = 0; s < ends.size(); ++s) {
        if (ends[s].first == gpu[i].stream)
          continue;
        const auto& e = ends[s].second;
        auto it       = std::upper_bound(e.begin(), e.end(), gpu[i].ts);
        if (it != e.begin())
          rank.ops[i].after.push_back(ops_of_stream[ends[s].first][static_cast<size_t>(it - e.begin() - 1)]);
      }
  }
  return rank;
}

// A JSON document: the first character that is not white space (or a UTF-8 byte order mark).
bool looks_like_json(const std::string& head)
{
  size_t i = head.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i])))
    ++i;
  return i < head.size() && (head[i] == '{' || head[i] == '[');
}

const bool registered = TraceFormatRegistry::add(
    "kineto", "PyTorch profiler (Kineto) Chrome-trace JSON, one file per rank",
    TraceFormat{looks_like_json, read_kineto});

} // namespace
} // namespace stepsim
