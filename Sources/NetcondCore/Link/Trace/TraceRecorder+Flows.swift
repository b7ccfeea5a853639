import Foundation

/// Which connection `netcond trace record --flow` records: its number as `--list-flows` lists
/// it, or its two endpoints in either order (`192.0.2.1:443-10.0.0.2:51234`, IPv6 in brackets:
/// `[2001:db8::1]:443-[2001:db8::2]:51234`).
public enum FlowChoice: Sendable, Equatable, CustomStringConvertible {
    case number(Int)
    case endpoints(CapturedSegment.Endpoint, CapturedSegment.Endpoint)

    /// What `--flow` accepts, for errors.
    public static let allowed =
        "a number as --list-flows lists them (1 for the first), or two endpoints joined by '-' in either order, "
        + "e.g. 192.0.2.1:443-10.0.0.2:51234 or [2001:db8::1]:443-[2001:db8::2]:51234"

    /// Reads `--flow`'s value; nil when it is neither form.
    public static func parse(_ text: String) -> FlowChoice? {
        let text = text.trimmingCharacters(in: .whitespaces)
        if let number = Int(text) { return number >= 1 ? .number(number) : nil }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let a = Self.endpoint(parts[0]), let b = Self.endpoint(parts[1]) else { return nil }
        return .endpoints(a, b)
    }

    /// `10.0.0.2:51234` or `[2001:db8::2]:51234`.
    static func endpoint(_ text: Substring) -> CapturedSegment.Endpoint? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        let host = text[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2 {
            return Self.ipv6(host.dropFirst().dropLast()).map { CapturedSegment.Endpoint(address: $0, port: port) }
        }
        return Self.ipv4(host).map { CapturedSegment.Endpoint(address: $0, port: port) }
    }

    static func ipv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy(\.isASCII), let byte = UInt8(part) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// Eight groups of hex, `::` standing for the zero groups it leaves out (no embedded IPv4).
    static func ipv6(_ text: Substring) -> [UInt8]? {
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ half: String) -> [UInt16]? {
            if half.isEmpty { return [] }
            var values: [UInt16] = []
            for group in half.split(separator: ":", omittingEmptySubsequences: false) {
                guard (1...4).contains(group.count), let value = UInt16(group, radix: 16) else { return nil }
                values.append(value)
            }
            return values
        }
        guard let head = groups(halves[0]) else { return nil }
        var all = head
        if halves.count == 2 {
            guard let tail = groups(halves[1]), head.count + tail.count <= 7 else { return nil }
            all += [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        }
        guard all.count == 8 else { return nil }
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    /// The index of the flow chosen among `keys` (in the order listed).
    func match(_ keys: [TraceRecorder.FlowKey]) -> Int? {
        switch self {
        case .number(let number):
            return number >= 1 && number <= keys.count ? number - 1 : nil
        case .endpoints(let one, let other):
            let key = one < other ? TraceRecorder.FlowKey(a: one, b: other) : TraceRecorder.FlowKey(a: other, b: one)
            return keys.firstIndex(of: key)
        }
    }

    public var description: String {
        switch self {
        case .number(let number): return "\(number)"
        case .endpoints(let a, let b): return "\(a)-\(b)"
        }
    }
}

/// One connection of a capture as `netcond trace record --list-flows` shows it.
public struct FlowListing: Sendable, Equatable {
    public var number: Int
    public var client: CapturedSegment.Endpoint
    public var server: CapturedSegment.Endpoint
    /// True when a SYN told the client.
    public var clientBySYN: Bool
    /// Packets and payload bytes toward the client (down) and toward the server (up).
    public var packetsDown: Int
    public var packetsUp: Int
    public var bytesDown: Int64
    public var bytesUp: Int64
    /// From its first packet to its last.
    public var duration: Span

    init(_ flow: TraceRecorder.FlowSummary, number: Int) {
        let sides = flow.sides
        let fromClient = sides.clientIsA ? flow.fromA : flow.fromB
        let fromServer = sides.clientIsA ? flow.fromB : flow.fromA
        self.number = number
        self.client = flow.client
        self.server = flow.server
        self.clientBySYN = sides.bySYN
        self.packetsDown = fromServer.packets
        self.packetsUp = fromClient.packets
        self.bytesDown = fromServer.payload
        self.bytesUp = fromClient.payload
        self.duration = Span(nanoseconds: flow.lastTime - flow.firstTime)
    }

    /// `  3  10.0.0.2:51234 -> 192.0.2.1:443  down 4000077 packets 5.79 GB, up 500003 packets 0 B, 694.130 s`.
    public var line: String {
        "\(self.number)  \(self.client) -> \(self.server)\(self.clientBySYN ? "" : " (no SYN: client guessed)")  "
            + "down \(self.packetsDown) packet\(self.packetsDown == 1 ? "" : "s") \(TraceRecording.bytes(self.bytesDown)), "
            + "up \(self.packetsUp) packet\(self.packetsUp == 1 ? "" : "s") \(TraceRecording.bytes(self.bytesUp)), "
            + "\(TraceRecording.seconds(self.duration)) s"
    }

    /// The lines of `flows`, the `limit` with the most bytes down when there are more (in their order).
    public static func table(_ flows: [FlowListing], limit: Int = .max) -> String {
        let shown =
            flows.count <= limit
            ? flows
            : flows.sorted { $0.bytesDown.addingSaturating($0.bytesUp) > $1.bytesDown.addingSaturating($1.bytesUp) }
                .prefix(limit).sorted { $0.number < $1.number }
        var lines = shown.map { "  " + $0.line }
        if shown.count < flows.count {
            lines.append(
                "  (\(flows.count - shown.count) more, with less data: netcond trace record --list-flows CAPTURE lists all)"
            )
        }
        return lines.joined(separator: "\n")
    }
}
