import Foundation

/// A packet capture read one record at a time, in pure Swift: classic pcap (microsecond and
/// nanosecond timestamps) and pcapng, in either byte order, as tcpdump, tshark and netcond's own
/// `--pcap` write them.
///
/// ```
///  classic:  [global header 24 B][rec hdr 16 B][packet …][rec hdr][packet …] …
///  pcapng:   [SHB][IDB (link type, if_tsresol)][EPB (interface, ts, caplen, len, packet)] …
///                                                  └─ only the first ``headerBytes`` of each packet are kept
/// ```
/// Memory stays bounded whatever the file's size: the file is read through a fixed buffer, and of
/// each packet only its first ``headerBytes`` bytes (the headers the recorder reads) are kept; the
/// rest is skipped.
public struct PacketCaptureFile {
    /// Bytes kept from the start of each packet: room for a link header, IPv6 with extension
    /// headers and TCP with options.
    public static let headerBytes = 512
    /// The largest record accepted (a packet of 16 MB is a corrupt length, not a packet).
    public static let maximumRecordBytes = 16 << 20

    /// One captured packet: its moment, its link type, the first bytes of it, and its length on the wire.
    public struct Record: Sendable, Equatable {
        /// 1 for the first packet of the file.
        public var number: Int
        /// Where its record starts in the file.
        public var offset: Int64
        /// Nanoseconds since the Unix epoch, as the capture stamped it.
        public var timestamp: Int64
        public var linkType: UInt32
        /// Its first bytes (up to ``headerBytes`` of what was captured).
        public var bytes: [UInt8]
        /// Its length on the wire (at least what was captured).
        public var originalLength: Int
    }

    /// Why a capture cannot be read, and where.
    public struct ReadError: Error, Sendable, Equatable, CustomStringConvertible {
        public var source: String
        public var message: String

        public init(source: String, message: String) {
            self.source = source
            self.message = message
        }

        public var description: String { "\(self.source): \(self.message)" }
    }

    enum Format {
        case classic(nanoseconds: Bool, linkType: UInt32)
        case pcapng
    }

    /// A pcapng interface: its link type and how long one tick of its timestamps is.
    struct Interface {
        var linkType: UInt32
        /// Timestamp ticks per second as 10^n (`decimal`) or 2^n.
        var resolution: UInt8
        var decimal: Bool
    }

    public let source: String
    private let reader: ByteReader
    private var bigEndian: Bool
    private var format: Format
    private var interfaces: [Interface] = []
    private var count = 0

