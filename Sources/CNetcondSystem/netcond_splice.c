#define _GNU_SOURCE
#include "netcond_splice.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#endif

/* Same family, address and port (IPv4 or IPv6). */
static int same_address(const struct sockaddr_storage *a, const struct sockaddr *b) {
    if (a->ss_family != b->sa_family) return 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)a, *y = (const struct sockaddr_in *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a, *y = (const struct sockaddr_in6 *)b;
        return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return 0;
}

int netcond_take_socket(int fd, const struct sockaddr *local, const struct sockaddr *peer) {
    struct sockaddr_storage mine, theirs;
    socklen_t mine_length = sizeof mine, theirs_length = sizeof theirs;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&mine, &mine_length) != 0
        || getpeername(fd, (struct sockaddr *)&theirs, &theirs_length) != 0
        || !same_address(&mine, local) || !same_address(&theirs, peer)) {
        errno = ENOTCONN;
        return -1;
    }
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

int netcond_connect_socket(const struct sockaddr *target, socklen_t length) {
    int fd = socket(target->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, target, length) != 0 && errno != EINPROGRESS) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

uint64_t netcond_relay_total(const netcond_relay_totals *totals, int direction) {
    return __atomic_load_n(&totals->moved[direction & 1], __ATOMIC_RELAXED);
}

#ifdef __linux__

enum { RUNNING = 0, ENDED = 1, HANDED_BACK = 2 };

struct netcond_relay {
    int fd[2];              /* 0 client, 1 upstream; direction d reads fd[d] and writes fd[1 - d] */
    int pipe_read[2], pipe_write[2];
    size_t in_pipe[2], pipe_capacity[2];
    int eof[2], shut[2];    /* direction d: its source's FIN seen; passed on (shutdown) */
    /* Side s may have bytes to read / room to write: set by epoll (edge-triggered), cleared by
       EAGAIN, so that no call is made that would only say EAGAIN. */
    int can_read[2], can_write[2];
    int urgent[2];          /* side s has had urgent data (EPOLLPRI): its mark is looked for */
    int control;            /* eventfd: a hand back is asked for */
    int deferred;           /* asked back while connecting: it gives back once the connect is over */
    int abandon;            /* (under the lock) give back now, connected or not: netcond stops */
    int poller;
    uint64_t moved[2];
    int how, connect_error;
    netcond_relay_totals *totals;
    netcond_relay_ended ended;
    void *context;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int state;
    struct netcond_relay_handback handback;
};

static void close_if_open(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* The bytes still in a pipe, read out in order (the pipe is nonblocking) into *bytes (malloc'd;
   NULL when there are none). -1 when they cannot be held: the caller must not lose them silently. */
static int drain_pipe(int fd, size_t expected, unsigned char **bytes_out, size_t *length) {
    *length = 0;
    *bytes_out = NULL;
    if (expected == 0) return 0;
    unsigned char *bytes = malloc(expected);
    if (bytes == NULL) return -1;
    *bytes_out = bytes;
    while (*length < expected) {
        ssize_t n = read(fd, bytes + *length, expected - *length);
        if (n > 0) {
            *length += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break;
        }
    }
    return 0;
}

static void reset_socket(int fd) {
    struct linger linger = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, sizeof linger);
}

/* splice(2) stops at TCP's urgent mark: it reads nothing more there (0 once the FIN came), while
   recv(2) reads on past it. So at the mark (SIOCATMARK), with the pipe empty, one page is read as
   recv(2) reads it (the urgent byte itself stays out of band, as through netcond's own loop) and
   written into the pipe. Returns the bytes moved, 0 while the pipe still holds bytes (its reader
   empties it first) or nothing is there, -2 at the end of the stream, -1 with errno on a failure. */
static ssize_t read_past_mark(struct netcond_relay *r, int d) {
    if (r->in_pipe[d] > 0) return 0;
    char buffer[4096];
    ssize_t n = recv(r->fd[d], buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0) return -2;
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    /* An empty pipe has room for a page. */
    ssize_t written = write(r->pipe_write[d], buffer, (size_t)n);
    if (written != n) {
        if (written >= 0) errno = EIO;
        return -1;
    }
    r->in_pipe[d] += (size_t)n;
    return n;
}

/* Moves what it can in direction d. Returns 0, or -1 with *failed the side (0 client, 1 upstream)
   whose socket failed and errno set. */
