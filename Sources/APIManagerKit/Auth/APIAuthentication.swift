import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A session that survives an expired credential: it puts the current credential on every request
/// of the engines it is given to, and when the server refuses it, renews it once for everyone.
///
/// ```swift
/// let session = APIAuthentication(authenticator: TokenRefresher(), store: keychainStore)
/// let engine = APIEngine(authentication: session)   // one per manager; several may share it
/// session.signIn(with: APICredential(accessToken: access, refreshToken: refresh))
/// ```
///
/// Guarantees, for every engine sharing it:
/// - Any number of requests refused together start exactly one ``APIAuthenticator/refresh(_:)``.
/// - While a refresh runs, no request is sent with the old credential: attempts about to be sent
///   wait for it. A waiting task is in flight (``AnyAPITask/state`` `.running`), can be cancelled,
///   and its deadline still ends it. When the refresh ends, each waiting request goes on where its
///   own engine's ``APIEngine/execution`` says.
/// - A request refused with a credential that has been replaced meanwhile is sent again with the
///   current one, without a new refresh. Each task is sent again after a refusal at most once; the
///   replay keeps its attempt's number, so it does not use up a retry attempt (a second refusal is
///   an ordinary `401` failure).
/// - A refresh that throws fails every task waiting for it with
///   ``APIError/authenticationFailed(underlying:)``; the next refusal may start a new one.
/// - A refresh that takes longer than ``refreshTimeout`` is cancelled and fails its waiters the same
///   way, with ``RefreshError/timedOut(after:)``: a refresh that never returns cannot hold every
///   request of every engine forever.
/// - ``signIn(with:)`` or ``signOut()`` during a refresh overrules it at once: the refresh is
///   cancelled (what it returns is dropped), the requests waiting for it go on with the new
///   credential, and requests sent afterwards do not wait.
/// - More than ``RefreshLimit/maxRefreshes`` refreshes within ``RefreshLimit/window`` seconds fail at
///   once with ``RefreshError/tooManyRefreshes(limit:window:)`` instead of starting another.
/// - The store ends with the credential the session uses: writes are made in the order of the
///   changes (a change made while another thread writes is written right after it, by that
///   thread), each as one ``APICredentialStore/replaceHeaders(_:forOrigin:)``.
/// - The refresh runs in a Swift task of its own, never while a lock is held, and holds the
///   session weakly: releasing the session cancels it. Delegate events stay exactly once per task.
///
/// Without a credential (before ``signIn(with:)``, after ``signOut()``) requests go as they are, and
/// a refusal is an ordinary failure.
public final class APIAuthentication: Sendable {
    /// How often refreshes may start.
    public struct RefreshLimit: Sendable, Hashable {
        /// The most refreshes that may start within ``window``. `3` unless set.
        public var maxRefreshes: Int
        /// The window, in seconds of the authentication's clock. `60` unless set.
        public var window: TimeInterval

        /// A limit of `maxRefreshes` refreshes per `window` seconds.
        public init(maxRefreshes: Int = 3, window: TimeInterval = 60) {
            self.maxRefreshes = maxRefreshes
            self.window = window
        }

        /// Three refreshes a minute.
        public static let `default` = RefreshLimit()
    }

    /// Why a refresh was not started, or did not finish.
    public enum RefreshError: Error, Sendable, Hashable, CustomStringConvertible {
        /// ``RefreshLimit/maxRefreshes`` refreshes already started within the last `window` seconds.
        case tooManyRefreshes(limit: Int, window: TimeInterval)
        /// The refresh did not return within ``APIAuthentication/refreshTimeout`` seconds; it was
        /// cancelled.
        case timedOut(after: TimeInterval)

        public var description: String {
            switch self {
            case .tooManyRefreshes(let limit, let window):
                return "\(limit) credential refreshes already started within \(window) s; not starting another"
            case .timedOut(let seconds):
                return "the credential refresh did not return within \(seconds) s; it was cancelled"
            }
        }
    }

    /// Decides how the credential is applied, refused and renewed.
    public let authenticator: any APIAuthenticator
    /// Where the credential is kept (under ``storageKey`` in place of an origin), read once at start
    /// and written on every change.
    public let store: any APICredentialStore
    /// The key the credential is stored under. `"APIManagerKit.credential"` unless given.
    public let storageKey: String
    /// How often refreshes may start.
    public let refreshLimit: RefreshLimit
    /// How long a refresh may take, in seconds of ``clock``, before it is cancelled and its waiters
    /// fail with ``RefreshError/timedOut(after:)``. `30` unless given.
    public let refreshTimeout: TimeInterval
    /// The clock that times ``refreshLimit`` and ``refreshTimeout``.
    public let clock: any APIClock

