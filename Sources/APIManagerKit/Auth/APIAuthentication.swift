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
///   and its deadline still ends it.
/// - A request refused with a credential that has been replaced meanwhile is sent again with the
///   current one, without a new refresh. Each task is sent again after a refusal at most once; the
///   replay keeps its attempt's number, so it does not use up a retry attempt (a second refusal is
///   an ordinary `401` failure).
/// - A refresh that throws fails every task waiting for it with
///   ``APIError/authenticationFailed(underlying:)``; the next refusal may start a new one.
/// - More than ``RefreshLimit/maxRefreshes`` refreshes within ``RefreshLimit/window`` seconds fail at
///   once with ``RefreshError/tooManyRefreshes(limit:window:)`` instead of starting another.
/// - The refresh runs in a Swift task of its own, never while a lock is held; delegate events stay
///   exactly once per task.
///
/// Without a credential (before ``signIn(with:)``, after ``signOut()``) requests go as they are, and
/// a refusal is an ordinary failure.
public final class APIAuthentication: @unchecked Sendable {
    // @unchecked: every `var` below is read and written only while holding `lock`; the `let`s are
    // Sendable. No user code (authenticator, store) is called while holding it.

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

    /// Why a refresh was not even started.
    public enum RefreshError: Error, Sendable, Hashable, CustomStringConvertible {
        /// ``RefreshLimit/maxRefreshes`` refreshes already started within the last `window` seconds.
        case tooManyRefreshes(limit: Int, window: TimeInterval)

