/* Spike for the packet engine (issue 16): how fast can one thread serve an NFQUEUE that carries
 * every packet of one cgroup's sockets, accepting each at once? The ceiling for shape (b)
 * (cgroup + nftables + NFQUEUE) before any emulation work. Not part of netcond.
 *
 * Build: cc -O2 -o nfqueue_accept nfqueue_accept.c -lnetfilter_queue
 * Run:   nfqueue_accept QUEUE_NUM SECONDS   (prints packets and bytes seen, then exits)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static unsigned long long packets = 0, bytes = 0;

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)msg; (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    unsigned char *payload;
    int len = nfq_get_payload(nfa, &payload);
    packets++;
    if (len > 0) bytes += (unsigned long long)len;
    return nfq_set_verdict(qh, ntohl(ph->packet_id), NF_ACCEPT, 0, NULL);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s QUEUE SECONDS\n", argv[0]); return 2; }
    int queue = atoi(argv[1]);
    double seconds = atof(argv[2]);
    struct nfq_handle *h = nfq_open();
    if (!h) { perror("nfq_open"); return 1; }
    struct nfq_q_handle *qh = nfq_create_queue(h, (unsigned short)queue, &on_packet, NULL);
    if (!qh) { perror("nfq_create_queue"); return 1; }
    /* Headers only: what a verdict needs (the packet engine will copy whole packets for pcap). */
    int copy = getenv("NFQ_COPY") ? atoi(getenv("NFQ_COPY")) : 128;
    if (nfq_set_mode(qh, NFQNL_COPY_PACKET, (unsigned)copy) < 0) { perror("nfq_set_mode"); return 1; }
    nfq_set_queue_maxlen(qh, 65536);
    int fd = nfq_fd(h);
    int size = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    char buf[65536 + 4096];
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    struct timeval tv = {0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned long long dropped_reads = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds) break;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == ENOBUFS) { dropped_reads++; continue; }
            if (errno == EAGAIN || errno == EINTR) continue;
            perror("recv");
            break;
        }
        nfq_handle_packet(h, buf, (int)n);
    }
    printf("packets %llu bytes %llu enobufs %llu\n", packets, bytes, dropped_reads);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
