import Foundation

/// The credential's lifecycle and its single-flight refresh, as a value whose events change it and
/// return the actions to perform (``Action``). ``APIAuthentication`` calls it under its lock and
/// performs the actions after unlocking; tests drive it alone. It never calls out: no
/// authenticator, store or clock.
struct RefreshMachine {
    typealias Grant = APIAuthentication.Grant
    typealias Waiter = @Sendable (Result<Grant, APIError>) -> Void

    /// Where the credential stands.
    enum Phase {
        /// No credential: requests go as they are, and a refusal is an ordinary response.
        case signedOut
        case ready(APIAuthentication.Credential)
        /// A refresh of the credential runs; requests about to be sent wait for it.
        case refreshing(Refresh)
        /// The last refresh failed. Requests sent with the credential it was renewing (generation
        /// `renewing`) fail with `failure` when their refusal arrives; later ones may try again.
        case failed(APIAuthentication.Credential, failure: APIError, renewing: UInt64)
    }

    /// The refresh that runs: its handles, to cancel when it is overruled or ends, and its waiters.
    struct Refresh {
        let identifier: UInt64
        let credential: APIAuthentication.Credential
        /// The generation of the credential it renews.
        let renewing: UInt64
        var work: (any APICancellable)?
        var timer: (any APICancellable)?
        /// The requests waiting for it, in the order they came.
        var waiters: [(key: UInt64, resume: Waiter)] = []
    }

    /// What a transition decided to do once the lock is released.
    enum Action: CustomStringConvertible {
        /// Cancel a handle of a refresh that was overruled or has ended.
        case cancel(any APICancellable)
        /// Write the newest change to the store (see ``takeWrite()``).
        case write
        /// Tell the waiters the outcome, in order.
        case resume([Waiter], Result<Grant, APIError>)
        /// Run the authenticator's refresh of the credential, with its timer; report the handles
        /// with ``refreshStarted(_:work:timer:into:)``.
        case runRefresh(APIAuthentication.Credential, identifier: UInt64)
        /// Tell the app and the engines that the session signed out: the refresh credential was
        /// rejected (after the write, before the waiters are told).
        case signedOut(APIAuthentication.CredentialRejected)

        var description: String {
            switch self {
            case .cancel: return "cancel"
            case .write: return "write"
            case .resume(let waiters, .success(let grant)):
                return "resume \(waiters.count) with \(grant.credential?.accessToken ?? "none") #\(grant.generation)"
            case .resume(let waiters, .failure(let error)): return "resume \(waiters.count) with \(error)"
            case .runRefresh(let credential, let identifier): return "refresh \(credential.accessToken) #\(identifier)"
            case .signedOut(let rejection): return "signed out: \(rejection.reason ?? "no reason")"
            }
        }
    }

    /// What a request gets: a grant now, a failure now, or a wait (the key stops it).
    enum Access {
        case now(Result<Grant, APIError>)
        case waiting(key: UInt64)
    }

    /// What a refusal leads to.
    enum Refusal {
        case decided(Access)
        /// No credential to renew: the refusal is an ordinary response.
        case ordinary
        /// Ask the authenticator whether the request carried this credential (outside the lock),
        /// then report with ``confirmedRefusal(of:seen:now:limit:resume:into:)``.
        case askAuthenticator(APIAuthentication.Credential, generation: UInt64)
    }

    private(set) var phase: Phase
    /// Increases each time the credential is replaced (refresh, sign-in, sign-out) and when a
    /// refresh fails.
    private(set) var generation: UInt64 = 0
    /// How many refreshes have started.
    private(set) var refreshes = 0
    private var refreshStarts: [TimeInterval] = []
    private var nextIdentifier: UInt64 = 0
    private var nextWaiter: UInt64 = 0
    /// The newest change not yet written to the store (`.some(nil)`: signed out).
    private var pendingWrite: APIAuthentication.Credential??
    /// Whether a thread is writing to the store now.
    private var writing = false
    /// The sign-out a rejected refresh credential caused, while no sign-in has replaced it: requests
    /// sent with the credential of generation `renewing` fail with `failure` when refused.
    private var rejection: (failure: APIError, renewing: UInt64)?

