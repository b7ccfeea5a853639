/// Both directions of the link, as both engines hold them: one ``LinkPath`` up, one down, seeded
/// from the run's seed, and kept in line with the ``ConditionTimeline`` (its conditions, its
/// outage's gate, its stalls) by one piece of code.
///
/// ```
///  timeline at t ──follow──▶ conditions changed? reconfigure both paths (what is on them keeps its fate)
///                            blackhole?          gate both paths
///                            stalled up / down?  stop or start each path's queue
/// ```
public struct LinkPaths<Unit, Connection: Hashable> {
    @usableFromInline var paths: [LinkPath<Unit, Connection>]
    /// The conditions the paths were last given.
    public private(set) var conditions: LinkConditions
    /// The outage in force when the paths last followed the timeline.
    public private(set) var outage: OutageBehaviour?

    /// The paths for `timeline` as it stands, each direction seeded from `seed` (``SeedDeriver/linkPath(_:_:)``).
    public init(_ timeline: ConditionTimeline, seed: UInt64) {
        let conditions = timeline.conditions
        self.conditions = conditions
        self.paths = Direction.allCases.map {
            LinkPath(conditions.direction($0), seed: SeedDeriver.linkPath(seed, $0))
        }
        self.follow(timeline, at: .zero)
    }

    /// One direction's path, read and changed in place (a `get` and `set` would copy the path's
    /// queues on every unit offered: both the copy and the stored path would hold them).
    @inlinable
    public subscript(direction: Direction) -> LinkPath<Unit, Connection> {
        _read { yield self.paths[direction == .up ? 0 : 1] }
        _modify { yield &self.paths[direction == .up ? 0 : 1] }
    }

    /// Brings both paths in line with `timeline` at `moment`. The driver takes every unit due
    /// before `moment` first (they arrived under the old conditions); it compares ``conditions``
    /// and ``outage`` before and after to act on a change of its own (a reset outage's cut).
    public mutating func follow(_ timeline: ConditionTimeline, at moment: Instant) {
        let conditions = timeline.conditions
        if conditions != self.conditions {
            self.conditions = conditions
            for direction in Direction.allCases {
                self[direction].reconfigure(conditions.direction(direction))
            }
        }
        self.outage = timeline.outage
        for direction in Direction.allCases {
            self[direction].blackholed = self.outage == .blackhole
            self[direction].setStalled(timeline.isStalled(direction), at: moment)
        }
    }

    /// The directions stalled now.
    public var stalled: [Direction] {
        Direction.allCases.filter { self[$0].stalledSince != nil }
    }

    /// When the next unit is due at its end (nil: none, or every one held by a stall).
    @inlinable
    public var nextDelivery: Instant? {
        Instant.earliest(self.paths[0].nextDelivery, self.paths[1].nextDelivery)
    }

    /// The next unit due by `now` in either direction, the earlier first (up first at a tie).
    @inlinable
    public mutating func popDelivery(upTo now: Instant) -> (Direction, PathDelivery<Unit>)? {
        let up = self.paths[0].nextDelivery
        let down = self.paths[1].nextDelivery
        let direction: Direction
        switch (up, down) {
        case (let u?, let d?): direction = d < u ? .down : .up
        case (.some, nil): direction = .up
        case (nil, .some): direction = .down
        case (nil, nil): return nil
        }
        guard let delivery = self[direction].popDelivery(upTo: now) else { return nil }
        return (direction, delivery)
    }
}
