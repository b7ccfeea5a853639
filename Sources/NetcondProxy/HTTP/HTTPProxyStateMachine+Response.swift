import NIOCore
import NIOHTTP1
import NetcondCore

/// The server's side of ``HTTPProxyStateMachine``: its response (and what a fault does to it), its
/// close, and a response netcond cannot read.
extension HTTPProxyStateMachine {
    // MARK: Server → client

    mutating func responsePart(_ part: HTTPClientResponsePart, now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        self.respond(part, now: now, into: &actions)
        return actions
    }

    mutating func respond(_ part: HTTPClientResponsePart, now: NIODeadline, into actions: inout [Action]) {
        guard self.state == .forwarding else { return }
        if case .head(let head) = part, (100..<200).contains(head.status.code), head.status != .switchingProtocols {
            // Not the response yet: it goes straight on (faults and holds apply to the response).
            actions.append(.write(.head(head), flush: true))
            return
        }
        if let notBefore = self.exchange.responseNotBefore {
            // `delay`: the response waits (and the server is not read meanwhile).
            self.exchange.held.append(part)
            if !self.exchange.releaseScheduled {
                self.exchange.releaseScheduled = true
                actions.append(.releaseAt(notBefore))
            }
            return
        }
        switch part {
        case .head(var head):
            if self.exchange.fault == .dropResponse {
                // Processed upstream, never answered: the client sees the connection close.
                self.state = .closed
                self.upstream = nil
                actions.append(contentsOf: [.closeUpstream, .closeClient(CloseWhenDrained())])
                return
            }
            if self.exchange.fault == .hang {
                // Processed upstream, never answered: the client's connection stays open and silent
                // (what it sends is read and dropped) until it gives up.
                self.state = .closed
                self.upstream = nil
                actions.append(.closeUpstream)
                return
            }
            if case .slowClose = self.exchange.fault {
                head.headers.replaceOrAdd(name: "Connection", value: "close")
            }
            if let altered = head.headers.first(where: { $0.name.contains("\u{FFFD}") || $0.value.contains("\u{FFFD}") }
            ) {
                actions.append(.noteAlteredHeader(altered.name, host: self.upstream?.host ?? ""))
            }
            self.exchange.responseStarted = true
            self.exchange.responseStatus = head.status
            if !head.isKeepAlive {
                self.exchange.keepAlive = false
                self.exchange.serverCloses = true
            }
            actions.append(.write(.head(head), flush: false))
        case .body(var buffer):
            switch self.exchange.fault {
            case .cut(let limit, let end)?:
                let room = max(0, Int(clamping: limit.bytes) - self.exchange.responseBodyBytes)
                if buffer.readableBytes >= room {
                    return self.cut(after: buffer.readSlice(length: room)!, reset: end == .reset, into: &actions)
                }
            default:
                break
            }
            self.exchange.responseBodyBytes += buffer.readableBytes
            actions.append(.write(.body(.byteBuffer(buffer)), flush: false))
        case .end(let trailers):
            actions.append(.write(.end(trailers), flush: true))
            self.exchange.responseEnded = true
            if self.exchange.responseStatus == .switchingProtocols {
                // The server switched protocols (a WebSocket): what follows is no longer HTTP.
                guard self.upstream != nil else {
                    self.state = .closed
                    return actions.append(.closeClient(CloseWhenDrained()))
                }
                self.state = .tunnel
                self.upstream = nil
                return actions.append(.switchToTunnel)
            }
            self.finishIfDone(now: now, into: &actions)
        }
    }

    /// `delay`: the wait is over; what was held goes out in order, then the server is read again.
    mutating func releaseHeld(now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        let held = self.exchange.held
        self.exchange.held = []
        self.exchange.releaseScheduled = false
        self.exchange.responseNotBefore = nil
        for part in held { self.respond(part, now: now, into: &actions) }
        actions.append(.flushClient)
        if let reset = self.exchange.closedWhileHeld {
            self.exchange.closedWhileHeld = nil
            self.upstreamClosed(reset: reset, into: &actions)
        }
        actions.append(.resumeUpstreamReading)
        return actions
    }

