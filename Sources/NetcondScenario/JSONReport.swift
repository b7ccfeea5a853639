import Foundation
import NetcondCore

extension ScenarioSuite {
    /// The JSON report (`netcond test --json`, `netcond report merge`): the suite's totals and, per
    /// scenario, its verdict, checks with evidence, the timeline as applied, the origin's request
    /// log and the end of the client's output. The HTML report and the merge read it back into these
    /// same types (``read(_:)``); what a run always writes but a trimmed or hand-made report may
    /// leave out is optional, so that such a file still reads.
    struct JSONReport: Codable, Equatable, Sendable {
        /// The report's shape: a reader refuses another (``ReportMerge``).
        var format: Int
        /// 2: the run's picture too (delivered bytes over time, output lines with their times,
        /// failed connection attempts, when each request ended, each check's marks).
        static let currentFormat = 2
        var passed: Bool
        var seconds: Double
        /// `I/N` for a part of a sharded run; absent otherwise.
        var shard: String?
        /// The parts a merged report joined (`1/3`, `2/3`, …); absent otherwise.
        var merged: [String]?
        var scenarios: [Scenario]

        /// One scenario's verdict.
        enum Verdict: String, Codable, Sendable {
            case passed, failed, error
        }

        /// What carried the scenario's traffic.
        enum Engine: String, Codable, Sendable {
            case proxy, packet
        }

        struct Scenario: Codable, Equatable, Sendable {
            var name: String
            /// Always written; optional so that a trimmed report still reads.
            var file: String?
            var profile: String?
            /// When it ran.
            var engine: Engine?
            /// which TCP sender the servers used
            var sender: String?
            var verdict: Verdict
            var error: String?
            var seed: UInt64?
            var command: [String]?
            var exit: String?
            var timedOut: Bool?
            var seconds: Double?
            var startupSeconds: Double?
            var checks: [Check]?
            var timeline: [Applied]?
            var requests: [Request]?
            var clientOutput: String?
            /// The device's radio (the profile's `radio:`): its model, constants, totals and lane.
            var radio: Radio?
            /// The client's deadline, seconds.
            var deadline: Double?
            /// Bytes delivered to the client, every 100 ms.
            var delivered: [Delivered]?
            /// The down link as it moved, each time it changed (sampled every 100 ms) and at the end.
            var link: [LinkRow]?
            /// The client's output lines as they came (at most the last 2,000, each at most 500 characters).
            var output: [Line]?
            /// Connection attempts that never reached a server.
            var attempts: [Attempt]?
            /// What the link recorded of itself (state changes, faults applied, the portal), at most 2,000.
            var events: [Event]?
            /// Each destination's lane (a route of the profile): its state and what it carried, as
            /// they moved; at most ``RouteLane/maxLanes``, the rest counted in ``routesLeftOut``.
            var routes: [RouteLane]?
            var routesLeftOut: Int?
        }
    }
}

extension ScenarioSuite.JSONReport.Scenario {
    /// A moment the link recorded of itself.
    struct Event: Codable, Equatable, Sendable {
        var at: Double
        var kind: RunEvidence.LinkEvent.Kind
        var detail: String
    }

    struct Line: Codable, Equatable, Sendable {
        var at: Double
        var stderr: Bool
        var text: String
    }

    struct Attempt: Codable, Equatable, Sendable {
        var at: Double
        var host: String
        var port: Int
        var outcome: AttemptOutcome
    }

    struct Check: Codable, Equatable, Sendable {
        var name: String
        var passed: Bool
        var evidence: String
        var details: [String]
        /// Why the verdict may not hold on a real network (absent when it does).
        var caveat: String?
        /// The moments (seconds) the verdict rests on.
        var marks: [Double]
    }

    struct Applied: Codable, Equatable, Sendable {
        var at: Double
        var what: String
    }

    /// How the link ended a request's connection.
    enum LinkCut: String, Codable, Sendable {
        case reset, close
    }

    struct Request: Codable, Equatable, Sendable {
        var at: Double
        var method: String
        /// The host the request asked for, when it named one.
        var host: String?
        var path: String
        var range: String?
        var idempotencyKey: String?
        /// A conditional GET's validator, as sent (`If-None-Match: "abc"`); absent otherwise.
        var condition: String? = nil
        var status: Int?
        var retryAfter: String?
        var bodyBytes: Int64
        var completed: Bool
        /// When the origin wrote the response head (seconds), when it did: the request waited on
        /// the server until then.
        var responded: Double?
        /// When the response ended (seconds), when it did.
        var ended: Double?
        /// When its last byte reached the client (seconds), when known.
        var received: Double?
        /// The response ended before its whole body (a cut, a fault); absent otherwise.
        var cutShort: Bool?
        /// Body bytes that reached the client, when fewer than the origin sent.
        var bodyBytesReceived: Int64?
        /// The rest was still on its way when the run ended (the client stopped at its deadline).
        var stoppedByRunEnd: Bool?
        var linkCut: LinkCut?
        /// The origin fault that hit it (`cut after 600 KB`), when one did.
        var originFault: String?
    }

