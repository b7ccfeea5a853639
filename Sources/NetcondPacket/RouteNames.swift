import NetcondCore

/// The names the cage's connections go to, for the routes that match hosts (`match: {host: …}`):
/// the packet engine sees only addresses, so it learns which name each address answered for —
/// from the DNS responses going down to the cage, and from the names the session writes to the
/// command's hosts file (those never cross the link as DNS).
///
/// ```
///  DNS response (UDP from port 53) ─▶ dnsAnswerAddresses ─▶ learn(name, addresses) ─▶ address → name
///  a connection's first packet ─▶ name(for: far address) ─▶ RouteTarget(host:, address:, port:) ─▶ RouteTable
/// ```
/// The last answer for an address wins (a CDN's address may serve several names: the one looked up
/// last is the one the next connection most likely wants). Bounded: two generations of at most
/// ``limit`` addresses each; when the newer fills, the older is forgotten.
struct RouteNames {
    private var current: [[UInt8]: String] = [:]
    private var previous: [[UInt8]: String] = [:]
    static let limit = 32_768

    /// `name` answered for `addresses` (4 or 16 bytes each; others are ignored).
    mutating func learn(name: String, addresses: [[UInt8]]) {
        let name = name.lowercased()
        for address in addresses where address.count == 4 || address.count == 16 {
            if self.current.count >= Self.limit {
                self.previous = self.current
                self.current = [:]
            }
            self.current[address] = name
        }
    }

    /// The name last learnt for `address` (nil: none).
    func name(for address: [UInt8]) -> String? {
        self.current[address] ?? self.previous[address]
    }

    var isEmpty: Bool { self.current.isEmpty && self.previous.isEmpty }
}

/// The name and addresses a DNS response answers: its question's name (lower case, no final dot)
/// and the addresses of the A and AAAA records in its answer section (a CNAME chain's end included:
/// the client connects to them for the name it asked). `packet`: a whole IP packet, or as much of
/// it as the queue copied (a record cut short is left out). Empty for anything but a successful
/// response over UDP from port 53 with one question.
///
/// The minimal reader the routes need; a fuller DNS parser can take its place.
func dnsAnswerAddresses(_ packet: UnsafeBufferPointer<UInt8>) -> [(name: String, addresses: [[UInt8]])] {
    guard let base = packet.baseAddress, let head = PacketHead(base, copied: packet.count), head.isUDP,
        head.sourcePort == 53
    else { return [] }
    let dns = head.headerLength + 8
    let count = packet.count
    func u16(_ at: Int) -> Int { Int(packet[at]) << 8 | Int(packet[at + 1]) }
    // A response (QR 1), no error (RCODE 0), one question, some answers.
    guard count >= dns + 12, packet[dns + 2] & 0x80 != 0, packet[dns + 3] & 0x0f == 0, u16(dns + 4) == 1 else {
        return []
    }
    let answers = u16(dns + 6)
    var labels: [String] = []
    var at = dns + 12
    while at < count, labels.count < 128 {
        let length = Int(packet[at])
        if length == 0 { break }
        guard length < 64, at + 1 + length <= count else { return [] }
        labels.append(String(decoding: packet[(at + 1)..<(at + 1 + length)], as: UTF8.self))
        at += 1 + length
    }
    // The root label, then the question's type and class.
    at += 5
    guard !labels.isEmpty, at <= count else { return [] }
    var addresses: [[UInt8]] = []
    for _ in 0..<answers {
        // The record's owner name: labels, ended by the root or a pointer (compression).
        while at < count, packet[at] != 0, packet[at] & 0xc0 == 0 { at += 1 + Int(packet[at]) }
        guard at < count else { break }
        at += packet[at] == 0 ? 1 : 2
        guard at + 10 <= count else { break }
        let type = u16(at)
        let length = u16(at + 8)
        at += 10
        guard at + length <= count else { break }
        if (type == 1 && length == 4) || (type == 28 && length == 16) {
            addresses.append(Array(packet[at..<(at + length)]))
        }
        at += length
    }
    return addresses.isEmpty ? [] : [(labels.joined(separator: ".").lowercased(), addresses)]
}
