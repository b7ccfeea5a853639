#ifndef NETCOND_PACKET_H
#define NETCOND_PACKET_H

#include <stddef.h>
#include <stdint.h>

/* The packet engine's side of netfilter's NFQUEUE, spoken over a raw NETLINK_NETFILTER socket (no
 * library: the hot path parses a batch of packets per recv and sends a batch of verdicts per send).
 * Linux only; elsewhere every call fails with ENOSYS. */

/// Opens a non-blocking NETLINK_NETFILTER socket with a large receive buffer, asking for receive
/// time stamps (so that the kernel stamps packets' arrival while it is open). Returns the
/// descriptor (close-on-exec) or -errno.
int ncq_open(void);

/// Binds `queue` on the socket: packets copied up to `copy_range` bytes (the rest is counted in the
/// packet's length), at most `max_length` waiting in the kernel (more are dropped, never let
/// through). Returns 0 or -errno (EBUSY: another process serves that queue).
int ncq_bind(int fd, uint16_t queue, uint32_t copy_range, uint32_t max_length);

/// With `whole` 0 (the default), the kernel segments a GSO packet (a TCP send of many segments at
/// once) before queueing it, so each segment gets a fate of its own as on a wire; with 1 it queues
/// it whole (one verdict for all of its segments: `ncq_packet.segments` says how many). With `wait`,
/// waits for the kernel's answer (only before packets flow: it reads the socket); without, an
/// error comes back later as an error reply that `ncq_receive` counts. Returns 0 or -errno.
int ncq_set_gso(int fd, uint16_t queue, int whole, int wait);

/// Unbinds `queue` (its waiting packets are dropped by the kernel). Returns 0 or -errno.
int ncq_unbind(int fd, uint16_t queue);

/// Binds NFLOG `group` on the same socket, so that the copies of the packets a rule logs arrive in
/// order with the queues' packets: each copy up to `copy_range` bytes, sent at once (a threshold
/// of one), numbered. Returns 0 or -errno (EBUSY: another socket has the group).
int ncq_log_bind(int fd, uint16_t group, uint32_t copy_range);

/// Unbinds NFLOG `group`. Returns 0 or -errno.
int ncq_log_unbind(int fd, uint16_t group);

/// Opens a blocking NETLINK_NETFILTER socket for nf_tables requests (``ncq_nft_set_element``).
/// Returns the descriptor (close-on-exec) or -errno.
int ncq_nft_open(void);

/// Adds (`add` 1) or deletes (0) the `count` elements of type `mark` in the set `set` of the
/// `inet` table `table`, in one transaction, and waits for the kernel's answer: on return 0 the
/// rules that look the set up see the change. Deleting an element that is not there is no error.
/// Returns 0 or -errno.
int ncq_nft_set_elements(int fd, const char *table, const char *set, const uint32_t *keys, int count, int add);

/// One packet handed to user space.
typedef struct {
    uint32_t id;
    uint16_t queue;
    /// netfilter hook: 1 = LOCAL_IN, 3 = LOCAL_OUT.
    uint8_t hook;
    /// 4 or 6.
    uint8_t ip_version;
    /// The packet's whole length (IP header included), even when only part was copied.
    uint32_t length;
    /// The copied part, pointing into the receive buffer (valid until the next receive).
    const uint8_t *payload;
    uint32_t payload_length;
    /// The packet's mark (0 when none).
    uint32_t mark;
    /// 1, or more for a GSO packet queued whole (see `ncq_set_gso`): the wire packets it stands for.
    uint32_t segments;
    /// The bytes those wire packets carry, headers of each included (`length` when 1 segment).
    uint32_t wire_length;
    /// When the packet reached the hook, as the kernel stamped it (CLOCK_REALTIME nanoseconds,
    /// microsecond resolution), or 0 when it gave no stamp (it stamps packets it receives, as
    /// loopback's, and hands the stamp over on the input hooks only).
    int64_t stamp;
    /// 1: a copy NFLOG handed over of a packet the kernel passed on at once (`ncq_log_bind`): it has
    /// no id and takes no verdict; `queue` is the log group's number. 2: such a copy from the ring
    /// (`ncq_ring_peek`), which numbers none.
    uint8_t logged;
    /// A logged copy's number in its group (the kernel counts from 0 per group; a gap is copies the
    /// socket had no room for).
    uint32_t log_sequence;
} ncq_packet;