    init(credential: APIAuthentication.Credential?) {
        phase = credential.map(Phase.ready) ?? .signedOut
    }

    // MARK: Reading

    /// The credential requests carry now.
    var credential: APIAuthentication.Credential? {
        switch phase {
        case .signedOut: return nil
        case .ready(let credential), .failed(let credential, _, _): return credential
        case .refreshing(let refresh): return refresh.credential
        }
    }

    var isRefreshing: Bool {
        if case .refreshing = phase { return true }
        return false
    }

    /// Whether a grant is still the one to send: no refresh runs and nothing replaced it.
    func isCurrent(_ grant: Grant) -> Bool {
        !isRefreshing && grant.generation == generation
    }

    private var currentGrant: Grant { Grant(credential: credential, generation: generation) }

    // MARK: Events

    /// A sign-in (`credential`) or a sign-out (`nil`): it replaces the credential and overrules a
    /// running refresh, whose waiters go on with the new credential.
    mutating func replace(with credential: APIAuthentication.Credential?, into actions: inout [Action]) {
        let overruled = takeRefresh()
        phase = credential.map(Phase.ready) ?? .signedOut
        rejection = nil
        generation &+= 1
        pendingWrite = .some(credential)
        if let overruled { cancelHandles(of: overruled, into: &actions) }
        actions.append(.write)
        if let overruled { actions.append(.resume(overruled.waiters.map(\.resume), .success(currentGrant))) }
    }

    /// An attempt is about to be sent: the credential now, unless a refresh runs.
    mutating func access(resume: @escaping Waiter) -> Access {
        if case .refreshing = phase { return .waiting(key: addWaiter(resume)) }
        return .now(.success(currentGrant))
    }

    /// A request carrying the credential of generation `sent` was refused.
    mutating func refused(sentWith sent: UInt64, resume: @escaping Waiter) -> Refusal {
        switch phase {
        case .refreshing:
            return .decided(.waiting(key: addWaiter(resume)))
        case .signedOut:
            // Refused with the credential whose renewal signed the session out: it fails as the
            // requests waiting for that refresh did. Any other: an ordinary response.
            if let rejection, rejection.renewing == sent { return .decided(.now(.failure(rejection.failure))) }
            return .ordinary
        case .failed(_, let failure, let renewing) where renewing == sent:
            // Refused together with the requests the failed refresh was for.
            return .decided(.now(.failure(failure)))
        case .ready(let credential), .failed(let credential, _, _):
            // Replaced since it was sent: send it again with the current one.
            if sent != generation { return .decided(.now(.success(currentGrant))) }
            return .askAuthenticator(credential, generation: generation)
        }
    }

    /// The authenticator confirmed that the refused request carried `credential`, which was current
    /// at generation `seen`: join the refresh that runs, or start one within `limit`.
    mutating func confirmedRefusal(
        of credential: APIAuthentication.Credential, seen: UInt64, now: TimeInterval,
        limit: APIAuthentication.RefreshLimit,
        resume: @escaping Waiter, into actions: inout [Action]
    ) -> Access {
        if case .refreshing = phase { return .waiting(key: addWaiter(resume)) }
        if generation != seen { return .now(.success(currentGrant)) }
        refreshStarts.removeAll { $0 <= now - limit.window }
        if refreshStarts.count >= limit.maxRefreshes {
            let error = APIAuthentication.RefreshError.tooManyRefreshes(limit: limit.maxRefreshes, window: limit.window)
            return .now(.failure(.authenticationFailed(underlying: error)))
        }
        refreshStarts.append(now)
        refreshes += 1
        nextIdentifier += 1
        phase = .refreshing(Refresh(identifier: nextIdentifier, credential: credential, renewing: seen))
        actions.append(.runRefresh(credential, identifier: nextIdentifier))
        return .waiting(key: addWaiter(resume))
    }