    /// Opens the file at `path`; `source` names it in errors.
    public init(path: String, source: String) throws(ReadError) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ReadError(source: source, message: "cannot open the file for reading")
        }
        try self.init(reader: ByteReader(handle: handle), source: source)
    }

    /// Reads a capture held in memory (tests, small files).
    public init(bytes: [UInt8], source: String) throws(ReadError) {
        try self.init(reader: ByteReader(bytes: bytes), source: source)
    }

    private init(reader: ByteReader, source: String) throws(ReadError) {
        self.reader = reader
        self.source = source
        guard let magic = try reader.read(4, source: source) else {
            let size = reader.offset
            throw ReadError(
                source: source, message: Self.notACapture(size == 0 ? "the file is empty" : "the file is \(size) bytes")
            )
        }
        let little = UInt32(magic[0]) | UInt32(magic[1]) << 8 | UInt32(magic[2]) << 16 | UInt32(magic[3]) << 24
        let big = little.byteSwapped
        switch (little, big) {
        case (0xa1b2_c3d4, _), (0xa1b2_3c4d, _), (_, 0xa1b2_c3d4), (_, 0xa1b2_3c4d):
            self.bigEndian = big == 0xa1b2_c3d4 || big == 0xa1b2_3c4d
            let nanoseconds = little == 0xa1b2_3c4d || big == 0xa1b2_3c4d
            guard let header = try reader.read(20, source: source) else {
                throw ReadError(source: source, message: "the pcap file header is truncated (\(reader.offset) bytes)")
            }
            let network = Self.uint32(header, 16, big: self.bigEndian) & 0x0FFF_FFFF
            self.format = .classic(nanoseconds: nanoseconds, linkType: network)
        case (0x0A0D_0D0A, _):
            self.bigEndian = false
            self.format = .pcapng
            try self.readSectionHeader(at: 0, afterType: magic)
        default:
            throw ReadError(source: source, message: Self.notACapture(nil, first: magic))
        }
    }

    private static func notACapture(_ reason: String?, first: [UInt8] = []) -> String {
        if let reason { return "not a pcap or pcapng file (\(reason))" }
        let shown = first.map { String(format: "%02x", $0) }.joined(separator: " ")
        return "not a pcap or pcapng file (first bytes \(shown); allowed: classic pcap, magic a1b2c3d4 or a1b23c4d, "
            + "or pcapng, 0a0d0d0a, as tcpdump -w and tshark write)"
    }

    /// The next packet, or nil at the end of the file.
    public mutating func next() throws(ReadError) -> Record? {
        switch self.format {
        case .classic(let nanoseconds, let linkType):
            return try self.nextClassic(nanoseconds: nanoseconds, linkType: linkType)
        case .pcapng:
            return try self.nextBlock()
        }
    }

    // MARK: - Classic pcap

    private mutating func nextClassic(nanoseconds: Bool, linkType: UInt32) throws(ReadError) -> Record? {
        let offset = self.reader.offset
        guard let header = try self.reader.read(16, source: self.source) else {
            if self.reader.offset == offset { return nil }
            throw self.truncated(self.count + 1, at: offset)
        }
        self.count += 1
        let seconds = Int64(Self.uint32(header, 0, big: self.bigEndian))
        let fraction = Int64(Self.uint32(header, 4, big: self.bigEndian))
        let captured = Int(Self.uint32(header, 8, big: self.bigEndian))
        let original = Int(Self.uint32(header, 12, big: self.bigEndian))
        guard captured <= Self.maximumRecordBytes else {
            throw ReadError(
                source: self.source,
                message: "packet \(self.count) at byte \(offset) claims \(captured) captured bytes; "
                    + "allowed: up to \(Self.maximumRecordBytes) (is the file damaged?)")
        }
        let bytes = try self.packetBytes(captured, number: self.count, at: offset)
        let timestamp = seconds * 1_000_000_000 + (nanoseconds ? fraction : fraction * 1_000)
        return Record(
            number: self.count, offset: offset, timestamp: timestamp, linkType: linkType, bytes: bytes,
            originalLength: max(original, captured))
    }

    /// The first ``headerBytes`` of a packet of `captured` bytes, skipping the rest.
    private func packetBytes(_ captured: Int, number: Int, at offset: Int64) throws(ReadError) -> [UInt8] {
        let kept = min(captured, Self.headerBytes)
        guard let bytes = try self.reader.read(kept, source: self.source),
            try self.reader.skip(captured - kept, source: self.source)
        else {
            throw self.truncated(number, at: offset)
        }
        return bytes
    }

    private func truncated(_ number: Int, at offset: Int64) -> ReadError {
        ReadError(
            source: self.source,
            message:
                "packet \(number) at byte \(offset) is truncated (the file ends inside it; if the capture was stopped "
                + "while writing, `head -c \(offset) \(self.source) > whole.pcap` keeps the packets before it)")
    }

    // MARK: - pcapng

    private static let sectionHeader: UInt32 = 0x0A0D_0D0A
    private static let interfaceDescription: UInt32 = 1
    private static let obsoletePacket: UInt32 = 2
    private static let enhancedPacket: UInt32 = 6

    private mutating func nextBlock() throws(ReadError) -> Record? {
        while true {
            let offset = self.reader.offset
            guard let type = try self.reader.read(4, source: self.source) else {
                if self.reader.offset == offset { return nil }
                throw self.truncatedBlock(at: offset)
            }
            if Self.uint32(type, 0, big: false) == Self.sectionHeader {
                try self.readSectionHeader(at: offset, afterType: type)
                continue
            }
            guard let lengthBytes = try self.reader.read(4, source: self.source) else {
                throw self.truncatedBlock(at: offset)
            }
            let blockType = Self.uint32(type, 0, big: self.bigEndian)
            let length = Int(Self.uint32(lengthBytes, 0, big: self.bigEndian))
            guard length >= 12, length % 4 == 0, length <= Self.maximumRecordBytes + 64 else {
                throw ReadError(
                    source: self.source,
                    message: "block at byte \(offset) has length \(length); allowed: a multiple of 4 from 12 "
                        + "to \(Self.maximumRecordBytes + 64) (is the file damaged?)")
            }
            let body = length - 12
            switch blockType {
            case Self.interfaceDescription:
                guard let bytes = try self.reader.read(body + 4, source: self.source), bytes.count >= 8 else {
                    throw self.truncatedBlock(at: offset)
                }
                self.interfaces.append(self.interface(bytes))
            case Self.enhancedPacket, Self.obsoletePacket:
                self.count += 1
                return try self.packetBlock(blockType, body: body, at: offset)
            default:
                guard try self.reader.skip(body + 4, source: self.source) else { throw self.truncatedBlock(at: offset) }
            }
        }
    }

    private func truncatedBlock(at offset: Int64) -> ReadError {
        ReadError(source: self.source, message: "the block at byte \(offset) is truncated (the file ends inside it)")
    }

    /// A Section Header Block (its type already read): sets the byte order; a new section has its own interfaces.
    private mutating func readSectionHeader(at offset: Int64, afterType: [UInt8]) throws(ReadError) {
        guard let head = try self.reader.read(8, source: self.source) else {
            throw ReadError(source: self.source, message: "the pcapng section header at byte \(offset) is truncated")
        }
        let order = Self.uint32(head, 4, big: false)
        switch order {
        case 0x1A2B_3C4D: self.bigEndian = false
        case 0x4D3C_2B1A: self.bigEndian = true
        default:
            throw ReadError(
                source: self.source,
                message: "the pcapng section header at byte \(offset) has no byte-order magic (is the file damaged?)")
        }
        let length = Int(Self.uint32(head, 0, big: self.bigEndian))
        guard length >= 28, length % 4 == 0, length <= 1 << 20 else {
            throw ReadError(
                source: self.source, message: "the pcapng section header at byte \(offset) has length \(length)")
        }
        guard try self.reader.skip(length - 12, source: self.source) else {
            throw ReadError(source: self.source, message: "the pcapng section header at byte \(offset) is truncated")
        }
        self.interfaces = []
    }

    /// An Interface Description Block's body: link type, and `if_tsresol` (option 9) when given.
    private func interface(_ body: [UInt8]) -> Interface {
        var interface = Interface(
            linkType: UInt32(Self.uint16(body, 0, big: self.bigEndian)), resolution: 6, decimal: true)
        var at = 8
        while at + 4 <= body.count - 4 {
            let code = Self.uint16(body, at, big: self.bigEndian)
            let length = Int(Self.uint16(body, at + 2, big: self.bigEndian))
            if code == 0 { break }
            if code == 9, length >= 1, at + 4 < body.count {
                let value = body[at + 4]
                interface.decimal = value & 0x80 == 0
                interface.resolution = value & 0x7F
            }
            at += 4 + (length + 3) / 4 * 4
        }
        return interface
    }

    /// An Enhanced Packet Block (or the obsolete Packet Block) of `body` bytes after its type and length.
    private func packetBlock(_ type: UInt32, body: Int, at offset: Int64) throws(ReadError) -> Record {
        guard body >= 20, let head = try self.reader.read(20, source: self.source) else {
            throw self.truncated(self.count, at: offset)
        }
        let interfaceID =
            type == Self.enhancedPacket
            ? Int(Self.uint32(head, 0, big: self.bigEndian)) : Int(Self.uint16(head, 0, big: self.bigEndian))
        let ticks =
            UInt64(Self.uint32(head, 4, big: self.bigEndian)) << 32 | UInt64(Self.uint32(head, 8, big: self.bigEndian))
        let captured = Int(Self.uint32(head, 12, big: self.bigEndian))
        let original = Int(Self.uint32(head, 16, big: self.bigEndian))
        guard interfaceID < self.interfaces.count else {
            throw ReadError(
                source: self.source,
                message: "packet \(self.count) at byte \(offset) names interface \(interfaceID), "
                    + "but the section describes \(self.interfaces.count)")
        }
        guard captured <= body - 20 else {
            throw ReadError(
                source: self.source,
                message:
                    "packet \(self.count) at byte \(offset) claims \(captured) captured bytes in a block of \(body + 12)"
            )
        }
        let bytes = try self.packetBytes(captured, number: self.count, at: offset)
        guard try self.reader.skip(body - 20 - captured + 4, source: self.source) else {
            throw self.truncated(self.count, at: offset)
        }
        let interface = self.interfaces[interfaceID]
        return Record(
            number: self.count, offset: offset, timestamp: Self.nanoseconds(ticks, interface),
            linkType: interface.linkType,
            bytes: bytes, originalLength: max(original, captured))
    }

    /// Ticks of an interface's clock as nanoseconds.
    static func nanoseconds(_ ticks: UInt64, _ interface: Interface) -> Int64 {
        let n = Int(interface.resolution)
        if interface.decimal {
            if n <= 9 {
                var scale: UInt64 = 1
                for _ in 0..<(9 - n) { scale *= 10 }
                return Int64(truncatingIfNeeded: ticks &* scale)
            }
            var scale: UInt64 = 1
            for _ in 0..<min(n - 9, 19) { scale *= 10 }
            return Int64(truncatingIfNeeded: ticks / scale)
        }
        guard n < 64 else { return 0 }
        let whole = ticks >> UInt64(n)
        let fraction = Double(ticks & ((1 << UInt64(n)) - 1)) / Double(sign: .plus, exponent: n, significand: 1)
        return Int64(truncatingIfNeeded: whole &* 1_000_000_000) &+ Int64((fraction * 1e9).rounded(.down))
    }

    // MARK: - Bytes

    static func uint16(_ bytes: [UInt8], _ at: Int, big: Bool) -> UInt16 {
        let value = UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
        return big ? value.byteSwapped : value
    }

    static func uint32(_ bytes: [UInt8], _ at: Int, big: Bool) -> UInt32 {
        let value =
            UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        return big ? value.byteSwapped : value
    }
}

