// platform.nccl_env, read as NCCL reads its environment (NVIDIA/nccl src/graph/tuning.cc:
// parseList and ncclTuningCostModelInit). NCCL_ALGO and NCCL_PROTO are comma-separated lists of
// names, case-insensitive; a list that starts with ^ enables all but those. Entries separated by
// ";" may name a collective function first ("Ring;allreduce:Tree,Ring": Ring for every function,
// then Tree and Ring for all-reduce); only the first may go without one, and a function no entry
// names keeps NCCL's defaults. A name NCCL does not know makes NCCL fail with ncclInvalidUsage,
// so it is bad input here too. NCCL_NVLS_ENABLE=0 takes NVLS and NVLS-tree away and
// NCCL_COLLNET_ENABLE=0 CollNet (src/init.cc, src/graph/tuning.cc).
#include "sim/input/nccl_env_parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace stepsim {
namespace {

// NCCL's names, in the bit order of sim/core/nccl_env.hpp (ncclAlgoStr, ncclProtoStr).
const std::vector<std::string> kAlgorithms = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
const std::vector<std::string> kProtocols  = {"LL", "LL128", "Simple"};
// The collective functions an entry may name (ncclFuncStr) and the CollectiveOp index of each
// (sim/core/task_graph.hpp).
const std::vector<std::pair<std::string, size_t>> kFunctions = {
    {"Broadcast", 4}, {"Reduce", 5}, {"AllGather", 1}, {"ReduceScatter", 2}, {"AllReduce", 0}};

bool same_name(const std::string& a, const std::string& b)
{
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// `text` cut at `separator`, empty pieces dropped (strtok's way).
std::vector<std::string> pieces(const std::string& text, char separator)
{
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(separator, start), text.size());
    if (end > start)
      out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string listed(const std::vector<std::string>& names)
{
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

// One NCCL_ALGO or NCCL_PROTO value into `masks` (one per CollectiveOp); "" when it reads, else
// what is wrong with it.
std::string parse_list(const std::string& value, const std::vector<std::string>& names, uint8_t every,
                       std::array<uint8_t, 6>& masks)
{
  const auto entries = pieces(value, ';');
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string list = entries[i], prefix;
    if (const size_t colon = list.find(':'); colon != std::string::npos) {
      prefix = list.substr(0, colon);
      list   = list.substr(colon + 1);
    } else if (i > 0) {
      return fmt::format("every entry after the first needs a collective function before a colon, as in "
                         "\"Ring;allreduce:Tree,Ring\"; \"{}\" has none",
                         entries[i]);
    }
    const bool but = !list.empty() && list.front() == '^';
    if (but)
      list.erase(0, 1);
    uint8_t named = 0;
    for (const auto& word : pieces(list, ',')) {
      const auto at = std::find_if(names.begin(), names.end(), [&](const std::string& n) { return same_name(n, word); });
      if (at == names.end()) {
        const std::string near = closest_name(word, names);
        return fmt::format("\"{}\" is not a name NCCL knows here{}; expected names among {} (any case), separated by "
                           "commas, the list optionally after ^ (all but these)",
                           word, near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near), listed(names));
      }
      named = static_cast<uint8_t>(named | (1u << (at - names.begin())));
    }
    if (named == 0) // nothing named: NCCL leaves the function's defaults (it forces none)
      continue;
    const uint8_t mask = but ? static_cast<uint8_t>(every & ~named) : named;
    bool found         = prefix.empty();
    for (const auto& [function, op] : kFunctions)
      if (prefix.empty() || same_name(prefix, function)) {
        masks[op] = mask;
        found     = true;
      }
    if (!found) {
      std::vector<std::string> functions;
      for (const auto& f : kFunctions)
        functions.push_back(f.first);
      const std::string near = closest_name(prefix, functions);
      return fmt::format("\"{}\" is not a collective function NCCL knows{}; expected one of {} (any case)", prefix,
                         near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near), listed(functions));
    }
  }
  return "";
}

} // namespace

const std::vector<std::string>& nccl_env_variables()
{
  static const std::vector<std::string> names = {"NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE"};
  return names;
}

void read_nccl_env(JsonReader& platform, NcclEnv& env)
{
  const nlohmann::json* given = platform.raw("nccl_env");
  if (given == nullptr)
    return;
  const std::string path = platform.path_of("nccl_env");
  Problems& problems     = platform.problems();
  if (!given->is_object()) {
    problems.add(path, fmt::format("expected an object of NCCL environment variables, each a string as the shell "
                                   "gives it ({{\"NCCL_ALGO\": \"Ring,Tree\"}}), got {}",
                                   given->dump()));
    return;
  }
  bool nvls = true, collnet = true;
  for (const auto& [name, value] : given->items()) {
    const std::string at = path + "." + name;
    const auto& known    = nccl_env_variables();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      const std::string near = closest_name(name, known);
      problems.add(at, fmt::format("not a variable stepsim models{}; expected {}. Variables that do not change which "
                                   "algorithm and protocol NCCL runs (NCCL_DEBUG, interface names, buffer and chunk "
                                   "sizes) are not modelled: leave them out",
                                   near.empty() ? "" : fmt::format(" (did you mean {}?)", near), listed(known)));
      continue;
    }
    const bool flag = name == "NCCL_NVLS_ENABLE" || name == "NCCL_COLLNET_ENABLE";
    std::string text;
    if (value.is_string())
      text = value.get<std::string>();
    else if (flag && value.is_number_integer())
      text = std::to_string(value.get<long long>());
    else {
      problems.add(at, fmt::format("expected {}, got {}",
                                   flag ? "\"0\" or \"1\" (a string as the shell gives it, or the integer)"
                                        : "a string in NCCL's syntax, as the shell gives it",
                                   value.dump()));
      continue;
    }
    env.variables[name] = text;
    if (flag) {
      // NCCL_NVLS_ENABLE is 2 (NCCL decides) by default; NCCL_COLLNET_ENABLE 0, but CollNet runs
      // only where the fabric reduces (platform.network.sharp), which stands for it being set.
      const bool nvls_flag = name == "NCCL_NVLS_ENABLE";
      if (text == "0")
        (nvls_flag ? nvls : collnet) = false;
      else if (!(text == "1" || (nvls_flag && text == "2")))
        problems.add(at, fmt::format("expected {}, got \"{}\"",
                                     nvls_flag ? "0 (no NVLS), 1 or 2 (NCCL's default: where the NVSwitch can)"
                                               : "0 (no CollNet) or 1 (CollNet where the fabric reduces: "
                                                 "platform.network.sharp)",
                                     text));
      continue;
    }
    const bool algorithms = name == "NCCL_ALGO";
    const std::string wrong =
        algorithms ? parse_list(text, kAlgorithms, kEveryNcclAlgorithm, env.choices.algorithms)
                   : parse_list(text, kProtocols, kEveryNcclProtocol, env.choices.protocols);
    if (!wrong.empty())
      problems.add(at, fmt::format("in \"{}\": {}", text, wrong));
  }
  const uint8_t off = static_cast<uint8_t>((nvls ? 0 : kNcclNvls | kNcclNvlsTree) |
                                           (collnet ? 0 : kNcclCollNetDirect | kNcclCollNetChain));
  for (auto& mask : env.choices.algorithms)
    mask = static_cast<uint8_t>(mask & ~off);
}

} // namespace stepsim
