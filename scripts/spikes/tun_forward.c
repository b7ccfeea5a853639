/* Spike for the packet engine, shape (a) (mahimahi's shape): how fast can user space carry every
 * packet between a TUN device inside a network namespace and a TUN device in the host namespace,
 * with no emulation at all? One thread per direction, a blocking read() then a write() of each
 * packet as it is. The ceiling for shape (a) before any emulation work. Not part of netcond.
 *
 * Build: cc -O2 -pthread -o tun_forward tun_forward.c
 * Run:   tun_forward HOST_IF NS_IF NETNS_PATH [vnet]
 *        Creates HOST_IF in the caller's namespace and NS_IF inside NETNS_PATH (IFF_TUN|IFF_NO_PI,
 *        not persistent: both vanish when this process exits), prints "ready", then forwards.
 *        "vnet": IFF_VNET_HDR and TUNSETOFFLOAD(CSUM|TSO4|TSO6) on both, so GSO super-packets
 *        cross whole, each with its virtio_net_hdr (the same 10-byte header on both sides).
 *        SIGUSR1 prints "up PKTS BYTES down PKTS BYTES errors N" (up: namespace to host);
 *        SIGTERM/SIGINT prints the same and exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct direction {
    int from, to;
    _Atomic unsigned long long packets, bytes, errors;
};

static int open_tun(const char *name, int vnet) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) { perror("open /dev/net/tun"); exit(1); }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (vnet ? IFF_VNET_HDR : 0);
    strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) { perror("TUNSETIFF"); exit(1); }
    if (vnet && ioctl(fd, TUNSETOFFLOAD, (unsigned long)(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)) < 0) {
        perror("TUNSETOFFLOAD"); exit(1);
    }
    return fd;
}

static void *forward(void *arg) {
    struct direction *d = arg;
    static __thread char buf[65536 + 256];
    for (;;) {
        ssize_t n = read(d->from, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            perror("read"); exit(1);
        }
        if (write(d->to, buf, (size_t)n) != n) { atomic_fetch_add_explicit(&d->errors, 1, memory_order_relaxed); continue; }
        atomic_fetch_add_explicit(&d->packets, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&d->bytes, (unsigned long long)n, memory_order_relaxed);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s HOST_IF NS_IF NETNS_PATH [vnet]\n", argv[0]); return 2; }
    int vnet = argc > 4 && strcmp(argv[4], "vnet") == 0;
    int host = open_tun(argv[1], vnet);
    int nsfd = open(argv[3], O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) { perror(argv[3]); return 1; }
    if (setns(nsfd, CLONE_NEWNET) < 0) { perror("setns"); return 1; }
    close(nsfd);
    int inner = open_tun(argv[2], vnet);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1); sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the forwarding threads inherit the mask */
    static struct direction up, down;
    up.from = inner; up.to = host;
    down.from = host; down.to = inner;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, forward, &up);
    pthread_create(&t2, NULL, forward, &down);
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int sig;
        sigwait(&set, &sig);
        printf("up %llu %llu down %llu %llu errors %llu\n",
               (unsigned long long)up.packets, (unsigned long long)up.bytes,
               (unsigned long long)down.packets, (unsigned long long)down.bytes,
               (unsigned long long)(up.errors + down.errors));
        fflush(stdout);
        if (sig != SIGUSR1) _exit(0);
    }
}
