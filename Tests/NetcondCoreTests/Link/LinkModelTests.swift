import Testing

@testable import NetcondCore

@Suite struct LinkModelTests {
    @Test func passThroughDeliversAtOnce() {
        var sim = LinkSimulation(.passThrough)
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .up, bytes: 100, at: .ms(5))
        sim.run(until: .ms(5))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .up, bytes: 100, at: .ms(5))])
    }

    @Test func latencyDelaysExactlyOneWay() {
        var sim = LinkSimulation(.test(latency: .milliseconds(100)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .up, bytes: 100, at: .ms(10))
        sim.run(until: .ms(109))
        #expect(sim.deliveries.isEmpty)
        sim.run(until: .ms(110))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .up, bytes: 100, at: .ms(110))])
    }

    @Test func aLatencyOnlyLinkStillStartsSlowlyInSegments() {
        // No rate, no loss: bytes move in large units, but slow start begins at 10 segments and
        // doubles each round trip (200 ms), as real TCP does: 1 MB takes 7 windows, not 2.
        var sim = LinkSimulation(.test(latency: .milliseconds(100)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .down, bytes: 1_000_000, at: .zero)
        sim.run(until: .s(5))
        let firstWindow = sim.deliveries.filter { $0.at <= .ms(100) }.reduce(0) { $0 + $1.bytes }
        #expect(firstWindow == 10 * 1460)
        #expect(sim.deliveries.reduce(0) { $0 + $1.bytes } == 1_000_000)
        let last = sim.deliveries.map(\.at).max() ?? .zero
        #expect(last >= .ms(1300) && last <= .ms(1400), "\(last)")
    }

    @Test func serializationCountsHeaderOverhead() {
        // 1460 + 40 bytes at 240 kbit/s take exactly 50 ms.
        var sim = LinkSimulation(.test(latency: .milliseconds(400), bandwidth: .kbit(240)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .down, bytes: 1460 * 2, at: .zero)
        sim.run(until: .s(10))
        #expect(
            sim.deliveries == [
                Delivery(flow: flow, direction: .down, bytes: 1460, at: .ms(450)),
                Delivery(flow: flow, direction: .down, bytes: 1460, at: .ms(500)),
            ]
        )
    }

    @Test func connectCostsOneRoundTripPlusDNS() {
        var profile = Profile.test(latency: .milliseconds(100))
        profile.dnsDelay = .milliseconds(300)
        var sim = LinkSimulation(profile)
        let flow = sim.model.openFlow(at: .zero)
        let other = sim.model.openFlow(at: .zero)
        sim.model.connect(flow, at: .ms(1), resolvesName: true)
        sim.model.connect(other, at: .ms(1), resolvesName: false)
        // Data written before the handshake completes waits for it.
        sim.model.send(other, .up, bytes: 10, at: .ms(2))
        sim.run(until: .ms(300))
        #expect(sim.deliveries == [])
        sim.run(until: .ms(1000))
        #expect(sim.deliveries == [Delivery(flow: other, direction: .up, bytes: 10, at: .ms(301))])
        let outcomes = sim.notices.compactMap { notice -> ConnectOutcome? in
            if case .connected(_, let outcome) = notice { return outcome }
            return nil
        }
        #expect(
            outcomes == [.established(at: .ms(201), synRetransmits: 0), .established(at: .ms(501), synRetransmits: 0)])
    }

    @Test func totalLossNeverConnectsAndNeverDelivers() {
        let profile = Profile.test(latency: .milliseconds(50), loss: 1)
        var sim = LinkSimulation(profile)
        let flow = sim.model.openFlow(at: .zero)
        // 1 + 2 + 4 + 8 + 16 + 32 + 64 s of SYN timeouts, as Linux does with tcp_syn_retries = 6.
        #expect(sim.connect(flow, at: .zero) == .timedOut(at: .s(127)))
        let other = sim.model.openFlow(at: .zero)
        sim.model.send(other, .down, bytes: 10_000, at: .zero)
        sim.run(until: .s(600))
        #expect(sim.deliveries.isEmpty)
        #expect(sim.model.backlog(other, .down) == 10_000)
    }

    @Test func slowStartSendsTenSegmentsInTheFirstRoundTrip() {
        // 100 ms each way, no rate limit but lossy enough to be segmented: IW = 10 segments, so a
        // 30-segment response needs two more round trips after the first flight.
        var profile = Profile.test(latency: .milliseconds(100))
        profile.down.connectionBandwidth = .mbit(1000)
        var sim = LinkSimulation(profile)
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .down, bytes: 1460 * 30, at: .zero)
        sim.run(until: .s(5))
        let firstFlight = sim.delivered(flow, .down, by: .ms(101))
        #expect(firstFlight == 1460 * 10)
        // Acks of the first flight come back at 200 ms and release 20 more segments (slow start).
        #expect(sim.delivered(flow, .down, by: .ms(299)) == 1460 * 10)
        #expect(sim.delivered(flow, .down, by: .ms(301)) == 1460 * 30)
    }

    @Test func jitterNeverReordersAndNeverArrivesEarly() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50), jitter: .milliseconds(30)), seed: 7)
        let flow = sim.model.openFlow(at: .zero)
        for i in 0..<200 {
            sim.model.send(flow, .up, bytes: 10, at: .ms(Int64(i)))
        }
        sim.run(until: .s(5))
        #expect(sim.delivered(flow, .up) == 2000)
        var previous = Instant.zero
        var sawJitter = false
        for delivery in sim.deliveries {
            #expect(delivery.at >= previous)
            previous = delivery.at
        }
        // Every message waited at least the latency: the k-th message cannot be there before k ms + 50 ms.
        var cumulative = 0
        for delivery in sim.deliveries {
            cumulative += delivery.bytes
            let lastIndex = Int64(cumulative / 10 - 1)
            #expect(delivery.at >= .ms(lastIndex + 50))
            if delivery.at > .ms(lastIndex + 55) { sawJitter = true }
        }
        #expect(sawJitter)
    }

    @Test func sameSeedSameDecisionsOtherSeedOthers() {
        func run(seed: UInt64) -> [Delivery] {
            var sim = LinkSimulation(.test(latency: .milliseconds(20), bandwidth: .mbit(5), loss: 0.03), seed: seed)
            let flow = sim.model.openFlow(at: .zero)
            _ = sim.bulk(flow, .down, total: 500_000, from: .zero, deadline: .s(60))
            return sim.deliveries
        }
        #expect(run(seed: 42) == run(seed: 42))
        #expect(run(seed: 42) != run(seed: 43))
    }

    @Test func everyByteArrivesOnceUnderHeavyLoss() {
        for tcp in CongestionControl.allCases {
            var sim = LinkSimulation(
                .test(latency: .milliseconds(30), bandwidth: .mbit(2), loss: 0.1, tcp: tcp), seed: 3)
            let flow = sim.model.openFlow(at: .zero)
            let done = sim.bulk(flow, .down, total: 300_000, from: .zero, deadline: .s(600))
            #expect(done != nil)
            #expect(sim.delivered(flow, .down) == 300_000)
            #expect(sim.model.backlog(flow, .down) == 0)
            #expect(sim.model.counters.segmentsLost > 0)
            #expect(sim.model.counters.retransmissions >= sim.model.counters.segmentsLost)
        }
    }

    @Test func bandwidthIsSharedFairlyBetweenTwoDownloads() {
        var sim = LinkSimulation(.test(latency: .milliseconds(20), bandwidth: .mbit(2)))
        let a = sim.model.openFlow(at: .zero)
        let b = sim.model.openFlow(at: .zero)
        var now = Instant.zero
        // Both applications keep 64 KB queued for 20 s.
        while now < .s(20) {
            for flow in [a, b] where sim.model.unsent(flow, .down) < 64 * 1024 {
                sim.model.send(flow, .down, bytes: 16 * 1024, at: now)
            }
            sim.deliveries += sim.model.advance(to: now)
            now = min(sim.model.nextEventTime ?? now + .milliseconds(1), .s(20))
            if now == .s(20) { break }
        }
        let rate = 2_000_000.0 / 8 * 1460 / 1500
        let byA = Double(sim.delivered(a, .down, by: .s(20)) - sim.delivered(a, .down, by: .s(5)))
        let byB = Double(sim.delivered(b, .down, by: .s(20)) - sim.delivered(b, .down, by: .s(5)))
        #expect(abs(byA + byB - rate * 15) / (rate * 15) < 0.03)
        // Neither starves. Through the link path's drop-tail queue the model's two senders, in
        // lockstep, share it 67/33 over these 15 s; the kernel's own cubic senders through the same
        // queue under the packet engine measured 55/45 and 44/56 (README, limits of the stream model).
        #expect(abs(byA / (byA + byB) - 0.5) < 0.2, "share \(byA / (byA + byB))")
    }

    @Test(arguments: [UInt64(7), 21, 35])
    func twoDownloadsBothGetTheirShareFromTheStart(startGapMilliseconds: UInt64) {
        // The second download starts a few milliseconds after the first and, over the first ten
        // seconds, is not starved. The queue is the link path's drop-tail, as under the packet
        // engine, so the one that started first may keep more of it at first (60-63 % here); over
        // 20 s they share evenly (above).
        var sim = LinkSimulation(.test(latency: .milliseconds(10), bandwidth: .mbit(2)), seed: startGapMilliseconds)
        let first = sim.model.openFlow(at: .zero)
        let second = sim.model.openFlow(at: .zero)
        let secondStarts = Instant.ms(Int64(startGapMilliseconds))
        var now = Instant.zero
        while now < .s(12) {
            for flow in [first, second]
            where (flow == first || now >= secondStarts)
                && sim.model.unsent(flow, .down) < 64 * 1024
            {
                sim.model.send(flow, .down, bytes: 16 * 1024, at: now)
            }
            sim.deliveries += sim.model.advance(to: now)
            now = min(sim.model.nextEventTime ?? now + .milliseconds(1), .s(12))
            if now == .s(12) { break }
        }
        let byFirst = Double(sim.delivered(first, .down, by: .s(11)) - sim.delivered(first, .down, by: .s(1)))
        let bySecond = Double(sim.delivered(second, .down, by: .s(11)) - sim.delivered(second, .down, by: .s(1)))
        #expect(
            abs(byFirst / (byFirst + bySecond) - 0.5) < 0.05, "first flow's share \(byFirst / (byFirst + bySecond))")
    }

    @Test func fullQueueAddsQueueingDelay() {
        // 2 Mbit/s, 50 ms each way, 64 KB queue: a bulk download keeps the queue near full, so a small
        // message sent behind it waits for the queue to drain (bufferbloat).
        var sim = LinkSimulation(.test(latency: .milliseconds(50), bandwidth: .mbit(2), queue: ByteCount(bytes: 65536)))
        let bulk = sim.model.openFlow(at: .zero)
        let ping = sim.model.openFlow(at: .zero)
        _ = sim.bulk(bulk, .down, total: 1_000_000, from: .zero, deadline: .s(2))
        sim.model.send(ping, .down, bytes: 100, at: sim.model.now)
        let sentAt = sim.model.now
        sim.run(until: sentAt + .seconds(2))
        let arrival = sim.deliveries.first { $0.flow == ping }?.at
        #expect(arrival != nil)
        if let arrival {
            let oneWay = arrival - sentAt
            #expect(oneWay > .milliseconds(120))
            #expect(oneWay <= .milliseconds(50 + 263))
        }
    }

    @Test func connectionCapLimitsOneConnection() {
        var profile = Profile.test(latency: .milliseconds(10), bandwidth: .mbit(10))
        profile.down.connectionBandwidth = .mbit(1)
        var sim = LinkSimulation(profile)
        let flow = sim.model.openFlow(at: .zero)
        let done = sim.bulk(flow, .down, total: 1_460_000, from: .zero, deadline: .s(60))
        // 1000 segments × 1500 wire bytes at 1 Mbit/s = 12 s.
        #expect(done != nil)
        if let done {
            #expect(done >= .s(12))
            #expect(done < .s(12.2))
        }
    }
}
