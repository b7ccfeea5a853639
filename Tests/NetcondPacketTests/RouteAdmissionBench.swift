import Foundation
import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// What routes cost the packet engine per packet: the same packets through the driver (admitted,
/// then taken off the network as the engine does) with no routes and with 1,000 CIDR routes, every
/// connection on one of them. A measurement, not a test: it runs only with `NETCOND_BENCH_ROUTES`
/// set, prints its numbers and asserts nothing about time.
///
///     NETCOND_BENCH_ROUTES=1 swift test --filter RouteAdmissionBench
///     (optimized: add -c release -Xswiftc -enable-testing)
@Suite struct RouteAdmissionBench {
    static let connections = 1000
    /// Packets of each connection (`NETCOND_BENCH_ROUTES` set to a number: that many).
    static let packetsPerConnection = Int(ProcessInfo.processInfo.environment["NETCOND_BENCH_ROUTES"] ?? "") ?? 20

    /// No routes; 1,000 routes none of the connections takes (the look-up alone); 1,000 routes,
    /// each connection on one (the look-up and a second path for every packet).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["NETCOND_BENCH_ROUTES"] != nil))
    func timePerAdmittedPacket() throws {
        for (routes, first) in [(0, 10), (1000, 200), (1000, 10)] {
            var yaml = "name: bench\nlink: {latency: 10ms}\n"
            if routes > 0 {
                yaml += "routes:\n"
                for index in 0..<routes {
                    yaml +=
                        "  - {match: {address: \(first).\(index / 256).\(index % 256).0/24}, link: {latency: 5ms}}\n"
                }
            }
            let profile = try ProfileDecoder().decode(yaml: yaml, file: "Profiles/bench.yaml")
            let (admitted, elapsed) = Self.run(profile)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let perPacket = seconds * 1e9 / Double(admitted)
            let taken = routes == 0 ? "" : first == 10 ? ", every connection on one" : ", none taken"
            print(
                "RouteAdmissionBench: \(routes) routes\(taken): \(admitted) packets admitted, "
                    + String(format: "%.0f ns per packet", perPacket))
            #expect(admitted == Self.connections * Self.packetsPerConnection)
        }
    }

    /// Every connection's SYN, then its packets, round robin, 2 µs apart; deliveries taken as they
    /// fall due. Returns the packets admitted and the time it took.
    static func run(_ profile: Profile) -> (Int, Duration) {
        var driver = PacketLinkDriver(profile: profile, seed: 1)
        var packets: [[UInt8]] = []
        for index in 0..<Self.connections {
            let far: [UInt8] = [10, UInt8(index / 256), UInt8(index % 256), 5]
            let cagePort = UInt16(20_000 + index)
            packets.append(PacketRouteTests.packet(up: true, far: far, cagePort: cagePort, flags: TCPHeader.syn))
        }
        var admitted = 0
        var moment: Int64 = 0
        let clock = ContinuousClock()
        let start = clock.now
        for round in 0..<Self.packetsPerConnection {
            for var bytes in packets {
                if round > 0 { bytes[33] = TCPHeader.ackFlag }
                moment += 2_000
                let now = Instant(nanoseconds: moment)
                while driver.popEvent(upTo: now) != nil {}
                let taken = bytes.withUnsafeBufferPointer { buffer in
                    let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: buffer.count)
                    return driver.admit(
                        HeldPacket(queue: 0, id: UInt32(admitted), mark: 0, tcp: tcp, length: UInt32(buffer.count)),
                        up: true, wireLength: buffer.count, segments: 1, payload: buffer.baseAddress!,
                        copied: buffer.count, bytes: nil, at: now)
                }
                if taken { admitted += 1 }
            }
        }
        return (admitted, clock.now - start)
    }
}
