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

        func validate() throws {
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
            let prefix = self.prefix
            let tracePath = prefix + ".trace"
            let profilePath = prefix + ".yaml"
            let recording: TraceRecording
            do {
                var capture = try PacketCaptureFile(path: self.capture, source: self.capture)
                let options = TraceRecorder.Options(
                    direction: self.direction.direction, from: self.from.map { Span.seconds(double: $0) },
                    to: self.to.map { Span.seconds(double: $0) })
                recording = try TraceRecorder.record(&capture, options: options)
            } catch let error as TraceRecordError {
                printError("netcond: \(TerminalText.escaped(error.description))")
                if case .window = error { throw ExitCode(2) }
                throw ExitCode(1)
            } catch let error as PacketCaptureFile.ReadError {
                printError("netcond: \(TerminalText.escaped(error.description))")
                throw ExitCode(1)
            }
            let traceName = (tracePath as NSString).lastPathComponent
            let profile = recording.profileYAML(
                name: (prefix as NSString).lastPathComponent, traceFile: traceName,
                captureName: (self.capture as NSString).lastPathComponent)
            try writeReports([(tracePath, { recording.traceText }), (profilePath, { profile })])
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
            precondition(
                loaded.millisecondsText == recording.trace.millisecondsText, "the trace written reads back different")
            for line in recording.report(traceFile: tracePath, profileFile: profilePath, loaded: loaded) {
                print(TerminalText.escaped(line))
            }
        }
    }
}
