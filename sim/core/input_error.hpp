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
  // Whether a problem was reported about `path`: a check across fields skips a field refused
  // already, whose value is then the stand-in the reader kept (a hidden_size out of range, read
  // as 1, is not "not divisible by the heads").
  bool about(const std::string& path) const;
  bool empty() const { return list_.empty(); }
  const std::vector<std::string>& list() const { return list_; }
  // Throws InputError if anything was added.
  void throw_if_any() const;

private:
  std::vector<std::string> list_;
  std::vector<std::string> paths_; // the paths reported, in order
};

// The closest of `candidates` to `word`: a spelling one or two letters off (Levenshtein), else one
// of which the word is a whole part, separated by "_", "-" or "." ("xgmi" -> "xgmi_mesh"), else the
// nearest spelling, or "" when nothing is close enough.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

} // namespace stepsim