    /// `[seconds since the client started, bytes delivered to it]` (the bytes a JSON number of
    /// any size, as a hand-made report may hold).
    struct Delivered: Codable, Equatable, Sendable {
        var at: Double
        var bytes: Double

        init(at: Double, bytes: Double) {
            self.at = at
            self.bytes = bytes
        }

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            self.at = try row.decode(Double.self)
            self.bytes = try row.decode(Double.self)
        }

        func encode(to encoder: any Encoder) throws {
            var row = encoder.unkeyedContainer()
            try row.encode(self.at)
            try row.encode(self.bytes)
        }
    }

    /// `[seconds since the client started, rate in bits per second (null: unlimited), one-way
    /// delay in ms, loss probability]`: the down link at a moment.
    struct LinkRow: Codable, Equatable, Sendable {
        var at: Double
        var rate: Double?
        var delay: Double
        var loss: Double

        init(at: Double, rate: Double?, delay: Double, loss: Double) {
            self.at = at
            self.rate = rate
            self.delay = delay
            self.loss = loss
        }

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            self.at = try row.decode(Double.self)
            self.rate = try row.decodeNil() ? nil : row.decode(Double.self)
            self.delay = try row.decode(Double.self)
            self.loss = row.isAtEnd ? 0 : try row.decode(Double.self)
        }

        func encode(to encoder: any Encoder) throws {
            var row = encoder.unkeyedContainer()
            try row.encode(self.at)
            if let rate = self.rate { try row.encode(rate) } else { try row.encodeNil() }
            try row.encode(self.delay)
            try row.encode(self.loss)
        }
    }
}

extension ScenarioSuite.JSONReport.Scenario.Check {
    /// `details` may be left out of a hand-made report: none.
    init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: CodingKeys.self)
        self.name = try keys.decode(String.self, forKey: .name)
        self.passed = try keys.decode(Bool.self, forKey: .passed)
        self.evidence = try keys.decode(String.self, forKey: .evidence)
        self.details = try keys.decodeIfPresent([String].self, forKey: .details) ?? []
        self.caveat = try keys.decodeIfPresent(String.self, forKey: .caveat)
        self.marks = try keys.decodeIfPresent([Double].self, forKey: .marks) ?? []
    }
}

// MARK: - From a run

extension ScenarioSuite.JSONReport.Scenario {
    /// Times to the millisecond.
    private static func ms(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }

    init(_ result: ScenarioSuite.Result) {
        let scenario = result.scenario
        self.name = scenario.name
        self.file = scenario.file
        self.profile = scenario.profile.name
        switch result {
        case .error(_, let message):
            self.verdict = .error
            self.error = message
        case .ran(let outcome):
            self.verdict = outcome.passed ? .passed : .failed
            self.engine = outcome.evidence.engine == .packet ? .packet : .proxy
            self.sender = outcome.evidence.sender
            self.seed = outcome.seed
            self.command = outcome.command
            self.exit = outcome.evidence.exit.map(Checks.describe)
            self.timedOut = outcome.evidence.timedOut
            self.seconds = Self.ms(outcome.evidence.duration)
            self.startupSeconds = Self.ms(outcome.startup)
            self.checks = outcome.results.map {
                Check(
                    name: $0.name, passed: $0.passed, evidence: $0.evidence, details: $0.details, caveat: $0.caveat,
                    marks: $0.marks)
            }
            self.timeline = outcome.applied.map { Applied(at: Self.ms($0.at), what: $0.what) }
            self.requests = outcome.evidence.requests.map(Request.init)
            self.clientOutput = outcome.clientOutput.tail
            self.radio = outcome.evidence.radio.map(Radio.init)
            self.deadline = outcome.evidence.deadline.seconds
            self.delivered = outcome.delivered.map { Delivered(at: $0.at, bytes: Double($0.bytes)) }
            self.link = Self.linkSamples(outcome.delivered)
            (self.routes, self.routesLeftOut) = RouteLane.lanes(outcome.delivered)
            self.output = outcome.evidence.lines.suffix(2_000).map {
                Line(at: Self.ms($0.at), stderr: $0.stderr, text: String($0.text.prefix(500)))
            }
            self.events = outcome.evidence.linkEvents.prefix(2_000).map {
                Event(at: Self.ms($0.at), kind: $0.kind, detail: $0.detail)
            }
            self.attempts = outcome.evidence.failedConnects.map {
                Attempt(at: Self.ms($0.at), host: $0.host, port: $0.port, outcome: $0.outcome)
            }
        }
    }

