import ArgumentParser
import Foundation
import NetcondCore
import NetcondProxy
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

/// `netcond ctl`: the command-line client of a running proxy's control API.
struct CtlCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Change the conditions of a running `netcond proxy` or `netcond run` live.",
        discussion: """
            Talks to the control API at --control, else $NETCOND_CONTROL (set for every program under \
            `netcond run`), else http://127.0.0.1:8081 (where `netcond proxy` listens by default).
              netcond ctl status         profile, phase, outage/stall, counters
              netcond ctl profile 3g     switch to a built-in profile or a YAML file
              netcond ctl outage refuse  blackhole | refuse | reset; `outage end`
              netcond ctl stall down     up | down | both; `stall end` ends it
              netcond ctl fault list     the faults in force, how often each hit
              netcond ctl fault remove 2 by id, by name, or `fault remove all`
              netcond ctl captive open   log in to the portal (`captive close`)
              netcond ctl cut            reset every open connection (`cut close`)
              netcond ctl handover lte --gap 2s  to another network; open ones stranded
              netcond ctl events         the event log (faults hit, link changes)
              netcond ctl routes         the routes beyond the access link, each one's link
              netcond ctl route NAME outage refuse   one route: outage, stall or profile
              netcond ctl fault add \\
                '{match: {path: /api/*}, status: 503, retry_after: 5s, first: 3}'
            Exit status: 0 done, 2 the request was refused (bad value; nothing changed), 3 no proxy answered.
            """,
        subcommands: [
            Status.self, SwitchProfile.self, Outage.self, Stall.self, Fault.self, Captive.self, Cut.self, Events.self,
            Routes.self, RouteCommand.self, Handover.self,
        ]
    )

    struct Target: ParsableArguments {
        @Option(name: .long, help: "The control API's URL (default: $NETCOND_CONTROL, else http://127.0.0.1:8081).")
        var control: String?

        @Option(
            name: .long,
            help:
                "The run's token, for a change while a scenario runs (netcond prints it; default: $NETCOND_CONTROL_TOKEN)."
        )
        var token: String?

        @Flag(name: .long, help: "Print the answer as JSON instead of a summary.")
        var json = false

        func endpoint() throws -> (host: String, port: Int, base: String) {
            var text = self.control ?? ProcessInfo.processInfo.environment["NETCOND_CONTROL"] ?? ""
            if text.isEmpty { text = "http://127.0.0.1:8081" }
            var hostPort = Substring(text)
            if hostPort.lowercased().hasPrefix("http://") { hostPort = hostPort.dropFirst(7) }
            if let slash = hostPort.firstIndex(of: "/") { hostPort = hostPort[..<slash] }
            guard let address = try? parseListen(String(hostPort)), address.port != 0 else {
                throw ValidationError(
                    "'\(text)' is not a control URL; allowed: http://HOST:PORT, e.g. http://127.0.0.1:8081")
            }
            let host = address.host.contains(":") ? "[\(address.host)]" : address.host
            return (address.host, address.port, "http://\(host):\(address.port)")
        }

        /// `word` must be one of `allowed` or `end`.
        static func checkStartOrEnd(_ word: String, among allowed: [String], what: String) throws {
            guard (allowed + ["end"]).contains(word) else {
                throw ValidationError(
                    "unknown \(what) '\(word)'; allowed: \((allowed + ["end"]).joined(separator: ", "))")
            }
        }

        /// `end` → `DELETE path`; anything else → `POST path {key: word}`.
        func startOrEnd(_ word: String, path: String, key: String) async throws {
            if word == "end" {
                try await self.send("DELETE", path)
            } else {
                try await self.send("POST", path, body: [key: word])
            }
        }

        /// Sends the request and prints the answer (JSON with --json, else `summary` of it);
        /// exits 2 on a rejection, 3 when nothing answered. A body goes with its `Content-Type`
        /// (`text` as `textType`), as the API requires; `Host` is the control URL's host.
        func send(
            _ method: String,
            _ path: String,
            body: [String: String]? = nil,
            text: String? = nil,
            textType: String = "application/json",
            summary: (Data) -> String? = { data in (try? JSONDecoder().decode(ControlStatus.self, from: data))?.summary
            }
        ) async throws {
            let endpoint = try self.endpoint()
            let fetcher = HTTPFetcher(proxyHost: endpoint.host, proxyPort: endpoint.port)
            var payload = try body.map { Array(try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys])) }
            if let text { payload = Array(text.utf8) }
            let result: HTTPFetcher.Result
            do {
                result = try await fetcher.send(
                    method: method,
                    url: endpoint.base + path,
                    body: payload,
                    contentType: text == nil ? "application/json" : textType,
                    headers: (self.token ?? ProcessInfo.processInfo.environment["NETCOND_CONTROL_TOKEN"]).map {
                        [("Authorization", "Bearer " + $0)]
                    } ?? [],
                    keepBody: true
                )
            } catch {
                printError(
                    "netcond ctl: no control API at \(endpoint.base): \(error) (is `netcond proxy` running? see --control)"
                )
                throw ExitCode(3)
            }
            let data = Data(result.body)
            guard result.status == 200 else {
                let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                let message = object?["error"] as? String ?? String(decoding: result.body, as: UTF8.self)
                printError("netcond ctl: \(message)")
                throw ExitCode(result.status == 405 ? 3 : 2)
            }
            if !self.json, let line = summary(data) {
                print(line)
            } else {
                print(String(decoding: result.body, as: UTF8.self), terminator: "")
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the link's state and counters.")
        @OptionGroup var target: Target

        func run() async throws {
            try await self.target.send("GET", "/status")
        }
    }

    struct SwitchProfile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "profile",
            abstract: "Switch to another profile (its schedule starts over); connections stay open."
        )
        @Argument(
            help: "A built-in profile name or a profile YAML file (read and checked here).",
            completion: profileCompletion)
        var profile: String
        @OptionGroup var target: Target

        func run() async throws {
            try await self.target.send("POST", "/profile", body: Self.body(self.profile))
        }

        /// `argument` as the control API takes a profile: checked here; a file is resolved here
        /// too (with `extends:` and `use:` files relative to it) and sent self-contained, a
        /// built-in goes by name.
        static func body(_ argument: String) -> [String: String] {
            let profile = resolveProfile(argument)
            return ProfileCatalog.looksLikePath(argument)
                ? ["yaml": profile.yaml(inlineTraces: true), "file": argument] : ["name": argument]
        }
    }

    struct Outage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start an outage (blackhole, refuse or reset) or end it (end)."
        )
        @Argument(
            help:
                "blackhole (nothing passes), refuse (new connections refused), reset (open ones reset, new refused), or end."
        )
        var behaviour: String
        @OptionGroup var target: Target

        func validate() throws {
            try Target.checkStartOrEnd(self.behaviour, among: OutageBehaviour.allCases.map(\.rawValue), what: "outage")
        }

        func run() async throws {
            try await self.target.startOrEnd(self.behaviour, path: "/outage", key: "behaviour")
        }
    }

    struct Stall: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stall a direction (no byte moves; connections stay open) or end it (end)."
        )
        @Argument(help: "up, down, both, or end.")
        var direction: String
        @OptionGroup var target: Target

        func validate() throws {
            try Target.checkStartOrEnd(
                self.direction, among: StallDirection.allCases.map(\.rawValue), what: "stall direction")
        }

        func run() async throws {
            try await self.target.startOrEnd(self.direction, path: "/stall", key: "direction")
        }
    }
}

