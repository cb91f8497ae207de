import APIManagerKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An authenticator that renews credentials from a script, records every refresh, and can hold a
/// refresh until the test releases it.
///
/// Credentials are sent as `Authorization: Bearer <accessToken>`, and a `401` refuses them (the
/// `APIAuthentication.Authenticator` defaults). Each refresh answers with the next scripted reply, the last one
/// repeating; without a script, refresh `n` returns `APIAuthentication.Credential(accessToken: "token-n",
/// refreshToken: "refresh-n")`.
///
/// With an engine whose execution is `.inline`, a refresh that is not held ends inside the call that
/// started it, and ``release(with:)`` returns once the refresh and the replays it lets go have run.
public final class MockAuthenticator: APIAuthentication.Authenticator, @unchecked Sendable {
    // @unchecked: all mutable state is read and written only under `lock`.

    /// What a refresh answers.
    public enum Reply: Sendable {
        /// A new credential.
        case credential(APIAuthentication.Credential)
        /// A failure: the refresh throws it.
        case failure(any Error & Sendable)
    }

    private let lock = NSLock()
    private var script: [Reply]
    private var holds: Bool
    private var started: [APIAuthentication.Credential] = []
    private var held: [CheckedContinuation<Reply?, Never>] = []

    /// - Parameters:
    ///   - replies: the answers of the refreshes in turn, the last repeating; numbered tokens unless given.
    ///   - holdsRefreshes: whether each refresh waits for ``release(with:)``. `false` unless given.
    public init(replies: [Reply] = [], holdsRefreshes: Bool = false) {
        self.script = replies
        self.holds = holdsRefreshes
    }

    /// Whether refreshes started from now on wait for ``release(with:)``.
    public var holdsRefreshes: Bool {
        get { lock.withLock { holds } }
        set { lock.withLock { holds = newValue } }
    }

    /// How many refreshes have started.
    public var refreshCount: Int { lock.withLock { started.count } }

    /// The credential each refresh was asked to replace, in order.
    public var refreshedCredentials: [APIAuthentication.Credential] { lock.withLock { started } }

    /// How many refreshes wait for ``release(with:)``.
    public var heldCount: Int { lock.withLock { held.count } }

    /// Lets the oldest held refresh answer, with `reply` if given, else with its scripted reply.
    /// Returns `false` when none is held.
    @discardableResult
    public func release(with reply: Reply? = nil) -> Bool {
        let continuation: CheckedContinuation<Reply?, Never>? = lock.withLock {
            held.isEmpty ? nil : held.removeFirst()
        }
        guard let continuation else { return false }
        continuation.resume(returning: reply)
        return true
    }

    public func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
        let (scripted, waits): (Reply, Bool) = lock.withLock {
            started.append(credential)
            let number = started.count
            let reply =
                script.isEmpty
                ? .credential(
                    APIAuthentication.Credential(accessToken: "token-\(number)", refreshToken: "refresh-\(number)"))
                : script[min(number, script.count) - 1]
            return (reply, holds)
        }
        var reply = scripted
        if waits {
            let given = await withCheckedContinuation { continuation in
                lock.withLock { held.append(continuation) }
            }
            if let given { reply = given }
        }
        switch reply {
        case .credential(let renewed): return renewed
        case .failure(let error): throw error
        }
    }
}
