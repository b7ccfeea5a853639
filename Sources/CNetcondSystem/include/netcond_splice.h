#ifndef NETCOND_SPLICE_H
#define NETCOND_SPLICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/// Descriptor `fd`, duplicated (close-on-exec), when it is a socket whose local address is `local`
/// and whose peer is `peer` (an established TCP connection is the only one with its two
/// addresses): how a connection NIO accepted is taken before NIO registers it, its descriptor read
/// from NIO's channel. -1 (errno ENOTCONN) when `fd` is not that socket.
int netcond_take_socket(int fd, const struct sockaddr *local, const struct sockaddr *peer);

/// A nonblocking, close-on-exec TCP socket with TCP_NODELAY, connecting to `target` (the connect
/// is under way, or done, when it returns). -1 and errno on failure.
int netcond_connect_socket(const struct sockaddr *target, socklen_t length);

/// A zero-copy relay between two TCP sockets on a thread of its own: splice(2) from each socket
/// into a pipe of its direction and from the pipe into the other socket (SPLICE_F_MOVE,
/// SPLICE_F_NONBLOCK), woken by epoll. It waits for the upstream's connect first. A FIN is passed
/// on (shutdown of the other side's output) once every byte before it has been, a reset (ECONNRESET)
/// as a reset (SO_LINGER 0), and when both directions are over both sockets are closed.
typedef struct netcond_relay netcond_relay;

/// Bytes moved by every relay of a proxy: [0] client to upstream, [1] upstream to client
/// (atomic; read with netcond_relay_total).
typedef struct netcond_relay_totals {
    uint64_t moved[2];
} netcond_relay_totals;

uint64_t netcond_relay_total(const netcond_relay_totals *totals, int direction);

/// What a relay gives back when asked (netcond_relay_hand_back): its two sockets, open, and the
/// bytes that were in its pipes, in order (malloc'd; free them with free()). `upstream_fd` is -1
/// when the upstream's connect failed, or was abandoned under way because netcond stops.
struct netcond_relay_handback {
    int client_fd;
    int upstream_fd;
    unsigned char *up;
    size_t up_length;
    unsigned char *down;
    size_t down_length;
};

enum {
    /// Both directions ended (FIN each way), or a side was reset: both sockets are closed.
    NETCOND_RELAY_CLOSED = 0,
    NETCOND_RELAY_RESET = 1,
    /// The upstream's connect failed (netcond_relay_connect_error): the client's socket is left
    /// open, for netcond_relay_hand_back to give back (`upstream_fd` -1).
    NETCOND_RELAY_CONNECT_FAILED = 2,
    /// Stopped by netcond_relay_hand_back.
    NETCOND_RELAY_HANDED_BACK = 3,
};

/// Called on the relay's thread once it has ended, whatever the cause: its last call, exactly once.
/// `how` is a NETCOND_RELAY_* value.
typedef void (*netcond_relay_ended)(void *context, int how);

/// Starts relaying between `client_fd` and `upstream_fd` (both nonblocking; the relay owns them
/// from now on). Returns NULL and errno when the thread or its pipes cannot be made (the
/// descriptors are then still the caller's).
netcond_relay *netcond_relay_start(int client_fd, int upstream_fd, netcond_relay_totals *totals,
                                   netcond_relay_ended ended, void *context);

/// How long a relay waits for its upstream's connect (as netcond's own connects: 30 s).
#define NETCOND_RELAY_CONNECT_TIMEOUT_MS 30000

/// Asks the relay to stop and give its sockets back, without waiting (a hand back then collects
/// them): many relays stop at once.
void netcond_relay_ask_back(netcond_relay *relay);

/// Stops the relay and hands its sockets back (see struct netcond_relay_handback): returns 1 and
/// fills *out. Returns 0 when the relay had already ended by itself with both sockets closed (its
/// `ended` call is made or on its way), or when the bytes in its pipes could not be held (both
/// sides are then reset, nothing is lost silently); after NETCOND_RELAY_CONNECT_FAILED it gives the
/// client's socket back (netcond_relay_connect_error says why). Waits for the relay's thread to
/// stop, which takes no longer than one splice call; except with `wait_for_connect` while the
/// upstream's connect is under way: it returns 2 at once, and the relay gives the connection back
/// once the connect is over (its `ended` call, NETCOND_RELAY_HANDED_BACK or
/// NETCOND_RELAY_CONNECT_FAILED; then call this again). Without `wait_for_connect` (netcond stops) a
/// connect under way is abandoned. After a 0 or 1, call netcond_relay_free.
int netcond_relay_hand_back(netcond_relay *relay, int wait_for_connect, struct netcond_relay_handback *out);

/// After the relay ended, its `how`, the errno of a failed connect, and the bytes it moved each
/// way (0: client to upstream, 1: upstream to client).
int netcond_relay_connect_error(const netcond_relay *relay);
uint64_t netcond_relay_moved(const netcond_relay *relay, int direction);

/// Joins the relay's thread and frees it: after a hand back that returned 0 or 1, never on the
/// relay's own thread.
void netcond_relay_free(netcond_relay *relay);

#endif
