// The code samples of the DocC article "Sessions: default headers, interceptors, authentication",
// compiled and run. Keep the two in step: a sample that changes there changes here.
import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where the signing key lives (an actor, so reading it is async).
actor Keychain {
    private let key: String
    init(key: String) { self.key = key }
    func signingKey() throws -> String { key }
}

/// Signs every attempt with a key read fresh from the keychain (an actor, so an async read).
struct Signer: APIRequestAdapter, APIResponseInspector {
    let keychain: Keychain

    func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
        var request = request
        let key = try await keychain.signingKey()
        request.setValue("v1:\(key.count):attempt-\(attempt.number)", forHTTPHeaderField: "X-Signature")
        return request
    }

    /// A 200 whose body says "try again" is retried (by the usual rules) twice at most.
    func inspect(_ response: APIRawResponse, to request: URLRequest, for attempt: APIAttempt) async throws
        -> APIResponseDisposition
    {
        response.body.starts(with: Data("RETRY".utf8)) && attempt.number < 3 ? .retry(after: 1) : .proceed
    }
}

/// Renews the access token at an OAuth 2 token endpoint (RFC 6749, section 6).
struct OAuthRefresher: APIAuthentication.Authenticator {
    let tokenURL: URL
    let clientID: String

    struct Refused: Error { let status: Int }

    func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
        guard let refreshToken = credential.refreshToken else { throw Refused(status: 0) }
        var request = URLRequest(url: tokenURL)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        let form = ["grant_type": "refresh_token", "refresh_token": refreshToken, "client_id": clientID]
        request.httpBody = Data(
            form.sorted { $0.key < $1.key }
                .map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
                .joined(separator: "&").utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        // The refresh token itself is no longer valid: the session signs out (see below).
        if status == 400, String(decoding: data, as: UTF8.self).contains("invalid_grant") {
            throw APIAuthentication.CredentialRejected(reason: "invalid_grant")
        }
        guard status == 200 else { throw Refused(status: status) }
        struct Tokens: Decodable {
            let accessToken: String
            let refreshToken: String?
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let tokens = try decoder.decode(Tokens.self, from: data)
        // Some servers rotate the refresh token, others keep it.
        return APIAuthentication.Credential(
            accessToken: tokens.accessToken, refreshToken: tokens.refreshToken ?? refreshToken)
    }
    // apply (Authorization: Bearer), isRefused (a 401) and request(_:wasSentWith:) keep their defaults.
}

struct ProfileRequest: APIRequest {
    let url = URL(string: "https://api.test")!
    let path = "me"
}

final class ProfileAPI: APIManager {
    typealias Request = ProfileRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

typealias OrdersAPI = ProfileAPI

@Suite("Article samples: sessions", .timeLimit(.minutes(1)))
struct SessionCodeSamplesTests {
    @Test func theDefaultHeadersSampleAddsAKeyReplacesTheAgentAndRemovesTheLanguage() {
        let apiKey = "k-123"
        var headers = APIEngine.DefaultHeaders.standard
        headers["X-Api-Key"] = apiKey  // an API key on every request
        headers["User-Agent"] = "Shop/2.1 APIManagerKit/\(APIEngine.DefaultHeaders.packageVersion)"
        headers["Accept-Language"] = nil  // removed
        let engine = APIEngine(defaultHeaders: headers)  // or .none: no default header at all
        #expect(engine.defaultHeaders.fields == ["X-Api-Key": "k-123", "User-Agent": "Shop/2.1 APIManagerKit/1.0.0"])
    }

    @Test func theSignerSignsEachAttemptAndRetriesATryAgainBody() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/me", .status(200, body: Data("RETRY".utf8)), .status(200))
        let api = ProfileAPI(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                interceptors: [Signer(keychain: Keychain(key: "s3cret"))]))
        // The keychain actor suspends the interceptor, so the attempt goes on on the actor's
        // thread: the test awaits the delegate's events (no sleep, and no blocked thread of the
        // cooperative pool, which the actor needs).
        let recorder = EventRecorder()
        let (events, signal) = AsyncStream<String>.makeStream()
        recorder.onEvent = { line in signal.yield(line) }
        api.delegate = recorder
        var lines = events.makeAsyncIterator()
        let task = api.send(ProfileRequest())
        while let line = await lines.next(), !line.hasSuffix(" retry 1.0") {}
        clock.advance(by: 1)
        while let line = await lines.next(), !line.hasSuffix(" finished"), !line.contains(" failed ") {}
        #expect(task.attemptCount == 2)
        #expect(recorder.events(of: task) == ["start 1", "retry 1.0", "start 2", "finished"])
        #expect(
            transport.requests.map { $0.value(forHTTPHeaderField: "X-Signature") } == [
                "v1:6:attempt-1", "v1:6:attempt-2",
            ])
    }

    @Test func theSessionSampleBuildsAndSignsInAndOut() {
        let session = APIAuthentication(
            authenticator: OAuthRefresher(
                tokenURL: URL(string: "https://auth.example.com/oauth/token")!, clientID: "shop-ios"),
            store: APIAuthentication.FileCredentialStore(
                fileURL: FileManager.default.temporaryDirectory.appendingPathComponent("example-session.json")),
            // The storm guard: at most this many refreshes in a window, then refreshes fail at once.
            // Its default is 3 a minute; a server whose access tokens live a few minutes needs more.
            refreshLimit: APIAuthentication.RefreshLimit(maxRefreshes: 10, window: 60))
        // When the refresh token is rejected, the session signs out and says so once:
        session.onSignOut = { rejection in
            Task { @MainActor in print("show the login screen: \(rejection)") }
        }
        #expect(session.refreshLimit.maxRefreshes == 10 && session.onSignOut != nil)
        // After the login screen (the tokens survive a restart: the store is read at start):
        session.signIn(with: APIAuthentication.Credential(accessToken: "eyJ…access", refreshToken: "eyJ…refresh"))
        // Every manager whose engine shares the session shares its refreshes:
        let cart = CartAPI(engine: APIEngine(authentication: session))
        let orders = OrdersAPI(engine: APIEngine(authentication: session))
        #expect(cart.engine.authentication === orders.engine.authentication)
        #expect(session.credential?.refreshToken == "eyJ…refresh")
        // Sign-out forgets the tokens, in memory and in the store:
        session.signOut()
        #expect(session.credential == nil)
        #expect(session.store.headers(forOrigin: session.storageKey).isEmpty)
    }
}

// MARK: article "Sessions", "Testing" (word for word)

struct AccountRequest: APIRequest {
    var url: URL { URL(string: "https://api.example.com/me")! }
}

final class AccountAPI: APIManager {
    typealias Request = AccountRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

@Test func oneRefreshServesEveryRefusedRequest() {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(nil, "/me") { request in
        request.value(forHTTPHeaderField: "Authorization") == "Bearer token-1" ? .json("{}") : .status(401)
    }
    let refresher = MockAuthenticator(holdsRefreshes: true)
    let session = APIAuthentication(authenticator: refresher, clock: clock)
    session.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
    let api = AccountAPI(
        engine: APIEngine(
            transport: transport, clock: clock, delivery: .inline, execution: .inline, authentication: session))
    let tasks = (0..<3).map { _ in api.send(AccountRequest()) }  // the first refused: one refresh, held
    #expect(refresher.refreshCount == 1)
    refresher.release()  // token-1; all three go with it
    #expect(tasks.allSatisfy { $0.state == .finished })
}
