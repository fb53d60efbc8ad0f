// Chakra execution traces (MLCommons Chakra, the input of ASTRA-sim), one file per rank, named
// NAME.RANK.et as Chakra writes them.
//
// What is read, and where the format comes from:
// - The file is a stream of messages, each preceded by its length as a varint: a GlobalMetadata
//   first, then Nodes (Chakra src/third_party/utils/protolib.py, encodeMessage / decodeMessage);
//   the messages are the schema's (workloads/traces/et_def.proto, copied from Chakra's
//   schema/protobuf/et_def.proto).
// - COMP_NODE: its duration_micros, or, without one, the kernel model's time for its "num_ops"
//   attribute (FLOPs) or its "tensor_size" (bytes). Host ops that the PyTorch converter writes as
//   COMP_NODEs with "is_cpu_op" true (Chakra src/converter/pytorch_converter.py,
//   convert_json_to_protobuf_node) take no time here: only the GPU's work is replayed, their
//   dependencies are kept.
// - COMM_COLL_NODE: "comm_type" (CollectiveCommType), "comm_size" (bytes, taken as each member's
//   whole buffer) and "pg_name" (the communicator; without one, every rank of the job), as the
//   converter writes them (pytorch_converter.py, convert_json_to_protobuf_nodes). "involved_dim"
//   needs ASTRA-sim's network dimensions, which a stepsim platform does not have: it is ignored.
// - COMM_SEND_NODE / COMM_RECV_NODE: "comm_src", "comm_dst", "comm_tag", "comm_size".
// - METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE: no time, dependencies kept.
// - data_deps and ctrl_deps: graph edges.
#include "workloads/traces/recorded_trace.hpp"

#include "workloads/traces/et_def.pb.h"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>