static int pump(struct netcond_relay *r, int d, int *failed) {
    for (;;) {
        int moved = 0;
        if (!r->eof[d] && r->in_pipe[d] < r->pipe_capacity[d] && r->can_read[d]) {
            ssize_t n = splice(r->fd[d], NULL, r->pipe_write[d], NULL, r->pipe_capacity[d] - r->in_pipe[d],
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                r->in_pipe[d] += (size_t)n;
                moved = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                *failed = d;
                return -1;
            } else if (n == 0 || errno == EAGAIN) {
                if (n < 0) r->can_read[d] = 0;
                int at_mark = 0;
                if (r->urgent[d] && ioctl(r->fd[d], SIOCATMARK, &at_mark) == 0 && at_mark) {
                    ssize_t past = read_past_mark(r, d);
                    if (past > 0) {
                        r->can_read[d] = 1;
                        moved = 1;
                    }
                    if (past == -2) {
                        r->eof[d] = 1;
                        moved = 1;
                    }
                    if (past == -1) {
                        *failed = d;
                        return -1;
                    }
                } else if (n == 0) {
                    r->eof[d] = 1;
                    moved = 1;
                }
            }
        }
        if (r->in_pipe[d] > 0 && r->can_write[1 - d]) {
            ssize_t n = splice(r->pipe_read[d], NULL, r->fd[1 - d], NULL, r->in_pipe[d],
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                r->in_pipe[d] -= (size_t)n;
                r->moved[d] += (uint64_t)n;
                __atomic_fetch_add(&r->totals->moved[d], (uint64_t)n, __ATOMIC_RELAXED);
                moved = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                *failed = 1 - d;
                return -1;
            } else if (n < 0 && errno == EAGAIN) {
                r->can_write[1 - d] = 0;
            }
        }
        if (r->eof[d] && r->in_pipe[d] == 0 && !r->shut[d]) {
            shutdown(r->fd[1 - d], SHUT_WR);
            r->shut[d] = 1;
            moved = 1;
        }
        if (!moved) return 0;
    }
}

/* Clears the control eventfd; whether netcond stops (abandon) rather than asks a connection back. */
static int take_control(struct netcond_relay *r) {
    uint64_t value;
    ssize_t n = read(r->control, &value, sizeof value);
    (void)n;
    pthread_mutex_lock(&r->lock);
    int abandon = r->abandon;
    pthread_mutex_unlock(&r->lock);
    return abandon;
}

/* Waits for the upstream's connect: 0 connected, -1 failed (connect_error set), 1 netcond stops
   meanwhile. Asked back meanwhile, it goes on waiting (deferred, so that the asker need not): a
   connect abandoned there would reach the server as an empty connection and be made again. */
