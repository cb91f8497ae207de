import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The network attempts in flight that identical requests share (see ``APIConcurrencyPolicy/Sharing``), by
/// key. The first attempt of a key calls the transport; attempts with the same key that come while
/// it is in flight join it; the transport's answer goes to every attempt still joined, each of which
/// builds its own response. Leaving (a task cancelled or ended) detaches one attempt; the transport
/// request is cancelled when the last one leaves.
///
/// Retries are shared too. When a task whose attempt was on a flight waits to retry it, the flight
/// *rests* under its key: attempts that come meanwhile board it and wait instead of calling the
/// transport. The first of its retriers whose delay ends launches it (one of the waiting attempts
/// calls the transport, and the retrier's own attempt joins it); when every retrier leaves without
/// retrying (cancelled during the delay), the waiting attempts are launched at once. A resting flight
/// with no attempt on board simply ends when its first retry starts: that retry's attempt starts
/// a new flight, which the other retriers join if it is still in the air.
///
/// Its lock is a leaf: it is never held while calling the transport or an attempt, and never taken
/// while the engine's lock is held.
final class SharedFlights: Sendable {
    /// Identifies identical requests: the method, URL, headers and body as they are about to be
    /// sent, the body limit (an attempt never gets an answer cut by another's smaller limit) and
    /// the cache partition (the caller's own identity, when credentials are not in the headers).
    /// Compared in full, so two different requests never share, whatever their hashes.
    struct Key: Hashable, Sendable {
        let method: String
        let url: URL?
        /// Header names as the request spells them: requests that spell one differently are not shared.
        let headers: [String: String]?
        let body: Data?
        let bodyLimit: Int?
        let partition: String?

        init(_ request: URLRequest, bodyLimit: Int?, partition: String?) {
            method = request.httpMethod ?? "GET"
            url = request.url
            headers = request.allHTTPHeaderFields
            body = request.httpBody
            self.bodyLimit = bodyLimit
            self.partition = partition
        }
    }

    private struct Flight {
        let number: UInt64
        /// The attempts joined to it, by member number.
        var members: [UInt64: Attempt] = [:]
        /// The transport's handle, once the transport took the request.
        var handle: (any APICancellable)?
        /// The task whose attempt called the transport (for a resting flight: a task that retries).
        var leader: UInt64
        /// The tasks that wait to retry it; not empty only while the flight rests (is not in the air).
        var retriers: Set<UInt64> = []

        var isResting: Bool { !retriers.isEmpty }
    }

    private struct State {
        var flights: [Key: Flight] = [:]
        var nextNumber: UInt64 = 0
        /// The key of the resting flight each retrying task waits to retry.
        var retrying: [UInt64: Key] = [:]
    }

    /// A resting flight to launch: `leader` calls the transport for everyone on board.
    struct Launch {
        let leader: Attempt
        /// The request to send, when the leader built it already (`nil`: built from the leader's).
        var request: APIHTTPRequest?
        let key: Key
        let flight: UInt64
    }

    private let state = LockedState(State())

    /// How an attempt got on a flight.
    enum Boarding {
        /// It is the first: call the transport, then report the handle with ``took(_:handle:)``.
        case leads(flight: UInt64, member: any APICancellable)
        /// It joined the flight that task `leader`'s attempt leads.
        case joined(leader: UInt64, member: any APICancellable)
    }

    /// Puts the attempt on the flight of its key, or on a new one it leads.
    func board(_ attempt: Attempt, key: Key) -> Boarding {
        state.withLock { state in
            state.nextNumber += 1
            let member = state.nextNumber
            let handle = MemberHandle(flights: self, key: key, member: member)
            if let leader = state.flights[key]?.leader {
                // In place: a copy of the flight would copy its members, once per joiner.
                state.flights[key]?.members[member] = attempt
                return .joined(leader: leader, member: handle)
            }
            var flight = Flight(number: member, leader: attempt.task.identifier)
            flight.members[member] = attempt
            state.flights[key] = flight
            return .leads(flight: member, member: handle)
        }
    }

    /// The transport took the flight's request: its handle is kept, or cancelled at once when every
    /// attempt has left meanwhile.
    func took(_ key: Key, flight number: UInt64, handle: any APICancellable) {
        let keep = state.withLock { state -> Bool in
            guard state.flights[key]?.number == number else { return false }
            state.flights[key]?.handle = handle
            return true
        }
        if !keep { handle.cancel() }
    }