/// Reads one datagram (it may hold many packets) into `buffer` and parses up to `max` packets into
/// `out`. Returns the number of packets (0 when nothing was waiting), or -errno. `-ENOBUFS` means
/// the kernel could not hand over packets because the socket was full: those packets were dropped.
/// `*errors` counts netlink error replies seen (a verdict for a packet the kernel no longer holds).
int ncq_receive(int fd, uint8_t *buffer, size_t capacity, ncq_packet *out, int max, int *errors);

/// Verdicts gathered and sent in one datagram.
typedef struct {
    uint8_t *data;
    size_t length;
    size_t capacity;
    uint32_t count;
} ncq_batch;

enum { NCQ_DROP = 0, NCQ_ACCEPT = 1 };

/// Appends a verdict for packet `id` of `queue`; `mark` is set on the packet when not 0; `payload`
/// (may be NULL) replaces the packet's bytes (a corrupted copy). Returns 0 or -ENOMEM.
int ncq_batch_add(ncq_batch *batch, uint16_t queue, uint32_t id, int verdict, uint32_t mark, const uint8_t *payload,
                  uint32_t payload_length);

/// Sends the gathered verdicts (several datagrams if they do not fit one) and empties the batch.
/// Returns 0 or -errno.
int ncq_batch_flush(int fd, ncq_batch *batch);

void ncq_batch_free(ncq_batch *batch);

/// Sets the calling thread's timer slack to 1 ns, so that its timed waits end on time.
void ncq_precise_timers(void);

/// Waits until `fd` or `wake` is readable or `timeout_ns` has passed (negative: forever). Returns a
/// bit mask (1: `fd` readable, 2: `wake` readable; its count is consumed), 0 on time-out, -errno.
int ncq_wait(int fd, int wake, int64_t timeout_ns);

/// As `ncq_wait`, but polls without sleeping for the first `spin_ns` of the wait (at most
/// `timeout_ns`), yielding the CPU between polls to whatever else wants it: a packet that comes
/// meanwhile is seen at once, without a wake-up from idle. Then it sleeps the rest of the wait.
int ncq_wait_spinning(int fd, int wake, int64_t spin_ns, int64_t timeout_ns);

/// An eventfd (non-blocking, close-on-exec) that `ncq_wake` makes readable. Returns it or -errno.
int ncq_wake_open(void);
void ncq_wake(int wake);

/// A raw socket (IPv4 or IPv6 by `version`) that sends whole IP packets netcond builds, each with
/// `mark` (so the cage's rules know it has crossed the link already). Returns it or -errno.
int ncq_raw_open(int version, uint32_t mark);

/// Recomputes the TCP or UDP checksum of a whole packet in place (IPv4, or IPv6 without extension
/// headers; not a fragment), as a copy sent on a raw socket or a corrupted packet needs: loopback
/// leaves it partial. Returns the transport header's offset, or -1 when there is none to fix.
int ncq_fix_checksum(uint8_t *packet, uint32_t length);

/// Sends a whole IP packet as it is (a duplicate) to its destination on raw socket `fd` (see
/// `ncq_raw_open`). Returns 0 or -errno.
int ncq_send_copy(int fd, const uint8_t *packet, uint32_t length);

/// Changes how much of each packet `queue` hands over (without waiting for an answer).
int ncq_set_copy(int fd, uint16_t queue, uint32_t copy_range);

/// Sends a TCP RST (with ACK when `with_ack`) from `source`:`source_port` to
/// `destination`:`destination_port` (4 or 16 address bytes by `version`; ports, seq and ack in host
/// order), checksums computed. When `copy` is not NULL (60 bytes), the packet sent is copied there
/// and its length stored in `*copy_length`. Returns 0 or -errno.
int ncq_send_rst(int fd, int version, const uint8_t *source, uint16_t source_port, const uint8_t *destination,
                 uint16_t destination_port, uint32_t seq, uint32_t ack, int with_ack, uint8_t *copy,
                 uint32_t *copy_length);

