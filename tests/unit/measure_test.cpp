// `observe`'s measurement (measure/): a command run while a filesystem is sampled, how it ended,
// PyTorch's bus error, and a private tmpfs in a mount namespace that nothing outside sees (root).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <functional>

#include "measure/private_shm.h"
#include "measure/sampler.h"

namespace {

namespace fs = std::filesystem;
using namespace shmguard::measure;

Sampled run(const std::vector<std::string>& cmd, const std::string& path = "/tmp", int* err = nullptr) {
  Sampled out;
  const int e = sample_command(cmd, {.path = path, .interval_ms = 5, .baseline = used_bytes(path.c_str())}, out);
  if (err) *err = e;
  return out;
}

TEST(Sampler, TheCommandsExitStatus) {
  const Sampled ok = run({"true"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_GE(ok.samples, 1u);
  EXPECT_EQ(run({"sh", "-c", "exit 3"}).exit_code, 3);
}

TEST(Sampler, KilledByASignal) {
  const Sampled killed = run({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(killed.signal, SIGTERM);
  EXPECT_EQ(killed.exit_code, 128 + SIGTERM);
  EXPECT_FALSE(killed.bus_error);
  const Sampled bus = run({"sh", "-c", "kill -BUS $$"});
  EXPECT_EQ(bus.signal, SIGBUS);
  EXPECT_TRUE(bus.bus_error);
}

TEST(Sampler, ACommandThatCannotStart) {
  int err = 0;
  run({"/nonexistent/shmguard-no-such-command"}, "/tmp", &err);
  EXPECT_EQ(err, ENOENT);
  run({"/"}, "/tmp", &err);
  EXPECT_EQ(err, EACCES);
}

TEST(Sampler, PyTorchsBusErrorOnStderr) {
  EXPECT_TRUE(says_bus_error("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible"));
  EXPECT_TRUE(says_bus_error("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."));
  EXPECT_FALSE(says_bus_error("Bus error (core dumped)"));  // not a DataLoader's
  EXPECT_FALSE(says_bus_error("DataLoader worker exited unexpectedly"));
  const Sampled r = run({"sh", "-c", "echo 'DataLoader worker (pid 1) is killed by signal: Bus error.' >&2; exit 1"});
  EXPECT_TRUE(r.bus_error);
  EXPECT_EQ(r.exit_code, 1);
}

// In a child process: the namespace is the child's, so this test binary's mounts stay as they are.
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(PrivateShm, ASizedTmpfsOnlyThisProcessAndItsCommandsSee) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting needs root";
  const fs::path dir = fs::temp_directory_path() / ("shmguard-measure-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string d = dir.string();
  const int code = in_child([&] {
    if (!private_tmpfs(d.c_str(), 8u << 20)) return 1;
    std::uint64_t total = 0;
    const std::uint64_t before = used_bytes(d.c_str(), &total);
    if (total != 8u << 20) return 2;
    // The command writes 3 MiB into the tmpfs, then removes it: the peak is what it held.
    Sampled r;
    const Sampling s{.path = d, .interval_ms = 5, .baseline = before};
    if (sample_command({"sh", "-c", "head -c 3145728 /dev/zero > " + d + "/seg; sleep 0.3; rm " + d + "/seg"}, s, r) != 0)
      return 3;
    if (r.exit_code != 0 || r.peak < (3u << 20) || r.peak > (4u << 20)) return 4;
    if (r.peak_at_s <= 0 || r.peak_at_s > r.duration_s) return 5;
    // More than the tmpfs holds: the write fails.
    if (sample_command({"sh", "-c", "head -c 9437184 /dev/zero > " + d + "/big"}, s, r) != 0 || r.exit_code == 0) return 6;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_FALSE(fs::exists(dir / "big")) << "the tmpfs and what was written in it stay in the child's namespace";
  std::uint64_t total = 0;
  used_bytes(d.c_str(), &total);
  EXPECT_NE(total, 8u << 20);
  fs::remove_all(dir);
}

TEST(PrivateShm, UsedBytesOfAPathThatIsNotThere) {
  std::uint64_t total = 42;
  EXPECT_EQ(used_bytes("/nonexistent/shmguard", &total), 0u);
  EXPECT_EQ(total, 42u);
}

}  // namespace