    /// The transport answered the flight: every attempt still on it gets the answer.
    func answered(_ key: Key, flight number: UInt64, with result: Result<APIRawResponse, any Error>) {
        let members = state.withLock { state -> [Attempt] in
            guard let flight = state.flights[key], flight.number == number else { return [] }
            state.flights[key] = nil
            return flight.members.sorted { $0.key < $1.key }.map(\.value)
        }
        // One network attempt: its outcome counts once for the circuit breaker and the retry budget.
        let shared = members.count > 1 ? SharedAnswer() : nil
        for attempt in members {
            attempt.machine.sharedAnswer = shared
            attempt.transportAnswered(result)
        }
    }

    /// Task `task`, whose attempt was on the (landed) flight of `key`, waits to retry: the flight
    /// rests until its retry starts. Returns `false`, and records nothing, when another flight of
    /// that key is already in the air (the retry joins it if it still is).
    func retrying(_ key: Key, task: UInt64) -> Bool {
        state.withLock { state in
            if let flight = state.flights[key] {
                guard flight.isResting else { return false }
                state.flights[key]?.retriers.insert(task)
            } else {
                state.nextNumber += 1
                state.flights[key] = Flight(number: state.nextNumber, leader: task, retriers: [task])
            }
            state.retrying[task] = key
            return true
        }
    }

    /// Task `task` no longer waits to retry: its delay ended (`retries`), or it ended during the
    /// delay. A resting flight is launched when its first retrier retries or its last one leaves;
    /// returns what to launch, if anyone is on board.
    func retrierLeft(_ task: UInt64, retries: Bool) -> Launch? {
        state.withLock { state -> Launch? in
            guard let key = state.retrying.removeValue(forKey: task),
                var flight = state.flights[key], flight.retriers.remove(task) != nil
            else { return nil }
            if !retries, let other = flight.retriers.first {
                if flight.leader == task { flight.leader = other }
                state.flights[key] = flight
                return nil
            }
            for other in flight.retriers { state.retrying[other] = nil }
            flight.retriers = []
            guard let first = flight.members.min(by: { $0.key < $1.key })?.value else {
                state.flights[key] = nil
                return nil
            }
            flight.leader = first.task.identifier
            state.flights[key] = flight
            return Launch(leader: first, request: nil, key: key, flight: flight.number)
        }
    }

    /// One attempt leaves; the flight's transport request is cancelled when it was the last (a
    /// resting flight stays for its retriers).
    fileprivate func leave(_ key: Key, member: UInt64) {
        let orphaned = state.withLock { state -> (any APICancellable)? in
            guard state.flights[key]?.members.removeValue(forKey: member) != nil,
                state.flights[key]?.members.isEmpty == true, state.flights[key]?.isResting == false
            else { return nil }
            return state.flights.removeValue(forKey: key)?.handle
        }
        orphaned?.cancel()
    }

    /// The number of flights in the air (tests).
    var count: Int { state.withLock { $0.flights.count } }

    /// The number of attempts on board of every flight (tests).
    var boardedCount: Int { state.withLock { $0.flights.values.reduce(0) { $0 + $1.members.count } } }

    /// The handle each attempt gets in place of the transport's: cancelling it leaves the flight.
    private struct MemberHandle: APICancellable {
        let flights: SharedFlights
        let key: Key
        let member: UInt64
        func cancel() { flights.leave(key, member: member) }
    }
}

/// One answer of a shared flight, given to every attempt on board: however many senders share it,
/// it is one network attempt, so its outcome is recorded once by the circuit breaker, and one retry
/// decision of the retry budget serves them all (the first sender that wants to retry asks the
/// budget; the others get the same answer, counted once). Its lock is a leaf, taken under the
/// engine's.
final class SharedAnswer: Sendable {
    private struct State {
        var recorded = false
        var retryAllowed: Bool?
    }
    private let state = LockedState(State())

    /// `true` for the first attempt that asks: it records the outcome; `false` for the others.
    func claimRecord() -> Bool {
        state.withLock { state in
            defer { state.recorded = true }
            return !state.recorded
        }
    }

    /// The budget's decision for this answer's retry: made by `decide` for the first attempt that
    /// asks, the same for the others.
    func retryAllowed(_ decide: () -> Bool) -> Bool {
        state.withLock { state in
            if let decided = state.retryAllowed { return decided }
            let allowed = decide()
            state.retryAllowed = allowed
            return allowed
        }
    }
}
