#define _GNU_SOURCE
#include "netcond_system.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#ifdef __linux__
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#endif

/* Closes every descriptor from `lowest` up, except `keep`: close_range(2) (Linux 5.9), else the
   entries of /proc/self/fd read with getdents64, else every number below `limit`. Only
   async-signal-safe calls: it runs between fork and exec. */
static void close_descriptors(int lowest, int keep, long limit) {
#ifdef SYS_close_range
    int done = 1;
    if (keep >= lowest) {
        if (keep > lowest && syscall(SYS_close_range, (unsigned)lowest, (unsigned)(keep - 1), 0u) != 0) done = 0;
        if (done && syscall(SYS_close_range, (unsigned)(keep + 1), ~0u, 0u) != 0) done = 0;
    } else if (syscall(SYS_close_range, (unsigned)lowest, ~0u, 0u) != 0) {
        done = 0;
    }
    if (done) return;
#endif
#if defined(__linux__) && defined(SYS_getdents64)
    int directory = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory >= 0) {
        /* Entries come in descriptor order, so closing one already listed changes nothing ahead. */
        char buffer[4096] __attribute__((aligned(8)));
        long got;
        while ((got = syscall(SYS_getdents64, directory, buffer, sizeof buffer)) > 0) {
            for (long offset = 0; offset < got;) {
                /* struct linux_dirent64: u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[] */
                unsigned short length;
                memcpy(&length, buffer + offset + 16, sizeof length);
                const char *name = buffer + offset + 19;
                offset += length;
                if (name[0] < '0' || name[0] > '9') continue;
                long fd = 0;
                for (const char *c = name; *c >= '0' && *c <= '9'; c++) fd = fd * 10 + (*c - '0');
                if (fd >= lowest && fd != keep && fd != directory) close((int)fd);
            }
        }
        close(directory);
        if (got == 0) return;
    }
#endif
    for (long fd = lowest; fd < limit; fd++) {
        if (fd != keep) close((int)fd);
    }
}

int netcond_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdout_fd,
                  int stderr_fd, int terminal_fd, int cgroup_fd, const char *hosts_file, const char *resolv_file,
                  const struct netcond_identity *identity, pid_t *pid, int *failed_step) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
    long limit = sysconf(_SC_OPEN_MAX);
    if (limit < 0 || limit > INT32_MAX) limit = 65536;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(report[0]);
        close(report[1]);
        return error;
    }
    if (child == 0) {
        /* Only async-signal-safe calls from here on. */
        int error = 0;
        int step = NETCOND_SPAWN_SETUP;
#ifdef __linux__
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) error = errno;
        if (getppid() != parent) _exit(127); /* netcond died before the prctl took effect */
#endif
        if (error == 0 && setpgid(0, 0) != 0) error = errno;
        if (error == 0 && terminal_fd >= 0) {
            /* A background group may set the terminal's foreground group only with SIGTTOU blocked. If
               it cannot (the terminal is gone), the program runs in the background rather than not at all. */
            sigset_t ttou;
            sigemptyset(&ttou);
            sigaddset(&ttou, SIGTTOU);
            sigprocmask(SIG_BLOCK, &ttou, NULL);
            (void)tcsetpgrp(terminal_fd, getpid());
        }
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        for (int signal = 1; signal < NSIG; signal++) sigaction(signal, &action, NULL);
        sigset_t empty;
        sigemptyset(&empty);
        sigprocmask(SIG_SETMASK, &empty, NULL);
        /* Into the cgroup before anything runs, so that its first packet is already the cgroup's. */
        if (error == 0 && cgroup_fd >= 0 && write(cgroup_fd, "0", 1) != 1) {
            error = errno;
            step = NETCOND_SPAWN_CGROUP;
        }
