/* What both reference relays do alike: listen on 127.0.0.1:LISTEN_PORT and, for each connection
 * accepted, open one to 127.0.0.1:TARGET_PORT (both without Nagle). Header-only: each relay is one
 * file the bench compiles alone. */
#ifndef NETCOND_BENCH_RELAY_H
#define NETCOND_BENCH_RELAY_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct relay {
    int listener;
    struct sockaddr_in target;
};

/* Parses `NAME LISTEN_PORT TARGET_PORT` and listens; exits with a message on failure. */
static struct relay relay_listen(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LISTEN_PORT TARGET_PORT\n", argv[0]);
        exit(2);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    struct relay relay = {.listener = socket(AF_INET, SOCK_STREAM, 0), .target = address};
    relay.target.sin_port = htons((uint16_t)atoi(argv[2]));
    int one = 1;
    setsockopt(relay.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(relay.listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(relay.listener, 128) != 0) {
        perror("listen");
        exit(1);
    }
    return relay;
}

/* The next accepted connection and its upstream one (blocks; skips one whose upstream fails). */
static void relay_accept(const struct relay *relay, int *client, int *upstream) {
    for (;;) {
        *client = accept(relay->listener, NULL, NULL);
        if (*client < 0) continue;
        *upstream = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(*upstream, (const struct sockaddr *)&relay->target, sizeof relay->target) != 0) {
            close(*client);
            close(*upstream);
            continue;
        }
        int one = 1;
        setsockopt(*client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(*upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return;
    }
}
#endif
