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
/// session.signIn(with: APIAuthentication.Credential(accessToken: access, refreshToken: refresh))
/// ```
///
/// Guarantees, for every engine sharing it:
/// - Any number of requests refused together start exactly one ``APIAuthentication/Authenticator/refresh(_:)``.
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
///   thread), each as one ``APIAuthentication/CredentialStore/replaceHeaders(_:forOrigin:)``.
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
    public let authenticator: any APIAuthentication.Authenticator
    /// Where the credential is kept (under ``storageKey`` in place of an origin), read once at start
    /// and written on every change.
    public let store: any APIAuthentication.CredentialStore
    /// The key the credential is stored under. `"APIManagerKit.credential"` unless given.
    public let storageKey: String
    /// How often refreshes may start.
    public let refreshLimit: RefreshLimit
    /// How long a refresh may take, in seconds of ``clock``, before it is cancelled and its waiters
    /// fail with ``RefreshError/timedOut(after:)``. `30` unless given.
    public let refreshTimeout: TimeInterval
    /// The clock that times ``refreshLimit`` and ``refreshTimeout``.
    public let clock: any APIClock

    /// The credential, its refresh and the store's writes (see ``RefreshMachine``), behind one lock;
    /// no user code (authenticator, store, clock) is called while it is held.
    private let state: LockedState<RefreshMachine>
    /// Who hears of a sign-out (see ``onSignOut``).
    let listeners = LockedState(SignOutListeners())

    /// - Parameters:
    ///   - authenticator: how the credential is applied, refused and renewed.
    ///   - store: a new ``APIAuthentication/InMemoryCredentialStore`` unless given; ``APIAuthentication/FileCredentialStore``
    ///     keeps it across launches, or implement ``APIAuthentication/CredentialStore`` for the keychain.
    ///   - storageKey: the key in `store`.
    ///   - refreshLimit: three refreshes a minute unless given.
    ///   - refreshTimeout: 30 seconds unless given; a refresh still running then is cancelled.
    ///   - clock: a ``DispatchClock`` unless given.
    public init(
        authenticator: any APIAuthentication.Authenticator,
        store: any APIAuthentication.CredentialStore = APIAuthentication.InMemoryCredentialStore(),
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
        self.state = LockedState(
            RefreshMachine(credential: APIAuthentication.Credential(storedForm: store.headers(forOrigin: storageKey))))
    }

    deinit {
        var actions: [RefreshMachine.Action] = []
        state.withLock { $0.release(into: &actions) }
        perform(actions)
    }

    /// The credential requests carry now; `nil` when signed out.
    public var credential: APIAuthentication.Credential? { state.withLock { $0.credential } }

    /// Whether a refresh is running.
    public var isRefreshing: Bool { state.withLock { $0.isRefreshing } }

    /// How many refreshes have started since this authentication was made.
    public var refreshCount: Int { state.withLock { $0.refreshes } }

    /// Replaces the credential (after a sign-in) and stores it. A refresh running meanwhile is
    /// overruled at once: it is cancelled, what it returns is dropped, and the requests waiting for
    /// it go on with this credential.
    public func signIn(with credential: APIAuthentication.Credential) {
        replace(with: credential)
    }

    /// Forgets the credential and removes it from the store; later requests go without one. A
    /// refresh running meanwhile is overruled, and the requests waiting for it go without one.
    public func signOut() {
        replace(with: nil)
    }

    private func replace(with credential: APIAuthentication.Credential?) {
        var actions: [RefreshMachine.Action] = []
        state.withLock { $0.replace(with: credential, into: &actions) }
        perform(actions)
    }

    /// Performs what the machine decided, in order, without the lock. `work` runs a refresh the
    /// actions start.
    private func perform(_ actions: [RefreshMachine.Action], work: AsyncWork? = nil) {
        for action in actions {
            switch action {
            case .cancel(let handle): handle.cancel()
            case .write: writeToStore()
            case .resume(let waiters, let result): for resume in waiters { resume(result) }
            case .runRefresh(let credential, let identifier):
                if let work { run(refreshOf: credential, identifier: identifier, work: work) }
            case .signedOut(let rejection): tellSignedOut(rejection)
            }
        }
    }

    /// Writes the newest change to the store, unless another thread is writing: that thread writes
    /// it when its own write returns. So writes follow the order of the changes, the last one wins,
    /// and no lock is held while the store runs.
    private func writeToStore() {
        while let change = state.withLock({ $0.takeWrite() }) {
            if let credential = change {
                store.replaceHeaders(credential.storedForm, forOrigin: storageKey)
            } else {
                store.removeHeaders(forOrigin: storageKey)
            }
            state.withLock { $0.writeDone() }
        }
    }

    // MARK: What the engine asks

    /// The credential to send, and its generation (to check later that it is still current).
    struct Grant: Sendable {
        let credential: APIAuthentication.Credential?
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
        switch state.withLock({ $0.access(resume: resume) }) {
        case .now(let result): return .now(result)
        case .waiting(let key): return .waiting(WaitHandle(authentication: self, key: key))
        }
    }

    /// Whether a grant is still the one to send: no refresh runs and nothing replaced it.
    func isCurrent(_ grant: Grant) -> Bool {
        state.withLock { $0.isCurrent(grant) }
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
        let machineAccess: RefreshMachine.Access
        switch state.withLock({ $0.refused(sentWith: sentGeneration, resume: resume) }) {
        case .ordinary:
            return nil
        case .decided(let access):
            machineAccess = access
        case .askAuthenticator(let refusedCredential, let seen):
            // Sent with another credential than the current one: send it again with the current one.
            if !authenticator.request(request, wasSentWith: refusedCredential) {
                return .now(.success(Grant(credential: refusedCredential, generation: seen)))
            }
            let now = clock.now
            var actions: [RefreshMachine.Action] = []
            machineAccess = state.withLock {
                $0.confirmedRefusal(
                    of: refusedCredential, seen: seen, now: now, limit: refreshLimit, resume: resume, into: &actions)
            }
            perform(actions, work: work)
        }
        switch machineAccess {
        case .now(let result): return .now(result)
        case .waiting(let key): return .waiting(WaitHandle(authentication: self, key: key))
        }
    }

    /// Starts the refresh's timer and its Swift task, and gives both to the machine to keep.
    private func run(refreshOf credential: APIAuthentication.Credential, identifier: UInt64, work: AsyncWork) {
        let timeout = refreshTimeout
        let timer = clock.schedule(after: timeout) { [weak self] in
            self?.finishRefresh(.failure(RefreshError.timedOut(after: timeout)), identifier: identifier)
        }
        var actions: [RefreshMachine.Action] = []
        state.withLock { $0.refreshStarted(identifier, work: nil, timer: timer, into: &actions) }
        guard actions.isEmpty else {
            perform(actions)  // it ended already: the timer is cancelled, and nothing is run
            return
        }
        let authenticator = self.authenticator
        let task = work.start { [weak self] in
            let outcome: Result<APIAuthentication.Credential, any Error>
            do {
                outcome = .success(try await authenticator.refresh(credential))
            } catch {
                outcome = .failure(error)
            }
            self?.finishRefresh(outcome, identifier: identifier)
        }
        state.withLock { $0.refreshStarted(identifier, work: task, timer: nil, into: &actions) }
        perform(actions)
    }

    /// Ends the refresh `identifier` (unless a sign-in, a sign-out or its timer ended it first):
    /// stores what it returned and tells every waiting request.
    private func finishRefresh(_ outcome: Result<APIAuthentication.Credential, any Error>, identifier: UInt64) {
        var actions: [RefreshMachine.Action] = []
        state.withLock { $0.refreshEnded(identifier, outcome: outcome, into: &actions) }
        perform(actions)
    }

    private func removeWaiter(_ key: UInt64) {
        state.withLock { $0.waiterLeft(key) }
    }

    /// Stops waiting: the request is no longer told the refresh's outcome.
    private struct WaitHandle: APICancellable {
        weak var authentication: APIAuthentication?
        let key: UInt64
        func cancel() { authentication?.removeWaiter(key) }
    }
}
