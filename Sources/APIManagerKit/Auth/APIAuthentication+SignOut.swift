import Foundation

extension APIAuthentication {
    /// What an authenticator's ``Authenticator/refresh(_:)`` throws when the server rejects the
    /// refresh credential itself (OAuth 2's `invalid_grant`: the refresh token expired, was revoked
    /// or was used already), as opposed to a failure of the network or of the server that a later
    /// refresh may get past.
    ///
    /// The session then signs out once: it forgets the credential (in memory and in its store),
    /// tells ``APIAuthentication/onSignOut`` and every engine's observers
    /// (``APIEngine/Notice/Kind/signedOut``), and the requests waiting for the refresh, and those
    /// refused with the rejected credential afterwards, fail with
    /// ``APIError/authenticationFailed(underlying:)`` carrying this error. Requests sent after it go
    /// without a credential (a refusal is then an ordinary response) until the app signs in again.
    ///
    /// ```swift
    /// guard status != 400 || error != "invalid_grant" else {  // the token endpoint's answer
    ///     throw APIAuthentication.CredentialRejected(reason: "the refresh token is no longer valid")
    /// }
    /// ```
    public struct CredentialRejected: Error, Sendable, Hashable, CustomStringConvertible {
        /// Why, in the authenticator's words; `nil` when it gave none.
        public let reason: String?

        /// - Parameter reason: why the server rejected it; none unless given.
        public init(reason: String? = nil) {
            self.reason = reason
        }

        public var description: String {
            "the server rejected the refresh credential" + (reason.map { ": \($0)" } ?? "")
                + "; the session is signed out"
        }
    }

    /// Called once each time a refresh finds the refresh credential rejected
    /// (``CredentialRejected``) and the session signs out; not when the app calls ``signOut()``
    /// itself. On the thread that ended the refresh, after the credential is forgotten and before
    /// the waiting requests fail: show the login screen from here (hop to the main actor). `nil`
    /// unless set.
    public var onSignOut: (@Sendable (CredentialRejected) -> Void)? {
        get { listeners.withLock { $0.handler } }
        set { listeners.withLock { $0.handler = newValue } }
    }

    /// Who hears of a sign-out: the app's handler and the engines made with the session that have
    /// observers (held weakly: a released engine is dropped when the next one is added).
    struct SignOutListeners {
        var handler: (@Sendable (CredentialRejected) -> Void)?
        var engines: [WeakEngine] = []
    }

    struct WeakEngine {
        weak var engine: APIEngine?
    }

    /// An engine made with this session tells its observers of its sign-outs
    /// (``APIEngine/Notice/Kind/signedOut``).
    func addSignOutListener(_ engine: APIEngine) {
        listeners.withLock { listeners in
            listeners.engines.removeAll { $0.engine == nil }
            listeners.engines.append(WeakEngine(engine: engine))
        }
    }

    /// Tells the app and the engines that the session signed out (no lock held).
    func tellSignedOut(_ rejection: CredentialRejected) {
        let (handler, engines) = listeners.withLock { ($0.handler, $0.engines.compactMap(\.engine)) }
        handler?(rejection)
        let notice = APIEngine.Notice.signedOut(rejection)
        for engine in engines { engine.tell(notice) }  // only engines with observers are listed
    }
}
