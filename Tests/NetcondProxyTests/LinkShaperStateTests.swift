import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

/// The link shaper's decisions, as values: what it holds is given, the actions out are exact.
@Suite struct LinkShaperStateTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func shaping() -> LinkShaperState {
        var state = LinkShaperState()
        state.beginShaping(at: self.start)
        return state
    }

    @Test func bytesSkipTheLinkUntilShapingAndWhileItIsTransparentWithNothingHeld() {
        var passive = LinkShaperState()
        let observed1 = passive.bytesRead(upHeld: false, transparent: false)
        #expect(observed1 == .bypass)
        let observed2 = passive.bytesWritten(downHeld: false, transparent: false)
        #expect(observed2 == .bypass)
        var state = self.shaping()
        let observed3 = state.bytesRead(upHeld: false, transparent: false)
        #expect(observed3 == .link)
        let observed4 = state.bytesRead(upHeld: false, transparent: true)
        #expect(observed4 == .bypass)
        let observed5 = state.bytesRead(upHeld: true, transparent: true)
        #expect(observed5 == .link, "behind held bytes, in order")
        let observed6 = state.bytesWritten(downHeld: true, transparent: true)
        #expect(observed6 == .link)
    }

    @Test func aReadEndGoesOnOnlyForBytesThatSkippedTheLink() {
        var state = self.shaping()
        _ = state.bytesRead(upHeld: false, transparent: false)
        let observed7 = !state.readComplete()
        #expect(observed7)
        _ = state.bytesRead(upHeld: false, transparent: true)
        let observed8 = state.readComplete()
        #expect(observed8)
        let observed9 = !state.readComplete()
        #expect(observed9)
        _ = state.bytesWritten(downHeld: false, transparent: false)
        let observed10 = !state.flush()
        #expect(observed10)
        _ = state.bytesWritten(downHeld: false, transparent: true)
        let observed11 = state.flush()
        #expect(observed11)
    }

    @Test func theClientIsReadOnlyWhileTheEmulatedSenderHasRoom() {
        var state = self.shaping()
        let observed12 = state.read(senderHasRoom: true)
        #expect(observed12 == [.read])
        let observed13 = state.read(senderHasRoom: false)
        #expect(observed13 == [.waitForRoom])
        let observed14 = state.roomMayHaveChanged(up: false, down: true)
        #expect(observed14 == [])
        let observed15 = state.roomMayHaveChanged(up: true, down: true)
        #expect(observed15 == [.read, .stopWaitingForRoom])
        let observed16 = state.roomMayHaveChanged(up: true, down: true)
        #expect(observed16 == [.stopWaitingForRoom])
    }

    @Test func aFullDownBufferStopsTheProxyReadingTheServerUntilItHasRoom() {
        var state = self.shaping()
        let observed17 = state.heldDown(senderHasRoom: true)
        #expect(observed17 == [])
        let observed18 = state.heldDown(senderHasRoom: false)
        #expect(observed18 == [.waitForRoom, .linkWritable(false)])
        let observed19 = state.heldDown(senderHasRoom: false)
        #expect(observed19 == [], "said once")
        let observed20 = state.roomMayHaveChanged(up: true, down: false)
        #expect(observed20 == [])
        let observed21 = state.roomMayHaveChanged(up: true, down: true)
        #expect(observed21 == [.linkWritable(true), .stopWaitingForRoom])
    }

    @Test func theClientsFinWaitsForTheBytesBeforeIt() {
        var state = self.shaping()
        let observed22 = state.inputClosed(upHeld: false, setUp: .milliseconds(100), at: self.start)
        #expect(observed22 == [.fireInputClosed])
        var held = self.shaping()
        let observed23 = held.inputClosed(upHeld: true, setUp: .milliseconds(100), at: self.start + .milliseconds(10))
        #expect(observed23 == [])
        let observed24 = held.deliveredUp(upHeld: true)
        #expect(observed24 == [])
        let observed25 = held.deliveredUp(upHeld: false)
        #expect(observed25 == [.fireInputClosed])
        let observed26 = held.deliveredUp(upHeld: false)
        #expect(observed26 == [])
    }

    @Test func aClientThatLeftBeforeAnythingGotThroughIsDroppedWithWhatItSent() {
        var left = self.shaping()
        let observed27 = left.inputClosed(upHeld: true, setUp: .milliseconds(100), at: self.start + .milliseconds(100))
        #expect(observed27 == [.dropHeldUpAndClose])
        // Once a byte has got through, the connection was made: its FIN waits for the rest.
        var through = self.shaping()
        _ = through.deliveredUp(upHeld: true)
        let observed28 = through.inputClosed(upHeld: true, setUp: .milliseconds(100), at: self.start + .seconds(5))
        #expect(observed28 == [])
    }

    @Test func aCloseWaitsForTheBytesBeforeItAndTheFarEndsForTheLatency() {
        var state = self.shaping()
        let far = CloseWhenDrained(reset: false, crossesLink: true)
        let observed29 = state.closeRequested(far, downLatency: .milliseconds(40), downHeld: true, at: self.start)
        #expect(observed29 == [])
        let observed30 = state.deliveredDown(downHeld: false, at: self.start + .milliseconds(10))
        #expect(observed30 == [.closeHeldOutputs, .armCloseTimer(self.start + .milliseconds(40))])
        let observed31 = state.deliveredDown(downHeld: false, at: self.start + .milliseconds(20))
        #expect(observed31 == [.closeHeldOutputs], "one timer")
        let observed32 = state.closeTimerFired(downHeld: false, at: self.start + .milliseconds(40))
        #expect(observed32 == [.close(reset: false)])
        let observed33 = state.closeTimerFired(downHeld: false, at: self.start + .milliseconds(50))
        #expect(observed33 == [], "closed once")
    }

    @Test func aResetAskedForOnceStaysAReset() {
        var state = self.shaping()
        let observed34 = state.closeRequested(
            CloseWhenDrained(reset: true), downLatency: .zero, downHeld: true, at: self.start)
        #expect(observed34 == [])
        let observed35 = state.closeRequested(CloseWhenDrained(), downLatency: .zero, downHeld: true, at: self.start)
        #expect(observed35 == [])
        let observed36 = state.deliveredDown(downHeld: false, at: self.start)
        #expect(observed36 == [.closeHeldOutputs, .close(reset: true)])
    }

    @Test func withoutShapingACloseIsMadeAtOnceAndHalfClosesAreNotHeld() {
        var state = LinkShaperState()
        #expect(!state.holdsOutputClose(downHeld: true))
        let observed37 = state.closeRequested(
            CloseWhenDrained(crossesLink: true), downLatency: .seconds(1), downHeld: true, at: self.start)
        #expect(observed37 == [.close(reset: false)])
        var shaping = self.shaping()
        #expect(shaping.holdsOutputClose(downHeld: true))
        shaping.stopShaping()
        #expect(!shaping.holdsOutputClose(downHeld: true))
    }
}
