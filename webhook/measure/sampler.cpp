// A command run while /dev/shm is sampled (see sampler.h).
#include "measure/sampler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "measure/private_shm.h"

namespace shmguard::measure {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int err_fd = -1;  // the command's stderr, passed through and watched for PyTorch's message
};

// Starts the command with stdin and stdout inherited (stdout onto observe's stderr when
// `stdout_to_stderr`: the report has stdout) and stderr through a pipe. Returns the exec error
// (errno) of a command that could not start, 0 when it runs.
int spawn(const std::vector<std::string>& cmd, bool stdout_to_stderr, Child& c) {
  int err_pipe[2], exec_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0) return errno;
  c.pid = ::fork();
  if (c.pid < 0) return errno;
  if (c.pid == 0) {
    if (stdout_to_stderr) ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::signal(SIGPIPE, SIG_DFL);
    std::vector<char*> argv;
    for (const auto& s : cmd) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    int e = errno;
    (void)!::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int e = 0;
  ssize_t n = ::read(exec_pipe[0], &e, sizeof e);  // EOF (0) when exec succeeded: CLOEXEC closed it
  ::close(exec_pipe[0]);
  c.err_fd = err_pipe[0];
  if (n == sizeof e) {
    ::waitpid(c.pid, nullptr, 0);
    return e;
  }
  return 0;
}

volatile sig_atomic_t g_forward = 0;
void on_signal(int sig) { g_forward = sig; }

// Samples the filesystem every interval until the command exits, passing its stderr through.
void watch(const Child& c, const Sampling& s, Sampled& r) {
  const auto start = Clock::now();
  std::string tail;  // the end of stderr so far, for a message split across reads
  bool stderr_open = true;
  int status = 0;
  for (;;) {
    const std::uint64_t used = used_bytes(s.path.c_str());
    ++r.samples;
    if (used > s.baseline && used - s.baseline > r.peak) {
      r.peak = used - s.baseline;
      r.peak_at_s = std::chrono::duration<double>(Clock::now() - start).count();
    }
    if (g_forward) {
      ::kill(c.pid, g_forward);
      g_forward = 0;
    }
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) break;
    pollfd p{stderr_open ? c.err_fd : -1, POLLIN, 0};
    if (::poll(&p, 1, s.interval_ms) > 0 && (p.revents & (POLLIN | POLLHUP))) {
      char buf[8192];
      ssize_t n = ::read(c.err_fd, buf, sizeof buf);
      if (n > 0) {
        (void)!::write(STDERR_FILENO, buf, static_cast<std::size_t>(n));
        tail.append(buf, static_cast<std::size_t>(n));
        if (says_bus_error(tail)) r.bus_error = true;
        if (tail.size() > 4096) tail.erase(0, tail.size() - 1024);
      } else {
        stderr_open = false;  // closed early (the command redirected it); keep sampling
      }
    }
  }
  // What the command wrote last.
  char buf[8192];
  ssize_t n;
  while (stderr_open && (n = ::read(c.err_fd, buf, sizeof buf)) > 0) {
    (void)!::write(STDERR_FILENO, buf, static_cast<std::size_t>(n));
    tail.append(buf, static_cast<std::size_t>(n));
  }
  if (says_bus_error(tail)) r.bus_error = true;
  ::close(c.err_fd);
  r.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.exit_code = 128 + r.signal;
    if (r.signal == SIGBUS) r.bus_error = true;
  }
}

}  // namespace

bool says_bus_error(const std::string& text) {
  return (text.find("Bus error") != std::string::npos && text.find("DataLoader worker") != std::string::npos) ||
         text.find("Unexpected bus error encountered in worker") != std::string::npos;
}

int sample_command(const std::vector<std::string>& command, const Sampling& s, Sampled& out) {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  Child c;
  if (int e = spawn(command, s.stdout_to_stderr, c); e != 0) return e;
  watch(c, s, out);
  return 0;
}

}  // namespace shmguard::measure
