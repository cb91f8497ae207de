import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A harness whose `/me` accepts only the tokens in ``valid``; refusals can be held, so several
/// requests are refused together when the test releases them.
final class AuthHarness: @unchecked Sendable {
    // @unchecked: immutable references to thread-safe objects.
    let authenticator: MockAuthenticator
    let authentication: APIAuthentication
    let store = APIAuthentication.InMemoryCredentialStore()
    let harness: Harness
    /// The access tokens the server accepts.
    let valid = Locked<Set<String>>(["token-1"])
    /// Whether refusals wait for `transport.release`.
    let holdsRefusals = Locked(false)

    init(
        authenticator: MockAuthenticator = MockAuthenticator(holdsRefreshes: true),
        refreshLimit: APIAuthentication.RefreshLimit = .default, signedInWith token: String? = "expired",
        observers: [any APIEngine.Observer] = []
    ) {
        self.authenticator = authenticator
        let clock = TestClock()
        authentication = APIAuthentication(
            authenticator: authenticator, store: store, refreshLimit: refreshLimit, clock: clock)
        harness = Harness(clock: clock, authentication: authentication, observers: observers)
        if let token {
            authentication.signIn(with: APIAuthentication.Credential(accessToken: token, refreshToken: "refresh-0"))
        }
        let valid = self.valid
        let holdsRefusals = self.holdsRefusals
        harness.transport.stub(nil, "/me") { request in
            let token = request.value(forHTTPHeaderField: "Authorization")?.replacingOccurrences(
                of: "Bearer ", with: "")
            if let token, valid.withLock({ $0.contains(token) }) { return .json(#"{"value":"\#(token)"}"#) }
            let refusal = MockTransport.Reply.json(#"{"error":"invalid_token"}"#, status: 401)
            return holdsRefusals.withLock { $0 } ? refusal.held() : refusal
        }
    }

    var transport: MockTransport { harness.transport }
    var recorder: EventRecorder { harness.recorder }
    var clock: TestClock { harness.clock }

    @discardableResult
    func send(_ request: TestRequest = TestRequest("/me")) -> APITask<TestRequest> { harness.send(request) }

    /// The token each request to `/me` carried, in order.
    var sentTokens: [String] {
        harness.records("/me").map {
            $0.request.value(forHTTPHeaderField: "Authorization")?.replacingOccurrences(of: "Bearer ", with: "") ?? "-"
        }
    }
}

@Suite("Authentication: one refresh for any number of refusals", .timeLimit(.minutes(1)))
struct AuthenticationTests {
    @Test func concurrentRefusalsStartExactlyOneRefreshAndEveryTaskIsReplayedWithTheNewCredential() {
        let auth = AuthHarness()
        auth.holdsRefusals.withLock { $0 = true }
        let tasks = (0..<5).map { _ in auth.send() }
        #expect(auth.transport.heldCount == 5)
        auth.transport.releaseAll()  // five 401s, one after another
        #expect(auth.authenticator.refreshCount == 1)
        #expect(auth.authenticator.refreshedCredentials.map(\.accessToken) == ["expired"])
        #expect(tasks.allSatisfy { $0.state.name == "running" })

        auth.authenticator.release()
        #expect(tasks.allSatisfy { $0.state.name == "finished" })
        #expect(auth.sentTokens == Array(repeating: "expired", count: 5) + Array(repeating: "token-1", count: 5))
        #expect(auth.authenticator.refreshCount == 1)
        // One start and one end per task: a replay is part of its attempt.
        for task in tasks { #expect(auth.recorder.events(of: task) == ["start 1", "finished"]) }
        #expect(tasks.allSatisfy { $0.attemptCount == 1 })
    }

    @Test func whileARefreshRunsNoRequestIsSentWithTheOldCredential() {
        let auth = AuthHarness()
        let first = auth.send()
        #expect(auth.authenticator.heldCount == 1)
        let waiting = (0..<3).map { _ in auth.send() }
        #expect(auth.sentTokens == ["expired"])
        #expect(waiting.allSatisfy { $0.state.name == "running" })
        #expect(auth.harness.manager.engine.inFlightCount == 4)

        auth.authenticator.release()
        #expect(auth.sentTokens == ["expired", "token-1", "token-1", "token-1", "token-1"])
        #expect(([first] + waiting).allSatisfy { $0.state.name == "finished" })
    }

    @Test func aRefusalOfACredentialAlreadyReplacedIsReplayedWithoutANewRefresh() {
        let auth = AuthHarness()
        auth.holdsRefusals.withLock { $0 = true }
        let early = auth.send()  // sent with "expired", its 401 held
        let second = auth.send()
        auth.transport.release()  // the first 401: a refresh starts
        auth.authenticator.release()  // token-1; `second` is replayed with it
        #expect(second.state.name == "running")  // its own 401 is still held
        #expect(early.state.name == "finished")

        auth.transport.release()  // `second`'s 401, for "expired": replaced already
        #expect(second.state.name == "finished")
        #expect(auth.authenticator.refreshCount == 1)
        #expect(auth.sentTokens == ["expired", "expired", "token-1", "token-1"])
    }

    @Test func aTaskIsReplayedAtMostOnceAndASecondRefusalIsAnOrdinaryFailure() {
        let auth = AuthHarness(authenticator: MockAuthenticator())
        auth.valid.withLock { $0 = [] }  // the server refuses every token
        let task = auth.send()
        #expect(task.state.name == "status(401)")
        #expect(auth.sentTokens == ["expired", "token-1"])
        #expect(auth.authenticator.refreshCount == 1)
        #expect(auth.recorder.events(of: task) == ["start 1", "failed status(401)"])
    }

    @Test func aReplayDoesNotUseUpARetryAttempt() {
        let auth = AuthHarness(authenticator: MockAuthenticator())
        let answers = Locked(0)
        auth.transport.stub(nil, "/flaky") { request in
            let count = answers.withLock { count -> Int in
                count += 1
                return count
            }
            if request.value(forHTTPHeaderField: "Authorization") == "Bearer expired" { return .status(401) }
            return count == 2 ? .status(503) : .json(#"{"value":"ok"}"#)
        }
        let task = auth.send(TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        // 401 → refresh → replay (same attempt) → 503 → retry → attempt 2 → 200.
        auth.clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(auth.recorder.events(of: task) == ["start 1", "retry 1.0", "start 2", "finished"])
        #expect(answers.withLock { $0 } == 3)
    }

    @Test func aFailedRefreshFailsEveryWaitingTaskAndTheNextRequestMayTryAgain() {
        struct RefreshDenied: Error {}
        let auth = AuthHarness()
        let tasks = (0..<3).map { _ in auth.send() }
        auth.authenticator.release(with: .failure(RefreshDenied()))
        for task in tasks {
            guard case .failed(.authenticationFailed(let underlying)) = task.state else {
                Issue.record("expected authenticationFailed, got \(task.state)")
                continue
            }
            #expect(underlying is RefreshDenied)
            #expect(auth.recorder.events(of: task) == ["start 1", "failed authenticationFailed(RefreshDenied())"])
        }
        #expect(auth.sentTokens == ["expired"])

        // The credential is kept; the next refusal starts a new refresh, which succeeds.
        auth.valid.withLock { $0 = ["token-2"] }
        let next = auth.send()
        #expect(auth.authenticator.refreshCount == 2)
        auth.authenticator.release()
        #expect(next.state.name == "finished")
    }

    @Test func aRefusalArrivingAfterTheRefreshFailedFailsWithItWithoutANewRefresh() {
        struct RefreshDenied: Error {}
        let auth = AuthHarness()
        auth.holdsRefusals.withLock { $0 = true }
        let first = auth.send()
        let late = auth.send()  // sent with the same credential, its 401 still held
        auth.transport.release()  // the first 401: a refresh starts
        auth.authenticator.release(with: .failure(RefreshDenied()))
        #expect(first.state.name == "authenticationFailed(RefreshDenied())")
        #expect(late.state.name == "running")

        auth.transport.release()  // the late 401: refused together with the first
        #expect(late.state.name == "authenticationFailed(RefreshDenied())")
        #expect(auth.authenticator.refreshCount == 1)
        #expect(auth.recorder.events(of: late) == ["start 1", "failed authenticationFailed(RefreshDenied())"])
    }

    @Test func refreshesBeyondTheLimitFailAtOnceUntilTheWindowHasPassed() {
        let auth = AuthHarness(
            authenticator: MockAuthenticator(),
            refreshLimit: APIAuthentication.RefreshLimit(maxRefreshes: 2, window: 60))
        auth.valid.withLock { $0 = [] }
        auth.send()
        auth.send()
        #expect(auth.authenticator.refreshCount == 2)
        let third = auth.send()
        #expect(auth.authenticator.refreshCount == 2)
        guard case .failed(.authenticationFailed(let underlying)) = third.state else {
            Issue.record("expected authenticationFailed, got \(third.state)")
            return
        }
        #expect(
            underlying as? APIAuthentication.RefreshError == .tooManyRefreshes(limit: 2, window: 60))

        auth.clock.advance(by: 60)
        auth.send()
        #expect(auth.authenticator.refreshCount == 3)
    }

    @Test func aTaskWaitingForARefreshCanBeCancelledAndIsNeverSent() {
        let auth = AuthHarness()
        auth.send()  // starts the refresh
        let waiting = auth.send()
        waiting.cancel()
        #expect(auth.recorder.events(of: waiting) == ["start 1", "failed cancelled(explicit)"])
        auth.authenticator.release()
        #expect(auth.sentTokens == ["expired", "token-1"])
        #expect(auth.recorder.events(of: waiting) == ["start 1", "failed cancelled(explicit)"])
    }

    @Test func theDeadlineEndsATaskWaitingForARefresh() {
        let auth = AuthHarness()
        let refused = auth.send(TestRequest("/me", deadline: 5))
        let waiting = auth.send(TestRequest("/me", deadline: 2))
        auth.clock.advance(by: 2)
        #expect(waiting.state.name == "timedOut")
        #expect(refused.state.name == "running")
        auth.authenticator.release()
        #expect(refused.state.name == "finished")
        #expect(auth.recorder.events(of: waiting) == ["start 1", "failed timedOut"])
    }

    @Test func theRenewedCredentialIsStoredAndReadBackByANewAuthentication() {
        let auth = AuthHarness(authenticator: MockAuthenticator())
        auth.send()
        #expect(
            auth.authentication.credential
                == APIAuthentication.Credential(accessToken: "token-1", refreshToken: "refresh-1"))
        let reopened = APIAuthentication(authenticator: MockAuthenticator(), store: auth.store)
        #expect(reopened.credential == APIAuthentication.Credential(accessToken: "token-1", refreshToken: "refresh-1"))
    }

    @Test func aSignInDuringARefreshOverrulesIt() {
        let auth = AuthHarness()
        auth.valid.withLock { $0 = ["fresh"] }
        let task = auth.send()
        auth.authentication.signIn(with: APIAuthentication.Credential(accessToken: "fresh"))
        auth.authenticator.release()  // token-1, dropped
        #expect(auth.authentication.credential?.accessToken == "fresh")
        #expect(task.state.name == "finished")
        #expect(auth.sentTokens == ["expired", "fresh"])
    }

    @Test func withoutACredentialRequestsGoAsTheyAreAndARefusalIsOrdinary() {
        let auth = AuthHarness(signedInWith: nil)
        let task = auth.send()
        #expect(auth.sentTokens == ["-"])
        #expect(task.state.name == "status(401)")
        #expect(auth.authenticator.refreshCount == 0)

        auth.authentication.signIn(with: APIAuthentication.Credential(accessToken: "token-1"))
        auth.send()
        auth.authentication.signOut()
        auth.send()
        #expect(auth.sentTokens == ["-", "token-1", "-"])
        #expect(auth.store.headers(forOrigin: auth.authentication.storageKey).isEmpty)
    }

    @Test func theRefreshRunsWithoutTheEngineLockAndSeesTheWaitingTasksInFlight() {
        let seen = Locked<Int?>(nil)
        let engineBox = Locked<APIEngine?>(nil)
        struct CountingAuthenticator: APIAuthentication.Authenticator {
            let seen: Locked<Int?>
            let engine: Locked<APIEngine?>
            func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
                // Would deadlock if the engine's lock were held.
                let count = engine.withLock { $0 }?.inFlightCount
                seen.withLock { $0 = count }
                return APIAuthentication.Credential(accessToken: "token-1")
            }
        }
        let clock = TestClock()
        let authentication = APIAuthentication(
            authenticator: CountingAuthenticator(seen: seen, engine: engineBox), clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
        let harness = Harness(clock: clock, authentication: authentication)
        engineBox.withLock { $0 = harness.manager.engine }
        harness.transport.stub(nil, "/me") { request in
            request.value(forHTTPHeaderField: "Authorization") == "Bearer token-1" ? .json("{}") : .status(401)
        }
        let task = harness.send(TestRequest("/me"))
        #expect(seen.withLock { $0 } == 1)
        #expect(task.state.name == "finished")
    }

    @Test func twoManagersSharingAnAuthenticationShareOneRefresh() {
        let auth = AuthHarness()
        let other = Harness(clock: auth.clock, authentication: auth.authentication)
        other.transport.stub(nil, "/orders") { request in
            request.value(forHTTPHeaderField: "Authorization") == "Bearer token-1" ? .json("{}") : .status(401)
        }
        let mine = auth.send()
        let theirs = other.send(TestRequest("/orders"))
        #expect(auth.authenticator.refreshCount == 1)
        #expect(other.transport.records.isEmpty)  // waits for the refresh mine started
        auth.authenticator.release()
        #expect(mine.state.name == "finished")
        #expect(theirs.state.name == "finished")
        #expect(auth.authenticator.refreshCount == 1)
    }

    @Test func theAppliedCredentialHeaderIsMarkedSensitive() {
        let auth = AuthHarness(signedInWith: "token-1")
        let described = Locked<[String]>([])
        auth.harness.manager.engine.eventMonitor = { event in
            if case .started = event.kind { described.withLock { $0.append(event.cURLDescription()) } }
        }
        auth.send()
        let curl = described.withLock { $0 }.joined()
        #expect(curl.contains("Authorization") && !curl.contains("token-1"), "\(curl)")
    }

    @Test func aCustomAuthenticatorDecidesHowTheCredentialIsAppliedAndRefused() {
        struct KeyAuthenticator: APIAuthentication.Authenticator {
            func apply(_ credential: APIAuthentication.Credential, to request: inout URLRequest) {
                request.setValue(credential.accessToken, forHTTPHeaderField: "X-Session")
            }
            func isRefused(_ response: APIRawResponse, to request: URLRequest) -> Bool {
                response.statusCode == 419
            }
            func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
                APIAuthentication.Credential(accessToken: credential.accessToken + "+renewed")
            }
        }
        let clock = TestClock()
        let authentication = APIAuthentication(authenticator: KeyAuthenticator(), clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "s1"))
        let harness = Harness(clock: clock, authentication: authentication)
        harness.transport.stub(nil, "/me") { request in
            request.value(forHTTPHeaderField: "X-Session") == "s1+renewed" ? .json("{}") : .status(419)
        }
        let described = Locked<[String]>([])
        harness.manager.engine.eventMonitor = { event in
            if case .started = event.kind { described.withLock { $0.append(event.cURLDescription()) } }
        }
        let task = harness.send(TestRequest("/me"))
        #expect(task.state.name == "finished")
        #expect(
            harness.records("/me").map { $0.request.value(forHTTPHeaderField: "X-Session") } == ["s1", "s1+renewed"])
        // X-Session is no standard credential header: it is redacted because the authenticator set it.
        let curl = described.withLock { $0 }
        #expect(curl.count == 2 && curl.allSatisfy { $0.contains("X-Session") && !$0.contains("s1") }, "\(curl)")
    }

    @Test func theCredentialStoredFormKeepsEveryValue() {
        let store = APIAuthentication.InMemoryCredentialStore()
        let credential = APIAuthentication.Credential(accessToken: "a", refreshToken: "r", values: ["user": "42"])
        APIAuthentication(authenticator: MockAuthenticator(), store: store, storageKey: "shop").signIn(with: credential)
        #expect(store.headers(forOrigin: "shop") == ["access_token": "a", "refresh_token": "r", "user": "42"])
        #expect(
            APIAuthentication(authenticator: MockAuthenticator(), store: store, storageKey: "shop").credential
                == credential)
    }
}
