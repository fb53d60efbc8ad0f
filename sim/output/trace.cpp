#include "sim/output/trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

namespace stepsim {

namespace {

// Whole nanoseconds, written as microseconds with three decimals: fixed-point, so the text is the
// same on every run, and a slice's end (start + duration) is computed from the same rounded
// numbers as the slices nested in it, so nesting survives the rounding.
long long nanos(double seconds) { return std::llround(seconds * 1e9); }
std::string micros(long long ns) { return fmt::format("{}.{:03d}", ns / 1000, static_cast<int>(ns % 1000)); }
std::string micros(double seconds) { return micros(nanos(seconds)); }

std::string quoted(const std::string& text) { return nlohmann::json(text).dump(); }

std::string micro_batch_label(const TimelineInterval& i)
{
  return i.micro_batch >= 0 ? fmt::format("{} mb{} chunk{}", pass_letter(i.pass), i.micro_batch, i.chunk)
                            : std::string(pass_name(i.pass));
}

std::string event_name(const TimelineInterval& i)
{
  switch (i.kind) {
  case TaskKind::Compute: return i.work;
  case TaskKind::Send: return fmt::format("send {} to {}", micro_batch_label(i), i.peer);
  case TaskKind::Recv: return fmt::format("recv {} from {}", micro_batch_label(i), i.peer);
  case TaskKind::Collective:
    return i.micro_batch >= 0 ? fmt::format("{} {}", collective_name(i.op), micro_batch_label(i))
                              : fmt::format("{} {}", collective_name(i.op), i.group);
  case TaskKind::HostCopy:
    return fmt::format("{} {}", i.stream == Stream::DeviceToHost ? "to host" : "from host", micro_batch_label(i));
  }
  return "?";
}

const char* category(TaskKind k)
{
  switch (k) {
  case TaskKind::Compute: return "compute";
  case TaskKind::Send:
  case TaskKind::Recv: return "p2p";
  case TaskKind::Collective: return "collective";
  case TaskKind::HostCopy: return "host_copy";
  }
  return "?";
}

std::string event_args(const TimelineInterval& i)
{
  std::string args = fmt::format("\"pass\":\"{}\",\"micro_batch\":{},\"chunk\":{}", pass_name(i.pass),
                                 i.micro_batch, i.chunk);
  switch (i.kind) {
  case TaskKind::Compute: args += fmt::format(",\"work\":{}", quoted(i.work)); break;
  case TaskKind::Send:
  case TaskKind::Recv: args += fmt::format(",\"peer\":{},\"tag\":{},\"bytes\":{:.0f}", i.peer, i.tag, i.bytes); break;
  case TaskKind::Collective:
    args += fmt::format(",\"op\":\"{}\",\"group\":{},\"bytes\":{:.0f}", collective_name(i.op), quoted(i.group),
                        i.bytes);
    break;
  case TaskKind::HostCopy: args += fmt::format(",\"bytes\":{:.0f}", i.bytes); break;
  }
  return args;
}

} // namespace

std::string trace_json(const Timeline& t)
{
  fmt::memory_buffer out;
  auto event = [&, first = true](const std::string& text) mutable {
    fmt::format_to(std::back_inserter(out), "{}\n{}", first ? "" : ",", text);
    first = false;
  };
  fmt::format_to(std::back_inserter(out), "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"scenario\":{},"
                                          "\"schedule\":{},\"step_time_s\":{:.9g}}},\n\"traceEvents\":[",
                 quoted(t.name), quoted(t.schedule), t.step_time_s);

  for (const auto& rank : t.ranks) {
    event(fmt::format("{{\"ph\":\"M\",\"pid\":{},\"name\":\"process_name\",\"args\":{{\"name\":\"rank {} (stage {})\"}}}}",
                      rank.rank, rank.rank, rank.stage));
    event(fmt::format("{{\"ph\":\"M\",\"pid\":{},\"name\":\"process_sort_index\",\"args\":{{\"sort_index\":{}}}}}",
                      rank.rank, rank.rank));
    std::set<Stream> streams;
    for (const auto& i : rank.intervals)
      streams.insert(i.stream);
    for (Stream s : streams) {
      event(fmt::format("{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":\"{}\"}}}}",
                        rank.rank, static_cast<int>(s), stream_name(s)));
      event(fmt::format("{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{}}}}}",
                        rank.rank, static_cast<int>(s), static_cast<int>(s)));
    }
  }

  // Receives by (receiver, sender, tag): the key a send and its receive share.
  std::map<std::tuple<int, int, int>, std::pair<int, const TimelineInterval*>> receives;
  auto slice = [&](int pid, Stream stream, double start_s, double end_s, const std::string& name, const char* cat,
                   const std::string& args) {
    const long long start = nanos(start_s);
    event(fmt::format("{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"name\":{},\"cat\":\"{}\","
                      "\"args\":{{{}}}}}",
                      pid, static_cast<int>(stream), micros(start), micros(nanos(end_s) - start), quoted(name), cat, args));
  };
  for (const auto& rank : t.ranks) {
    // A compute run ("B mb3 chunk0") is a slice holding its tasks' slices, so that the pipeline
    // reads at a glance and zooming in shows the layers (and recompute) inside a pass.
    for (const ComputeRun& run : compute_runs(rank)) {
      std::string name = run.micro_batch >= 0 ? fmt::format("{} mb{} chunk{}", pass_letter(run.pass), run.micro_batch, run.chunk)
                                              : std::string(pass_name(run.pass));
      slice(rank.rank, Stream::Compute, run.start_s, run.end_s, name, "pass",
            fmt::format("\"pass\":\"{}\",\"micro_batch\":{},\"chunk\":{},\"recompute_s\":{:.9g}", pass_name(run.pass),
                        run.micro_batch, run.chunk, run.recompute_s));
      for (size_t k = run.first; k <= run.last; ++k) {
        const TimelineInterval& i = rank.intervals[k];
        slice(rank.rank, i.stream, i.start_s, i.end_s, event_name(i), category(i.kind), event_args(i));
      }
    }
    for (const auto& i : rank.intervals) {
      if (i.stream == Stream::Compute)
        continue;
      slice(rank.rank, i.stream, i.start_s, i.end_s, event_name(i), category(i.kind), event_args(i));
      if (i.kind == TaskKind::Recv)
        receives[{rank.rank, i.peer, i.tag}] = {rank.rank, &i};
    }
  }

  // Each flow end sits in the middle of its slice: a viewer binds a flow point to the slice that
  // encloses it, and a slice's own boundaries are ambiguous.
  long long id = 0;
  for (const auto& rank : t.ranks)
    for (const auto& i : rank.intervals) {
      if (i.kind != TaskKind::Send)
        continue;
      auto it = receives.find({i.peer, rank.rank, i.tag});
      if (it == receives.end()) // the receiver is not simulated (reduced fidelity)
        continue;
      const TimelineInterval& r = *it->second.second;
      ++id;
      std::string name = quoted(micro_batch_label(i));
      event(fmt::format("{{\"ph\":\"s\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":{},\"cat\":\"p2p\"}}", id,
                        rank.rank, static_cast<int>(i.stream), micros((i.start_s + i.end_s) / 2), name));
      event(fmt::format("{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":{},"
                        "\"cat\":\"p2p\"}}",
                        id, it->second.first, static_cast<int>(r.stream), micros((r.start_s + r.end_s) / 2), name));
    }
  fmt::format_to(std::back_inserter(out), "\n]}}\n");
  return fmt::to_string(out);
}

} // namespace stepsim