static int await_connect(struct netcond_relay *r) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long waited = (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (waited >= NETCOND_RELAY_CONNECT_TIMEOUT_MS) {
            r->connect_error = ETIMEDOUT;
            return -1;
        }
        struct pollfd fds[2] = {{r->fd[1], POLLOUT, 0}, {r->control, POLLIN, 0}};
        int n = poll(fds, 2, (int)(NETCOND_RELAY_CONNECT_TIMEOUT_MS - waited));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            r->connect_error = errno;
            return -1;
        }
        if (n == 0) continue;
        if (fds[1].revents & POLLIN) {
            if (take_control(r)) return 1;
            pthread_mutex_lock(&r->lock);
            r->deferred = 1;
            pthread_cond_broadcast(&r->changed);
            pthread_mutex_unlock(&r->lock);
        }
        if (!(fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
        int error = 0;
        socklen_t length = sizeof error;
        if (getsockopt(r->fd[1], SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
        if (error != 0) {
            r->connect_error = error;
            return -1;
        }
        return 0;
    }
}

/* Relays until both directions are over (0), a socket fails (-1, *failed and errno set), or a
   hand back is asked for (1). */
static int relay_loop(struct netcond_relay *r, int *failed) {
    struct epoll_event events[4];
    for (;;) {
        for (int d = 0; d < 2; d++) {
            if (pump(r, d, failed) != 0) return -1;
        }
        if (r->shut[0] && r->shut[1]) return 0;
        int n = epoll_wait(r->poller, events, 4, -1);
        if (n < 0 && errno != EINTR) {
            *failed = 0;
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.fd == r->control) return 1;
            int side = events[i].data.fd == r->fd[0] ? 0 : 1;
            uint32_t what = events[i].events;
            if (what & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) r->can_read[side] = 1;
            if (what & (EPOLLOUT | EPOLLHUP | EPOLLERR)) r->can_write[side] = 1;
            if (what & EPOLLPRI) r->urgent[side] = 1;
        }
        /* A reset on a side whose input already ended (the client half-closed, then aborted) is
           seen by no read and no write: its error is. */
        for (int i = 0; i < n; i++) {
            if (!(events[i].events & (EPOLLERR | EPOLLHUP))) continue;
            int side = events[i].data.fd == r->fd[0] ? 0 : 1, error = 0;
            socklen_t length = sizeof error;
            if (getsockopt(r->fd[side], SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error != 0) {
                *failed = side;
                errno = error;
                return -1;
            }
        }
    }
}

/* Gives the sockets back with the pipes' bytes; when those cannot be held, both sides are reset
   instead (an honest failure, never a silent loss). */
static void hand_back_locked(struct netcond_relay *r, int connected) {
    if (!connected) close_if_open(&r->fd[1]);
    struct netcond_relay_handback *back = &r->handback;
    if (drain_pipe(r->pipe_read[0], r->in_pipe[0], &back->up, &back->up_length) != 0 ||
        drain_pipe(r->pipe_read[1], r->in_pipe[1], &back->down, &back->down_length) != 0) {
        free(back->up);
        free(back->down);
        back->up = back->down = NULL;
        back->up_length = back->down_length = 0;
        for (int side = 0; side < 2; side++) {
            if (r->fd[side] >= 0) reset_socket(r->fd[side]);
            close_if_open(&r->fd[side]);
        }
        r->how = NETCOND_RELAY_RESET;
        r->state = ENDED;
        return;
    }
    back->client_fd = r->fd[0];
    back->upstream_fd = r->fd[1];
    r->fd[0] = r->fd[1] = -1;
    r->how = NETCOND_RELAY_HANDED_BACK;
    r->state = HANDED_BACK;
}

static void *relay_main(void *argument) {
    struct netcond_relay *r = argument;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* SIGPIPE from a write to a closed peer stays here, unseen */
    int connected = await_connect(r);
    int failed = 0, outcome;
    if (connected == 0 && r->deferred) {
        outcome = 1; /* asked back while connecting: nothing was relayed yet */
    } else {
        outcome = connected == 0 ? relay_loop(r, &failed) : connected;
    }
    int error = errno;
    pthread_mutex_lock(&r->lock);
    if (outcome == 1) {
        hand_back_locked(r, connected == 0);
    } else if (connected == -1) {
        r->how = NETCOND_RELAY_CONNECT_FAILED;
        close_if_open(&r->fd[1]);
    } else if (outcome == -1 && (error == ECONNRESET || error == EPIPE)) {
        r->how = NETCOND_RELAY_RESET;
        reset_socket(r->fd[1 - failed]); /* the other side is reset, as its peer was */
        close_if_open(&r->fd[0]);
        close_if_open(&r->fd[1]);
    } else {
        r->how = NETCOND_RELAY_CLOSED;
        close_if_open(&r->fd[0]);
        close_if_open(&r->fd[1]);
    }
    if (r->state == RUNNING) r->state = ENDED;
    pthread_cond_broadcast(&r->changed);
    int how = r->how;
    pthread_mutex_unlock(&r->lock);
    r->ended(r->context, how);
    return NULL;
}

static int make_pipe(struct netcond_relay *r, int d) {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
    r->pipe_read[d] = fds[0];
    r->pipe_write[d] = fds[1];
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; the default (64 KiB) when refused */
    int capacity = fcntl(fds[1], F_GETPIPE_SZ);
    r->pipe_capacity[d] = capacity > 0 ? (size_t)capacity : 65536;
    return 0;
}

static void release_resources(struct netcond_relay *r) {
    for (int d = 0; d < 2; d++) {
        close_if_open(&r->pipe_read[d]);
        close_if_open(&r->pipe_write[d]);
    }
    close_if_open(&r->control);
    close_if_open(&r->poller);
}

netcond_relay *netcond_relay_start(int client_fd, int upstream_fd, netcond_relay_totals *totals,
                                   netcond_relay_ended ended, void *context) {
    struct netcond_relay *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    r->fd[0] = client_fd;
    r->fd[1] = upstream_fd;
    r->can_read[0] = r->can_read[1] = r->can_write[0] = r->can_write[1] = 1; /* tried once, then epoll says */
    r->pipe_read[0] = r->pipe_read[1] = r->pipe_write[0] = r->pipe_write[1] = -1;
    r->totals = totals;
    r->ended = ended;
    r->context = context;
    r->control = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r->poller = epoll_create1(EPOLL_CLOEXEC);
    int ok = r->control >= 0 && r->poller >= 0 && make_pipe(r, 0) == 0 && make_pipe(r, 1) == 0;
    struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET};
    for (int i = 0; ok && i < 2; i++) {
        event.data.fd = r->fd[i];
        ok = epoll_ctl(r->poller, EPOLL_CTL_ADD, r->fd[i], &event) == 0;
    }
    event.events = EPOLLIN;
    event.data.fd = r->control;
    ok = ok && epoll_ctl(r->poller, EPOLL_CTL_ADD, r->control, &event) == 0;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    if (ok) {
        int created = pthread_create(&r->thread, NULL, relay_main, r);
        if (created != 0) errno = created; /* pthread_create returns its error, errno is not set */
        ok = created == 0;
    }
    if (!ok) {
        int saved = errno;
        release_resources(r);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->changed);
        free(r);
        errno = saved;
        return NULL;
    }
    return r;
}

