import NIOCore
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondProxy

/// The HTTP proxy's decisions, as values: each event in, the exact actions out, no channel and no clock.
@Suite struct HTTPProxyStateMachineTests {
    typealias Action = HTTPProxyStateMachine.Action

    /// The rules a request meets, set by the test.
    final class Policy: HTTPRequestPolicy {
        var fault: FaultAction?
        var captive: CannedResponse?
        var asked: [FaultRequest] = []

        func captiveAnswer(method: String, host: String, path: String, now: NIODeadline) -> CannedResponse? {
            self.captive
        }

        func decide(_ request: FaultRequest, now: NIODeadline) -> FaultAction? {
            self.asked.append(request)
            return self.fault
        }
    }

    let now = NIODeadline.uptimeNanoseconds(5_000_000_000)
    let origin = UpstreamTarget(host: "origin.test", port: 80)

    func get(_ url: String, keepAlive: Bool = true, headers: [(String, String)] = []) -> HTTPServerRequestPart {
        let all = keepAlive ? headers : headers + [("Connection", "close")]
        return .head(HTTPRequestHead(version: .http1_1, method: .GET, uri: url, headers: HTTPHeaders(all)))
    }

    func upstreamHead(_ path: String, host: String = "origin.test") -> HTTPClientRequestPart {
        .head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: ["Host": host]))
    }

    func response(_ status: HTTPResponseStatus = .ok, headers: HTTPHeaders = ["Content-Length": "5"])
        -> HTTPClientResponsePart
    {
        .head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))
    }

    func body(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    /// A machine with one GET to origin.test forwarded over a fresh connection.
    func forwarding(_ policy: Policy = Policy(), url: String = "http://origin.test/a") -> HTTPProxyStateMachine {
        var machine = HTTPProxyStateMachine(policy: policy)
        _ = machine.requestPart(self.get(url), now: self.now)
        _ = machine.requestPart(.end(nil), now: self.now)
        _ = machine.upstreamConnected(self.origin, now: self.now)
        return machine
    }

    @Test func aRequestConnectsThenGoesUpstreamInOriginFormWithAHost() {
        var machine = HTTPProxyStateMachine(policy: nil)
        #expect(machine.waitsIdle)
        let observed1 = machine.requestPart(
            self.get("http://origin.test/a?b=1", headers: [("Proxy-Connection", "keep-alive")]), now: self.now)
        #expect(observed1 == [.cancelIdleTimer, .connect(self.origin)])
        #expect(machine.state == .connecting)
        let observed2 = machine.requestPart(.body(self.body("xy")), now: self.now)
        #expect(observed2 == [])
        let observed3 = machine.requestPart(.end(nil), now: self.now)
        #expect(observed3 == [])
        let observed4 = machine.upstreamConnected(self.origin, now: self.now)
        #expect(
            observed4 == [
                .forward(self.upstreamHead("/a?b=1"), flush: false),
                .forward(.body(.byteBuffer(self.body("xy"))), flush: false),
                .forward(.end(nil), flush: true),
                .flushUpstream, .resumeReadingIfPending,
            ])
        #expect(machine.state == .forwarding)
    }

    @Test func theResponseGoesToTheClientAndTheConnectionIsReusedForTheSameHost() {
        var machine = self.forwarding()
        let observed5 = machine.responsePart(self.response(), now: self.now)
        #expect(
            observed5 == [
                .write(
                    .head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "5"])),
                    flush: false)
            ])
        let observed6 = machine.responsePart(.body(self.body("hello")), now: self.now)
        #expect(observed6 == [.write(.body(.byteBuffer(self.body("hello"))), flush: false)])
        let observed7 = machine.responsePart(.end(nil), now: self.now)
        #expect(observed7 == [.write(.end(nil), flush: true), .resumeReadingIfPending, .rearmIdleTimer])
        #expect(machine.state == .idle)
        #expect(!machine.waitsIdle, "a server connection is open: its own idle time-out decides")
        let observed8 = machine.requestPart(self.get("http://origin.test/b"), now: self.now)
        #expect(observed8 == [.cancelIdleTimer, .forward(self.upstreamHead("/b"), flush: false)])
    }

    @Test func anotherHostClosesTheOldConnectionFirst() {
        var machine = self.forwarding()
        _ = machine.responsePart(self.response(), now: self.now)
        _ = machine.responsePart(.end(nil), now: self.now)
        let observed9 = machine.requestPart(self.get("http://other.test:8080/"), now: self.now)
        #expect(
            observed9 == [.cancelIdleTimer, .closeUpstream, .connect(UpstreamTarget(host: "other.test", port: 8080))])
    }

    @Test func aPipelinedRequestWaitsForTheResponseBeforeIt() {
        var machine = self.forwarding()
        let observed10 = machine.requestPart(self.get("http://origin.test/second"), now: self.now)
        #expect(observed10 == [])
        let observed11 = machine.requestPart(.end(nil), now: self.now)
        #expect(observed11 == [])
        _ = machine.responsePart(self.response(), now: self.now)
        let observed12 = machine.responsePart(.end(nil), now: self.now)
        #expect(
            observed12 == [
                .write(.end(nil), flush: true),
                .forward(self.upstreamHead("/second"), flush: false),
                .forward(.end(nil), flush: true),
                .resumeReadingIfPending, .rearmIdleTimer,
            ])
    }

    @Test func aRequestThatIsNotKeptAliveClosesAfterItsResponse() {
        var machine = HTTPProxyStateMachine(policy: nil)
        _ = machine.requestPart(self.get("http://origin.test/", keepAlive: false), now: self.now)
        _ = machine.requestPart(.end(nil), now: self.now)
        _ = machine.upstreamConnected(self.origin, now: self.now)
        _ = machine.responsePart(self.response(), now: self.now)
        let observed13 = machine.responsePart(.end(nil), now: self.now)
        #expect(observed13 == [.write(.end(nil), flush: true), .closeUpstream, .closeClient(CloseWhenDrained())])
        #expect(machine.state == .closed)
    }

    @Test func theServerClosingBetweenRequestsClosesTheClientAcrossTheLink() {
        var machine = self.forwarding()
        _ = machine.responsePart(self.response(), now: self.now)
        _ = machine.responsePart(.end(nil), now: self.now)
        let observed14 = machine.upstreamClosed(reset: true)
        #expect(observed14 == [.closeClient(CloseWhenDrained(reset: true, crossesLink: true))])
    }

    @Test func theServerClosingBeforeItsResponseIsAFinNeverA502() {
        var machine = self.forwarding()
        let observed15 = machine.upstreamClosed(reset: false)
        #expect(observed15 == [.closeClient(CloseWhenDrained(reset: false, crossesLink: true))])
        #expect(machine.state == .closed)
    }

    /// A response the decoder could not read (garbage, HTTP/0.9, Content-Length beside
    /// Transfer-Encoding) is a 502 saying so before the response began, a cut after; noted either way.
    @Test func aResponseThatIsNotHTTPIsA502BeforeItBeganAndACutAfter() {
        var machine = self.forwarding()
        let text = "netcond: the response of origin.test:80 is not HTTP netcond can read: invalid constant\n"
        let answer = CannedResponse.text(502, text)
        let observed = machine.upstreamMalformed("invalid constant")
        #expect(
            observed == [
                .noteMalformed("invalid constant", host: "origin.test:80"),
                .write(.head(answer.head(keepAlive: false)), flush: false),
                .write(.body(.byteBuffer(ByteBuffer(bytes: answer.body))), flush: false),
                .write(.end(nil), flush: true),
                .closeClient(CloseWhenDrained()),
            ])
        #expect(machine.state == .closed)

        var started = self.forwarding()
        _ = started.responsePart(self.response(), now: self.now)
        let cut = started.upstreamMalformed("invalid chunk size")
        #expect(
            cut == [
                .noteMalformed("invalid chunk size", host: "origin.test:80"),
                .closeClient(CloseWhenDrained(reset: false, crossesLink: true)),
            ])
    }

    @Test func aRefusedConnectionIsAResetAndAnUnknownNameA502() {
        var refused = HTTPProxyStateMachine(policy: nil)
        _ = refused.requestPart(self.get("http://origin.test/"), now: self.now)
        let observed16 = refused.connectFailed(.refused(self.origin, "refused"))
        #expect(observed16 == [.closeClient(CloseWhenDrained(reset: true))])

        var unknown = HTTPProxyStateMachine(policy: nil)
        _ = unknown.requestPart(self.get("http://nowhere.invalid/"), now: self.now)
        let actions = unknown.connectFailed(.nameNotResolved("nowhere.invalid"))
        guard case .write(.head(let head), _)? = actions.first else {
            Issue.record("no answer: \(actions)")
            return
        }
        #expect(head.status.code == 502)
        #expect(actions.last == .closeClient(CloseWhenDrained()))
    }

    @Test func aClientLeavingWhileItsConnectionIsHeldUpIsNeverConnected() {
        var machine = HTTPProxyStateMachine(policy: nil)
        _ = machine.requestPart(self.get("http://origin.test/"), now: self.now)
        let observed17 = machine.clientInputClosed(leftBeforeConnecting: true)
        #expect(observed17 == [.abandonConnect, .closeClientNow])
        #expect(machine.state == .closed)
    }

    @Test func aHalfCloseAfterTheRequestClosesOnceItIsAnswered() {
        var machine = self.forwarding()
        let observed18 = machine.clientInputClosed(leftBeforeConnecting: false)
        #expect(observed18 == [])
        _ = machine.responsePart(self.response(), now: self.now)
        let observed19 = machine.responsePart(.end(nil), now: self.now)
        #expect(observed19 == [.write(.end(nil), flush: true), .closeUpstream, .closeClient(CloseWhenDrained())])
    }

    @Test func aStatusFaultIsAnsweredOnceTheRequestIsReadAndTheConnectionStays() {
        let policy = Policy()
        policy.fault = .status(503, retryAfter: nil)
        var machine = HTTPProxyStateMachine(policy: policy)
        let observed20 = machine.requestPart(self.get("http://origin.test/api"), now: self.now)
        #expect(observed20 == [.cancelIdleTimer])
        #expect(policy.asked == [FaultRequest(method: "GET", host: "origin.test", path: "/api", port: 80)])
        let observed21 = machine.requestPart(.body(self.body("ignored")), now: self.now)
        #expect(observed21 == [])
        let actions = machine.requestPart(.end(nil), now: self.now)
        guard case .write(.head(let head), flush: false)? = actions.first else {
            Issue.record("no answer: \(actions)")
            return
        }
        #expect(head.status.code == 503)
        #expect(actions.suffix(3) == [.write(.end(nil), flush: true), .resumeReadingIfPending, .rearmIdleTimer])
        #expect(machine.waitsIdle)
    }

    @Test func firstByteHoldsTheResponseUntilItsMomentAndACloseBeforeItsEndUntilAfterIt() {
        let policy = Policy()
        policy.fault = .delay(.seconds(2))
        var machine = self.forwarding(policy)
        #expect(machine.responseHeld && !machine.responseMayFlow)
        let observed22 = machine.responsePart(self.response(), now: self.now)
        #expect(observed22 == [.releaseAt(self.now + .seconds(2))])
        let observed23 = machine.responsePart(.body(self.body("hello")), now: self.now)
        #expect(observed23 == [])
        let observed24 = machine.upstreamClosed(reset: false)
        #expect(observed24 == [])
        let released = machine.releaseHeld(now: self.now + .seconds(2))
        // What was held goes out in order; the server's close, made before the response ended,
        // comes after it: the client sees the response cut short by a FIN crossing the link.
        #expect(
            released == [
                .write(
                    .head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "5"])),
                    flush: false),
                .write(.body(.byteBuffer(self.body("hello"))), flush: false),
                .flushClient,
                .closeClient(CloseWhenDrained(reset: false, crossesLink: true)),
                .resumeUpstreamReading,
            ])
        #expect(!machine.responseHeld)
        #expect(machine.state == .closed)
    }

    @Test func aServerCloseHeldBehindFirstByteClosesTheClientAfterTheHeldParts() {
        let policy = Policy()
        policy.fault = .delay(.seconds(1))
        var machine = self.forwarding(policy)
        _ = machine.responsePart(self.response(), now: self.now)
        _ = machine.upstreamClosed(reset: true)
        let released = machine.releaseHeld(now: self.now + .seconds(1))
        #expect(
            released == [
                .write(
                    .head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "5"])),
                    flush: false),
                .flushClient,
                .closeClient(CloseWhenDrained(reset: true, crossesLink: true)),
                .resumeUpstreamReading,
            ])
    }

    @Test func truncateAfterCutsTheBodyAtItsByteWithAFinAndResetAfterWithAReset() {
        for (fault, reset) in [
            (FaultAction.cut(after: ByteCount(bytes: 7), end: .fin), false),
            (.cut(after: ByteCount(bytes: 7), end: .reset), true),
        ] {
            let policy = Policy()
            policy.fault = fault
            var machine = self.forwarding(policy)
            _ = machine.responsePart(self.response(headers: ["Content-Length": "10"]), now: self.now)
            let observed25 = machine.responsePart(.body(self.body("abcd")), now: self.now)
            #expect(observed25 == [.write(.body(.byteBuffer(self.body("abcd"))), flush: false)])
            let cut = machine.responsePart(.body(self.body("efghij")), now: self.now)
            if reset {
                #expect(cut == [.closeUpstream, .writeThenReset(self.body("efg"))])
            } else {
                #expect(
                    cut == [
                        .closeUpstream, .write(.body(.byteBuffer(self.body("efg"))), flush: true),
                        .closeClient(CloseWhenDrained()),
                    ])
            }
            #expect(machine.state == .closed)
        }
    }

    @Test func dropResponseClosesWithoutAnAnswer() {
        let policy = Policy()
        policy.fault = .dropResponse
        var machine = self.forwarding(policy)
        let observed26 = machine.responsePart(self.response(), now: self.now)
        #expect(observed26 == [.closeUpstream, .closeClient(CloseWhenDrained())])
    }

    @Test func aServerThatSaysCloseIsFollowedToItsOwnClose() {
        var machine = self.forwarding(Policy())
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Connection", value: "close")
        #expect(machine.responsePart(.head(head), now: self.now) == [.write(.head(head), flush: false)])
        // The response is whole, but the client's connection ends only when the server's does.
        #expect(machine.responsePart(.end(nil), now: self.now) == [.write(.end(nil), flush: true)])
        #expect(
            machine.upstreamClosed(reset: false) == [.closeClient(CloseWhenDrained(reset: false, crossesLink: true))])
    }

    /// The server said it closes, and then: bytes it may not send, or the client's FIN. Either
    /// way the wait for its close ends, as it would without netcond.
    @Test func aWaitForTheServersCloseEndsOnStrayBytesOrTheClientsFIN() {
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Connection", value: "close")
        for ending in ["stray bytes", "client FIN"] {
            var machine = self.forwarding(Policy())
            _ = machine.responsePart(.head(head), now: self.now)
            _ = machine.responsePart(.end(nil), now: self.now)
            if ending == "stray bytes" {
                let observed = machine.upstreamMalformed("Data after Connection: close")
                #expect(observed == [.closeClient(CloseWhenDrained(reset: false, crossesLink: true))])
            } else {
                let observed = machine.clientInputClosed(leftBeforeConnecting: false)
                #expect(observed == [.closeUpstream, .closeClient(CloseWhenDrained())])
            }
            #expect(machine.upstreamClosed(reset: false).isEmpty)
        }
    }

    /// netcond's own answer to a request that asked to close (a status fault) closes at once: the
    /// kept-alive server connection behind it says nothing and does not close for it.
    @Test func aStatusFaultAnswerToAClosingRequestClosesAtOnce() {
        let policy = Policy()
        var machine = self.forwarding(policy)
        _ = machine.responsePart(self.response(), now: self.now)
        _ = machine.responsePart(.body(self.body("hello")), now: self.now)
        _ = machine.responsePart(.end(nil), now: self.now)
        policy.fault = .status(503, retryAfter: nil)
        _ = machine.requestPart(self.get("http://origin.test/b", keepAlive: false), now: self.now)
        let observed = machine.requestPart(.end(nil), now: self.now)
        #expect(observed.contains(.closeUpstream) && observed.last == .closeClient(CloseWhenDrained()), "\(observed)")
    }

    @Test func hangForwardsTheRequestAndNeverAnswersNorCloses() {
        let policy = Policy()
        policy.fault = .hang
        var machine = self.forwarding(policy)
        #expect(machine.responsePart(self.response(), now: self.now) == [.closeUpstream])
        #expect(machine.responsePart(.body(ByteBuffer(string: "late")), now: self.now).isEmpty)
        #expect(machine.responsePart(.end(nil), now: self.now).isEmpty)
        // What the client sends meanwhile is read and dropped; its FIN does not close it either.
        let mayRead = machine.mayRead(upstreamWritable: true)
        #expect(mayRead)
        #expect(
            machine.requestPart(
                .head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://a.test/")), now: self.now
            ).isEmpty)
        let onFIN = machine.clientInputClosed(leftBeforeConnecting: false)
        #expect(onFIN.isEmpty && !machine.waitsIdle)
    }

    @Test func slowCloseAsksForCloseAndLingersAfterTheResponse() {
        let policy = Policy()
        policy.fault = .slowClose(.seconds(3))
        var machine = self.forwarding(policy)
        let head = machine.responsePart(self.response(), now: self.now)
        guard case .write(.head(let written), _)? = head.first else {
            Issue.record("no head: \(head)")
            return
        }
        #expect(written.headers["Connection"] == ["close"])
        let observed27 = machine.responsePart(.end(nil), now: self.now)
        #expect(observed27 == [.write(.end(nil), flush: true), .closeUpstream, .closeLater(.seconds(3))])
    }

    @Test func switchingProtocolsTurnsTheExchangeIntoATunnel() {
        var machine = self.forwarding()
        _ = machine.responsePart(
            self.response(.switchingProtocols, headers: ["Upgrade": "websocket", "Connection": "upgrade"]),
            now: self.now)
        let observed28 = machine.responsePart(.end(nil), now: self.now)
        #expect(observed28 == [.write(.end(nil), flush: true), .switchToTunnel])
        #expect(machine.state == .tunnel)
        let observed29 = !machine.mayRead(upstreamWritable: true)
        #expect(observed29)
    }

    @Test func aMalformedRequestGetsOne400UnlessItsOwnResponseIsUnderWay() {
        var fresh = HTTPProxyStateMachine(policy: nil)
        let answer = fresh.malformedRequest("a line does not end with CRLF")
        #expect(answer.prefix(2) == [.abandonConnect, .closeUpstream])
        #expect(answer.last == .closeClient(CloseWhenDrained()))
        let again = fresh.malformedRequest("again")
        #expect(again == [], "one answer only")

        // The request being answered broke off mid-body: its response, already going, is cut short.
        var broken = HTTPProxyStateMachine(policy: nil)
        _ = broken.requestPart(self.get("http://origin.test/a"), now: self.now)
        _ = broken.upstreamConnected(self.origin, now: self.now)
        _ = broken.requestPart(.body(self.body("ab")), now: self.now)
        _ = broken.responsePart(self.response(), now: self.now)
        let cut = broken.malformedRequest("x")
        #expect(cut == [.abandonConnect, .closeUpstream, .closeClient(CloseWhenDrained())])
    }

    /// A whole request, then a malformed one, while the server connection is still being made: the
    /// whole one is forwarded and answered, then the 400, then the close (no reset, no lost answer).
    @Test func aMalformedRequestBehindAWholeOneWaitsForItsAnswer() {
        var machine = HTTPProxyStateMachine(policy: nil)
        _ = machine.requestPart(self.get("http://origin.test/a"), now: self.now)
        _ = machine.requestPart(.end(nil), now: self.now)
        #expect(machine.state == .connecting)
        let deferred = machine.malformedRequest("bad request line")
        #expect(deferred == [], "the connect goes on")
        let connected = machine.upstreamConnected(self.origin, now: self.now)
        #expect(connected.contains(.forward(self.upstreamHead("/a"), flush: false)))
        _ = machine.responsePart(self.response(), now: self.now)
        _ = machine.responsePart(.body(self.body("hello")), now: self.now)
        let ended = machine.responsePart(.end(nil), now: self.now)
        #expect(ended.first == .write(.end(nil), flush: true), "the answer goes out whole")
        #expect(ended.contains(.closeUpstream))
        let written = ended.compactMap { action -> HTTPResponseStatus? in
            if case .write(.head(let head), _) = action { return head.status }
            return nil
        }
        #expect(written == [.badRequest])
        #expect(ended.last == .closeClient(CloseWhenDrained()))
        #expect(machine.state == .closed)

        // Behind a response already under way (pipelined): the same, once it ends.
        var pipelined = self.forwarding()
        _ = pipelined.responsePart(self.response(), now: self.now)
        #expect(pipelined.malformedRequest("x") == [])
        _ = pipelined.responsePart(.body(self.body("hello")), now: self.now)
        let after = pipelined.responsePart(.end(nil), now: self.now)
        #expect(after.last == .closeClient(CloseWhenDrained()))
        #expect(
            after.contains { if case .write(.head(let head), _) = $0 { head.status == .badRequest } else { false } })

        // A pipelined request whose body breaks while the one before it waits on the server: the
        // one before gets its answer, the broken one never goes upstream, then the 400.
        var brokenBody = HTTPProxyStateMachine(policy: nil)
        _ = brokenBody.requestPart(self.get("http://origin.test/a"), now: self.now)
        _ = brokenBody.requestPart(.end(nil), now: self.now)
        _ = brokenBody.requestPart(self.get("http://origin.test/b"), now: self.now)
        _ = brokenBody.requestPart(.body(self.body("ab")), now: self.now)
        #expect(brokenBody.malformedRequest("bad chunk") == [])
        let made = brokenBody.upstreamConnected(self.origin, now: self.now)
        #expect(!made.contains(.forward(self.upstreamHead("/b"), flush: false)), "the broken request is dropped")
        _ = brokenBody.responsePart(self.response(), now: self.now)
        let answered = brokenBody.responsePart(.end(nil), now: self.now)
        #expect(answered.first == .write(.end(nil), flush: true))
        #expect(
            answered.contains { if case .write(.head(let head), _) = $0 { head.status == .badRequest } else { false } })
        #expect(answered.last == .closeClient(CloseWhenDrained()))

        // Behind a request that said Connection: close: the server closes after it, as it would.
        var closing = HTTPProxyStateMachine(policy: nil)
        _ = closing.requestPart(self.get("http://origin.test/a", keepAlive: false), now: self.now)
        _ = closing.requestPart(.end(nil), now: self.now)
        _ = closing.malformedRequest("x")
        _ = closing.upstreamConnected(self.origin, now: self.now)
        _ = closing.responsePart(self.response(), now: self.now)
        let closed = closing.responsePart(.end(nil), now: self.now)
        #expect(!closed.contains { if case .write(.head, _) = $0 { true } else { false } })
        #expect(closed.last == .closeClient(CloseWhenDrained()))
    }

    @Test func theClientIsReadOnlyWhileItsRequestCanGoOn() {
        var machine = HTTPProxyStateMachine(policy: nil)
        let observed32 = machine.mayRead(upstreamWritable: false)
        #expect(observed32)
        _ = machine.requestPart(self.get("http://origin.test/"), now: self.now)
        let observed33 = !machine.mayRead(upstreamWritable: true)
        #expect(observed33, "connecting")
        let observed34 = machine.takePendingRead()
        #expect(observed34)
        let observed35 = !machine.takePendingRead()
        #expect(observed35)
        _ = machine.upstreamConnected(self.origin, now: self.now)
        let observed36 = !machine.mayRead(upstreamWritable: false)
        #expect(observed36, "the server connection is full")
        let observed37 = machine.mayRead(upstreamWritable: true)
        #expect(observed37)
    }

    @Test func theIdleTimeOutClosesOnlyAConnectionWithNothingUnderWay() {
        var machine = HTTPProxyStateMachine(policy: nil)
        _ = machine.requestPart(self.get("http://origin.test/"), now: self.now)
        let observed38 = machine.idleTimedOut()
        #expect(observed38 == [])
        var idle = HTTPProxyStateMachine(policy: nil)
        let observed39 = idle.idleTimedOut()
        #expect(observed39 == [.closeClientNow])
        #expect(idle.state == .closed)
    }

    @Test func connectOpensATunnelAndBadFramingIsRefused() {
        var machine = HTTPProxyStateMachine(policy: nil)
        let connect = HTTPRequestHead(version: .http1_1, method: .CONNECT, uri: "origin.test:443")
        let observed40 = machine.requestPart(.head(connect), now: self.now)
        #expect(observed40 == [.cancelIdleTimer, .openTunnel(UpstreamTarget(host: "origin.test", port: 443))])
        #expect(machine.state == .tunnel)

        var twoHosts = HTTPProxyStateMachine(policy: nil)
        let actions = twoHosts.requestPart(
            self.get("http://origin.test/", headers: [("Host", "a"), ("Host", "b")]), now: self.now)
        guard case .write(.head(let head), _)? = actions.dropFirst().first else {
            Issue.record("no answer: \(actions)")
            return
        }
        #expect(head.status.code == 400)
        #expect(twoHosts.state == .closed)
    }
}