#ifdef __linux__
        /* Names of netcond's own (the built-in origin, its DNS responder): a mount namespace of the
           child's own in which /etc/hosts and /etc/resolv.conf are netcond's copies. Nothing of it is
           visible outside, and it ends with the child's last process. */
        if (error == 0 && (hosts_file != NULL || resolv_file != NULL)) {
            step = NETCOND_SPAWN_NAMES;
            if (unshare(CLONE_NEWNS) != 0) error = errno;
            if (error == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) error = errno;
            if (error == 0 && hosts_file != NULL && mount(hosts_file, "/etc/hosts", NULL, MS_BIND, NULL) != 0)
                error = errno;
            if (error == 0 && resolv_file != NULL && mount(resolv_file, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0)
                error = errno;
            if (error == 0) step = NETCOND_SPAWN_SETUP;
        }
#else
        (void)hosts_file;
        (void)resolv_file;
#endif
        if (error == 0 && identity != NULL) {
            step = NETCOND_SPAWN_IDENTITY;
            /* Captured output goes to pipes netcond made (its own, mode 0600): the user's program must be
               able to reopen them (/dev/stdout is /proc/self/fd/1). */
            if (stdout_fd >= 0 && stderr_fd >= 0 &&
                (fchown(stdout_fd, identity->uid, identity->gid) != 0 || fchown(stderr_fd, identity->uid, identity->gid) != 0))
                error = errno;
            if (error == 0 && setgroups((size_t)identity->group_count, identity->groups) != 0) error = errno;
            if (error == 0 && setgid(identity->gid) != 0) error = errno;
            if (error == 0 && setuid(identity->uid) != 0) error = errno;
#ifdef __linux__
            /* The kernel clears the parent-death signal when the credentials change. */
            if (error == 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) error = errno;
            if (getppid() != parent) _exit(127);
#endif
            if (error == 0) step = NETCOND_SPAWN_SETUP;
        }
        if (error == 0 && directory != NULL && chdir(directory) != 0) {
            error = errno;
            step = NETCOND_SPAWN_DIRECTORY;
        }
        if (error == 0 && stdout_fd >= 0 && stderr_fd >= 0) {
            int input = open("/dev/null", O_RDONLY);
            if (input < 0 || dup2(input, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0) error = errno;
            if (input > 2) close(input);
        }
        /* The child keeps 0, 1 and 2 and nothing else of netcond's: no listener, epoll descriptor or
           pipe (the report pipe is close-on-exec). */
        if (error == 0) close_descriptors(3, report[1], limit);
        if (error == 0) {
            execve(path, argv, envp);
            error = errno;
            step = NETCOND_SPAWN_EXEC;
        }
        int failure[2] = {error, step};
        ssize_t ignored = write(report[1], failure, sizeof failure);
        (void)ignored;
        _exit(127);
    }
    close(report[1]);
    /* Set the group from both sides, so that it exists whichever runs first. */
    setpgid(child, child);
    int failure[2] = {0, NETCOND_SPAWN_SETUP};
    ssize_t got;
    do {
        got = read(report[0], failure, sizeof failure);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof failure && failure[0] != 0) {
        /* The start failed: reap the child, which has already exited. */
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        if (failed_step != NULL) *failed_step = failure[1];
        return failure[0];
    }
    *pid = child;
    return 0;
}

int netcond_wait_child(pid_t pid, int job_control, int *kind, int *value) {
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        int options = WEXITED | WNOWAIT | (job_control ? WSTOPPED : 0);
        if (waitid(P_PID, (id_t)pid, &info, options) != 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        switch (info.si_code) {
        case CLD_EXITED:
            *kind = NETCOND_CHILD_EXITED;
            *value = info.si_status;
            return 0;
        case CLD_KILLED:
        case CLD_DUMPED:
            *kind = NETCOND_CHILD_KILLED;
            *value = info.si_status;
            return 0;
        case CLD_STOPPED:
        case CLD_TRAPPED: {
            /* Consume the stop (WNOWAIT left it); it may already be gone if the child went on. */
            siginfo_t consumed;
            memset(&consumed, 0, sizeof consumed);
            while (waitid(P_PID, (id_t)pid, &consumed, WSTOPPED | WNOHANG) != 0 && errno == EINTR) {}
            *kind = NETCOND_CHILD_STOPPED;
            *value = info.si_status;
            return 0;
        }
        default:
            continue;
        }
    }
}

int netcond_reap_child(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
}

int netcond_open_terminal(void) {
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    return fd >= 0 ? fd : -1;
}

pid_t netcond_terminal_foreground(int fd) {
    return tcgetpgrp(fd);
}

int netcond_give_terminal(int fd, pid_t group) {
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    int result = tcsetpgrp(fd, group) == 0 ? 0 : errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return result;
}

int netcond_stop_self(int signal) {
    if (signal != SIGSTOP) {
        struct sigaction current;
        if (sigaction(signal, NULL, &current) != 0 || current.sa_handler != SIG_DFL) return -1;
    }
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, signal);
    pthread_sigmask(SIG_UNBLOCK, &stop, &old);
    /* Directed at this thread, so that it stops here, before the call returns. */
    pthread_kill(pthread_self(), signal);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return 0;
}

int netcond_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : errno;
}

long netcond_raise_open_file_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    }
    return (long)limit.rlim_cur;
}
