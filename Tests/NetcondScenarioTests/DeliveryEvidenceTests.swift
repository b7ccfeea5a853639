import Testing

@testable import NetcondCore
@testable import NetcondOrigin
@testable import NetcondScenario

/// Tying the proxy's count of delivered bytes to the origin's responses: what the client never got.
@Suite struct DeliveryEvidenceTests {
    typealias Entry = OriginRequestLog.Entry
    typealias Connection = OriginRequestLog.Connection

    func entry(_ id: Int, connection: Int, body: Int64, completed: Bool = true) -> Entry {
        Entry(
            id: id, connection: connection, timestamp: .ms(Int64(id) * 100), method: "GET", target: "/files/big.bin",
            headers: .init(), status: 200, retryAfter: nil, bodyBytesSent: body, completed: completed,
            isFinished: true, finishedAt: nil, effect: nil)
    }

    func connection(_ id: Int, port: Int, written: Int64, tls: Bool = false, at: Instant = .zero) -> Connection {
        Connection(id: id, peerPort: port, tls: tls, openedAt: at, bytesWritten: written)
    }

    @Test func theLastResponseOnACutConnectionLosesWhatNeverArrived() {
        // Two responses on one connection, each after a 200-byte head: 1,000 body bytes, then 1,000,000.
        let entries = [self.entry(0, connection: 0, body: 1000), self.entry(1, connection: 0, body: 1_000_000)]
        let connections = [self.connection(0, port: 40_000, written: 200 + 1000 + 200 + 1_000_000)]
        let lost = DeliveryEvidence.undelivered(
            entries: entries, connections: connections,
            deliveries: [.init(at: .s(1), localPort: 40_000, bytes: 200 + 1000 + 200 + 600_000, cut: .reset)])
        #expect(lost == [1: .init(bytes: 400_000, uncertainty: 0, cut: .reset)])
    }

