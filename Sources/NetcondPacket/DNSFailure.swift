import NetcondCore

/// `dns_fail` under the packet engine: a DNS query (UDP, port 53) the command sends for a name
/// the profile makes fail is answered NXDOMAIN ("no such name") in the server's place, as a
/// resolver would answer for a name that does not exist; the query itself goes no further.
enum DNSFailure {
    /// The question of a DNS query in the copied packet: its name (lower case, no final dot) and
    /// where the question ends. Nil for anything but a standard query over UDP.
    static func question(_ bytes: [UInt8]) -> (name: String, end: Int, dns: Int)? {
        guard let head = bytes.withUnsafeBufferPointer({ PacketHead($0.baseAddress!, copied: bytes.count) }),
            head.isUDP, head.destinationPort == 53
        else { return nil }
        let dns = head.headerLength + 8
        return Self.question(bytes[...], at: dns).map { ($0.name, $0.end, dns) }
    }

    /// The question of the DNS query that starts at `dns` in `bytes`: its name (lower case, no
    /// final dot) and where the question ends. Nil for anything but a standard query (QR 0, opcode
    /// 0) with one question, whole in `bytes`.
    static func question(_ bytes: ArraySlice<UInt8>, at dns: Int) -> (name: String, end: Int)? {
        guard bytes.endIndex >= dns + 12, bytes[dns + 2] & 0xf8 == 0, bytes[dns + 4] == 0, bytes[dns + 5] == 1 else {
            return nil
        }
        var labels: [String] = []
        var at = dns + 12
        while at < bytes.endIndex, labels.count < 128 {
            let length = Int(bytes[at])
            if length == 0 { break }
            // A compressed name has no place in a question.
            guard length < 64, at + 1 + length <= bytes.endIndex else { return nil }
            labels.append(String(decoding: bytes[(at + 1)..<(at + 1 + length)], as: UTF8.self))
            at += 1 + length
        }
        guard at < bytes.endIndex, bytes[at] == 0, at + 5 <= bytes.endIndex else { return nil }
        return (labels.joined(separator: ".").lowercased(), at + 5)
    }

    /// The NXDOMAIN answer to the query in `bytes` (a whole packet), from the server's address and
    /// port to the querier's, its UDP checksum left for the sender to compute.
    static func reply(to bytes: [UInt8], question: (name: String, end: Int, dns: Int)) -> [UInt8] {
        let version = bytes[0] >> 4
        let ipLength = version == 6 ? 40 : 20
        let dns = question.dns
        let questionBytes = bytes[(dns + 12)..<question.end]
        let udpLength = 8 + 12 + questionBytes.count
        var reply = [UInt8](repeating: 0, count: ipLength)
        if version == 6 {
            reply[0] = 0x60
            reply[4] = UInt8(udpLength >> 8)
            reply[5] = UInt8(udpLength & 0xff)
            reply[6] = 17
            reply[7] = 64
            reply.replaceSubrange(8..<24, with: bytes[24..<40])
            reply.replaceSubrange(24..<40, with: bytes[8..<24])
        } else {
            let total = ipLength + udpLength
            reply[0] = 0x45
            reply[2] = UInt8(total >> 8)
            reply[3] = UInt8(total & 0xff)
            reply[6] = 0x40
            reply[8] = 64
            reply[9] = 17
            reply.replaceSubrange(12..<16, with: bytes[16..<20])
            reply.replaceSubrange(16..<20, with: bytes[12..<16])
        }
        let udp = dns - 8
        // Ports swapped; length; checksum computed when sent.
        reply += [
            bytes[udp + 2], bytes[udp + 3], bytes[udp], bytes[udp + 1], UInt8(udpLength >> 8), UInt8(udpLength & 0xff),
            0, 0,
        ]
        // Same id; QR, the query's RD; RA, RCODE 3 (NXDOMAIN); one question, no answer.
        reply += [bytes[dns], bytes[dns + 1], 0x80 | (bytes[dns + 2] & 0x01), 0x83, 0, 1, 0, 0, 0, 0, 0, 0]
        reply += questionBytes
        return reply
    }
}