extension CtlCommand {
    struct Fault: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add, list or remove HTTP faults (plain HTTP through the proxy, and the built-in origin).",
            subcommands: [Add.self, List.self, Remove.self]
        )

        static func listing(_ data: Data) -> String? {
            guard let faults = try? JSONDecoder().decode(ControlFaults.self, from: data) else { return nil }
            var lines: [String] = []
            if let added = faults.added { lines.append("added fault \(added)") }
            if faults.faults.isEmpty { lines.append("no faults in force") }
            for fault in faults.faults {
                lines.append(
                    "\(fault.id)  \(fault.fault)  (hit \(fault.applied) of \(fault.matched) matching requests)")
            }
            return lines.joined(separator: "\n")
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a fault after the others (the profile schema's fault entry, YAML or JSON)."
            )
            @Argument(help: "e.g. '{match: {method: POST, path: /orders}, drop_response: true, first: 1}'")
            var fault: String
            @OptionGroup var target: Target

            func run() async throws {
                do {
                    _ = try HTTPFault.decode(yaml: self.fault, file: "fault")
                } catch {
                    printError("netcond ctl: \(error.description)")
                    throw ExitCode(2)
                }
                // YAML (flow style, so JSON too): said so, since the API takes only the types it names.
                try await self.target.send(
                    "POST", "/faults", text: self.fault, textType: "application/yaml", summary: Fault.listing
                )
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "The faults in force, with how often each hit.")
            @OptionGroup var target: Target

            func run() async throws {
                try await self.target.send("GET", "/faults", summary: Fault.listing)
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove one fault by id, every fault of a name, or all.")
            @Argument(help: "A fault id from `netcond ctl fault list`, a fault's name, or all.")
            var id: String
            @OptionGroup var target: Target

            func validate() throws {
                let positiveIfNumber = Int(self.id).map { $0 > 0 } ?? true
                guard !self.id.isEmpty, !self.id.contains("/"), positiveIfNumber else {
                    throw ValidationError(
                        "'\(self.id)' is not a fault id or name; allowed: a number or a name from `netcond ctl fault list`, or all"
                    )
                }
            }

            func run() async throws {
                let key = self.id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? self.id
                try await self.target.send(
                    "DELETE", self.id == "all" ? "/faults" : "/faults/\(key)", summary: Fault.listing)
            }
        }
    }

    struct Events: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The run's event log: faults that hit, link state changes.")
        @OptionGroup var target: Target

        func run() async throws {
            try await self.target.send("GET", "/events") { data in
                guard let log = try? JSONDecoder().decode(ControlEvents.self, from: data) else { return nil }
                var lines = log.events.map { String(format: "+%.3f s  ", $0.at) + $0.detail }
                if log.events.isEmpty { lines.append("no events yet") }
                if log.dropped > 0 { lines.append("(\(log.dropped) more not kept: the log is full)") }
                return lines.joined(separator: "\n")
            }
        }
    }
}

extension CtlCommand {
    struct Captive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Open the captive portal (as a login would) or close it again."
        )
        @Argument(help: "open or close.")
        var action: String
        @OptionGroup var target: Target

        func validate() throws {
            guard ["open", "close"].contains(self.action) else {
                throw ValidationError("unknown captive action '\(self.action)'; allowed: open, close")
            }
        }

        func run() async throws {
            try await self.target.send(
                "POST", "/captive", body: nil, text: self.action == "open" ? #"{"open": true}"# : #"{"open": false}"#)
        }
    }

    struct Cut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cut every open connection once; the link stays up and new connections go through.",
            discussion:
                "reset (the default): a TCP reset, as a NAT that lost the connection answers. close: an orderly close at once, bytes still on the link dropped."
        )
        @Argument(help: "reset or close.")
        var mode: String = CutMode.reset.rawValue
        @OptionGroup var target: Target

        func validate() throws {
            guard CutMode(rawValue: self.mode) != nil else {
                throw ValidationError(
                    "unknown cut mode '\(self.mode)'; allowed: \(CutMode.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
        }

        func run() async throws {
            try await self.target.send("POST", "/cut", body: ["mode": self.mode])
        }
    }
}
