import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The moments on a run's time axis (seconds since the client started) that a check's verdict
/// rests on, for the HTML report's timeline: the cut and the request that resumed it, the attempts
/// whose gaps backed off or did not, the POSTs of an intent, the steps of a usable client, where the
/// portal stood in the way, the exit or the deadline.
extension Checks {
    static func marks(_ spec: CheckSpec, _ evidence: RunEvidence) -> [Double] {
        let end = evidence.timedOut ? evidence.deadline.seconds : evidence.duration
        var marks: [Double]
        switch spec {
        case .completes:
            marks = [end]
        case .resumes(let check):
            let gets = evidence.gets(of: check.file)
            marks = []
            for (index, request) in gets.enumerated() where request.bodyBytesReceived > 0 && request.cutByNetwork {
                marks.append(request.at)
                if let ended = request.ended { marks.append(ended) }
                if index + 1 < gets.count { marks.append(gets[index + 1].at) }
            }
        case .backsOff(let check):
            let requests = check.file.map { evidence.gets(of: $0) } ?? evidence.requests
            let attempts = (requests.map { ($0.at, $0.failed) } + evidence.failedConnects.map { ($0.at, true) }).sorted
            { $0.0 < $1.0 }
            if let first = attempts.firstIndex(where: \.1), let last = attempts.lastIndex(where: \.1) {
                marks = attempts[first...min(last + 1, attempts.count - 1)].map(\.0)
            } else {
                marks = attempts.map(\.0)
            }
        case .reconnects:
            marks = evidence.handovers.flatMap { handover in
                [handover.at, handover.back] + (evidence.requests.first { $0.at > handover.at }.map { [$0.at] } ?? [])
            }
        case .idempotent(let check):
            let path = OriginAPI.path(of: check.api)
            marks = evidence.requests.filter { $0.method == "POST" && $0.path == path }.map(\.at)
        case .staysUsable(let check):
            switch check.steps {
            case .lines(let pattern)?:
                let regex = try? NSRegularExpression(pattern: pattern)
                marks = evidence.lines.filter { line in
                    regex?.firstMatch(in: line.text, range: NSRange(line.text.startIndex..., in: line.text)) != nil
                }.map(\.at)
            case .requests(let glob)?:
                marks = evidence.requests.filter { Checks.isStep($0, glob: glob, host: check.host) }.flatMap {
                    [$0.at] + ($0.ended.map { [$0] } ?? [])
                }
            case nil:
                marks = []
            }
            marks.append(end)
        case .revalidates(let check):
            marks = evidence.requests.filter { $0.method == "GET" && $0.path == check.path }.map(\.at)
        case .overlaps(let check):
            marks = Checks.overlapping(check, evidence).flatMap { [$0.at, $0.ended ?? end] }
        case .delivers(let check):
            let path = OriginAPI.path(of: check.api)
            // The network's return, when the client was still there to meet it, and each call.
            let back = check.returnsAt.seconds
            marks =
                (back <= end ? [back] : [])
                + evidence.requests.filter { $0.method == "POST" && $0.path == path }.map(\.at)
        case .radio:
            // Where the radio woke.
            let lane = evidence.radio?.intervals ?? []
            marks = lane.indices.filter { lane[$0].state.isOn && ($0 == 0 || lane[$0 - 1].state == .idle) }.map {
                lane[$0].start
            }
            marks.append(end)
        case .captiveSafe:
            marks = evidence.portal.filter { $0.kind == .answered || $0.kind == .intercepted || $0.kind == .opened }
                .map(\.at)
            marks.append(end)
        }
        return Array(Set(marks.map { ($0 * 1000).rounded() / 1000 })).sorted()
    }
}
