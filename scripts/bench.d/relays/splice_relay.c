/* Bench item 1's ceiling for a forward in user space: the least such a relay does. Each accepted
 * connection gets an upstream one and two blocking threads, each splicing one direction through a
 * 1 MB pipe; nothing is counted, shaped or checked. Not netcond: what netcond's spliced forward is
 * measured against on the same machine in the same run.
 *
 * Usage: splice_relay LISTEN_PORT TARGET_PORT   (both on 127.0.0.1; runs until killed) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>

#include "relay.h"

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
    struct relay relay = relay_listen(argc, argv);
    for (;;) {
        int client, upstream;
        relay_accept(&relay, &client, &upstream);
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
