// Forked simulation children end with the command that started them (issue 23): a parent killed
// by SIGKILL, which runs no cleanup of its own, must not leave its child running.
#include "sim/simulate.hpp"
#include "tools/driver/process_pool.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <functional>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace stepsim;

namespace {

// Inside a helper process that adopts orphans (a child subreaper), so that it can reap the
// grandchild and see how it ended: a "parent" process starts a child through `start`, the child
// reports its pid and waits forever; the parent is SIGKILLed. Returns the helper's exit code:
// 0 when the child was killed by SIGKILL soon after, 3 when it was still running 10 s later.
int child_outlives_parent(const std::function<void(int report_fd)>& start)
{
  std::fflush(nullptr); // else the forked processes would print Catch2's buffered output again
  pid_t helper = fork();
  REQUIRE(helper >= 0);
  if (helper == 0) {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
      _exit(4);
    int fds[2];
    if (pipe(fds) != 0)
      _exit(4);
    pid_t parent = fork();
    if (parent == 0) {
      close(fds[0]);
      start(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    pid_t child = 0;
    if (read(fds[0], &child, sizeof child) != sizeof child)
      _exit(5);
    kill(parent, SIGKILL);
    waitpid(parent, nullptr, 0);
    for (int tenth = 0; tenth < 100; ++tenth) {
      int status = 0;
      if (waitpid(child, &status, WNOHANG) == child)
        _exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : 6);
      usleep(100000);
    }
    kill(child, SIGKILL);
    _exit(3);
  }
  int status = 0;
  waitpid(helper, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The body of every child: tell the helper who it is, then run until killed.
std::string report_and_wait(int report_fd)
{
  pid_t self = getpid();
  if (write(report_fd, &self, sizeof self) != sizeof self)
    _exit(7);
  for (;;)
    pause();
}

} // namespace

TEST_CASE("a simulation child dies with its killed parent", "[child_processes]")
{
  CHECK(child_outlives_parent([](int fd) { run_in_child([fd] { return report_and_wait(fd); }); }) == 0);
}

TEST_CASE("a sweep worker dies with its killed parent", "[child_processes]")
{
  CHECK(child_outlives_parent([](int fd) {
          run_in_processes({0}, 1, [fd](size_t) { return report_and_wait(fd); }, [](size_t, std::string) {});
        }) == 0);
}

TEST_CASE("a child whose parent is already gone exits at once", "[child_processes]")
{
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    die_with_parent(getppid() + 1); // as if the parent had died and the child been adopted
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
}
