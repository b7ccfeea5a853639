import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import NetcondPacket
import NetcondProxy

/// Everything netcond parses from outside, as functions of one input's bytes: what libFuzzer drives
/// (`scripts/fuzz TARGET`, through `netcond-fuzz`), and what the Swift tests replay (every file of
/// `Fuzz/corpus/TARGET/` and `Fuzz/regressions/TARGET/`). A target returns normally for every input:
/// a refusal is an answer; a trap, a hang or a leak is the defect.
public enum FuzzTargets {
    public static let all: [(name: String, run: @Sendable ([UInt8]) -> Void)] = [
        ("profile", profile),
        ("scenario", scenario),
        ("trace", trace),
        ("pcap", pcap),
        ("proxy-head", proxyHead),
        ("socks5", socks5),
        ("control-api", controlAPI),
        ("toxiproxy-api", toxiproxyAPI),
        ("dns-answers", dnsAnswers),
        ("nat64", nat64),
    ]

    public static func named(_ name: String) -> (@Sendable ([UInt8]) -> Void)? {
        self.all.first { $0.name == name }?.run
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// A profile file, as `validate`, `run` and the control API's `{"yaml": …}` read it (built-ins
    /// only: a fuzzer's path names no file of ours).
    static func profile(_ bytes: [UInt8]) {
        let decoder = ProfileDecoder(fileReferences: .refused(reason: "fuzzing"))
        if let profile = try? decoder.decode(yaml: Self.text(bytes), file: "fuzz.yaml") {
            _ = profile.proxyRefusal(hasTLS: true)
            _ = String(describing: profile)
        }
    }

    /// A scenario file (with its timeline, origin, client and checks), every error collected.
    static func scenario(_ bytes: [UInt8]) {
        let text = Self.text(bytes)
        _ = ScenarioDecoder.looksLikeScenario(yaml: text)
        _ = try? ScenarioDecoder.decode(yaml: text, file: "/nonexistent-netcond-fuzz/fuzz.yaml")
    }

    /// A `trace:` file: mahimahi's opportunities or a step series, as `TraceFile.read` tells them
    /// apart; a series read is then asked about moments across its length.
    static func trace(_ bytes: [UInt8]) {
        let text = Self.text(bytes)
        if LinkSeries.looksLikeSeries(text) {
            guard let series = try? LinkSeries.parse(text, source: "fuzz") else { return }
            _ = series.meanRate
            let last = series.steps.last?.at ?? .zero
            for moment in [
                Instant(nanoseconds: 0), Instant(nanoseconds: last.nanoseconds),
                Instant(nanoseconds: last.nanoseconds + 1_000_000_000),
            ] {
                _ = series.conditions(at: moment)
                _ = series.departure(bytes: 1_500, startingAt: moment)
            }
        } else if let trace = try? LinkTrace.parse(text, source: "fuzz") {
            _ = trace.meanRate
        }
    }

    /// A capture for `netcond trace record`: classic pcap or pcapng, its connections listed, then
    /// the busiest recorded (both passes).
    static func pcap(_ bytes: [UInt8]) {
        let open: TraceRecorder.Opener = { () throws(PacketCaptureFile.ReadError) in
            try PacketCaptureFile(bytes: bytes, source: "fuzz.pcap")
        }
        _ = try? TraceRecorder.flows(open: open)
        _ = try? TraceRecorder.record(options: TraceRecorder.Options(), open: open)
    }

    /// What a client sends the proxy's port in HTTP: request heads (absolute-form, CONNECT,
    /// origin-form with Host) as NIO's decoder reads them, then routed as the proxy routes them.
    static func proxyHead(_ bytes: [UInt8]) {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        guard (try? channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))) != nil
        else { return }
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        _ = try? channel.writeInbound(buffer)
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) {
            guard case .head(let head) = part else { continue }
            _ = HTTPRequestRouting.route(head)
            _ = HTTPRequestRouting.framingProblem(head)
            if head.method == .CONNECT { _ = UpstreamTarget(authority: head.uri, defaultPort: nil) }
        }
    }

    /// SOCKS5's greeting and request, fed in two pieces (as they may arrive).
    static func socks5(_ bytes: [UInt8]) {
        var parser = SOCKS5Parser()
        let half = bytes.count / 2
        _ = parser.feed(Array(bytes[..<half]))
        _ = parser.feed(Array(bytes[half...]))
    }

    /// A control API request: the first line is `METHOD TARGET`, the rest its body.
    static func controlAPI(_ bytes: [UInt8]) {
        let (method, target, body) = Self.request(bytes)
        _ = ControlAPI.route(method: method, target: target, body: body)
        _ = ControlAccess().check(
            method: method, target: target, headers: [("Content-Type", "application/json")], hasBody: !body.isEmpty)
    }

    /// A Toxiproxy API body for a toxic (create, then update the same one), and the link it makes.
    static func toxiproxyAPI(_ bytes: [UInt8]) {
        guard case .success(let object) = ControlAPI.object(bytes, example: "{}") else { return }
        for onLink in [false, true] {
            guard let toxic = try? Toxic.decode(object, onLink: onLink) else { continue }
            _ = try? Toxic.decode(object, updating: toxic, onLink: onLink)
            _ = ToxicConditions(toxics: [toxic, toxic], name: "fuzz")
        }
    }

    /// A DNS response's payload, as the packet engine reads the answers its command receives; and
    /// the same bytes as a whole IP packet, whose DNS (UDP or one TCP segment, an answer or a
    /// question) the engine reads for its routes.
    static func dnsAnswers(_ bytes: [UInt8]) {
        _ = DNSAnswers.parse(bytes)
        _ = readPacketDNS(bytes)
    }

    /// A packet an IPv6-only run's NAT64 translates: either way, and back.
    static func nat64(_ bytes: [UInt8]) {
        _ = translateNAT64(bytes)
    }

    /// `METHOD TARGET\nBODY`.
    static func request(_ bytes: [UInt8]) -> (String, String, [UInt8]) {
        let newline = bytes.firstIndex(of: 0x0A) ?? bytes.count
        let words = Self.text(Array(bytes[..<newline])).split(separator: " ", maxSplits: 1).map(String.init)
        let body = newline < bytes.count ? Array(bytes[(newline + 1)...]) : []
        return (words.first ?? "GET", words.count > 1 ? words[1] : "/", body)
    }
}
