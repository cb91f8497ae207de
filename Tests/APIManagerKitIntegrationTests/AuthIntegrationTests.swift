import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Integration: auth and redirects", .enabled(if: Server.isAvailable, Server.skipReason), .timeLimit(.minutes(2)))
struct AuthIntegrationTests {
    @Test func basicAuthIsAcceptedAndAWrongPasswordIsRefused() async throws {
        var request = HTTPRequest("basic-auth/ada/s3cret")
        request.authorization = .basic(username: "ada", password: "s3cret")
        struct Authenticated: APIResponse, Decodable {
            let authenticated: Bool
            let user: String
        }
        let answer = try await Client<Authenticated>().response(for: request)
        #expect(answer.authenticated && answer.user == "ada")
        request.authorization = .basic(username: "ada", password: "wrong")
        let error = await failure { () async throws(APIError) in
            try await Client<Authenticated>().response(for: request)
        }
        #expect(error?.statusCode == 401)
    }

    @Test func bearerAuthIsAcceptedAndItsAbsenceRefused() async throws {
        struct Token: APIResponse, Decodable {
            let authenticated: Bool
            let token: String
        }
        var request = HTTPRequest("bearer")
        request.authorization = .bearer("t0ken")
        #expect(try await Client<Token>().response(for: request).token == "t0ken")
        request.authorization = nil
        let error = await failure { () async throws(APIError) in try await Client<Token>().response(for: request) }
        #expect(error?.statusCode == 401)
    }

    @Test func persistedAuthHeadersAreCapturedAndSentOnLaterRequests() async throws {
        let store = APIAuthentication.InMemoryCredentialStore()
        let client = Client<Echoed>(persisted: APIAuthentication.PersistedHeaders(store: store))
        // httpbin sets the response headers named in the query.
        _ = try await Client<APIRawResponse>(persisted: client.engine.persistedHeaders)
            .response(
                for: HTTPRequest(
                    "response-headers",
                    parameters: ["access-token": "tok-1", "client": "web", "uid": "ada@example.com"]))
        let echoed = try await client.response(for: HTTPRequest("headers"))
        #expect(echoed.header("access-token") == "tok-1")
        #expect(echoed.header("client") == "web")
        #expect(echoed.header("uid") == "ada@example.com")
        var other = HTTPRequest("headers")
        other.url = Server.secondURL
        #expect(try await client.response(for: other).header("access-token") == nil)
    }

    @Test func credentialsDoNotFollowARedirectToAnotherOrigin() async throws {
        let store = APIAuthentication.InMemoryCredentialStore()
        store.save(["access-token": "tok"], forOrigin: APIAuthentication.PersistedHeaders.origin(of: Server.url) ?? "")
        let client = Client<Echoed>(persisted: APIAuthentication.PersistedHeaders(store: store))
        let target = Server.secondURL.appendingPathComponent("headers").absoluteString
        var request = HTTPRequest("redirect-to", parameters: ["url": .string(target)])
        request.authorization = .bearer("secret")
        request.headers = ["Cookie": "session=1", "X-Trace": "kept"]
        let echoed = try await client.response(for: request)
        #expect(echoed.header("Host")?.hasSuffix(":\(Server.secondURL.port ?? 0)") == true)
        #expect(echoed.header("Authorization") == nil)
        #expect(echoed.header("access-token") == nil)
        #expect(echoed.header("Cookie") == nil)
        #expect(echoed.header("X-Trace") == "kept")
    }

    @Test func aCustomAuthHeaderDoesNotFollowARedirectToAnotherOrigin() async throws {
        let target = Server.secondURL.appendingPathComponent("headers").absoluteString
        var request = HTTPRequest("redirect-to", parameters: ["url": .string(target)])
        request.authorization = .custom(header: "X-API-Key", value: "k3y")
        #expect(try await Client<Echoed>().response(for: request).header("X-API-Key") == nil)
    }

    @Test func credentialsFollowARedirectWithinTheOrigin() async throws {
        var request = HTTPRequest("redirect-to", parameters: ["url": "/headers"])
        request.authorization = .bearer("secret")
        #expect(try await Client<Echoed>().response(for: request).header("Authorization") == "Bearer secret")
    }
}

@Suite(
    "Integration: authentication challenges", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct ChallengeIntegrationTests {
    @Test func aChallenged401IsDeliveredAsTheResponseItIs() async {
        let request = HTTPRequest("fixture/error/401", parameters: ["challenge": true, "text": "token expired"])
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error?.statusCode == 401)
        #expect(error?.response?.value(forHeader: "WWW-Authenticate") == #"Bearer realm="fixture""#)
        #expect(error?.serverMessage == "token expired")
    }
}
