#ifndef NETCOND_SYSTEM_H
#define NETCOND_SYSTEM_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL-terminated) in a child that:
/// - dies with SIGKILL if netcond dies, whatever the cause (PR_SET_PDEATHSIG);
/// - leads a process group of its own, so that a signal to -pid reaches its children too;
/// - when `terminal_fd` is not -1, is that terminal's foreground process group (set before the exec,
///   so that the program has the terminal from its first instruction);
/// - has every signal at its default disposition and an empty signal mask;
/// - runs in `directory` when it is not NULL;
/// - writes its stdout to `stdout_fd` and its stderr to `stderr_fd` when they are not -1 (and then reads
///   stdin from /dev/null);
/// - when `cgroup_fd` is not -1 (an open `cgroup.procs`), moves itself into that cgroup before the exec;
/// - when `hosts_file` or `resolv_file` is not NULL (Linux, root), runs in a mount namespace of its own
///   where that file is bind-mounted on /etc/hosts, and this one on /etc/resolv.conf;
/// - when `identity` is not NULL (netcond runs as root), takes that user's groups, group and user id after
///   the cgroup and the mount namespace and before the directory and the exec, so that the program cannot
///   leave the cgroup or change the firewall (and sets the parent-death signal again: a change of
///   credentials clears it);
/// - holds descriptors 0, 1 and 2 and no other of netcond's (every one above 2 is closed before the exec).
/// Returns 0 and sets *pid, or an errno value (the child's own failure is reported through a pipe) and
/// sets *failed_step to the step that failed (NETCOND_SPAWN_*).
enum {
    NETCOND_SPAWN_SETUP = 0,
    NETCOND_SPAWN_DIRECTORY = 1,
    NETCOND_SPAWN_EXEC = 2,
    NETCOND_SPAWN_CGROUP = 3,
    NETCOND_SPAWN_NAMES = 4,
    NETCOND_SPAWN_IDENTITY = 5,
};
struct netcond_identity {
    uid_t uid;
    gid_t gid;
    int group_count;
    const gid_t *groups;
};
int netcond_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdout_fd,
                  int stderr_fd, int terminal_fd, int cgroup_fd, const char *hosts_file, const char *resolv_file,
                  const struct netcond_identity *identity, pid_t *pid, int *failed_step);

enum {
    NETCOND_CHILD_EXITED = 0,
    NETCOND_CHILD_KILLED = 1,
    NETCOND_CHILD_STOPPED = 2,
};

/// Waits for the child `pid` to end (or, with `job_control`, to stop). An end is left unreaped, so that
/// its process group cannot be reused while it is signalled (see netcond_reap_child); a stop is consumed.
/// Sets *kind (NETCOND_CHILD_*) and *value (exit code or signal). Returns 0 or an errno value.
int netcond_wait_child(pid_t pid, int job_control, int *kind, int *value);

/// Reaps the child `pid` that netcond_wait_child saw end. Returns 0 or an errno value.
int netcond_reap_child(pid_t pid);

/// The controlling terminal (/dev/tty, close-on-exec), or -1 when netcond has none.
int netcond_open_terminal(void);

/// The terminal's foreground process group, or -1.
pid_t netcond_terminal_foreground(int fd);

/// Makes `group` the terminal's foreground process group, with SIGTTOU blocked in the calling thread
/// (netcond may be in the background by then). Returns 0 or an errno value.
int netcond_give_terminal(int fd, pid_t group);

/// Stops netcond with `signal` (SIGTSTP, SIGTTIN, SIGTTOU or SIGSTOP), directed at the calling thread so
/// that it returns only once netcond has been continued. Returns -1, sending nothing, when netcond does
/// not stop on `signal` (it is ignored or handled). The kernel discards SIGTSTP, SIGTTIN and SIGTTOU
/// when netcond's process group is orphaned: the caller checks that first.
int netcond_stop_self(int signal);

/// pipe2(fds, O_CLOEXEC): a pipe whose ends no other child inherits. Returns 0 or an errno value.
int netcond_pipe_cloexec(int fds[2]);

/// Raises the soft open-file limit to the hard limit; returns the new soft limit (or -1).
long netcond_raise_open_file_limit(void);

#endif
