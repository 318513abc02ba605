/* plugin/child.c — the one fork / pipe / timeout runner (child.h): forks,
 * runs a body in the child, reads its pipe until EOF or the deadline, reaps
 * the child and reports how it ended.
 *
 * fork() copies only the calling thread, so a multi-threaded host should
 * not hold locks a plugin might need while a child runs. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/grow.h"
#include "plugin/child.h"

const char *tpx__signal_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGABRT: return "SIGABRT";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGKILL: return "SIGKILL";
  case SIGTERM: return "SIGTERM";
  case SIGPIPE: return "SIGPIPE";
  case SIGXCPU: return "SIGXCPU";
  default: return NULL;
  }
}

double tpx__child_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned long long tpx__child_default_memory(void) {
  const char *v = getenv("TPX_PLUGIN_MEMORY_MB");
  if (v && *v) {
    char *end = NULL;
    errno = 0;
    unsigned long long mb = strtoull(v, &end, 10);
    if (errno == 0 && end && *end == '\0' && mb < (1ull << 40))
      return mb << 20;
  }
  return 8ull << 30;
}

void tpx__child_result_free(tpx__child_result *res) {
  if (!res)
    return;
  free(res->out);
  res->out = NULL;
  res->len = 0;
}

/* Field `which` of /proc/self/statm in bytes (0: the address space the
 * process holds now, 1: its resident memory); 0 when it cannot be read. */
static unsigned long long statm_bytes(int which) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  unsigned long long pages[2] = {0, 0};
  int n = fscanf(f, "%llu %llu", &pages[0], &pages[1]);
  fclose(f);
  if (n <= which)
    return 0;
  long ps = sysconf(_SC_PAGESIZE);
  return pages[which] * (unsigned long long)(ps > 0 ? ps : 4096);
}

static void set_limits(const tpx__child_spec *spec) {
  if (spec->max_memory) {
    /* a limit on top of what it holds: the child inherits the parent's
     * mappings (under AddressSanitizer, terabytes of shadow) */
    unsigned long long vm = statm_bytes(0);
    struct rlimit rl = {(rlim_t)(vm + spec->max_memory),
                        (rlim_t)(vm + spec->max_memory)};
    if (vm)
      setrlimit(RLIMIT_AS, &rl);
  }
  if (spec->max_cpu > 0) {
    rlim_t sec = (rlim_t)ceil(spec->max_cpu);
    struct rlimit rl = {sec, sec + 1}; /* soft: SIGXCPU, hard: SIGKILL */
    setrlimit(RLIMIT_CPU, &rl);
  }
}

/* The child's side: limits, stdout onto stderr, the body, then _exit (no
 * atexit handlers, no flushing of stdio buffers inherited from the
 * parent). */
static void child_main(int fd, const tpx__child_spec *spec) {
  signal(SIGPIPE, SIG_DFL);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  set_limits(spec);
  spec->body(fd, spec->arg);
  close(fd);
  _exit(0);
}

/* waitpid, keeping the child's resource usage when it is reaped. */
static pid_t reap(pid_t pid, int *status, int flags, struct rusage *ru) {
  return wait4(pid, status, flags, ru);
}

/* Wait for `pid` until `deadline`; 1 when it ended (*status filled). */
static int wait_until(pid_t pid, int *status, double deadline,
                      struct rusage *ru) {
  for (;;) {
    pid_t w = reap(pid, status, WNOHANG, ru);
    if (w == pid)
      return 1;
    if (w < 0 && errno != EINTR)
      return 1;
    if (tpx__child_now() >= deadline)
      return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Append what `fd` has to res->out. 1 read something, 0 EOF or error,
 * -1 out of memory. */
static int read_some(int fd, tpx__child_result *res, size_t *cap) {
  if (res->len + 4096 + 1 > *cap) {
    if (TPX_GROW(res->out, *cap, res->len + 4096 + 1, 16384) != 0)
      return -1;
    res->out[res->len] = '\0';
  }
  ssize_t r;
  do r = read(fd, res->out + res->len, *cap - res->len - 1);
  while (r < 0 && errno == EINTR);
  if (r <= 0)
    return 0;
  res->len += (size_t)r;
  res->out[res->len] = '\0';
  return 1;
}

/* Read `fd` into res->out until EOF, the end of `pid` (*reaped set,
 * *status filled; what is already in the pipe is still read) or
 * `deadline`. 1 at EOF or the child's end, 0 at the deadline, -1 out of
 * memory. */
static int read_until(int fd, pid_t pid, int *status, int *reaped,
                      tpx__child_result *res, double deadline,
                      struct rusage *ru) {
  size_t cap = 0;
  for (;;) {
    double left = deadline - tpx__child_now();
    if (left <= 0)
      return 0;
    struct pollfd pf = {fd, POLLIN, 0};
    /* Wake now and then to see whether the child ended while something
     * else (a grandchild) keeps the pipe open. */
    int ms = *reaped ? 0 : left > 0.05 ? 50 : (int)(left * 1000.0) + 1;
    int pr = poll(&pf, 1, ms);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0)
      return 1;
    if (pr == 0) {
      if (*reaped) {
        res->held_open = 1;
        return 1; /* the child is gone and the pipe is drained */
      }
      pid_t w = reap(pid, status, WNOHANG, ru);
      if (w == pid || (w < 0 && errno != EINTR))
        *reaped = 1;
      continue;
    }
    int r = read_some(fd, res, &cap);
    if (r < 0)
      return -1;
    if (r == 0)
      return 1; /* EOF: the child is done (or gone) */
  }
}

tpx_status tpx__child_run(const tpx__child_spec *spec, tpx__child_result *res,
                          tpx_error *err) {
  memset(res, 0, sizeof *res);
  int fds[2];
  if (pipe(fds) != 0)
    return tpx_error_set(err, TPX_INTERNAL, "pipe: %s", strerror(errno));
  /* A plugin that calls exit() in the child flushes the stdio buffers it
   * inherited; empty them first so nothing is written twice. */
  fflush(NULL);
  const unsigned long long rss_at_fork = statm_bytes(1);
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    return tpx_error_set(err, TPX_INTERNAL, "fork: %s", strerror(e));
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], spec);
  }
  close(fds[1]);
  const double deadline = tpx__child_now() + spec->timeout;
  int status = 0, reaped = 0;
  int rd = read_until(fds[0], pid, &status, &reaped, res, deadline, &ru);
  close(fds[0]);
  /* A child that closed its output is finishing: one more second. */
  int ended = reaped;
  if (rd == 1 && !ended)
    ended = wait_until(pid, &status, deadline + 1.0, &ru);
  if (!ended) {
    kill(pid, SIGKILL);
    reap(pid, &status, 0, &ru);
  }
  /* ru_maxrss is in KiB; the child started with (at most) the parent's
   * resident pages. */
  const unsigned long long peak = (unsigned long long)ru.ru_maxrss << 10;
  res->rss_growth = peak > rss_at_fork ? peak - rss_at_fork : 0;
  if (rd < 0) {
    tpx__child_result_free(res);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "out of memory reading the child's output");
  }
  if (!ended) {
    res->end = TPX__CHILD_TIMED_OUT;
    return TPX_OK;
  }
  if (WIFSIGNALED(status)) {
    res->end = TPX__CHILD_SIGNALED;
    res->code = WTERMSIG(status);
  } else {
    res->end = TPX__CHILD_EXITED;
    res->code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return TPX_OK;
}
