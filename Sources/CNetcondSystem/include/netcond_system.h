#ifndef NETCOND_SYSTEM_H
#define NETCOND_SYSTEM_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL-terminated) in a child that:
/// - dies with SIGKILL if netcond dies, whatever the cause (PR_SET_PDEATHSIG), so no orphan is left;
/// - has every signal at its default disposition and an empty signal mask;
/// - runs in `directory` when it is not NULL;
/// - writes its stdout to `stdout_fd` and its stderr to `stderr_fd` when they are not -1 (and then reads
///   stdin from /dev/null and leads a process group of its own, so that a signal to -pid reaches its
///   children too);
/// - holds descriptors 0, 1 and 2 and no other of netcond's (every one above 2 is closed before the exec).
/// Returns 0 and sets *pid, or an errno value (the exec's own failure is reported through a pipe).
int netcond_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdout_fd,
                  int stderr_fd, pid_t *pid);

/// pipe2(fds, O_CLOEXEC): a pipe whose ends no other child inherits. Returns 0 or an errno value.
int netcond_pipe_cloexec(int fds[2]);

/// Raises the soft open-file limit to the hard limit; returns the new soft limit (or -1).
long netcond_raise_open_file_limit(void);

#endif