    @Test func requestsThatReachedTheOriginAfterTheirClientsFINAreNamed() {
        // Entries at +0.1, +0.2, +0.3 s on one connection; the client's FIN reached netcond at +0.15 s.
        let entries = (1...3).map { self.entry($0, connection: 0, body: 10) }
        let connections = [self.connection(0, port: 40_000, written: 630)]
        let late = DeliveryEvidence.afterClientFIN(
            entries: entries, connections: connections,
            deliveries: [.init(at: .zero, localPort: 40_000, bytes: 630, clientFIN: .ms(150))])
        #expect(late == [2: .milliseconds(50), 3: .milliseconds(150)])
        // A client that never sent a FIN before the connection ended: nothing is late.
        #expect(
            DeliveryEvidence.afterClientFIN(
                entries: entries, connections: connections,
                deliveries: [.init(at: .zero, localPort: 40_000, bytes: 630)]
            ).isEmpty)
    }

    @Test func eachWholeResponseIsReceivedWhenItsLastByteReachedTheClient() {
        // Two responses on one connection, ending at bytes 1,200 and 3,400 of its stream; the
        // third was cut (no end known). The client got 1,000 bytes by +1 s, 1,300 by +2 s, 3,400 by +3 s.
        var first = self.entry(0, connection: 0, body: 1000)
        first.connectionBytesAtEnd = 1200
        var second = self.entry(1, connection: 0, body: 2000)
        second.connectionBytesAtEnd = 3400
        let cut = self.entry(2, connection: 0, body: 500, completed: false)
        var delivery = DeliveryEvidence.Delivery(at: .zero, localPort: 40_000, bytes: 3400)
        delivery.samples = [(1, 1000), (2, 1300), (3, 3400)].map { .init(at: .s(Int64($0.0)), bytes: $0.1) }
        let connections = [self.connection(0, port: 40_000, written: 3900)]
        let received = DeliveryEvidence.received(
            entries: [first, second, cut], connections: connections, deliveries: [delivery])
        #expect(received == [0: .s(2), 1: .s(3)])
        // Samples that stop short of a response's end: it never arrived whole, so no moment.
        delivery.samples.removeLast()
        #expect(
            DeliveryEvidence.received(entries: [first, second], connections: connections, deliveries: [delivery]) == [
                0: .s(2)
            ])
    }

    @Test func everythingDeliveredMeansNothingLost() {
        let entries = [self.entry(0, connection: 0, body: 1000)]
        let connections = [self.connection(0, port: 40_000, written: 1200)]
        #expect(
            DeliveryEvidence.undelivered(
                entries: entries, connections: connections,
                deliveries: [.init(at: .s(1), localPort: 40_000, bytes: 1200)]
            ).isEmpty)
        // A cut that came when the origin had written everything it would: the response is still the link's to answer for.
        let unfinished = [self.entry(0, connection: 0, body: 1000, completed: false)]
        #expect(
            DeliveryEvidence.undelivered(
                entries: unfinished, connections: connections,
                deliveries: [.init(at: .s(1), localPort: 40_000, bytes: 1200, cut: .close)])
                == [0: .init(bytes: 0, uncertainty: 0, cut: .close)])
    }

    @Test func aLossLargerThanTheBodyTakesTheWholeBody() {
        let entries = [self.entry(0, connection: 0, body: 1000)]
        let connections = [self.connection(0, port: 40_000, written: 1200)]
        let lost = DeliveryEvidence.undelivered(
            entries: entries, connections: connections, deliveries: [.init(at: .s(1), localPort: 40_000, bytes: 100)])
        #expect(lost[0]?.bytes == 1000)
    }

    @Test func aReusedPortMeansTheLatestConnectionOpenedBeforeTheDelivery() {
        let entries = [
            self.entry(0, connection: 0, body: 5000), self.entry(1, connection: 1, body: 5000),
            self.entry(2, connection: 2, body: 5000),
        ]
        let connections = [
            self.connection(0, port: 40_000, written: 5200, at: .zero),
            self.connection(1, port: 40_000, written: 5200, at: .s(2)),
            self.connection(2, port: 40_000, written: 5200, at: .s(9)),
        ]
        let lost = DeliveryEvidence.undelivered(
            entries: entries, connections: connections, deliveries: [.init(at: .s(3), localPort: 40_000, bytes: 3200)])
        #expect(lost == [1: .init(bytes: 2000, uncertainty: 0, cut: nil)])
    }

    @Test func behindTLSTheLossCarriesAnUncertainty() {
        let entries = [self.entry(0, connection: 0, body: 1_000_000)]
        let connections = [self.connection(0, port: 40_000, written: 1_030_000, tls: true)]
        let lost = DeliveryEvidence.undelivered(
            entries: entries, connections: connections,
            deliveries: [.init(at: .s(1), localPort: 40_000, bytes: 630_000)])
        #expect(lost == [0: .init(bytes: 400_000, uncertainty: 64 + 400_000 / 512, cut: nil)])
    }

    @Test func aCloseNotifyBehindTLSIsNoLoss() {
        // The origin's TLS wrote its 24-byte close_notify as the connection went: nothing was cut.
        let entries = [self.entry(0, connection: 0, body: 1_000_000)]
        let connections = [self.connection(0, port: 40_000, written: 1_030_024, tls: true)]
        #expect(
            DeliveryEvidence.undelivered(
                entries: entries, connections: connections,
                deliveries: [.init(at: .s(1), localPort: 40_000, bytes: 1_030_000)]
            ).isEmpty)
    }

    @Test func deliveriesForOtherConnectionsAreIgnored() {
        let entries = [self.entry(0, connection: 0, body: 1000)]
        let connections = [self.connection(0, port: 40_000, written: 1200)]
        #expect(
            DeliveryEvidence.undelivered(
                entries: entries, connections: connections, deliveries: [.init(at: .s(1), localPort: 40_001, bytes: 0)]
            ).isEmpty)
    }
}

extension Instant {
    fileprivate static func ms(_ milliseconds: Int64) -> Instant { Instant(nanoseconds: milliseconds * 1_000_000) }
    fileprivate static func s(_ seconds: Int64) -> Instant { Instant(nanoseconds: seconds * 1_000_000_000) }
}
