@testable import NetcondCore

/// Captures made in memory for the recorder's tests: IP packets of made-up TCP connections, their
/// link headers, and classic pcap and pcapng files holding them.
enum TestCapture {
    /// One packet: when (ns from the capture's start), and its IP bytes.
    struct Packet {
        var nanoseconds: Int64
        var bytes: [UInt8]
    }

    struct Host {
        var address: [UInt8]
        var port: UInt16
    }

    static let client = Host(address: [10, 0, 0, 2], port: 51_000)
    static let server = Host(address: [192, 0, 2, 7], port: 443)
    static let client6 = Host(address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [2], port: 51_000)
    static let server6 = Host(address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [7], port: 443)

    static let syn: UInt8 = 0x02
    static let ack: UInt8 = 0x10
    static let synAck: UInt8 = 0x12

    /// An IPv4 or IPv6 packet (by the address size) with a 20-byte TCP header and `payload` zero bytes.
    static func tcp(
        from: Host, to: Host, seq: UInt32, ack: UInt32 = 0, flags: UInt8, payload: Int = 0,
        extensionHeader: Bool = false
    ) -> [UInt8] {
        var tcp = self.be16(from.port) + self.be16(to.port) + self.be32(seq) + self.be32(ack)
        tcp += [0x50, flags] + self.be16(65_535) + [0, 0, 0, 0]
        tcp += [UInt8](repeating: 0, count: payload)
        if from.address.count == 4 {
            let total = 20 + tcp.count
            return [0x45, 0] + self.be16(UInt16(total)) + [0, 1, 0x40, 0, 64, 6, 0, 0] + from.address + to.address + tcp
        }
        // IPv6, optionally with an 8-byte hop-by-hop header before TCP.
        let hopByHop: [UInt8] = extensionHeader ? [6, 0, 1, 4, 0, 0, 0, 0] : []
        let next: UInt8 = extensionHeader ? 0 : 6
        return [0x60, 0, 0, 0] + self.be16(UInt16(hopByHop.count + tcp.count)) + [next, 64] + from.address + to.address
            + hopByHop + tcp
    }

    /// `ip` behind a link header of `linkType` (Ethernet with one VLAN tag when `vlan`).
    static func framed(_ ip: [UInt8], linkType: UInt32, vlan: Bool = false, littleEndianFamily: Bool = true) -> [UInt8]
    {
        let v6 = ip[0] >> 4 == 6
        let etherType: [UInt8] = v6 ? [0x86, 0xDD] : [0x08, 0x00]
        switch linkType {
        case 1:
            let macs = [UInt8](repeating: 0xAA, count: 6) + [UInt8](repeating: 0xBB, count: 6)
            return macs + (vlan ? [0x81, 0x00, 0x00, 0x05] : []) + etherType + ip
        case 113:
            return [0, 0, 0, 1, 0, 6] + [UInt8](repeating: 0xCC, count: 8) + etherType + ip
        case 276:
            return etherType + [0, 0] + [0, 0, 0, 2] + [0, 1, 0, 6] + [UInt8](repeating: 0xCC, count: 8) + ip
        case 0, 108:
            let family: UInt32 = v6 ? 10 : 2
            return (littleEndianFamily ? self.le32(family) : self.be32(family)) + ip
        default:
            return ip
        }
    }

    /// A download: handshake (SYN at `syn`, SYN-ACK at `synAck`, ACK at `ack`, in ns), then server
    /// data of `payload` bytes at each moment (ms) of `data`, from sequence `isn`.
    static func download(
        syn: Int64? = 0, synAck: Int64 = 20_000_000, ack: Int64 = 20_100_000, data: [(ms: Double, payload: Int)],
        serverISN: UInt32 = 1_000_000, client: Host = TestCapture.client, server: Host = TestCapture.server,
        skipping: Set<Int> = []
    ) -> [Packet] {
        var packets: [Packet] = []
        let clientISN: UInt32 = 5_000
        if let syn {
            packets.append(
                Packet(nanoseconds: syn, bytes: self.tcp(from: client, to: server, seq: clientISN, flags: self.syn)))
            packets.append(
                Packet(
                    nanoseconds: synAck,
                    bytes: self.tcp(from: server, to: client, seq: serverISN, ack: clientISN + 1, flags: self.synAck)))
            packets.append(
                Packet(
                    nanoseconds: ack,
                    bytes: self.tcp(from: client, to: server, seq: clientISN + 1, ack: serverISN &+ 1, flags: self.ack))
            )
        }
        var seq = serverISN &+ 1
        for (index, segment) in data.enumerated() {
            defer { seq = seq &+ UInt32(segment.payload) }
            if skipping.contains(index) { continue }
            let bytes = self.tcp(
                from: server, to: client, seq: seq, ack: clientISN + 1, flags: self.ack, payload: segment.payload)
            packets.append(Packet(nanoseconds: Int64((segment.ms * 1_000_000).rounded()), bytes: bytes))
        }
        return packets.sorted { $0.nanoseconds < $1.nanoseconds }
    }