    /// The refresh's work and timer were started: kept, or cancelled when it has already ended.
    mutating func refreshStarted(
        _ identifier: UInt64, work: (any APICancellable)?, timer: (any APICancellable)?, into actions: inout [Action]
    ) {
        guard case .refreshing(var refresh) = phase, refresh.identifier == identifier else {
            if let work { actions.append(.cancel(work)) }
            if let timer { actions.append(.cancel(timer)) }
            return
        }
        if let work { refresh.work = work }
        if let timer { refresh.timer = timer }
        phase = .refreshing(refresh)
    }

    /// The refresh `identifier` returned, failed or timed out (unless a sign-in, a sign-out or its
    /// timer ended it first): its outcome is kept and told to every waiter.
    mutating func refreshEnded(
        _ identifier: UInt64, outcome: Result<APIAuthentication.Credential, any Error>, into actions: inout [Action]
    ) {
        guard case .refreshing(let refresh) = phase, refresh.identifier == identifier else { return }
        generation &+= 1
        let result: Result<Grant, APIError>
        var written: [Action] = []  // after the refresh's handles are cancelled, before the waiters
        switch outcome {
        case .success(let renewed):
            phase = .ready(renewed)
            pendingWrite = .some(renewed)
            result = .success(currentGrant)
            written = [.write]
        case .failure(let rejected as APIAuthentication.CredentialRejected):
            // The refresh credential itself is no longer valid: signed out, once, and forgotten.
            let failure = APIError.authenticationFailed(underlying: rejected)
            phase = .signedOut
            rejection = (failure, refresh.renewing)
            pendingWrite = .some(nil)
            result = .failure(failure)
            written = [.write, .signedOut(rejected)]
        case .failure(let error):
            // Requests sent from now on may try again; those sent before fail with this error.
            let failure = APIError.authenticationFailed(underlying: error)
            phase = .failed(refresh.credential, failure: failure, renewing: refresh.renewing)
            result = .failure(failure)
        }
        cancelHandles(of: refresh, into: &actions)  // the timer, or the task that timed out
        actions += written
        actions.append(.resume(refresh.waiters.map(\.resume), result))
    }

    /// A waiting request stopped waiting (its task ended): it is no longer told the outcome.
    mutating func waiterLeft(_ key: UInt64) {
        guard case .refreshing(var refresh) = phase else { return }
        refresh.waiters.removeAll { $0.key == key }
        phase = .refreshing(refresh)
    }

    /// The session is released: a running refresh is cancelled.
    mutating func release(into actions: inout [Action]) {
        if let refresh = takeRefresh() {
            cancelHandles(of: refresh, into: &actions)
            phase = .ready(refresh.credential)
        }
    }

    /// The newest change to write, unless another thread writes (it writes this one after its own):
    /// so writes follow the order of the changes and the last one wins. `nil`: nothing to write now.
    mutating func takeWrite() -> APIAuthentication.Credential?? {
        guard !writing, let change = pendingWrite else { return nil }
        pendingWrite = nil
        writing = true
        return change
    }

    /// The write from ``takeWrite()`` returned.
    mutating func writeDone() {
        writing = false
    }

    // MARK: Transitions

    private mutating func addWaiter(_ resume: @escaping Waiter) -> UInt64 {
        nextWaiter += 1
        if case .refreshing(var refresh) = phase {
            refresh.waiters.append((nextWaiter, resume))
            phase = .refreshing(refresh)
        }
        return nextWaiter
    }

    private mutating func takeRefresh() -> Refresh? {
        guard case .refreshing(let refresh) = phase else { return nil }
        phase = .ready(refresh.credential)
        return refresh
    }

    private func cancelHandles(of refresh: Refresh, into actions: inout [Action]) {
        if let work = refresh.work { actions.append(.cancel(work)) }
        if let timer = refresh.timer { actions.append(.cancel(timer)) }
    }
}
