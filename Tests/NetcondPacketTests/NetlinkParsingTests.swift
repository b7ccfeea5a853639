import CNetcondPacket
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ncq_receive` on datagrams built by hand (through a socket pair): what the kernel sends, and
/// what it must survive.
@Suite struct NetlinkParsingTests {
    /// One attribute: length, type, value, padded to 4 bytes.
    static func attribute(_ type: UInt16, _ value: [UInt8]) -> [UInt8] {
        let length = UInt16(4 + value.count)
        var bytes = [UInt8(length & 0xff), UInt8(length >> 8), UInt8(type & 0xff), UInt8(type >> 8)] + value
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    static func be32(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32($0))) }
    }

    /// A NFQNL_MSG_PACKET message for `queue` with these attributes.
    static func message(queue: UInt16, type: UInt16 = (3 << 8) | 0, _ attributes: [UInt8]) -> [UInt8] {
        let length = UInt32(16 + 4 + attributes.count)
        var bytes: [UInt8] = []
        bytes += (0..<4).map { UInt8(truncatingIfNeeded: length >> (8 * UInt32($0))) }  // nlmsg_len, host order
        bytes += [UInt8(type & 0xff), UInt8(type >> 8), 0, 0]  // type, flags
        bytes += [UInt8](repeating: 0, count: 8)  // seq, pid
        bytes += [2, 0, UInt8(queue >> 8), UInt8(queue & 0xff)]  // nfgenmsg: family, version, res_id (BE)
        return bytes + attributes
    }

    /// An IPv4 TCP head of `length` bytes in all, the first `copied` given.
    static func ipv4TCP(length: Int, copied: Int = 60) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: copied)
        bytes[0] = 0x45
        bytes[2] = UInt8(length >> 8)
        bytes[3] = UInt8(length & 0xff)
        bytes[9] = 6
        bytes[32] = 8 << 4  // data offset 32 (timestamps)
        return bytes
    }

    /// Sends `datagram` through a socket pair and parses it.
    static func parse(_ datagram: [UInt8]) -> (count: Int32, packets: [ncq_packet], errors: Int32, payloads: [[UInt8]])
    {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        _ = datagram.withUnsafeBytes { send(pair[0], $0.baseAddress, $0.count, 0) }
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 65536)
        defer { buffer.deallocate() }
        var packets = [ncq_packet](repeating: ncq_packet(), count: 8)
        var errors: Int32 = 0
        let count = ncq_receive(pair[1], buffer, 65536, &packets, 8, &errors)
        let parsed = Array(packets.prefix(max(0, Int(count))))
        let payloads = parsed.map { packet in
            Array(UnsafeBufferPointer(start: packet.payload, count: Int(packet.payload_length)))
        }
        return (count, parsed, errors, payloads)
    }

    @Test func packetsOfOneDatagramAreReadWithIdHookLengthAndMark() {
        let head = Self.ipv4TCP(length: 1500)
        let first = Self.message(
            queue: 7,
            Self.attribute(1, Self.be32(41) + [0x08, 0x00, 3]) + Self.attribute(10, head)
                + Self.attribute(13, Self.be32(1500)) + Self.attribute(3, Self.be32(0x6e00_1200)))
        let second = Self.message(
            queue: 8, Self.attribute(1, Self.be32(42) + [0x86, 0xdd, 1]) + Self.attribute(10, head))
        let result = Self.parse(first + second)
        #expect(result.count == 2)
        #expect(result.packets[0].id == 41 && result.packets[0].queue == 7 && result.packets[0].hook == 3)
        #expect(result.packets[0].length == 1500 && result.packets[0].payload_length == 60)
        #expect(result.packets[0].mark == 0x6e00_1200 && result.packets[0].ip_version == 4)
        #expect(result.packets[0].segments == 1 && result.packets[0].wire_length == 1500)
        #expect(result.payloads[0] == head)
        #expect(result.packets[1].id == 42 && result.packets[1].queue == 8 && result.packets[1].hook == 1)
        #expect(result.packets[1].length == 60)  // no CAP_LEN: all of it was copied
    }

    @Test func aGSOPacketTakenWholeCountsTheWirePacketsItStandsFor() {
        // 20 + 32 bytes of headers and 14,480 of data: ten 1,448-byte segments of 1,500 bytes each.
        let length = 52 + 14_480
        let message = Self.message(
            queue: 7,
            Self.attribute(1, Self.be32(1) + [0x08, 0x00, 3]) + Self.attribute(10, Self.ipv4TCP(length: length))
                + Self.attribute(13, Self.be32(UInt32(length))) + Self.attribute(14, Self.be32(2)))
        let result = Self.parse(message)
        #expect(result.count == 1)
        #expect(result.packets[0].segments == 10)
        #expect(result.packets[0].wire_length == 15_000)
    }

    @Test func errorRepliesAreCountedAndOtherMessagesSkipped() {
        var error = [UInt8](repeating: 0, count: 36)
        error[0] = 36
        error[4] = 2  // NLMSG_ERROR
        let code = UInt32(bitPattern: -2)  // -ENOENT, host order
        for index in 0..<4 { error[16 + index] = UInt8(truncatingIfNeeded: code >> (8 * UInt32(index))) }
        let other = Self.message(queue: 7, type: (1 << 8) | 0, Self.attribute(1, Self.be32(9) + [0, 0, 3]))
        let packet = Self.message(queue: 7, Self.attribute(1, Self.be32(5) + [0x08, 0x00, 3]))
        let result = Self.parse(error + other + packet)
        #expect(result.errors == 1)
        #expect(result.count == 1 && result.packets[0].id == 5)
    }

    @Test func truncatedAndMalformedMessagesAreSurvived() {
        let good = Self.message(queue: 7, Self.attribute(1, Self.be32(5) + [0x08, 0x00, 3]))
        // An attribute claiming more bytes than the message holds; a packet without its header.
        var bad = Self.message(queue: 7, Self.attribute(10, [1, 2, 3, 4]))
        bad[20] = 0xff
        let headless = Self.message(queue: 7, Self.attribute(10, Self.ipv4TCP(length: 60)))
        var truncated = good
        truncated[0] = 200  // nlmsg_len beyond the datagram
        for datagram in [bad, headless, truncated, bad + good, Array(good.prefix(10)), []] {
            let result = Self.parse(datagram)
            #expect(result.count >= 0)
            #expect(result.packets.allSatisfy { $0.id == 5 })
        }
        #expect(Self.parse(bad + good).count == 1)
    }

    /// An NFULNL_MSG_PACKET message (a copy NFLOG sends of a packet the kernel passed) for `group`.
    static func logged(group: UInt16, hook: UInt8 = 1, sequence: UInt32, mark: UInt32, _ payload: [UInt8]) -> [UInt8] {
        Self.message(
            queue: group, type: (4 << 8) | 0,
            Self.attribute(1, [0x08, 0x00, hook, 0]) + Self.attribute(2, Self.be32(mark))
                + Self.attribute(9, payload) + Self.attribute(12, Self.be32(sequence)))
    }

    @Test func aLoggedCopyIsReadInOrderWithQueuedPacketsWithItsLengthFromItsIPHeader() {
        // A copy of a 1,500-byte packet cut to 60 bytes, a queued packet, a copy of a GSO packet.
        let gso = 52 + 14_480
        let queued = Self.message(queue: 7, Self.attribute(1, Self.be32(5) + [0x08, 0x00, 3]))
        let result = Self.parse(
            Self.logged(group: 7, sequence: 40, mark: 0x6e00_1200, Self.ipv4TCP(length: 1500)) + queued
                + Self.logged(group: 8, hook: 3, sequence: 9, mark: 0x6e00_1240, Self.ipv4TCP(length: gso)))
        #expect(result.count == 3)
        let first = result.packets[0]
        #expect(first.logged == 1 && first.queue == 7 && first.log_sequence == 40 && first.hook == 1)
        #expect(first.length == 1500 && first.payload_length == 60 && first.mark == 0x6e00_1200)
        #expect(first.segments == 1 && first.wire_length == 1500 && first.id == 0)
        #expect(result.packets[1].logged == 0 && result.packets[1].id == 5)
        let last = result.packets[2]
        #expect(last.logged == 1 && last.queue == 8 && last.log_sequence == 9 && last.hook == 3)
        #expect(last.length == UInt32(gso) && last.segments == 10 && last.wire_length == 15_000)
        // IPv6: 40 bytes of header and the payload length.
        var six = [UInt8](repeating: 0, count: 60)
        six[0] = 0x60
        six[4] = 0x05
        six[5] = 0xdc  // 1,500 bytes of payload
        let v6 = Self.parse(Self.logged(group: 7, sequence: 1, mark: 1, six))
        #expect(v6.count == 1 && v6.packets[0].ip_version == 6 && v6.packets[0].length == 1540)
    }

    @Test func aMalformedLoggedCopyIsSkipped() {
        let good = Self.logged(group: 7, sequence: 1, mark: 1, Self.ipv4TCP(length: 60))
        // No packet header; no payload; an IPv4 header whose length is shorter than the copy.
        let headless = Self.message(queue: 7, type: (4 << 8) | 0, Self.attribute(9, Self.ipv4TCP(length: 60)))
        let empty = Self.message(queue: 7, type: (4 << 8) | 0, Self.attribute(1, [0x08, 0x00, 1, 0]))
        let short = Self.logged(group: 7, sequence: 2, mark: 1, Self.ipv4TCP(length: 20))
        #expect(Self.parse(headless + good).count == 1)
        #expect(Self.parse(empty).count == 0)
        let parsed = Self.parse(short)
        #expect(parsed.count == 1 && parsed.packets[0].length == 60)
        for cut in [4, 16, 20, 30] {
            #expect(Self.parse(Array(good.prefix(cut))).count == 0)
        }
    }

    static func be64(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    @Test func theKernelsArrivalStampIsReadInNanosecondsAndABadOneIsIgnored() {
        let head = Self.ipv4TCP(length: 60)
        func stamped(_ seconds: UInt64, _ microseconds: UInt64) -> [UInt8] {
            Self.message(
                queue: 1,
                Self.attribute(1, Self.be32(1) + [0x08, 0x00, 1]) + Self.attribute(10, head)
                    + Self.attribute(4, Self.be64(seconds) + Self.be64(microseconds)))
        }
        let good = Self.parse(stamped(1_795_621_101, 572_345))
        #expect(good.count == 1 && good.packets[0].stamp == 1_795_621_101_572_345_000)
        // No stamp (queued on output), a stamp with impossible microseconds, a short one: 0.
        #expect(
            Self.parse(
                Self.message(queue: 1, Self.attribute(1, Self.be32(1) + [0x08, 0x00, 3]) + Self.attribute(10, head))
            ).packets[0].stamp == 0)
        #expect(Self.parse(stamped(1_795_621_101, 1_000_000)).packets[0].stamp == 0)
        #expect(Self.parse(stamped(UInt64.max, 0)).packets[0].stamp == 0)
        let short = Self.message(
            queue: 1,
            Self.attribute(1, Self.be32(1) + [0x08, 0x00, 1]) + Self.attribute(10, head)
                + Self.attribute(4, Self.be64(1_795_621_101)))
        #expect(Self.parse(short).packets[0].stamp == 0)
    }
}
