#define _GNU_SOURCE
#include "netcond_system.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

int netcond_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdout_fd,
                  int stderr_fd, pid_t *pid) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
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
#ifdef __linux__
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) error = errno;
        if (getppid() != parent) _exit(127); /* netcond died before the prctl took effect */
#endif
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        for (int signal = 1; signal < NSIG; signal++) sigaction(signal, &action, NULL);
        sigset_t empty;
        sigemptyset(&empty);
        sigprocmask(SIG_SETMASK, &empty, NULL);
        if (error == 0 && directory != NULL && chdir(directory) != 0) error = errno;
        if (error == 0 && stdout_fd >= 0 && stderr_fd >= 0) {
            if (setpgid(0, 0) != 0) error = errno;
            int input = open("/dev/null", O_RDONLY);
            if (input < 0 || dup2(input, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0) error = errno;
            if (input > 2) close(input);
        }
        if (error == 0) {
            execve(path, argv, envp);
            error = errno;
        }
        ssize_t ignored = write(report[1], &error, sizeof error);
        (void)ignored;
        _exit(127);
    }
    close(report[1]);
    /* Set the group from both sides, so that it exists whichever runs first. */
    if (stdout_fd >= 0 && stderr_fd >= 0) setpgid(child, child);
    int error = 0;
    ssize_t got;
    do {
        got = read(report[0], &error, sizeof error);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof error && error != 0) {
        /* The exec failed: reap the child, which has already exited. */
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        return error;
    }
    *pid = child;
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