    private let state: LockedState<State>

    /// Everything that changes, behind one lock; no user code (authenticator, store, clock) is
    /// called while it is held.
    private struct State {
        var current: APICredential?
        /// Increases each time the credential is replaced (refresh, sign-in, sign-out) and when a
        /// refresh fails.
        var generation: UInt64 = 0
        var refresh: RunningRefresh?
        var nextRefreshIdentifier: UInt64 = 0
        var waiters: [UInt64: @Sendable (Result<Grant, APIError>) -> Void] = [:]
        var nextWaiter: UInt64 = 0
        var refreshStarts: [TimeInterval] = []
        /// The last refresh's failure and the generation the requests it was for were sent with; a
        /// refusal of such a request arriving late fails with it. `nil` once anything replaced it.
        var lastFailure: (generation: UInt64, error: APIError)?
        var refreshes = 0
        /// The newest change not yet written to the store (`.some(nil)`: signed out).
        var pendingWrite: APICredential??
        /// Whether a thread is writing to the store now.
        var writing = false

        /// Takes the waiters, in the order they came.
        mutating func takeWaiters() -> [@Sendable (Result<Grant, APIError>) -> Void] {
            let taken = waiters.sorted { $0.key < $1.key }.map(\.value)
            waiters = [:]
            return taken
        }
    }

    /// The refresh that runs: its work and its timer, to cancel when it is overruled or timed out.
    private struct RunningRefresh {
        let identifier: UInt64
        /// The generation of the credential it renews.
        let startedAt: UInt64
        var work: (any APICancellable)?
        var timer: (any APICancellable)?

        func cancel() {
            work?.cancel()
            timer?.cancel()
        }
    }

    /// - Parameters:
    ///   - authenticator: how the credential is applied, refused and renewed.
    ///   - store: a new ``APIInMemoryCredentialStore`` unless given; ``APIFileCredentialStore``
    ///     keeps it across launches, or implement ``APICredentialStore`` for the keychain.
    ///   - storageKey: the key in `store`.
    ///   - refreshLimit: three refreshes a minute unless given.
    ///   - refreshTimeout: 30 seconds unless given; a refresh still running then is cancelled.
    ///   - clock: a ``DispatchClock`` unless given.
    public init(
        authenticator: any APIAuthenticator,
        store: any APICredentialStore = APIInMemoryCredentialStore(),
        storageKey: String = "APIManagerKit.credential",
        refreshLimit: RefreshLimit = .default,
        refreshTimeout: TimeInterval = 30,
        clock: any APIClock = DispatchClock()
    ) {
        self.authenticator = authenticator
        self.store = store
        self.storageKey = storageKey
        self.refreshLimit = refreshLimit
        self.refreshTimeout = refreshTimeout.isNaN ? 30 : max(0, refreshTimeout)
        self.clock = clock
        self.state = LockedState(State(current: APICredential(storedForm: store.headers(forOrigin: storageKey))))
    }

    deinit {
        state.withLock { $0.refresh }?.cancel()
    }

    /// The credential requests carry now; `nil` when signed out.
    public var credential: APICredential? { state.withLock { $0.current } }

    /// Whether a refresh is running.
    public var isRefreshing: Bool { state.withLock { $0.refresh != nil } }

    /// How many refreshes have started since this authentication was made.
    public var refreshCount: Int { state.withLock { $0.refreshes } }

    /// Replaces the credential (after a sign-in) and stores it. A refresh running meanwhile is
    /// overruled at once: it is cancelled, what it returns is dropped, and the requests waiting for
    /// it go on with this credential.
    public func signIn(with credential: APICredential) {
        replace(with: credential)
    }

    /// Forgets the credential and removes it from the store; later requests go without one. A
    /// refresh running meanwhile is overruled, and the requests waiting for it go without one.
    public func signOut() {
        replace(with: nil)
    }

    private func replace(with credential: APICredential?) {
        let (overruled, waiters, grant) = state.withLock { state in
            state.current = credential
            state.generation &+= 1
            state.lastFailure = nil
            state.pendingWrite = .some(credential)
            let overruled = state.refresh
            state.refresh = nil
            return (overruled, state.takeWaiters(), Grant(credential: credential, generation: state.generation))
        }
        overruled?.cancel()
        writeToStore()
        for resume in waiters { resume(.success(grant)) }
    }

