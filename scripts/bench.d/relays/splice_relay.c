/* Bench item 1's ceiling for a forward in user space: the least such a relay does. Each accepted
 * connection gets an upstream one and two blocking threads, each splicing one direction through a
 * 1 MB pipe; nothing is counted, shaped or checked. Not netcond: what netcond's spliced forward is
 * measured against on the same machine in the same run.
 *
 * Usage: splice_relay LISTEN_PORT TARGET_PORT   (both on 127.0.0.1; runs until killed) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct direction {
    int from, to;
};

static void *pump(void *argument) {
    struct direction *d = argument;
    int pipe_ends[2];
    if (pipe(pipe_ends) != 0) return NULL;
    fcntl(pipe_ends[1], F_SETPIPE_SZ, 1 << 20);
    for (;;) {
        ssize_t in = splice(d->from, NULL, pipe_ends[1], NULL, 1 << 20, SPLICE_F_MOVE);
        if (in <= 0) break;
        while (in > 0) {
            ssize_t out = splice(pipe_ends[0], NULL, d->to, NULL, (size_t)in, SPLICE_F_MOVE);
            if (out <= 0) goto done;
            in -= out;
        }
    }
    shutdown(d->to, SHUT_WR);
done:
    close(pipe_ends[0]);
    close(pipe_ends[1]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LISTEN_PORT TARGET_PORT\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    struct sockaddr_in target = address;
    target.sin_port = htons((uint16_t)atoi(argv[2]));
    int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 128) != 0) {
        perror("splice_relay: listen");
        return 1;
    }
    for (;;) {
        int client = accept(listener, NULL, NULL);
        if (client < 0) continue;
        int upstream = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(upstream, (struct sockaddr *)&target, sizeof target) != 0) {
            close(client);
            close(upstream);
            continue;
        }
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* A bench's few connections: their threads and sockets are not reclaimed. */
        struct direction *up = malloc(sizeof *up), *down = malloc(sizeof *down);
        *up = (struct direction){client, upstream};
        *down = (struct direction){upstream, client};
        pthread_t threads[2];
        pthread_create(&threads[0], NULL, pump, up);
        pthread_create(&threads[1], NULL, pump, down);
        pthread_detach(threads[0]);
        pthread_detach(threads[1]);
    }
}
