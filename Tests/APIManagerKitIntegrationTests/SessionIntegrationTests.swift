import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Renews tokens at the fixture's OAuth-style token endpoint, counting its refreshes.
final class FixtureTokenRefresher: APIAuthentication.Authenticator, @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    let tokenURL: URL
    private let lock = NSLock()
    private var count = 0

    init(tokenURL: URL) { self.tokenURL = tokenURL }

    var refreshCount: Int { lock.withLock { count } }

    struct Refused: Error { let status: Int }

    func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
        lock.withLock { count += 1 }
        var request = URLRequest(url: tokenURL)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("refresh_token=\(credential.refreshToken ?? "")".utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else { throw Refused(status: status) }
        struct Tokens: Decodable {
            let accessToken: String
            let refreshToken: String
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let tokens = try decoder.decode(Tokens.self, from: data)
        return APIAuthentication.Credential(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
    }
}

/// What the fixture's protected route answers: the token it accepted.
struct TokenEcho: APIResponse, Decodable {
    let value: String
}

/// A realm of the fixture's token server of its own, with a client whose engine authenticates.
struct TokenRealm {
    let name = "realm-\(UUID().uuidString.prefix(8))"
    let refresher: FixtureTokenRefresher
    let authentication: APIAuthentication
    let client: Client<TokenEcho>

    /// - Parameter tokenQuery: the token endpoint's query (`delay`, `ttl`).
    init(tokenQuery: String = "delay=0.3", refreshToken: String = "start") {
        refresher = FixtureTokenRefresher(
            tokenURL: URL(string: "fixture/token/\(name)?\(tokenQuery)", relativeTo: Server.url)!.absoluteURL)
        authentication = APIAuthentication(authenticator: refresher)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "stale", refreshToken: refreshToken))
        client = Client(APIEngine(transport: Shared.transport, delivery: .inline, authentication: authentication))
    }

    var protected: HTTPRequest { HTTPRequest("fixture/protected/\(name)") }

    /// Tokens the server issued and requests it refused.
    func log() async throws -> (issued: Int, refused: Int) {
        struct Log: APIResponse, Decodable {
            let issued: Int
            let refused: Int
        }
        let log = try await Client<Log>().response(for: HTTPRequest("fixture/token-log/\(name)"))
        return (log.issued, log.refused)
    }

    /// Sends `count` protected requests at once; their results in order.
    func sendTogether(_ count: Int) async -> [Result<TokenEcho, APIError>] {
        await withTaskGroup(of: (Int, Result<TokenEcho, APIError>).self) { group in
            for index in 0..<count {
                group.addTask {
                    do throws(APIError) {
                        return (index, .success(try await client.response(for: protected)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results: [(Int, Result<TokenEcho, APIError>)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}

@Suite(
    "Integration: sessions that survive an expired token", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct SessionIntegrationTests {
    @Test func concurrentRefusalsStartExactlyOneRefresh() async throws {
        let realm = TokenRealm()
        let results = await realm.sendTogether(6)
        for result in results { #expect(throws: Never.self) { try result.get() } }
        #expect(realm.refresher.refreshCount == 1)
        let log = try await realm.log()
        #expect(log.issued == 1)
        #expect(realm.authentication.credential?.accessToken == "\(realm.name)-a1")
    }

    @Test func requestsSentWhileARefreshRunsWaitForItAndAreNeverRefused() async throws {
        // The refresh takes 1.5 s: wide enough that a busy machine's slow polls still see it run.
        let realm = TokenRealm(tokenQuery: "delay=1.5")
        async let first = realm.client.response(for: realm.protected)
        // Waits (real time, polling) until the first refusal has started the refresh.
        var polls = 0
        while !realm.authentication.isRefreshing && polls < 2_000 {
            try await Task.sleep(nanoseconds: 5_000_000)
            polls += 1
        }
        #expect(realm.authentication.isRefreshing)
        let later = await realm.sendTogether(5)
        _ = try await first
        for result in later { #expect(throws: Never.self) { try result.get() } }
        let log = try await realm.log()
        #expect(log.issued == 1)
        #expect(log.refused == 1)  // only the first request ever carried the stale token
    }

    @Test func aFailedRefreshFailsEveryWaitingRequestAndTheNextMayTryAgain() async throws {
        let realm = TokenRealm(refreshToken: "bogus")
        let results = await realm.sendTogether(4)
        for result in results {
            guard case .failure(.authenticationFailed(let underlying)) = result else {
                Issue.record("expected authenticationFailed, got \(result)")
                continue
            }
            #expect((underlying as? FixtureTokenRefresher.Refused)?.status == 400)
        }
        #expect(realm.refresher.refreshCount == 1)

        realm.authentication.signIn(with: APIAuthentication.Credential(accessToken: "stale", refreshToken: "start"))
        _ = try await realm.client.response(for: realm.protected)
        #expect(realm.refresher.refreshCount == 2)
        #expect(try await realm.log().issued == 1)
    }

    @Test func aTokenThatExpiresIsRenewedOnTheNextRefusal() async throws {
        let realm = TokenRealm(tokenQuery: "ttl=3")
        _ = try await realm.client.response(for: realm.protected)
        try await Task.sleep(nanoseconds: 3_300_000_000)
        let answer = try await realm.client.response(for: realm.protected)
        #expect(answer.value == "\(realm.name)-a2")
        #expect(try await realm.log().issued == 2)
        #expect(realm.authentication.credential?.accessToken == "\(realm.name)-a2")
    }

    @Test func theDefaultUserAgentAndAcceptLanguageReachTheServer() async throws {
        let echoed = try await Client<Echoed>().response(for: HTTPRequest("headers"))
        #expect(echoed.header("User-Agent") == APIEngine.DefaultHeaders.userAgent)
        #expect(echoed.header("User-Agent")?.contains("APIManagerKit/") == true)
        #expect(echoed.header("Accept-Language") == APIEngine.DefaultHeaders.standard["Accept-Language"])
    }
}
