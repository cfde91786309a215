/* The pod sandbox's process for the test node's containerd (its sandbox_image): it holds the pod's
 * namespaces and waits. Built static, into an image FROM scratch, since no image can be pulled here.
 * As init (pid 1) of the pod it reaps whatever is reparented to it and exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = quit};
  struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0)
    return 1;
  for (;;) pause();
}