        public var description: String {
            switch self {
            case .tooManyRefreshes(let limit, let window):
                return "\(limit) credential refreshes already started within \(window) s; not starting another"
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
    /// The clock that times ``refreshLimit``.
    public let clock: any APIClock

    private let lock = Lock()
    private var current: APICredential?
    /// Increases each time the credential is replaced (refresh, sign-in, sign-out).
    private var generation: UInt64 = 0
    private var refreshRuns = false
    private var waiters: [UInt64: @Sendable (Result<Grant, APIError>) -> Void] = [:]
    private var nextWaiter: UInt64 = 0
    private var refreshStarts: [TimeInterval] = []
    /// The last refresh's failure and the generation the requests it was for were sent with; a
    /// refusal of such a request arriving late fails with it. `nil` once anything replaced it.
    private var lastFailure: (generation: UInt64, error: APIError)?
    private var refreshes = 0

    /// - Parameters:
    ///   - authenticator: how the credential is applied, refused and renewed.
    ///   - store: a new ``APIInMemoryCredentialStore`` unless given; ``APIFileCredentialStore``
    ///     keeps it across launches, or implement ``APICredentialStore`` for the keychain.
    ///   - storageKey: the key in `store`.
    ///   - refreshLimit: three refreshes a minute unless given.
    ///   - clock: a ``DispatchClock`` unless given.
    public init(
        authenticator: any APIAuthenticator,
        store: any APICredentialStore = APIInMemoryCredentialStore(),
        storageKey: String = "APIManagerKit.credential",
        refreshLimit: RefreshLimit = .default,
        clock: any APIClock = DispatchClock()
    ) {
        self.authenticator = authenticator
        self.store = store
        self.storageKey = storageKey
        self.refreshLimit = refreshLimit
        self.clock = clock
        self.current = APICredential(storedForm: store.headers(forOrigin: storageKey))
    }

    /// The credential requests carry now; `nil` when signed out.
    public var credential: APICredential? { lock.withLock { current } }

    /// Whether a refresh is running.
    public var isRefreshing: Bool { lock.withLock { refreshRuns } }

    /// How many refreshes have started since this authentication was made.
    public var refreshCount: Int { lock.withLock { refreshes } }

    /// Replaces the credential (after a sign-in) and stores it. A refresh running meanwhile is
    /// overruled: what it returns is dropped, and the requests waiting for it go with this one.
    public func signIn(with credential: APICredential) {
        replace(with: credential)
    }

    /// Forgets the credential and removes it from the store; later requests go without one.
    public func signOut() {
        replace(with: nil)
    }

    private func replace(with credential: APICredential?) {
        lock.withLock {
            current = credential
            generation &+= 1
            lastFailure = nil
        }
        persist(credential)
    }

    private func persist(_ credential: APICredential?) {
        store.removeHeaders(forOrigin: storageKey)
        if let credential { store.save(credential.storedForm, forOrigin: storageKey) }
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
        lock.lock()
        defer { lock.unlock() }
        if refreshRuns { return .waiting(addWaiter(resume)) }
        return .now(.success(Grant(credential: current, generation: generation)))
    }

    /// Whether a grant is still the one to send: no refresh runs and nothing replaced it.
    func isCurrent(_ grant: Grant) -> Bool {
        lock.withLock { !refreshRuns && grant.generation == generation }
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
        lock.lock()
        if refreshRuns {
            let wait = addWaiter(resume)
            lock.unlock()
            return .waiting(wait)
        }
        guard let refusedCredential = current else {
            lock.unlock()
            return nil
        }
        if let failure = lastFailure, failure.generation == sentGeneration {
            lock.unlock()
            return .now(.failure(failure.error))
        }
        if sentGeneration != generation {
            // Replaced since it was sent: send it again with the current one.
            let grant = Grant(credential: current, generation: generation)
            lock.unlock()
            return .now(.success(grant))
        }
        let seen = generation
        lock.unlock()

        // Sent with another credential than the current one: send it again with the current one.
        if !authenticator.request(request, wasSentWith: refusedCredential) {
            return .now(.success(Grant(credential: refusedCredential, generation: seen)))
        }

        lock.lock()
        if refreshRuns {
            let wait = addWaiter(resume)
            lock.unlock()
            return .waiting(wait)
        }
        if generation != seen {
            let grant = Grant(credential: current, generation: generation)
            lock.unlock()
            return .now(.success(grant))
        }
        let now = clock.now
        refreshStarts.removeAll { $0 <= now - refreshLimit.window }
        if refreshStarts.count >= refreshLimit.maxRefreshes {
            lock.unlock()
            return .now(
                .failure(
                    .authenticationFailed(
                        underlying: RefreshError.tooManyRefreshes(
                            limit: refreshLimit.maxRefreshes, window: refreshLimit.window))))
        }
        refreshStarts.append(now)
        refreshes += 1
        refreshRuns = true
        let wait = addWaiter(resume)
        lock.unlock()

        let authenticator = self.authenticator
        _ = work.start { [self] in
            let outcome: Result<APICredential, any Error>
            do {
                outcome = .success(try await authenticator.refresh(refusedCredential))
            } catch {
                outcome = .failure(error)
            }
            finishRefresh(outcome, startedAt: seen)
        }
        return .waiting(wait)
    }

    /// Stores what the refresh returned (unless a sign-in or sign-out overruled it) and tells
    /// every waiting request.
    private func finishRefresh(_ outcome: Result<APICredential, any Error>, startedAt started: UInt64) {
        lock.lock()
        let overruled = generation != started
        if !overruled {
            switch outcome {
            case .success(let renewed):
                current = renewed
                lastFailure = nil
            case .failure(let error):
                // Requests sent from now on may try again; those sent before fail with this error.
                lastFailure = (started, .authenticationFailed(underlying: error))
            }
            generation &+= 1
        }
        lock.unlock()
        if case .success(let renewed) = outcome, !overruled { persist(renewed) }

        lock.lock()
        refreshRuns = false
        let told = waiters
        waiters = [:]
        let result: Result<Grant, APIError>
        if let failure = lastFailure, !overruled {
            result = .failure(failure.error)
        } else {
            result = .success(Grant(credential: current, generation: generation))
        }
        lock.unlock()
        for (_, resume) in told.sorted(by: { $0.key < $1.key }) { resume(result) }
    }

    /// Called with the lock held.
    private func addWaiter(_ resume: @escaping @Sendable (Result<Grant, APIError>) -> Void) -> any APICancellable {
        nextWaiter += 1
        let key = nextWaiter
        waiters[key] = resume
        return WaitHandle(authentication: self, key: key)
    }

    private func removeWaiter(_ key: UInt64) {
        lock.withLock { _ = waiters.removeValue(forKey: key) }
    }

    /// Stops waiting: the request is no longer told the refresh's outcome.
    private struct WaitHandle: APICancellable {
        weak var authentication: APIAuthentication?
        let key: UInt64
        func cancel() { authentication?.removeWaiter(key) }
    }
}
