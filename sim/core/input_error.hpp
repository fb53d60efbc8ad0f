// Problems found in user input. Every message names the JSON path it is about, so a user can
// find the line to fix; the command line turns an InputError into exit code 2.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace stepsim {

class InputError : public std::runtime_error {
public:
  explicit InputError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

private:
  std::vector<std::string> problems_;
};

// Collects independent problems so that a user sees all of them at once.
class Problems {
public:
  void add(const std::string& path, const std::string& message);
  bool empty() const { return list_.empty(); }
  const std::vector<std::string>& list() const { return list_; }
  // Throws InputError if anything was added.
  void throw_if_any() const;

private:
  std::vector<std::string> list_;
};

// The closest of `candidates` to `word` (Levenshtein), or "" when nothing is close enough.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

} // namespace stepsim
