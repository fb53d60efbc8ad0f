// Running a simulation in a child process: SimGrid allows one engine per process.
#include "sim/simulate.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace stepsim {

void die_with_parent(int parent_pid)
{
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent_pid)
    _exit(1);
}

namespace {

std::string read_all(int fd)
{
  std::string text;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  return text;
}

// False when the descriptor takes no more (the reader has gone).
bool write_all(int fd, const std::string& text)
{
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n <= 0)
      return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

// Forks a child that dies with this process, and a pipe from it: in the child `fds[1]` is its
// end to write (0 returned), here `fds[0]` is the end to read (the child's pid returned).
pid_t fork_with_pipe(int fds[2])
{
  if (pipe(fds) != 0)
    throw std::runtime_error("cannot create a pipe for the simulation process");
  std::fflush(nullptr); // else the child would write the parent's buffered output a second time
  const pid_t parent = getpid();
  const pid_t pid    = fork();
  if (pid < 0)
    throw std::runtime_error("cannot fork the simulation process");
  if (pid == 0) {
    die_with_parent(parent);
    close(fds[0]);
    return 0;
  }
  close(fds[1]);
  return pid;
}

} // namespace

std::string run_in_child(const std::function<std::string()>& body, long* peak_rss_kb)
{
  int fds[2];
  const pid_t pid = fork_with_pipe(fds);
  if (pid == 0) {
    write_all(fds[1], body());
    close(fds[1]);
    _exit(0);
  }
  const std::string text = read_all(fds[0]);
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  if (peak_rss_kb != nullptr)
    *peak_rss_kb = usage.ru_maxrss;
  if (text.empty())
    throw std::runtime_error(fmt::format("the simulation process died (status {})", status));
  return text;
}

void run_in_child_lines(const std::function<void(const std::function<void(const std::string&)>& emit)>& body,
                        const std::function<void(const std::string&)>& on_line)
{
  int fds[2];
  const pid_t pid = fork_with_pipe(fds);
  if (pid == 0) {
    auto emit = [&](const std::string& line) {
      if (!write_all(fds[1], line + "\n"))
        _exit(1);
    };
    body(emit);
    emit(""); // the end: an empty line, which `emit` is never handed otherwise
    close(fds[1]);
    _exit(0);
  }
  std::string pending;
  char buffer[65536];
  ssize_t n;
  bool ended = false;
  std::exception_ptr failed;
  while (!ended && !failed && (n = read(fds[0], buffer, sizeof buffer)) > 0) {
    pending.append(buffer, static_cast<size_t>(n));
    size_t at;
    while (!ended && !failed && (at = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, at);
      pending.erase(0, at + 1);
      if (line.empty())
        ended = true;
      else
        try {
          on_line(line);
        } catch (...) { // reported once the child is reaped
          failed = std::current_exception();
        }
    }
  }
  close(fds[0]);
  if (failed)
    kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (failed)
    std::rethrow_exception(failed);
  if (!ended)
    throw std::runtime_error(fmt::format("the simulation process died (status {})", status));
}

DeferredChild::DeferredChild(std::function<std::string(const std::string&)> body)
{
  int in[2], out[2];
  if (pipe(in) != 0)
    throw std::runtime_error("cannot create a pipe for the simulation process");
  if (pipe(out) != 0) {
    close(in[0]);
    close(in[1]);
    throw std::runtime_error("cannot create a pipe for the simulation process");
  }
  std::fflush(nullptr);
  const pid_t parent = getpid();
  pid_               = fork();
  if (pid_ < 0)
    throw std::runtime_error("cannot fork the simulation process");
  if (pid_ == 0) {
    die_with_parent(parent);
    close(in[1]);
    close(out[0]);
    const std::string input = read_all(in[0]);
    close(in[0]);
    if (!input.empty())
      write_all(out[1], body(input));
    close(out[1]);
    _exit(0);
  }
  close(in[0]);
  close(out[1]);
  to_child_   = in[1];
  from_child_ = out[0];
}

DeferredChild::~DeferredChild()
{
  if (to_child_ >= 0)
    close(to_child_);
  if (from_child_ >= 0)
    close(from_child_);
  if (pid_ > 0)
    waitpid(pid_, nullptr, 0);
}

std::string DeferredChild::run(const std::string& input)
{
  if (to_child_ < 0)
    throw std::logic_error("a deferred child runs once");
  write_all(to_child_, input);
  close(to_child_);
  to_child_              = -1;
  const std::string text = read_all(from_child_);
  close(from_child_);
  from_child_ = -1;
  int status  = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (text.empty())
    throw std::runtime_error(fmt::format("the host-side simulation process died (status {})", status));
  return text;
}

nlohmann::json simulate_isolated_json(const Scenario& s, int link_count)
{
  nlohmann::json out = nlohmann::json::parse(run_in_child([&] {
    nlohmann::json result;
    try {
      result["report"] = to_json(simulate(s, nullptr, link_count));
    } catch (const InputError& e) {
      result["input_error"] = e.problems();
    } catch (const std::exception& e) {
      result["error"] = e.what();
    }
    return result.dump();
  }));
  if (out.contains("input_error"))
    throw InputError(out["input_error"].get<std::vector<std::string>>());
  if (out.contains("error"))
    throw std::runtime_error(out["error"].get<std::string>());
  return out["report"];
}

Report simulate_isolated(const Scenario& s) { return report_from_json(simulate_isolated_json(s)); }

} // namespace stepsim