    // MARK: Files

    /// A classic pcap file (µs or ns timestamps, either byte order), every packet behind `linkType`'s header.
    static func classic(
        _ packets: [Packet], linkType: UInt32 = 101, nanoseconds: Bool = false, bigEndian: Bool = false,
        snap: Int? = nil
    ) -> [UInt8] {
        let u32 = bigEndian ? self.be32 : self.le32
        let u16 = bigEndian ? self.be16 : self.le16
        var file =
            u32(nanoseconds ? 0xa1b2_3c4d : 0xa1b2_c3d4) + u16(2) + u16(4) + u32(0) + u32(0) + u32(262_144)
            + u32(linkType)
        let epoch: Int64 = 1_700_000_000
        for packet in packets {
            let framed = self.framed(packet.bytes, linkType: linkType)
            let kept = snap.map { Array(framed.prefix($0)) } ?? framed
            let fraction = nanoseconds ? packet.nanoseconds % 1_000_000_000 : packet.nanoseconds % 1_000_000_000 / 1_000
            file += u32(UInt32(epoch + packet.nanoseconds / 1_000_000_000)) + u32(UInt32(fraction))
            file += u32(UInt32(kept.count)) + u32(UInt32(framed.count))
            file += kept
        }
        return file
    }

    /// A pcapng file: a section header, one interface (`resolution`: its if_tsresol option byte,
    /// none for microseconds), then an Enhanced Packet Block per packet.
    static func pcapng(_ packets: [Packet], linkType: UInt16 = 101, resolution: UInt8? = nil, bigEndian: Bool = false)
        -> [UInt8]
    {
        let u32 = bigEndian ? self.be32 : self.le32
        let u16 = bigEndian ? self.be16 : self.le16
        func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
            let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
            let length = UInt32(padded.count + 12)
            return u32(type) + u32(length) + padded + u32(length)
        }
        var file = block(0x0A0D_0D0A, u32(0x1A2B_3C4D) + u16(1) + u16(0) + [UInt8](repeating: 0xFF, count: 8))
        var options: [UInt8] = []
        if let resolution { options = u16(9) + u16(1) + [resolution, 0, 0, 0] + u16(0) + u16(0) }
        file += block(1, u16(linkType) + u16(0) + u32(262_144) + options)
        // A block the reader does not know, which it skips.
        file += block(5, [1, 2, 3, 4])
        for packet in packets {
            let framed = self.framed(packet.bytes, linkType: UInt32(linkType))
            let ticks: UInt64
            switch resolution {
            case nil: ticks = UInt64(packet.nanoseconds / 1_000)
            case 9: ticks = UInt64(packet.nanoseconds)
            case 0x80 | 20: ticks = UInt64(packet.nanoseconds) * (1 << 20) / 1_000_000_000
            default: preconditionFailure("a resolution the tests do not write")
            }
            let stamped = ticks + (resolution == 9 ? 1_700_000_000_000_000_000 : 0)
            file += block(
                6,
                u32(0) + u32(UInt32(stamped >> 32)) + u32(UInt32(stamped & 0xFFFF_FFFF)) + u32(UInt32(framed.count))
                    + u32(UInt32(framed.count)) + framed)
        }
        return file
    }

    static func be16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    static func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
    static func be32(_ value: UInt32) -> [UInt8] { self.be16(UInt16(value >> 16)) + self.be16(UInt16(value & 0xFFFF)) }
    static func le32(_ value: UInt32) -> [UInt8] { self.le16(UInt16(value & 0xFFFF)) + self.le16(UInt16(value >> 16)) }

    /// Records `bytes` as a capture named t.pcap.
    static func record(_ bytes: [UInt8], _ options: TraceRecorder.Options = .init()) throws -> TraceRecording {
        try TraceRecorder.record(options: options) { () throws(PacketCaptureFile.ReadError) in
            try PacketCaptureFile(bytes: bytes, source: "t.pcap")
        }
    }

    /// The error recording `bytes` ends with, as a user reads it.
    static func recordError(_ bytes: [UInt8], _ options: TraceRecorder.Options = .init()) -> String? {
        do {
            _ = try self.record(bytes, options)
            return nil
        } catch let error as TraceRecordError {
            return error.description
        } catch {
            return "\(error)"
        }
    }

    /// Opportunity times of a recording.
    static func times(_ recording: TraceRecording) -> [Int64] {
        recording.trace.millisecondsText.split(separator: " ").map { Int64($0)! }
    }
}
