#include "sim/engine/link_slowdown.hpp"

#include "sim/core/input_error.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <cctype>
#include <set>

namespace stepsim {

namespace {
std::string without_direction(const std::string& name)
{
  for (const char* suffix : {"_UP", "_DOWN"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return name.substr(0, name.size() - s.size());
  }
  return name;
}
} // namespace

std::string link_kind(const std::string& link_name)
{
  std::string kind;
  for (char c : without_direction(link_name)) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (kind.empty() || kind.back() != 'N')
        kind += 'N';
    } else {
      kind += c;
    }
  }
  return kind;
}

bool link_matches(const std::string& link_name, const std::string& wanted)
{
  if (wanted == link_name || wanted == without_direction(link_name))
    return true;
  const std::string kind = link_kind(link_name);
  if (wanted == kind)
    return true;
  size_t start = 0;
  while (start <= kind.size()) {
    size_t end       = kind.find('-', start);
    std::string word = kind.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!word.empty() && word.back() == 'N') // "nicN" is the word "nic"
      word.pop_back();
    if (word == wanted)
      return true;
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return false;
}

void slow_links(const std::vector<SimulationSpec::Straggler>& stragglers)
{
  std::vector<simgrid::s4u::Link*> links;
  bool any = false;
  for (const auto& st : stragglers)
    any = any || !st.link.empty();
  if (!any)
    return;
  links = simgrid::s4u::Engine::get_instance()->get_all_links();
  Problems problems;
  for (size_t i = 0; i < stragglers.size(); ++i) {
    const auto& st = stragglers[i];
    if (st.link.empty())
      continue;
    int matched = 0;
    for (auto* link : links)
      if (link_matches(link->get_name(), st.link)) {
        link->set_bandwidth(link->get_bandwidth() / st.slowdown);
        ++matched;
      }
    if (matched == 0) {
      std::set<std::string> kinds;
      for (const auto* link : links)
        kinds.insert(link_kind(link->get_name()));
      std::string known;
      for (const auto& k : kinds)
        known += (known.empty() ? "" : ", ") + k;
      problems.add(fmt::format("simulation.stragglers[{}].link", i),
                   fmt::format("no link of the simulated platform is named \"{}\" or of that kind; link kinds built: {}",
                               st.link, known));
    }
  }
  problems.throw_if_any();
}

} // namespace stepsim
