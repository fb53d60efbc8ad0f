// A registry of named implementations (schedules, collective algorithms, topologies, cost
// models). Each implementation is one .cpp file that registers itself with one line:
//
//   static const bool registered = Registry<PipelineSchedule>::add("1f1b", "one forward, one backward", &make);
//
// The registry is a function-local static, so registration order across files does not matter.
// Libraries holding implementations are linked whole, so the linker keeps the registering code.
#pragma once

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

namespace stepsim {

template <class Entry> class Registry {
public:
  struct Item {
    std::string description;
    Entry entry;
  };

  static bool add(const std::string& name, const std::string& description, Entry entry)
  {
    items().emplace(name, Item{description, std::move(entry)});
    return true;
  }

  static const Entry* find(const std::string& name)
  {
    auto it = items().find(name);
    return it == items().end() ? nullptr : &it->second.entry;
  }

  // The entry, or an InputError at `path` that lists the valid names.
  static const Entry& get(const std::string& name, const std::string& path)
  {
    if (const Entry* e = find(name))
      return *e;
    std::string valid;
    for (const auto& n : names())
      valid += (valid.empty() ? "" : ", ") + fmt::format("\"{}\"", n);
    std::string near = closest_name(name, names());
    throw InputError({fmt::format("{}: unknown name \"{}\"{}. Valid values are: {}", path, name,
                                  near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near), valid)});
  }

  static std::vector<std::string> names()
  {
    std::vector<std::string> out;
    for (const auto& [name, item] : items())
      out.push_back(name);
    return out;
  }

  static const std::map<std::string, Item>& all() { return items(); }

private:
  static std::map<std::string, Item>& items()
  {
    static std::map<std::string, Item> registry;
    return registry;
  }
};

} // namespace stepsim
