import ArgumentParser
import Foundation
import NetcondCore
import NetcondScenario

struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Work with the reports netcond test writes.",
        discussion: """
            netcond report FILE.json --html OUT draws the HTML report of a JSON report; \
            netcond report --tcptrace CAPTURE.pcap [--drops DROPS.pcap] --html OUT draws a time-sequence graph \
            of each TCP connection of a capture (netcond run --engine packet --pcap); \
            netcond report merge PART.json... joins the parts of a sharded run.
            """,
        subcommands: [Draw.self, Merge.self],
        defaultSubcommand: Draw.self
    )

    struct Draw: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "html",
            abstract:
                "Draw the HTML report of a JSON report (netcond test --json): netcond report FILE.json --html OUT."
        )

        @Argument(help: "A JSON report written by netcond test --json (this netcond's format).")
        var file: String?

        @Option(
            name: .long,
            help:
                "Instead: draw a time-sequence graph (tcptrace's) of each TCP connection of this capture (pcap or pcapng; netcond run --engine packet --pcap FILE)."
        )
        var tcptrace: String?

        @Option(
            name: .long,
            help:
                "With --tcptrace: the link's drops of the same run (netcond run --pcap-drops FILE), marked on the graphs."
        )
        var drops: String?

        @Option(name: .long, help: "Write the HTML report here.")
        var html: String

        func validate() throws {
            if self.drops != nil && self.tcptrace == nil {
                throw ValidationError("--drops goes with --tcptrace CAPTURE.pcap")
            }
            switch (self.file, self.tcptrace) {
            case (nil, nil):
                throw ValidationError(
                    "give a JSON report (netcond report FILE.json --html OUT) or --tcptrace CAPTURE.pcap")
            case (.some, .some): throw ValidationError("give a JSON report or --tcptrace CAPTURE.pcap, not both")
            default: break
            }
        }

        func run() throws {
            let page: String
            if let capture = self.tcptrace {
                do {
                    let graph = try TimeSequence.read(capture: capture, drops: self.drops)
                    page = TimeSequenceReport.render(graph, source: capture, drops: self.drops)
                } catch {
                    printError("netcond: \(TerminalText.escaped(error.description))")
                    throw ExitCode(2)
                }
            } else {
                let file = self.file ?? ""
                guard let data = FileManager.default.contents(atPath: file) else {
                    printError("netcond: cannot read \(file)")
                    throw ExitCode(2)
                }
                do {
                    page = try HTMLReport.render(json: data, source: file)
                } catch {
                    printError("netcond: \(TerminalText.escaped(error.description))")
                    throw ExitCode(2)
                }
            }
            do {
                try page.write(toFile: self.html, atomically: true, encoding: .utf8)
            } catch {
                printError("netcond: cannot write \(self.html): \(error.localizedDescription)")
                throw ExitCode(3)
            }
        }
    }

    struct Merge: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "merge",
            abstract: "Join the JSON reports of a sharded run's parts (netcond test --shard I/N --json) into one.",
            discussion: """
                The merged report is the one the whole run would have written: every scenario once (in \
                order of name), passed when every part passed. A scenario in two files, parts of \
                different splits, a file that is not a netcond JSON report or one of another format are \
                refused (exit 2), naming the file.

                Example:
                  netcond report merge part-*.json --json report.json --html report.html
                """
        )

        @Argument(help: "The parts' JSON reports.")
        var files: [String]

        @Option(name: .long, help: "Write the merged report here (default: standard output).")
        var json: String?

        @Option(name: .long, help: "Also draw the merged report as HTML here (one page for the whole run).")
        var html: String?

        func run() throws {
            var reports: [(path: String, data: Data)] = []
            for file in self.files {
                guard let data = FileManager.default.contents(atPath: file) else {
                    printError("netcond: cannot read \(file)")
                    throw ExitCode(2)
                }
                reports.append((file, data))
            }
            let merged: String
            do {
                merged = try ReportMerge.merge(reports)
            } catch {
                printError("netcond: \(TerminalText.escaped(error.description))")
                throw ExitCode(2)
            }
            if self.json == nil { print(merged, terminator: "") }
            try writeReports([(self.json, { merged }), (self.html, { htmlReport(merged) })])
        }
    }
}