/// The copies of the packets the kernel passes at once while the link holds nothing back, read
/// from a BPF ring buffer that programs on the cage's cgroup fill (egress: packets its sockets
/// send, marked `up_mark`; ingress: packets delivered to them, marked `down_mark`), waking no one.
typedef struct ncq_ring ncq_ring;

/// Makes a ring of `size` bytes (a power of two, a multiple of the page size) and attaches its
/// programs to the cgroup (they go with it). Returns the ring, or NULL with `*error` (-errno; the
/// verifier's words in `log`).
ncq_ring *ncq_ring_open(const char *cgroup_directory, uint32_t up_mark, uint32_t down_mark, uint32_t size, int *error,
                        char *log, size_t log_length);

/// Parses up to `max` waiting copies into `out` (`logged` 2, `queue` `up_queue` or the next for
/// down, `stamp` when the program saw the packet, the payload pointing into the ring: valid until
/// `ncq_ring_release`). Returns how many.
int ncq_ring_peek(ncq_ring *ring, ncq_packet *out, int max, uint16_t up_queue);

/// Gives the copies the last `ncq_ring_peek` handed over back to the ring.
void ncq_ring_release(ncq_ring *ring);

/// How many copies the ring had no room for, since it was made.
uint64_t ncq_ring_unseen(ncq_ring *ring);

void ncq_ring_close(ncq_ring *ring);

/// A capture file written through libpcap, which is loaded when the first one is opened (no build
/// dependency: libpcap.so.0.8 or libpcap.so.1 at run time). Raw IP link type (IPv4 and IPv6).
typedef struct ncq_capture ncq_capture;

/// Opens `path` for writing; NULL with a message in `error` when libpcap is missing or the file
/// cannot be made.
ncq_capture *ncq_capture_open(const char *path, char *error, size_t error_length);

/// Writes one packet: `length` bytes of it (its whole length `original_length`), stamped
/// `nanoseconds` since the Unix epoch.
void ncq_capture_write(ncq_capture *capture, int64_t nanoseconds, const uint8_t *bytes, uint32_t length,
                       uint32_t original_length);

void ncq_capture_flush(ncq_capture *capture);
void ncq_capture_close(ncq_capture *capture);

/// Gives every TCP socket of the cgroup at `cgroup_directory` the MSS of a 1,500-byte path as it
/// connects or listens (`mss4` for IPv4, `mss6` for IPv6: TCP_MAXSEG, set by a sock_ops BPF
/// program attached to the cgroup, which goes with it). Returns 0 or -errno; the verifier's words,
/// if any, in `log`.
int ncq_cage_path_mss(const char *cgroup_directory, uint16_t mss4, uint16_t mss6, char *log, size_t log_length);

/* Refuses the cgroup's sockets every IPv4 destination (connect, and a UDP send without one), an
 * IPv4-mapped IPv6 one too, with ENETUNREACH, but 127.0.0.1 at `exempt_port` (0: none): an
 * IPv6-only device's. Each refusal is noted in a map (its descriptor in `map`, for
 * ncq_cage_refusals; the caller closes it). Returns 0, or -errno (the verifier's words in `log`). */
int ncq_cage_refuse_ipv4(const char *cgroup_directory, uint16_t exempt_port, int *map, char *log,
                         size_t log_length);

/* One refused IPv4 destination: when (CLOCK_MONOTONIC ns), where. */
typedef struct {
    int64_t at;
    uint8_t address[4];
    uint16_t port;
} ncq_refusal;

/* The refusals noted so far: returns how many there were in all (or -errno), and fills `out`
 * with up to `max` of the last 32, in no order. */
int ncq_cage_refusals(int map, ncq_refusal *out, int max);

/// CLOCK_REALTIME in nanoseconds.
int64_t ncq_wall_now(void);

/// CLOCK_MONOTONIC in nanoseconds.
int64_t ncq_now(void);

#endif