/// A file (or bytes in memory) read forward through a fixed buffer.
final class ByteReader {
    private static let chunk = 1 << 20
    private let handle: FileHandle?
    private var buffer: [UInt8]
    private var position = 0
    /// The file offset of `buffer[0]`.
    private var base: Int64 = 0
    private var ended: Bool

    init(handle: FileHandle) {
        self.handle = handle
        self.buffer = []
        self.ended = false
    }

    init(bytes: [UInt8]) {
        self.handle = nil
        self.buffer = bytes
        self.ended = true
    }

    deinit { try? self.handle?.close() }

    /// Where the next byte comes from.
    var offset: Int64 { self.base + Int64(self.position) }

    /// The next `count` bytes, or nil when the file ends first (what was there is consumed).
    func read(_ count: Int, source: String) throws(PacketCaptureFile.ReadError) -> [UInt8]? {
        try self.fill(count, source: source)
        let available = min(count, self.buffer.count - self.position)
        let bytes = Array(self.buffer[self.position..<(self.position + available)])
        self.position += available
        return available == count ? bytes : nil
    }

    /// Skips `count` bytes; false when the file ends first.
    func skip(_ count: Int, source: String) throws(PacketCaptureFile.ReadError) -> Bool {
        var left = count
        while left > 0 {
            try self.fill(min(left, Self.chunk), source: source)
            let step = min(left, self.buffer.count - self.position)
            if step == 0 { return false }
            self.position += step
            left -= step
        }
        return true
    }

    /// Makes `count` bytes available in the buffer, unless the file ends first.
    private func fill(_ count: Int, source: String) throws(PacketCaptureFile.ReadError) {
        guard self.buffer.count - self.position < count, !self.ended, let handle = self.handle else { return }
        self.base += Int64(self.position)
        self.buffer.removeFirst(self.position)
        self.position = 0
        while self.buffer.count < count && !self.ended {
            let data: Data?
            do {
                data = try handle.read(upToCount: max(Self.chunk, count - self.buffer.count))
            } catch {
                throw PacketCaptureFile.ReadError(
                    source: source, message: "cannot read the file: \(error.localizedDescription)")
            }
            guard let data, !data.isEmpty else {
                self.ended = true
                break
            }
            self.buffer.append(contentsOf: data)
        }
    }
}
