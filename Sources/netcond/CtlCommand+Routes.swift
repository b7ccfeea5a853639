import ArgumentParser
import Foundation
import NetcondCore
import NetcondProxy

/// `netcond ctl routes` and `netcond ctl route NAME …`: the routes beyond the access link.
extension CtlCommand {
    struct Routes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the routes beyond the access link, each with its link now.")
        @OptionGroup var target: Target

        func run() async throws {
            try await self.target.send("GET", "/routes") { data in
                (try? JSONDecoder().decode(ControlRoutes.self, from: data)).map(Self.summary)
            }
        }

        static func summary(_ answer: ControlRoutes) -> String {
            guard !answer.routes.isEmpty else { return "no routes: every connection meets the access link alone" }
            return answer.routes.map { route in
                var parts = [route.phase]
                for link in route.link {
                    let rate = link.rateBps.map { Bandwidth(bitsPerSecond: $0).description } ?? "unlimited"
                    parts.append("\(link.direction) \(rate), \(Self.milliseconds(link.delayMs))")
                }
                if let outage = route.outage { parts.append("outage (\(outage))") }
                if !route.stalled.isEmpty { parts.append("stalled \(route.stalled.joined(separator: "+"))") }
                parts.append("\(route.connections) connection\(route.connections == 1 ? "" : "s")")
                parts.append("carried \(ByteCount(bytes: route.bytesDown)) down, \(ByteCount(bytes: route.bytesUp)) up")
                return "\(route.name) [\(route.match)]: " + parts.joined(separator: "; ")
            }.joined(separator: "\n")
        }

        static func milliseconds(_ value: Double) -> String {
            value == value.rounded() ? "\(Int(value)) ms" : String(format: "%.1f ms", value)
        }
    }

    struct RouteCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "route",
            abstract: "Change one route live: an outage, a stall, or another link.",
            discussion: """
                  netcond ctl route cdn.example.com outage refuse   blackhole | refuse | reset | end
                  netcond ctl route cdn.example.com stall down      up | down | both | end
                  netcond ctl route cdn.example.com profile 3g      the route's link becomes 3g's
                """)
        @Argument(help: "The route's name (netcond ctl routes lists them).")
        var name: String
        @Argument(help: "outage, stall or profile.")
        var change: String
        @Argument(help: "The outage, the stall's direction, or a built-in profile's name.")
        var value: String
        @OptionGroup var target: Target

        func validate() throws {
            switch self.change {
            case "outage":
                try Target.checkStartOrEnd(self.value, among: OutageBehaviour.allCases.map(\.rawValue), what: "outage")
            case "stall":
                try Target.checkStartOrEnd(
                    self.value, among: StallDirection.allCases.map(\.rawValue), what: "stall direction")
            case "profile":
                guard !ProfileCatalog.looksLikePath(self.value) else {
                    throw ValidationError("'\(self.value)' is a path; a route's link takes a built-in profile's name")
                }
            default:
                throw ValidationError("unknown change '\(self.change)'; allowed: outage, stall, profile")
            }
        }

        func run() async throws {
            let path =
                "/routes/" + (self.name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? self.name)
            try await self.target.send("POST", path, body: [self.change: self.value])
        }
    }

    struct Handover: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move the device to another network (Wi-Fi to cellular): open connections are stranded.",
            discussion:
                "Every connection open now is stranded: nothing of it is carried again, either way, and neither end is told (no reset: the address it used is gone). Nothing is carried for --gap, then the link is the profile's."
        )
        @Argument(
            help: "The new network's profile: a built-in name or a profile YAML file (read and checked here).",
            completion: profileCompletion)
        var profile: String
        @Option(name: .long, help: "How long nothing is carried before the new network is up (e.g. 2s; default 0s).")
        var gap = "0s"
        @OptionGroup var target: Target

        func validate() throws {
            guard let gap = try? Span.parse(self.gap), gap <= .seconds(3600) else {
                throw ValidationError("'\(self.gap)' is not a gap; allowed: a duration 0s…1h, e.g. 2s")
            }
        }

        func run() async throws {
            var body = SwitchProfile.body(self.profile)
            body["gap"] = self.gap
            try await self.target.send("POST", "/handover", body: body)
        }
    }
}
