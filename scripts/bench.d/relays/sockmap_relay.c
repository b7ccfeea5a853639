/* Bench item 1's other reference: a forward the kernel does itself. Both sockets of each forwarded
 * connection go into a SOCKHASH, and an sk_skb verdict program sends what one receives out of the
 * other (bpf_sk_redirect_hash, keyed by the receiving socket's ports): no thread wakes per byte.
 * Needs root (CAP_BPF, CAP_NET_ADMIN). Bytes queued before a connection's sockets are in the map
 * are copied once by hand; the ends of streams are not passed on (iperf3 ends on its control
 * connection). Not netcond: it measures how far a kernel-side forward would take item 1 here.
 *
 * Usage: sockmap_relay LISTEN_PORT TARGET_PORT   (both on 127.0.0.1; runs until killed) */
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>

#include "relay.h"

static long bpf(int command, union bpf_attr *attributes) {
    return syscall(__NR_bpf, command, attributes, sizeof *attributes);
}

/* As the program reads them from __sk_buff: remote_port is the port in network order shifted left
 * 16 bits (on little-endian machines), local_port the port in host order. */
struct key {
    uint32_t remote_port, local_port;
};

static int put(int map, int socket_for_key, int socket_to_send_on) {
    struct sockaddr_in mine, theirs;
    socklen_t mine_length = sizeof mine, theirs_length = sizeof theirs;
    if (getsockname(socket_for_key, (struct sockaddr *)&mine, &mine_length) != 0
        || getpeername(socket_for_key, (struct sockaddr *)&theirs, &theirs_length) != 0)
        return -1;
    struct key key = {(uint32_t)theirs.sin_port << 16, ntohs(mine.sin_port)};
    uint32_t value = (uint32_t)socket_to_send_on;
    union bpf_attr attributes;
    memset(&attributes, 0, sizeof attributes);
    attributes.map_fd = (uint32_t)map;
    attributes.key = (uint64_t)(uintptr_t)&key;
    attributes.value = (uint64_t)(uintptr_t)&value;
    attributes.flags = BPF_ANY;
    return (int)bpf(BPF_MAP_UPDATE_ELEM, &attributes);
}

static int load(int map) {
    struct bpf_insn program[] = {
        /* r6 = skb; the key on the stack: remote_port at fp-8, local_port at fp-4. */
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6, .src_reg = 1},
        {.code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 2, .src_reg = 6, .off = offsetof(struct __sk_buff, remote_port)},
        {.code = BPF_STX | BPF_MEM | BPF_W, .dst_reg = 10, .src_reg = 2, .off = -8},
        {.code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 2, .src_reg = 6, .off = offsetof(struct __sk_buff, local_port)},
        {.code = BPF_STX | BPF_MEM | BPF_W, .dst_reg = 10, .src_reg = 2, .off = -4},
        /* return bpf_sk_redirect_hash(skb, map, &key, 0): out of the other socket. */
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 1, .src_reg = 6},
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 2, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map},
        {.code = 0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 3, .src_reg = 10},
        {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 3, .imm = -8},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 4, .imm = 0},
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_sk_redirect_hash},
        {.code = BPF_JMP | BPF_EXIT},
    };
    static char log[16384];
    union bpf_attr attributes;
    memset(&attributes, 0, sizeof attributes);
    attributes.prog_type = BPF_PROG_TYPE_SK_SKB;
    attributes.insns = (uint64_t)(uintptr_t)program;
    attributes.insn_cnt = sizeof program / sizeof program[0];
    attributes.license = (uint64_t)(uintptr_t) "GPL";
    attributes.log_buf = (uint64_t)(uintptr_t)log;
    attributes.log_size = sizeof log;
    attributes.log_level = 1;
    int loaded = (int)bpf(BPF_PROG_LOAD, &attributes);
    if (loaded < 0) {
        perror("sockmap_relay: BPF_PROG_LOAD");
        fprintf(stderr, "%s\n", log);
        return -1;
    }
    memset(&attributes, 0, sizeof attributes);
    attributes.target_fd = (uint32_t)map;
    attributes.attach_bpf_fd = (uint32_t)loaded;
    attributes.attach_type = BPF_SK_SKB_STREAM_VERDICT;
    if (bpf(BPF_PROG_ATTACH, &attributes) < 0) {
        perror("sockmap_relay: BPF_PROG_ATTACH");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct relay relay = relay_listen(argc, argv);
    union bpf_attr attributes;
    memset(&attributes, 0, sizeof attributes);
    attributes.map_type = BPF_MAP_TYPE_SOCKHASH;
    attributes.key_size = sizeof(struct key);
    attributes.value_size = sizeof(uint32_t);
    attributes.max_entries = 256;
    int map = (int)bpf(BPF_MAP_CREATE, &attributes);
    if (map < 0) {
        perror("sockmap_relay: BPF_MAP_CREATE");
        return 1;
    }
    if (load(map) != 0) return 1;
    for (;;) {
        int client, upstream;
        relay_accept(&relay, &client, &upstream);
        /* A socket the map refuses (one already closing: a probe that connected and left) ends
           its connection. */
        if (put(map, client, upstream) != 0 || put(map, upstream, client) != 0) {
            perror("sockmap_relay: BPF_MAP_UPDATE_ELEM");
            close(client);
            close(upstream);
            continue;
        }
        /* What arrived before the sockets were in the map: the verdict program never saw it. */
        for (int side = 0; side < 2; side++) {
            int from = side ? upstream : client, to = side ? client : upstream;
            char buffer[65536];
            ssize_t n;
            while ((n = recv(from, buffer, sizeof buffer, MSG_DONTWAIT)) > 0) send(to, buffer, (size_t)n, 0);
        }
    }
}
