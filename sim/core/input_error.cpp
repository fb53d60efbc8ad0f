#include "sim/core/input_error.hpp"

#include <algorithm>
#include <numeric>

namespace stepsim {

namespace {
std::string join_lines(const std::vector<std::string>& lines)
{
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty())
      out += '\n';
    out += l;
  }
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b)
{
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0]      = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j]    = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag      = up;
    }
  }
  return row[b.size()];
}
} // namespace

InputError::InputError(std::vector<std::string> problems)
    : std::runtime_error(join_lines(problems)), problems_(std::move(problems))
{
}

void Problems::add(const std::string& path, const std::string& message)
{
  if (!path.empty())
    paths_.push_back(path);
  list_.push_back(path.empty() ? message : path + ": " + message);
}

bool Problems::about(const std::string& path) const
{
  return std::find(paths_.begin(), paths_.end(), path) != paths_.end();
}

void Problems::throw_if_any() const
{
  if (!list_.empty())
    throw InputError(list_);
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates)
{
  std::string best;
  size_t best_distance = std::max<size_t>(3, word.size() / 2) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best          = c;
    }
  }
  // A spelling one or two letters off is the likeliest ("moe_shared_expert" for
  // "moe_shared_experts"). Past that, a candidate of which the word is a whole part ("xgmi" of
  // "xgmi_mesh", "cube_mesh" of "dgx1_cube_mesh") comes before one merely spelled near it ("dgx2"
  // is three letters from "xgmi"): the shortest such.
  if (!best.empty() && best_distance <= 2)
    return best;
  auto separator = [](char c) { return c == '_' || c == '-' || c == '.'; };
  std::string part;
  if (word.size() >= 3)
    for (const auto& c : candidates)
      for (size_t at = c.find(word); at != std::string::npos; at = c.find(word, at + 1)) {
        const size_t end = at + word.size();
        if ((at == 0 || separator(c[at - 1])) && (end == c.size() || separator(c[end])) && c != word &&
            (part.empty() || c.size() < part.size()))
          part = c;
      }
  return part.empty() ? best : part;
}

} // namespace stepsim
