import ArgumentParser
import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

struct TraceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract:
            "Make measured links: netcond trace record CAPTURE turns a capture of a download into a trace and a profile.",
        subcommands: [Record.self]
    )

    /// The direction whose rate is recorded.
    enum RecordDirection: String, ExpressibleByArgument, CaseIterable {
        case down, up
        var direction: Direction { self == .down ? .down : .up }
    }

    struct Record: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "record",
            abstract:
                "Turn a packet capture (pcap or pcapng) of a saturating download into a trace of the path it crossed.",
            discussion: """
                Reads the connection that carried the most data in the chosen direction and writes PREFIX.trace \
                (mahimahi's format: one line per 1500-byte delivery opportunity, at the millisecond its bytes \
                arrived) and PREFIX.yaml, a profile that uses it with the one-way delays the handshake shows and \
                the loss the sequence holes show. The trace is only true where the download filled the path: \
                stretches without arrivals are reported, as they replay as no capacity.

                Example:
                  tcpdump -i wlan0 -s 96 -w train.pcap port 443      while a large download runs
                  netcond trace record train.pcap --from 5 --to 65
                  netcond run train.yaml -- ./client
                """
        )

        @Argument(help: "The capture: classic pcap or pcapng (tcpdump -w, tshark -w, netcond run --pcap).")
        var capture: String

        @Option(name: .long, help: "down: the rate toward the client (default); up: toward the server.")
        var direction: RecordDirection = .down

        @Option(
            name: .long,
            help: "Start of the window, in seconds from the capture's first packet (default: the first data packet).")
        var from: Double?

        @Option(
            name: .long,
            help: "End of the window, in seconds from the capture's first packet (default: the last data packet).")
        var to: Double?

        @Option(
            name: [.customShort("o"), .long],
            help: "Write PREFIX.trace and PREFIX.yaml (default: the capture's path without its extension).")
        var output: String?

        @Flag(name: .long, help: "Overwrite PREFIX.trace and PREFIX.yaml when they exist.")
        var force = false

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The connection to record: its number as --list-flows lists it, or its endpoints in either order "
                    + "(default: the one with the most data in the direction).",
                valueName: "N|ADDR:PORT-ADDR:PORT"))
        var flow: String?

        @Flag(
            name: .long,
            help: "List the capture's TCP connections (endpoints, packets and bytes each way, duration) and stop.")
        var listFlows = false

        func validate() throws {
            if let flow = self.flow, FlowChoice.parse(flow) == nil {
                throw ValidationError(
                    "--flow '\(flow)' is neither a number nor two endpoints; allowed: \(FlowChoice.allowed)")
            }
            if self.listFlows { return }
            for (option, value) in [("--from", self.from), ("--to", self.to)] {
                guard let value else { continue }
                guard value.isFinite && value >= 0 && value < 365 * 86_400 else {
                    throw ValidationError("\(option) \(value): give seconds from the capture's first packet, 0 or more")
                }
            }
            if let from = self.from, let to = self.to, from >= to {
                throw ValidationError("--from \(from) is not before --to \(to)")
            }
            if let to = self.to, to == 0 {
                throw ValidationError("--to 0 leaves nothing: give seconds after the capture's first packet")
            }
            try checkReportFolders([("--output", self.prefix + ".trace")])
            if !self.force {
                for path in [self.prefix + ".trace", self.prefix + ".yaml"]
                where FileManager.default.fileExists(atPath: path) {
                    throw ValidationError("\(path) exists; give another --output, or --force to overwrite it")
                }
            }
        }

        /// PREFIX: the option, else the capture's path without its extension.
        var prefix: String {
            if let output = self.output {
                return output.hasSuffix(".trace") || output.hasSuffix(".yaml")
                    ? (output as NSString).deletingPathExtension : output
            }
            return (self.capture as NSString).deletingPathExtension
        }

        func run() throws {
            let path = self.capture
            let open: TraceRecorder.Opener = { () throws(PacketCaptureFile.ReadError) in
                try PacketCaptureFile(path: path, source: path)
            }
            if self.listFlows { return try self.list(open) }
            let prefix = self.prefix
            let tracePath = prefix + ".trace"
            let profilePath = prefix + ".yaml"
            let recording: TraceRecording
            do {
                let options = TraceRecorder.Options(
                    direction: self.direction.direction, from: self.from.map { Span.seconds(double: $0) },
                    to: self.to.map { Span.seconds(double: $0) }, flow: self.flow.flatMap(FlowChoice.parse))
                recording = try TraceRecorder.record(options: options, open: open)
            } catch {
                try Self.fail(error)
            }
            let traceName = (tracePath as NSString).lastPathComponent
            let profile = recording.profileYAML(
                name: (prefix as NSString).lastPathComponent, traceFile: traceName,
                captureName: (self.capture as NSString).lastPathComponent)
            try Self.writeTrace(recording.trace, to: tracePath)
            try writeReports([(profilePath, { profile })])
            // The profile must read back through the loader every command uses.
            let loaded: LinkTrace
            do {
                let read = try ProfileCatalog.resolve(
                    ProfileCatalog.looksLikePath(profilePath) ? profilePath : "./" + profilePath)
                guard let trace = read.direction(self.direction.direction).trace else {
                    preconditionFailure("the profile written has no trace on \(self.direction.direction)")
                }
                loaded = trace
            } catch {
                printError("netcond: the profile written does not read back (a bug in netcond): \(error.description)")
                throw ExitCode(1)
            }
            precondition(loaded.hasTimes(recording.trace), "the trace written reads back different")
            for line in recording.report(traceFile: tracePath, profileFile: profilePath, loaded: loaded) {
                print(TerminalText.escaped(line))
            }
        }

        /// `--list-flows`: the connections, numbered as --flow takes them.
        func list(_ open: TraceRecorder.Opener) throws {
            let flows: [FlowListing]
            do {
                flows = try TraceRecorder.flows(open: open)
            } catch {
                try Self.fail(error)
            }
            guard !flows.isEmpty else {
                print(TerminalText.escaped("\(self.capture): no TCP connections"))
                return
            }
            print(
                TerminalText.escaped(
                    "\(self.capture): \(flows.count) TCP connection\(flows.count == 1 ? "" : "s") (client -> server; "
                        + "down is toward the client; bytes are TCP payload); record one with --flow N"))
            for line in FlowListing.table(flows).split(separator: "\n") { print(TerminalText.escaped(String(line))) }
        }

        static func fail(_ error: TraceRecordError) throws -> Never {
            // One line at a time: a --flow that names no connection is answered with the list.
            let lines = error.description.split(separator: "\n").map { TerminalText.escaped(String($0)) }
            printError("netcond: " + lines.joined(separator: "\n"))
            switch error {
            case .window, .flow: throw ExitCode(2)
            case .capture, .unusable: throw ExitCode(1)
            }
        }

        /// Writes the trace a piece at a time to a file beside `path`, then puts it in place.
        static func writeTrace(_ trace: OpportunityTimes, to path: String) throws {
            let partial = path + ".partial"
            do {
                guard FileManager.default.createFile(atPath: partial, contents: nil),
                    let handle = FileHandle(forWritingAtPath: partial)
                else {
                    throw CocoaError(.fileWriteNoPermission)
                }
                defer { try? handle.close() }
                try trace.fileText { piece in try handle.write(contentsOf: Data(piece.utf8)) }
                try handle.synchronize()
                if FileManager.default.fileExists(atPath: path) { try FileManager.default.removeItem(atPath: path) }
                try FileManager.default.moveItem(atPath: partial, toPath: path)
            } catch {
                try? FileManager.default.removeItem(atPath: partial)
                printError("netcond: cannot write the report \(path): \(error.localizedDescription)")
                throw ExitCode(3)
            }
        }
    }
}
