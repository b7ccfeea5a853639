#if canImport(Glibc)
import Glibc
#endif

/// What a DNS response told the client: the name it asked for and the addresses (A, AAAA) its
/// answers give, each with every name that leads to it through the answers' CNAME chain. The
/// packet engine learns from it which name a connection's destination address stands for.
///
/// Read from the UDP payload of a response as it crosses the link: anything may arrive there, so
/// every read is bounds-checked, a compressed name follows at most ``maxJumps`` pointers, and a
/// malformed record ends the reading (the records before it are kept).
public struct DNSAnswers: Equatable, Sendable {
    /// One name and one address it resolved to.
    public struct Mapping: Hashable, Sendable {
        /// Lower case, without the final dot (`cdn.netcond.test`).
        public var name: String
        /// Dotted IPv4 (`127.110.3.4`) or IPv6 as `inet_ntop` writes it.
        public var address: String

        public init(name: String, address: String) {
            self.name = name
            self.address = address
        }
    }

    /// The first question's name (lower case, without the final dot).
    public var question: String
    /// Every address of the answers with the name it is the address of, then each name whose
    /// CNAME chain ends at that name; in the answers' order, each pair once.
    public var mappings: [Mapping]

    public init(question: String, mappings: [Mapping]) {
        self.question = question
        self.mappings = mappings
    }

    /// Compression pointers followed in one name at most: a loop of pointers ends here.
    static let maxJumps = 32
    /// CNAME links followed from one name at most: a loop of aliases ends here.
    static let maxChain = 16

    /// The answers of the DNS response in `payload`; nil when it is not a response with a
    /// question (a query, a truncated header, a malformed question).
    public static func parse(_ payload: [UInt8]) -> DNSAnswers? {
        var reader = Reader(bytes: payload)
        guard payload.count >= 12, payload[2] & 0x80 != 0 else { return nil }
        let questions = Int(payload[4]) << 8 | Int(payload[5])
        let answers = Int(payload[6]) << 8 | Int(payload[7])
        guard questions >= 1 else { return nil }
        reader.at = 12
        var question: String?
        for _ in 0..<questions {
            guard let name = reader.name(), reader.skip(4) else { return nil }
            if question == nil { question = name }
        }
        var aliases: [(alias: String, target: String)] = []
        var addresses: [(owner: String, address: String)] = []
        for _ in 0..<answers {
            guard let record = reader.record() else { break }
            switch record.type {
            case 5:
                var inner = reader
                inner.at = record.data
                guard let target = inner.name(), inner.at <= record.end else { continue }
                aliases.append((record.owner, target))
            case 1 where record.end - record.data == 4, 28 where record.end - record.data == 16:
                addresses.append((record.owner, Self.text(Array(payload[record.data..<record.end]))))
            default:
                continue
            }
        }
        return DNSAnswers(
            question: question ?? "", mappings: Self.mappings(addresses: addresses, aliases: aliases))
    }

    /// Each address with its owner, then with every alias whose chain (at most ``maxChain`` links)
    /// reaches that owner.
    private static func mappings(
        addresses: [(owner: String, address: String)], aliases: [(alias: String, target: String)]
    ) -> [Mapping] {
        var seen = Set<Mapping>()
        var result: [Mapping] = []
        func add(_ mapping: Mapping) {
            if seen.insert(mapping).inserted { result.append(mapping) }
        }
        for (owner, address) in addresses {
            add(Mapping(name: owner, address: address))
            for (alias, _) in aliases where Self.chain(from: alias, aliases: aliases, reaches: owner) {
                add(Mapping(name: alias, address: address))
            }
        }
        return result
    }

    private static func chain(from alias: String, aliases: [(alias: String, target: String)], reaches owner: String)
        -> Bool
    {
        var name = alias
        for _ in 0..<Self.maxChain {
            guard let next = aliases.first(where: { $0.alias == name })?.target else { return false }
            if next == owner { return true }
            name = next
        }
        return false
    }

    /// Dotted IPv4, or IPv6 as `inet_ntop` writes it.
    static func text(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written = address.withUnsafeBytes { raw in
            inet_ntop(AF_INET6, raw.baseAddress, &buffer, socklen_t(buffer.count))
        }
        guard written != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Reads a DNS message from its start; every read checks its bounds.
    struct Reader {
        let bytes: [UInt8]
        var at = 0

        mutating func skip(_ count: Int) -> Bool {
            guard self.at + count <= self.bytes.count else { return false }
            self.at += count
            return true
        }

        func u16(_ offset: Int) -> Int? {
            guard offset >= 0, offset + 2 <= self.bytes.count else { return nil }
            return Int(self.bytes[offset]) << 8 | Int(self.bytes[offset + 1])
        }

        /// A name at ``at`` (lower case, no final dot), compression pointers followed; ``at`` moves
        /// past it as it appears in place. Nil when it runs off the end, loops or is too long.
        mutating func name() -> String? {
            var labels: [String] = []
            var offset = self.at
            var end: Int?
            var jumps = 0
            var length = 0
            while true {
                guard offset < self.bytes.count else { return nil }
                let byte = Int(self.bytes[offset])
                if byte & 0xc0 == 0xc0 {
                    guard let pointer = self.u16(offset), jumps < DNSAnswers.maxJumps else { return nil }
                    if end == nil { end = offset + 2 }
                    jumps += 1
                    offset = pointer & 0x3fff
                    continue
                }
                guard byte & 0xc0 == 0 else { return nil }
                if byte == 0 {
                    self.at = end ?? offset + 1
                    return labels.joined(separator: ".").lowercased()
                }
                length += byte + 1
                guard offset + 1 + byte <= self.bytes.count, length <= 255 else { return nil }
                labels.append(String(decoding: self.bytes[(offset + 1)..<(offset + 1 + byte)], as: UTF8.self))
                offset += 1 + byte
            }
        }

        /// A resource record: its owner, type, and where its data starts and ends.
        mutating func record() -> (owner: String, type: Int, data: Int, end: Int)? {
            guard let owner = self.name(), let type = self.u16(self.at), let length = self.u16(self.at + 8) else {
                return nil
            }
            let data = self.at + 10
            guard data + length <= self.bytes.count else { return nil }
            self.at = data + length
            return (owner, type, data, data + length)
        }
    }
}