    /// The down link's samples where it changed, and the last: a fixed link is two rows.
    static func linkSamples(_ samples: [DeliverySample]) -> [LinkRow]? {
        var rows: [LinkRow] = []
        var last: LinkRow?
        for (index, sample) in samples.enumerated() {
            guard let link = sample.link else { continue }
            let row = LinkRow(
                at: sample.at, rate: link.rate.map { Double($0.bitsPerSecond) },
                delay: (Double(link.delay.nanoseconds) / 1e3).rounded() / 1e3, loss: (link.loss * 1e6).rounded() / 1e6)
            let changed = last.map { ($0.rate, $0.delay, $0.loss) != (row.rate, row.delay, row.loss) } ?? true
            if changed || index == samples.count - 1 { rows.append(row) }
            last = row
        }
        return rows.isEmpty ? nil : rows
    }
}

extension ScenarioSuite.JSONReport.Scenario.Request {
    init(_ request: RunEvidence.Request) {
        func ms(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
        self.init(
            at: ms(request.at), method: request.method, host: request.host, path: request.path, range: request.range,
            idempotencyKey: request.idempotencyKey, condition: request.condition, status: request.status,
            retryAfter: request.retryAfter,
            bodyBytes: request.bodyBytesSent, completed: request.completed,
            responded: request.responded.map(ms), ended: request.ended.map(ms), received: request.received.map(ms),
            cutShort: request.cutShort ? true : nil,
            bodyBytesReceived: request.undelivered > 0 ? request.bodyBytesReceived : nil,
            stoppedByRunEnd: request.stoppedByRunEnd && request.undelivered > 0 ? true : nil,
            linkCut: request.linkCut.flatMap { ScenarioSuite.JSONReport.Scenario.LinkCut(rawValue: $0.rawValue) },
            originFault: request.originFault?.description)
    }
}

// MARK: - Writing and reading

extension ScenarioSuite.JSONReport {
    /// The report as netcond writes it: keys sorted, two-space indents, slashes as they are, a
    /// newline at the end.
    var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(self)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// Why a file is not a report this netcond reads.
    enum ReadFailure: Error, Equatable {
        /// It does not parse (the reason, when the parser says one).
        case notJSON(String?)
        /// JSON, but no `scenarios` list (and, when `needsPassed`, no `passed`).
        case notAReport
        /// A report of another format (nil: none, an older netcond).
        case format(Int?)
        /// A report of this format with a value that is not what this netcond writes there.
        case damaged(String)
    }

    /// The outside of a report, read before its contents: its format, and whether it has the
    /// `scenarios` list and `passed`.
    private struct Envelope: Decodable {
        var format: Int?
        var listsScenarios: Bool
        var saysPassed: Bool

        enum CodingKeys: String, CodingKey {
            case format, scenarios, passed
        }

        init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            self.format = try? keys.decodeIfPresent(Int.self, forKey: .format)
            self.listsScenarios = (try? keys.nestedUnkeyedContainer(forKey: .scenarios)) != nil
            self.saysPassed = (try? keys.decode(Bool.self, forKey: .passed)) != nil
        }
    }

    /// Reads a report of this netcond's format; `needsPassed`: one without `passed` is not a report.
    static func read(_ data: Data, needsPassed: Bool = false) throws(ReadFailure) -> Self {
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: data)
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw .notJSON(context.underlyingError.map { "\($0)" })
        } catch {
            throw .notAReport
        }
        guard envelope.listsScenarios, envelope.saysPassed || !needsPassed else { throw .notAReport }
        guard envelope.format == Self.currentFormat else { throw .format(envelope.format) }
        do {
            return try JSONDecoder().decode(Self.self, from: data)
        } catch {
            throw .damaged(Self.describe(error))
        }
    }

    /// `scenarios[0].events[2].kind: "portal" is not one this netcond writes`.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func place(_ path: [any CodingKey]) -> String {
            let steps = path.map { key -> String in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }
            return String(steps.joined().drop { (character: Character) in character == "." })
        }
        switch error {
        case .keyNotFound(let key, let context):
            let within = place(context.codingPath)
            return "\(within.isEmpty ? "" : within + ": ")no \"\(key.stringValue)\""
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(place(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