namespace stepsim {
namespace {

namespace et = ChakraProtoMsg;

constexpr unsigned long long kMaxTraceBytes = 1ULL << 30; // protobuf's streams count in int

std::string node_where(const et::Node& node) { return fmt::format("node {} (\"{}\")", node.id(), node.name()); }

// An integer attribute of any integer kind, or nothing.
std::optional<long long> integer_attr(const et::Node& node, const std::string& name, const std::string& file)
{
  for (const auto& a : node.attr()) {
    if (a.name() != name)
      continue;
    switch (a.value_case()) {
    case et::AttributeProto::kInt32Val: return a.int32_val();
    case et::AttributeProto::kInt64Val: return a.int64_val();
    case et::AttributeProto::kUint32Val: return a.uint32_val();
    case et::AttributeProto::kUint64Val:
      if (a.uint64_val() > (1ULL << 62))
        throw InputError({fmt::format("{}: {}: attribute \"{}\" is {}, beyond any size", file, node_where(node), name,
                                      a.uint64_val())});
      return static_cast<long long>(a.uint64_val());
    case et::AttributeProto::kSint32Val: return a.sint32_val();
    case et::AttributeProto::kSint64Val: return a.sint64_val();
    case et::AttributeProto::kFixed32Val: return a.fixed32_val();
    case et::AttributeProto::kFixed64Val: return static_cast<long long>(std::min<uint64_t>(a.fixed64_val(), 1ULL << 62));
    case et::AttributeProto::kSfixed32Val: return a.sfixed32_val();
    case et::AttributeProto::kSfixed64Val: return a.sfixed64_val();
    case et::AttributeProto::kDoubleVal:
      if (std::isfinite(a.double_val()) && std::abs(a.double_val()) < 1e18)
        return static_cast<long long>(a.double_val());
      break;
    default: break;
    }
    throw InputError({fmt::format("{}: {}: attribute \"{}\" is not an integer", file, node_where(node), name)});
  }
  return std::nullopt;
}

const et::AttributeProto* attr(const et::Node& node, const std::string& name)
{
  for (const auto& a : node.attr())
    if (a.name() == name)
      return &a;
  return nullptr;
}

long long required(const et::Node& node, const std::string& name, const std::string& file, const char* what)
{
  auto v = integer_attr(node, name, file);
  if (!v)
    throw InputError({fmt::format("{}: {}: no attribute \"{}\" ({})", file, node_where(node), name, what)});
  return *v;
}

RecordedRank read_chakra(const std::string& file)
{
  const std::string bytes = read_bounded_file(file, kMaxTraceBytes, "a trace file");
  // The library logs what it refuses (a string that is not UTF-8) on stderr; the errors below say it.
  const google::protobuf::LogSilencer quiet;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  et::GlobalMetadata metadata;
  bool clean_end = false;
  if (!google::protobuf::util::ParseDelimitedFromCodedStream(&metadata, &in, &clean_end))
    throw InputError({fmt::format("{}: not a Chakra execution trace: its first message (GlobalMetadata, at byte 0) is "
                                  "{}",
                                  file, clean_end ? "missing (the file is empty)" : "truncated or malformed protobuf")});
  RecordedRank rank;
  // NAME.RANK.et, as Chakra's tools name one rank's trace.
  static const std::regex numbered(R"(.*\.([0-9]{1,7})\.et$)");
  std::smatch m;
  const std::string base = std::filesystem::path(file).filename().string();
  if (std::regex_match(base, m, numbered))
    rank.stated_rank = std::stoi(m[1].str());

  std::vector<et::Node> nodes;
  std::map<uint64_t, size_t> index_of_id;
  for (;;) {
    const int at = in.CurrentPosition();
    et::Node node;
    if (!google::protobuf::util::ParseDelimitedFromCodedStream(&node, &in, &clean_end)) {
      if (clean_end)
        break;
      throw InputError({fmt::format("{}: the message at byte {} (node #{}{}) is truncated or malformed protobuf (or holds a "
                                    "string that is not UTF-8)", file,
                                    at, nodes.size(),
                                    nodes.empty() ? "" : fmt::format(", after {}", node_where(nodes.back())))});
    }
    auto [it, fresh] = index_of_id.emplace(node.id(), nodes.size());
    if (!fresh)
      throw InputError({fmt::format("{}: {}: a second node with id {} (the first is \"{}\")", file, node_where(node),
                                    node.id(), nodes[it->second].name())});
    nodes.push_back(std::move(node));
  }
  if (nodes.empty())
    throw InputError({fmt::format("{}: a Chakra execution trace with no nodes", file)});

  // Times from the earliest start, in whole microseconds before they become seconds.
  uint64_t origin = 0;
  for (const auto& node : nodes)
    if (node.start_time_micros() > 0 && (origin == 0 || node.start_time_micros() < origin))
      origin = node.start_time_micros();
  rank.timed = origin > 0;
  for (const auto& node : nodes) {
    RecordedOp op;
    op.name    = node.name();
    op.where   = node_where(node);
    op.start_s = node.start_time_micros() > 0 ? static_cast<double>(node.start_time_micros() - origin) * 1e-6 : 0.0;
    op.seconds = static_cast<double>(node.duration_micros()) * 1e-6;
    switch (node.type()) {
    case et::COMP_NODE: {
      const auto* cpu = attr(node, "is_cpu_op");
      if (cpu != nullptr && cpu->value_case() == et::AttributeProto::kBoolVal && cpu->bool_val()) {
        op.seconds = 0; // the host's work: not replayed on the GPU
        break;
      }
      const auto flops  = integer_attr(node, "num_ops", file);
      const auto tensor = integer_attr(node, "tensor_size", file);
      if ((flops && *flops < 0) || (tensor && *tensor < 0))
        throw InputError({fmt::format("{}: {}: a negative num_ops or tensor_size", file, op.where)});
      if (flops && *flops > 0)
        op.kernel = opaque_kernel(op.name, static_cast<double>(*flops));
      else if (tensor && *tensor > 0)
        op.kernel = memory_kernel(op.name, static_cast<double>(*tensor));
      if (node.duration_micros() == 0 && op.kernel)
        op.seconds = -1; // none recorded: the kernel model times it
      break;
    }
    case et::COMM_COLL_NODE: {
      op.kind              = RecordedKind::Collective;
      const long long type = required(node, "comm_type", file, "the collective, a CollectiveCommType");
      switch (type) {
      case et::ALL_REDUCE: op.op = CollectiveOp::AllReduce; break;
      case et::REDUCE: op.op = CollectiveOp::Reduce; break;
      case et::ALL_GATHER: op.op = CollectiveOp::AllGather; break;
      case et::BROADCAST: op.op = CollectiveOp::Broadcast; break;
      case et::ALL_TO_ALL: op.op = CollectiveOp::AllToAll; break;
      case et::REDUCE_SCATTER:
      case et::REDUCE_SCATTER_BLOCK: op.op = CollectiveOp::ReduceScatter; break;
      case et::BARRIER: op.op = CollectiveOp::AllReduce; break; // NCCL's barrier: an all-reduce of one element
      case et::GATHER:
      case et::SCATTER:
        throw InputError({fmt::format("{}: {}: comm_type {} ({}) is a collective stepsim does not replay (all-reduce, "
                                      "reduce, all-gather, broadcast, all-to-all, reduce-scatter, barrier)",
                                      file, op.where, type, et::CollectiveCommType_Name(static_cast<int>(type)))});
      default:
        throw InputError({fmt::format("{}: {}: unknown comm_type {}; Chakra's CollectiveCommType has ALL_REDUCE (0) to "
                                      "BARRIER (9)",
                                      file, op.where, type)});
      }
      const long long size = type == et::BARRIER ? 4 : required(node, "comm_size", file, "the bytes it moves");
      if (size < 0)
        throw InputError({fmt::format("{}: {}: comm_size {} is negative", file, op.where, size)});
      op.bytes = std::max(1.0, static_cast<double>(size));
      if (const auto* pg = attr(node, "pg_name")) {
        if (pg->value_case() != et::AttributeProto::kStringVal)
          throw InputError({fmt::format("{}: {}: attribute \"pg_name\" is not a string", file, op.where)});
        op.group = pg->string_val();
      }
      break;
    }
    case et::COMM_SEND_NODE:
    case et::COMM_RECV_NODE: {
      const bool send = node.type() == et::COMM_SEND_NODE;
      op.kind         = send ? RecordedKind::Send : RecordedKind::Recv;
      const long long peer = required(node, send ? "comm_dst" : "comm_src", file, send ? "the receiving rank" : "the sending rank");
      op.peer  = static_cast<int>(std::clamp(peer, -1LL, 1LL << 24));
      op.tag   = std::max(0LL, integer_attr(node, "comm_tag", file).value_or(0));
      op.bytes = static_cast<double>(std::max(1LL, required(node, "comm_size", file, "the bytes it moves")));
      break;
    }
    case et::METADATA_NODE:
    case et::MEM_LOAD_NODE:
    case et::MEM_STORE_NODE: op.seconds = 0; break;
    default:
      throw InputError({fmt::format("{}: {}: node type {} is none stepsim replays (COMP_NODE, COMM_COLL_NODE, "
                                    "COMM_SEND_NODE, COMM_RECV_NODE, METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE)",
                                    file, op.where, static_cast<int>(node.type()))});
    }
    for (const auto* deps : {&node.data_deps(), &node.ctrl_deps()})
      for (uint64_t id : *deps) {
        auto it = index_of_id.find(id);
        if (it == index_of_id.end())
          throw InputError({fmt::format("{}: {}: depends on node {}, which the trace does not have", file, op.where, id)});
        op.after.push_back(it->second);
      }
    rank.ops.push_back(std::move(op));
  }
  return rank;
}

// Not a JSON document (the Kineto format's): taken as a protobuf stream, which has no magic number.
bool not_json(const std::string& head)
{
  size_t i = head.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i])))
    ++i;
  return !head.empty() && !(i < head.size() && (head[i] == '{' || head[i] == '['));
}

const bool registered = TraceFormatRegistry::add(
    "chakra", "Chakra execution trace (.et protobuf, ASTRA-sim's input), one file per rank",
    TraceFormat{not_json, read_chakra});

} // namespace
} // namespace stepsim
