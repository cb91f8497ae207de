// De-duplication (issue 22, item 4): identical requests in flight share one network attempt; each
// sender keeps its own task, events and typed result.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

@Suite("Sharing identical requests", .timeLimit(.minutes(1)))
struct RequestSharingTests {
    struct ProfileRequest: APIRequest {
        var url = testBaseURL
        var path = "/profile"
        var method: HTTPMethod = .get
        var headers: [String: String] = [:]
        var body: APIRequestBody?
        var sharing: APIConcurrencyPolicy.Sharing = .safeMethods
        var retryPolicy: APIRetryPolicy?
        var concurrencyScope: String?
        var parameters: APIParameters = [:]
        var cachePartition: String?
    }

    final class ProfileManager: APIManager {
        typealias Request = ProfileRequest
        typealias Response = Echo
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    /// A second manager type on the same engine, with a response type of its own.
    final class RawProfileManager: APIManager {
        typealias Request = ProfileRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    private func make() -> (MockTransport, ProfileManager, EventRecorder) {
        let transport = MockTransport()
        transport.stub(nil, "/profile", MockTransport.Reply.json(#"{"value":"ada"}"#).held())
        let manager = ProfileManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let recorder = EventRecorder()
        manager.delegate = recorder
        return (transport, manager, recorder)
    }

    @Test func twoScreensAskingForTheSameProfileMakeOneRequest() {
        let (transport, manager, recorder) = make()
        let first = manager.send(ProfileRequest())
        let second = manager.send(ProfileRequest())
        #expect(transport.records.count == 1)
        transport.releaseAll()
        #expect(first.state.name == "finished" && second.state.name == "finished")
        #expect(recorder.events(of: first) == ["start 1", "finished"])
        #expect(recorder.events(of: second) == ["start 1", "finished"], "each sender has its own events")
        #expect(manager.engine.sharedFlights.count == 0)
    }

    @Test func eachSenderGetsAResponseOfItsOwnType() async throws {
        let (transport, manager, _) = make()
        let raw = RawProfileManager(engine: manager.engine)
        // Identical on the wire: the typed manager would otherwise add `Accept: application/json`.
        let request = ProfileRequest(headers: ["Accept": "application/json"])
        async let typed = manager.response(for: request)
        async let untyped = raw.response(for: request)
        // Both attempts on board before the answer: a task counts as in flight before its attempt
        // boards, and a sender that boards after the answer makes a request of its own.
        while manager.engine.sharedFlights.boardedCount < 2 { await Task.yield() }
        #expect(transport.records.count == 1)
        transport.releaseAll()
        let (profile, response) = try await (typed, untyped)
        #expect(profile == Echo(value: "ada"))
        #expect(response.statusCode == 200)
    }

    @Test func differentRequestsAreNotShared() {
        let (transport, manager, _) = make()
        manager.send(ProfileRequest())
        manager.send(ProfileRequest(headers: ["Accept-Language": "fr"]))
        manager.send(ProfileRequest(sharing: .never))
        #expect(transport.records.count == 3)
        transport.releaseAll()
    }

    @Test func postsWithDifferentBodiesOrQueriesAreNotShared() {
        let (transport, manager, _) = make()
        let add = APIRequestBody(data: Data(#"{"add":1}"#.utf8), contentType: "application/json")
        let remove = APIRequestBody(data: Data(#"{"remove":1}"#.utf8), contentType: "application/json")
        manager.send(ProfileRequest(method: .post, body: add, sharing: .always))
        manager.send(ProfileRequest(method: .post, body: remove, sharing: .always))
        #expect(transport.records.count == 2, "the body is part of the key (Moya keyed on the URL alone)")
        manager.send(ProfileRequest(parameters: ["page": 1]))
        manager.send(ProfileRequest(parameters: ["page": 2]))
        manager.send(ProfileRequest(parameters: ["page": 2]))
        #expect(transport.records.count == 4, "the query is part of the key")
        transport.releaseAll()
    }

    @Test func requestsOfDifferentUsersAreNeverShared() {
        let (transport, manager, _) = make()
        let ada = manager.send(ProfileRequest(headers: ["Authorization": "Bearer ada"]))
        let bob = manager.send(ProfileRequest(headers: ["Authorization": "Bearer bob"]))
        let adaAgain = manager.send(ProfileRequest(headers: ["Authorization": "Bearer ada"]))
        #expect(transport.records.count == 2, "one request per credential")
        transport.releaseAll()
        #expect([ada, bob, adaAgain].allSatisfy { $0.state.name == "finished" })
    }

    @Test func requestsOfDifferentCachePartitionsAreNotShared() {
        let (transport, manager, _) = make()
        manager.send(ProfileRequest(cachePartition: "user-a"))
        manager.send(ProfileRequest(cachePartition: "user-b"))
        manager.send(ProfileRequest(cachePartition: "user-a"))
        #expect(transport.records.count == 2, "the partition is the caller's identity: one request per partition")
        transport.releaseAll()
    }

    @Test func anEngineWithAnAuthenticationSharesOnlyUnderOneCredential() {
        let transport = MockTransport()
        transport.stub(nil, "/profile", MockTransport.Reply.json(#"{"value":"ada"}"#).held())
        let session = APIAuthentication(authenticator: MockAuthenticator())
        session.signIn(with: APIAuthentication.Credential(accessToken: "t0ken"))
        let manager = ProfileManager(
            engine: APIEngine(
                transport: transport, delivery: .inline, execution: .inline, cache: APIResponseCache(disk: nil),
                authentication: session))
        let first = manager.send(ProfileRequest())
        let second = manager.send(ProfileRequest())
        #expect(transport.records.count == 1)
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Authorization") == "Bearer t0ken")
        transport.releaseAll()
        #expect(first.state.name == "finished" && second.state.name == "finished")
    }

    @Test func unsafeMethodsAreSharedOnlyWhenTheRequestOptsIn() {
        let transport = MockTransport()
        transport.stub(nil, "/profile", MockTransport.Reply.json(#"{"value":"ada"}"#).held())
        let manager = ProfileManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let body = APIRequestBody(data: Data("{}".utf8), contentType: "application/json")
        manager.send(ProfileRequest(method: .post, body: body))
        manager.send(ProfileRequest(method: .post, body: body))
        #expect(transport.records.count == 2, "safeMethods does not share a POST")
        manager.send(ProfileRequest(method: .post, body: body, sharing: .always))
        manager.send(ProfileRequest(method: .post, body: body, sharing: .always))
        #expect(transport.records.count == 3, "always shares it")
        transport.releaseAll()
    }

    @Test func cancellingOneSenderDetachesOnlyIt() {
        let (transport, manager, recorder) = make()
        let first = manager.send(ProfileRequest())
        let second = manager.send(ProfileRequest())
        first.cancel()
        #expect(transport.pendingCount == 1, "the request goes on for the other sender")
        transport.releaseAll()
        #expect(first.state.name == "cancelled(explicit)")
        #expect(second.state.name == "finished")
        #expect(recorder.events(of: first).last == "failed cancelled(explicit)")
    }

    @Test func theNetworkAttemptIsCancelledWhenTheLastSenderLeaves() {
        let (transport, manager, _) = make()
        let first = manager.send(ProfileRequest())
        let second = manager.send(ProfileRequest())
        first.cancel()
        second.cancel()
        #expect(transport.pendingCount == 0, "nobody is left: the transport request is cancelled")
        #expect(manager.engine.sharedFlights.count == 0)
    }

    @Test func aSenderArrivingAfterTheAnswerMakesANewRequest() {
        let (transport, manager, _) = make()
        manager.send(ProfileRequest())
        transport.releaseAll()
        let later = manager.send(ProfileRequest())
        #expect(transport.records.count == 2)
        transport.releaseAll()
        #expect(later.state.name == "finished")
    }

    @Test func aFailureReachesEverySenderAndEachRetriesByItsOwnPolicy() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/profile", MockTransport.Reply.failure(.networkConnectionLost).after(1))
        let manager = ProfileManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let first = manager.send(ProfileRequest())
        let second = manager.send(ProfileRequest())
        clock.advance(by: 1)
        #expect(transport.records.count == 1)
        #expect(first.state.name == "transport(\(URLError.Code.networkConnectionLost.rawValue))")
        #expect(second.state.name == first.state.name)
    }

    // MARK: Retries are shared

    /// One failure, then an answer; every attempt takes `latency` seconds.
    private func makeFlaky(latency: TimeInterval = 1, retryBudget: APIEngine.RetryBudget? = nil) -> (
        TestClock, MockTransport, ProfileManager
    ) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(
            nil, "/profile", MockTransport.Reply.failure(.networkConnectionLost).after(latency),
            MockTransport.Reply.json(#"{"value":"ada"}"#).after(latency))
        let manager = ProfileManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline, retryBudget: retryBudget))
        return (clock, transport, manager)
    }

    private static func retrying(after delay: TimeInterval, scope: String? = nil) -> ProfileRequest {
        ProfileRequest(
            retryPolicy: APIRetryPolicy(maxAttempts: 3, baseDelay: delay, jitter: .none), concurrencyScope: scope)
    }

    @Test(arguments: [nil, "profile"] as [String?])
    func sendersThatFailTogetherRetryOnOneRequest(scope: String?) {
        let (clock, transport, manager) = makeFlaky()
        let first = manager.send(Self.retrying(after: 2, scope: scope))
        let second = manager.send(Self.retrying(after: 2, scope: scope))
        clock.advance(by: 1)  // both fail
        #expect(transport.records.count == 1)
        clock.advance(by: 2)  // both retry
        #expect(transport.records.count == 2, "the retries share one request")
        clock.advance(by: 1)
        #expect(first.state.name == "finished" && second.state.name == "finished")
        #expect(first.attemptCount == 2 && second.attemptCount == 2)
        #expect(manager.engine.sharedFlights.count == 0)
    }

    @Test(arguments: [nil, "profile"] as [String?])
    func aSenderArrivingDuringARetryDelayJoinsTheRetry(scope: String?) {
        let (clock, transport, manager) = makeFlaky()
        let recorder = EventRecorder()
        manager.delegate = recorder
        let first = manager.send(Self.retrying(after: 5, scope: scope))
        clock.advance(by: 1)  // fails; retries at 6
        clock.advance(by: 2)
        let late = manager.send(ProfileRequest(concurrencyScope: scope))
        #expect(transport.records.count == 1, "nothing is sent for it: it waits for the retry")
        #expect(late.state.name == "running")
        clock.advance(by: 3)  // the retry starts
        #expect(transport.records.count == 2)
        clock.advance(by: 1)
        #expect(first.state.name == "finished" && late.state.name == "finished")
        #expect(late.attemptCount == 1, "the late sender did not fail: it rode the retry")
        #expect(recorder.events(of: late) == ["start 1", "finished"])
        #expect(manager.engine.sharedFlights.count == 0)
    }

    @Test func theEarliestRetryLaunchesTheWaitingSenders() {
        let (clock, transport, manager) = makeFlaky(latency: 1)
        let soon = manager.send(Self.retrying(after: 1))
        let later = manager.send(Self.retrying(after: 10))
        clock.advance(by: 1)  // both fail: retries at 2 and at 11
        let waiting = manager.send(ProfileRequest())
        clock.advance(by: 1)  // the earlier retry goes, the waiting sender with it
        #expect(transport.records.count == 2)
        clock.advance(by: 1)
        #expect(soon.state.name == "finished" && waiting.state.name == "finished")
        #expect(later.state.name == "waitingForRetry" || later.state.name == "running")
        clock.advance(by: 9)  // the later retry: the flight has landed, it sends its own
        #expect(transport.records.count == 3)
        clock.advance(by: 1)
        #expect(later.state.name == "finished")
        #expect(manager.engine.sharedFlights.count == 0)
    }

    @Test(arguments: [nil, "profile"] as [String?])
    func aRetrierCancelledDuringItsDelayLetsTheWaitingSendersGoAtOnce(scope: String?) {
        let (clock, transport, manager) = makeFlaky()
        let retrier = manager.send(Self.retrying(after: 5, scope: scope))
        clock.advance(by: 1)
        let waiting = manager.send(ProfileRequest(concurrencyScope: scope))
        #expect(transport.records.count == 1)
        retrier.cancel()
        #expect(transport.records.count == 2, "nobody retries any more: the waiting sender sends now")
        clock.advance(by: 1)
        #expect(waiting.state.name == "finished")
        #expect(retrier.state.name == "cancelled(explicit)")
        #expect(manager.engine.sharedFlights.count == 0)
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func aRetrierCancelledFromAnotherThreadLetsTheWaitingSenderGo() async {
        let (clock, transport, manager) = makeFlaky()
        let retrier = manager.send(Self.retrying(after: 5))
        clock.advance(by: 1)
        let waiting = manager.send(ProfileRequest())
        await Task.detached { retrier.cancel() }.value
        #expect(transport.records.count == 2)
        clock.advance(by: 1)
        #expect(waiting.state.name == "finished")
    }

    @Test func waitingSendersLeavingKeepTheRetryOnItsOwn() {
        let (clock, transport, manager) = makeFlaky()
        let retrier = manager.send(Self.retrying(after: 5))
        clock.advance(by: 1)
        let waiting = manager.send(ProfileRequest())
        waiting.cancel()
        #expect(waiting.state.name == "cancelled(explicit)")
        clock.advance(by: 5)
        #expect(transport.records.count == 2, "the retry goes as planned")
        clock.advance(by: 1)
        #expect(retrier.state.name == "finished")
        #expect(manager.engine.sharedFlights.count == 0)
    }

    @Test func aRetryRefusedByTheBudgetLetsTheWaitingSenderGo() {
        let (clock, transport, manager) = makeFlaky(
            retryBudget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 0, window: 60))
        let retrier = manager.send(Self.retrying(after: 5))
        let waiting = manager.send(ProfileRequest())  // joins the first flight
        clock.advance(by: 1)
        #expect(retrier.state.name == "transport(\(URLError.Code.networkConnectionLost.rawValue))")
        #expect(waiting.state.name == retrier.state.name)
        let next = manager.send(ProfileRequest())
        #expect(transport.records.count == 2, "no retry rests the flight: a new sender sends at once")
        clock.advance(by: 1)
        #expect(next.state.name == "finished")
        #expect(manager.engine.sharedFlights.count == 0)
    }
}