void netcond_relay_ask_back(netcond_relay *r) {
    pthread_mutex_lock(&r->lock);
    if (r->state == RUNNING) {
        uint64_t one = 1;
        ssize_t written = write(r->control, &one, sizeof one);
        (void)written;
    }
    pthread_mutex_unlock(&r->lock);
}

int netcond_relay_hand_back(netcond_relay *r, int wait_for_connect, struct netcond_relay_handback *out) {
    pthread_mutex_lock(&r->lock);
    if (r->state == RUNNING) {
        if (!wait_for_connect) r->abandon = 1;
        uint64_t one = 1;
        ssize_t written = write(r->control, &one, sizeof one);
        (void)written;
        while (r->state == RUNNING && !(wait_for_connect && r->deferred)) pthread_cond_wait(&r->changed, &r->lock);
        if (r->state == RUNNING) {
            pthread_mutex_unlock(&r->lock);
            return 2;
        }
    }
    int given = 0;
    if (r->state == HANDED_BACK) {
        *out = r->handback;
        memset(&r->handback, 0, sizeof r->handback);
        r->handback.client_fd = r->handback.upstream_fd = -1;
        given = 1;
    } else if (r->how == NETCOND_RELAY_CONNECT_FAILED && r->fd[0] >= 0) {
        memset(out, 0, sizeof *out);
        out->client_fd = r->fd[0];
        out->upstream_fd = -1;
        r->fd[0] = -1;
        given = 1;
    }
    pthread_mutex_unlock(&r->lock);
    return given;
}

int netcond_relay_connect_error(const netcond_relay *r) { return r->connect_error; }

uint64_t netcond_relay_moved(const netcond_relay *r, int direction) { return r->moved[direction & 1]; }

void netcond_relay_free(netcond_relay *r) {
    pthread_join(r->thread, NULL);
    close_if_open(&r->fd[0]);
    close_if_open(&r->fd[1]);
    release_resources(r);
    free(r->handback.up);
    free(r->handback.down);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->changed);
    free(r);
}

#else

netcond_relay *netcond_relay_start(int client_fd, int upstream_fd, netcond_relay_totals *totals,
                                   netcond_relay_ended ended, void *context) {
    (void)client_fd;
    (void)upstream_fd;
    (void)totals;
    (void)ended;
    (void)context;
    errno = ENOSYS;
    return NULL;
}

void netcond_relay_ask_back(netcond_relay *r) { (void)r; }

int netcond_relay_hand_back(netcond_relay *r, int wait_for_connect, struct netcond_relay_handback *out) {
    (void)r;
    (void)wait_for_connect;
    (void)out;
    return 0;
}

int netcond_relay_connect_error(const netcond_relay *r) {
    (void)r;
    return 0;
}

uint64_t netcond_relay_moved(const netcond_relay *r, int direction) {
    (void)r;
    (void)direction;
    return 0;
}

void netcond_relay_free(netcond_relay *r) { (void)r; }

#endif
