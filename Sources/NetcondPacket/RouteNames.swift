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

/// What the engine reads of the DNS a packet carries, for a fuzzer: `packet` as a whole IP packet,
/// the answers it may hold (going down) and the question it may ask (going up). Returns how many
/// names it found, so that nothing is optimised away.
public func readPacketDNS(_ packet: [UInt8]) -> Int {
    let answers = packet.withUnsafeBufferPointer { dnsAnswerAddresses($0) }
    guard packet.count >= 20,
        let head = packet.withUnsafeBufferPointer({ PacketHead($0.baseAddress!, copied: $0.count) }),
        let message = packet.withUnsafeBufferPointer({
            head.dnsMessage($0.baseAddress!, copied: $0.count, serverPort: head.destinationPort)
        })
    else { return answers.count }
    let question = DNSFailure.question(packet[..<message.upperBound], at: message.lowerBound)
    return answers.count + (question == nil ? 0 : 1) + (DNSFailure.question(packet) == nil ? 0 : 1)
}

/// The names and addresses a DNS response answers (``DNSAnswers``): each name the client may
/// connect by (the question's, and every name of a CNAME chain) with the A and AAAA addresses it
/// leads to, the question's name last. `packet`: a whole IP packet, or as much of it as the queue copied (a record cut short
/// is left out). Empty for anything but a response from port 53, over UDP or in one TCP segment.
func dnsAnswerAddresses(_ packet: UnsafeBufferPointer<UInt8>) -> [(name: String, addresses: [[UInt8]])] {
    guard let base = packet.baseAddress, let head = PacketHead(base, copied: packet.count),
        let message = head.dnsMessage(base, copied: packet.count, serverPort: head.sourcePort),
        let answers = DNSAnswers.parse(Array(packet[message]))
    else { return [] }
    var names: [String] = []
    var addresses: [String: [[UInt8]]] = [:]
    for mapping in answers.mappings {
        guard let address = AddressBlock.parseAddress(mapping.address) else { continue }
        if addresses[mapping.name] == nil { names.append(mapping.name) }
        addresses[mapping.name, default: []].append(address)
    }
    // The name the client asked for last: learnt last, it is the one an address stands for.
    let ordered = names.filter { $0 != answers.question } + names.filter { $0 == answers.question }
    return ordered.map { ($0, addresses[$0]!) }
}