    /// `cut_after`: the last bytes the client gets, then a FIN or a reset.
    mutating func cut(after last: ByteBuffer, reset: Bool, into actions: inout [Action]) {
        self.state = .closed
        self.upstream = nil
        self.exchange.responseBodyBytes += last.readableBytes
        actions.append(.closeUpstream)
        if reset {
            actions.append(.writeThenReset(last))
        } else {
            actions.append(contentsOf: [
                .write(.body(.byteBuffer(last)), flush: true), .closeClient(CloseWhenDrained()),
            ])
        }
    }

    /// The server closed its connection (`reset`: with a reset).
    mutating func upstreamClosed(reset: Bool) -> [Action] {
        var actions: [Action] = []
        self.upstreamClosed(reset: reset, into: &actions)
        return actions
    }

    mutating func upstreamClosed(reset: Bool, into actions: inout [Action]) {
        self.upstream = nil
        if self.awaitingServerClose {
            self.awaitingServerClose = false
            return actions.append(.closeClient(CloseWhenDrained(reset: reset, crossesLink: true)))
        }
        if self.state == .idle && self.queued.isEmpty {
            // The server closed a keep-alive connection between requests (its idle time-out): the
            // client sees its connection close, as it would without netcond, instead of one that
            // silently reconnects for its next request. A client that reuses a connection the
            // server has just closed must cope with that, and is judged on it.
            self.state = .closed
            return actions.append(.closeClient(CloseWhenDrained(reset: reset, crossesLink: true)))
        }
        guard self.state == .forwarding else { return }
        if self.exchange.responseNotBefore != nil {
            // Held parts first; the close is looked at again once they have gone out.
            self.exchange.closedWhileHeld = reset
            return
        }
        if self.exchange.responseEnded { return }
        // No response, or one cut short: the client sees what the server did, a FIN or a reset,
        // when it would have crossed the link; never an answer of netcond's own (a 502 here would
        // be retried by clients that would not retry a lost response, and taken as a result by
        // others).
        self.state = .closed
        actions.append(.closeClient(CloseWhenDrained(reset: reset, crossesLink: true)))
    }

    /// The server's response could not be read as HTTP (bytes that are not a status line, an
    /// HTTP/0.9 answer, `Content-Length` beside `Transfer-Encoding`, a bad chunk). The proxy cannot
    /// pass on what it could not parse: before a response began, the client gets a 502 saying so,
    /// as a forward proxy answers; after, its response ends cut short. Either way the event is noted.
    mutating func upstreamMalformed(_ reason: String) -> [Action] {
        if self.awaitingServerClose {
            // Bytes after a whole response that said it closes: the connection ends there.
            self.awaitingServerClose = false
            self.upstream = nil
            return [.closeClient(CloseWhenDrained(reset: false, crossesLink: true))]
        }
        var actions: [Action] = []
        let target = self.upstream
        self.upstream = nil
        actions.append(.noteMalformed(reason, host: target?.description ?? "the server"))
        guard self.state == .forwarding, !self.exchange.responseEnded else {
            if self.state != .closed {
                self.state = .closed
                actions.append(.closeClient(CloseWhenDrained()))
            }
            return actions
        }
        self.queued.removeAll()
        let began = self.exchange.responseStarted && self.exchange.held.isEmpty
        // What a `delay` fault held back never goes out now.
        self.exchange.held = []
        self.exchange.responseNotBefore = nil
        guard began else {
            self.fail(
                502, "the response of \(target?.description ?? "the server") is not HTTP netcond can read: \(reason)",
                into: &actions)
            return actions
        }
        // Part of it reached the client (or waits to): it ends there, cut short.
        self.state = .closed
        actions.append(.closeClient(CloseWhenDrained(reset: false, crossesLink: true)))
        return actions
    }
}
