/// A handover in the stream engine: the device leaves its network (Wi-Fi) for another (cellular).
/// Every connection open at that moment is stranded on the old network — nothing of it is carried
/// any more, either way, and neither end is told (no reset: the address it used is gone) — the
/// link carries nothing during the gap (a blackhole), then the device is on the new profile's
/// link, where new connections go through.
///
/// ```
///  t: handover ─▶ open connections stranded, blackhole ──gap──▶ new profile, outage over
/// ```
extension LinkModel {
    /// Starts a handover at `now` to `profile`, after `gap`; returns how many connections it stranded.
    /// A handover under way is replaced (its gap restarts, towards the new profile).
    @discardableResult
    public func handover(to profile: Profile, gap: Span, at now: Instant) -> Int {
        self.catchUp(to: now)
        var stranded = 0
        for flow in self.flows.values where !flow.stranded {
            flow.stranded = true
            stranded += 1
        }
        self.timeline.setOutage(.blackhole, at: self.now)
        self.refresh()
        self.handoverEnds = (self.now + gap, profile)
        if gap > .zero {
            self.schedule(.handoverEnds, at: self.now + gap)
        } else {
            self.endHandover()
        }
        return stranded
    }

    /// The handover's gap is over (when it is due now): the new profile, and the outage ends.
    func endHandover() {
        guard let ends = self.handoverEnds, ends.at <= self.now else { return }
        self.handoverEnds = nil
        self.switchProfile(to: ends.profile, at: self.now)
        self.setOutage(nil, at: self.now)
    }

    /// Connections a handover stranded that are still open.
    public var strandedConnections: Int { self.flows.values.filter(\.stranded).count }
}