    /// Writes the newest change to the store, unless another thread is writing: that thread writes
    /// it when its own write returns. So writes follow the order of the changes, the last one wins,
    /// and no lock is held while the store runs.
    private func writeToStore() {
        while let change = state.withLock({ state -> APICredential?? in
            guard !state.writing, let change = state.pendingWrite else { return nil }
            state.pendingWrite = nil
            state.writing = true
            return change
        }) {
            if let credential = change {
                store.replaceHeaders(credential.storedForm, forOrigin: storageKey)
            } else {
                store.removeHeaders(forOrigin: storageKey)
            }
            state.withLock { $0.writing = false }
        }
    }

    // MARK: What the engine asks

    /// The credential to send, and its generation (to check later that it is still current).
    struct Grant: Sendable {
        let credential: APICredential?
        let generation: UInt64
    }

    /// What a request gets: a grant now, a failure now, or a wait (the handle cancels the wait).
    enum Access {
        case now(Result<Grant, APIError>)
        case waiting(any APICancellable)
    }

    /// The credential for an attempt about to be sent: at once, unless a refresh runs, in which
    /// case `resume` is called with its outcome when it ends (on the thread that ends it).
    func access(resume: @escaping @Sendable (Result<Grant, APIError>) -> Void) -> Access {
        state.withLock { state in
            if state.refresh != nil { return .waiting(addWaiter(resume, to: &state)) }
            return .now(.success(Grant(credential: state.current, generation: state.generation)))
        }
    }

    /// Whether a grant is still the one to send: no refresh runs and nothing replaced it.
    func isCurrent(_ grant: Grant) -> Bool {
        state.withLock { $0.refresh == nil && grant.generation == $0.generation }
    }

    /// What to do about a refusal, decided under the lock.
    private enum RefusalStep {
        case decided(Access?)
        /// Ask the authenticator whether the request carried this credential (outside the lock).
        case askAuthenticator(APICredential, generation: UInt64)
    }

    /// A request carrying a credential (of grant generation `sentWith`) was refused. The outcome
    /// (now, or through `resume` when the refresh it joins or starts ends) is the credential to send
    /// it again with, or the failure; `nil` when there is no credential to renew (the refusal is an
    /// ordinary response).
    ///
    /// A request sent before a refresh failed, whose refusal arrives after it, fails with that
    /// refresh's error instead of starting another: it was refused together with the others.
    func refused(
        _ request: URLRequest, sentWith sentGeneration: UInt64, work: AsyncWork,
        resume: @escaping @Sendable (Result<Grant, APIError>) -> Void
    ) -> Access? {
        let step = state.withLock { state -> RefusalStep in
            if state.refresh != nil { return .decided(.waiting(addWaiter(resume, to: &state))) }
            guard let refusedCredential = state.current else { return .decided(nil) }
            if let failure = state.lastFailure, failure.generation == sentGeneration {
                return .decided(.now(.failure(failure.error)))
            }
            if sentGeneration != state.generation {
                // Replaced since it was sent: send it again with the current one.
                return .decided(.now(.success(Grant(credential: state.current, generation: state.generation))))
            }
            return .askAuthenticator(refusedCredential, generation: state.generation)
        }
        switch step {
        case .decided(let access):
            return access
        case .askAuthenticator(let refusedCredential, let seen):
            // Sent with another credential than the current one: send it again with the current one.
            if !authenticator.request(request, wasSentWith: refusedCredential) {
                return .now(.success(Grant(credential: refusedCredential, generation: seen)))
            }
            return startRefresh(of: refusedCredential, seen: seen, work: work, resume: resume)
        }
    }

    /// What a confirmed refusal led to, decided under the lock.
    private enum RefreshStart {
        /// Joined the refresh that runs, replaced meanwhile, or over the limit.
        case decided(Access)
        /// A new refresh, to run once the lock is released.
        case started(identifier: UInt64, wait: any APICancellable)
    }

    /// Joins the refresh that runs, or starts one (within the limit) for the credential of
    /// generation `seen`.
    private func startRefresh(
        of refusedCredential: APICredential, seen: UInt64, work: AsyncWork,
        resume: @escaping @Sendable (Result<Grant, APIError>) -> Void
    ) -> Access {
        let now = clock.now
        let start = state.withLock { state -> RefreshStart in
            if state.refresh != nil { return .decided(.waiting(addWaiter(resume, to: &state))) }
            if state.generation != seen {
                return .decided(.now(.success(Grant(credential: state.current, generation: state.generation))))
            }
            state.refreshStarts.removeAll { $0 <= now - refreshLimit.window }
            if state.refreshStarts.count >= refreshLimit.maxRefreshes {
                let error = RefreshError.tooManyRefreshes(limit: refreshLimit.maxRefreshes, window: refreshLimit.window)
                return .decided(.now(.failure(.authenticationFailed(underlying: error))))
            }
            state.refreshStarts.append(now)
            state.refreshes += 1
            state.nextRefreshIdentifier += 1
            state.refresh = RunningRefresh(identifier: state.nextRefreshIdentifier, startedAt: seen)
            return .started(identifier: state.nextRefreshIdentifier, wait: addWaiter(resume, to: &state))
        }
        switch start {
        case .decided(let access):
            return access
        case .started(let identifier, let wait):
            run(refreshOf: refusedCredential, identifier: identifier, work: work)
            return .waiting(wait)
        }
    }

    /// Starts the refresh's timer and its Swift task, and keeps both to cancel.
    private func run(refreshOf credential: APICredential, identifier: UInt64, work: AsyncWork) {
        let timeout = refreshTimeout
        let timer = clock.schedule(after: timeout) { [weak self] in
            self?.finishRefresh(.failure(RefreshError.timedOut(after: timeout)), identifier: identifier)
        }
        guard keep(timer: timer, identifier: identifier) else {
            timer.cancel()
            return
        }
        let authenticator = self.authenticator
        let task = work.start { [weak self] in
            let outcome: Result<APICredential, any Error>
            do {
                outcome = .success(try await authenticator.refresh(credential))
            } catch {
                outcome = .failure(error)
            }
            self?.finishRefresh(outcome, identifier: identifier)
        }
        if let task, !keep(work: task, identifier: identifier) { task.cancel() }
    }

    /// Keeps a handle of the refresh; `false` when it has already ended (cancel the handle).
    private func keep(timer: (any APICancellable)? = nil, work: (any APICancellable)? = nil, identifier: UInt64)
        -> Bool
    {
        state.withLock { state in
            guard state.refresh?.identifier == identifier else { return false }
            if let timer { state.refresh?.timer = timer }
            if let work { state.refresh?.work = work }
            return true
        }
    }

    /// Ends the refresh `identifier` (unless a sign-in, a sign-out or its timer ended it first):
    /// stores what it returned and tells every waiting request.
    private func finishRefresh(_ outcome: Result<APICredential, any Error>, identifier: UInt64) {
        let ended = state.withLock {
            state -> (RunningRefresh, [@Sendable (Result<Grant, APIError>) -> Void], Result<Grant, APIError>)? in
            guard let refresh = state.refresh, refresh.identifier == identifier else { return nil }
            state.refresh = nil
            state.generation &+= 1
            let result: Result<Grant, APIError>
            switch outcome {
            case .success(let renewed):
                state.current = renewed
                state.lastFailure = nil
                state.pendingWrite = .some(renewed)
                result = .success(Grant(credential: renewed, generation: state.generation))
            case .failure(let error):
                // Requests sent from now on may try again; those sent before fail with this error.
                let failure = APIError.authenticationFailed(underlying: error)
                state.lastFailure = (refresh.startedAt, failure)
                result = .failure(failure)
            }
            return (refresh, state.takeWaiters(), result)
        }
        guard let (refresh, waiters, result) = ended else { return }
        refresh.cancel()  // the timer, or the task that timed out; harmless for what has returned
        writeToStore()
        for resume in waiters { resume(result) }
    }

    /// Called with the lock held.
    private func addWaiter(
        _ resume: @escaping @Sendable (Result<Grant, APIError>) -> Void, to state: inout State
    ) -> any APICancellable {
        state.nextWaiter += 1
        let key = state.nextWaiter
        state.waiters[key] = resume
        return WaitHandle(authentication: self, key: key)
    }

    private func removeWaiter(_ key: UInt64) {
        state.withLock { _ = $0.waiters.removeValue(forKey: key) }
    }

    /// Stops waiting: the request is no longer told the refresh's outcome.
    private struct WaitHandle: APICancellable {
        weak var authentication: APIAuthentication?
        let key: UInt64
        func cancel() { authentication?.removeWaiter(key) }
    }
}
