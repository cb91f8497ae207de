import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A refresh that hangs, is overruled, times out, races a sign-in, or ends on another engine's
/// thread; and the store that must end with the credential the session uses.
@Suite("Authentication: refreshes that hang, race or time out", .timeLimit(.minutes(1)))
struct RefreshLifecycleTests {
    @Test func aSignInDuringAHungRefreshReleasesTheWaitersAtOnceAndLaterRequestsDoNotWait() {
        let auth = AuthHarness()  // refreshes are held: this one never returns
        auth.valid.withLock { $0 = ["fresh"] }
        let first = auth.send()
        let waiting = (0..<3).map { _ in auth.send() }
        #expect(auth.authentication.isRefreshing)
        #expect(waiting.allSatisfy { $0.state.name == "running" })

        auth.authentication.signIn(with: APIAuthentication.Credential(accessToken: "fresh"))
        #expect(!auth.authentication.isRefreshing)
        #expect(([first] + waiting).allSatisfy { $0.state.name == "finished" })
        let later = auth.send()
        #expect(later.state.name == "finished")
        #expect(auth.sentTokens == ["expired"] + Array(repeating: "fresh", count: 5))

        auth.authenticator.release()  // the hung refresh returns at last: dropped
        #expect(auth.authentication.credential?.accessToken == "fresh")
        #expect(auth.store.headers(forOrigin: auth.authentication.storageKey)["access_token"] == "fresh")
    }

    @Test func aSignOutDuringAHungRefreshReleasesTheWaitersWithoutACredential() {
        let auth = AuthHarness()
        let first = auth.send()
        #expect(first.state.name == "running")
        auth.authentication.signOut()
        #expect(first.state.name == "status(401)")  // sent again without one, refused as ordinary
        #expect(auth.sentTokens == ["expired", "-"])
        #expect(auth.store.headers(forOrigin: auth.authentication.storageKey).isEmpty)
    }

    @Test func aRefreshThatNeverReturnsTimesOutAndFailsItsWaiters() throws {
        let auth = AuthHarness()
        let tasks = (0..<3).map { _ in auth.send() }
        #expect(auth.authentication.refreshTimeout == 30)
        auth.clock.advance(by: 29.9)
        #expect(tasks.allSatisfy { $0.state.name == "running" })
        auth.clock.advance(by: 0.1)
        #expect(!auth.authentication.isRefreshing)
        for task in tasks {
            guard case .failed(.authenticationFailed(let underlying)) = task.state else {
                Issue.record("\(task.state)")
                continue
            }
            #expect(underlying as? APIAuthentication.RefreshError == .timedOut(after: 30))
        }
        // The next refusal may try again.
        auth.send()
        #expect(auth.authenticator.refreshCount == 2)
    }

    @Test func theTimeLimitIsSettableAndTheTimedOutRefreshIsCancelled() async throws {
        let authenticator = CancellationAwareAuthenticator()
        let clock = TestClock()
        let authentication = APIAuthentication(
            authenticator: authenticator, refreshTimeout: 5, clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
        let harness = Harness(clock: clock, authentication: authentication)
        harness.transport.stub(nil, "/me", .json(#"{"error":"invalid_token"}"#, status: 401))
        let task = harness.send(TestRequest("/me"))
        await authenticator.started.wait()
        clock.advance(by: 5)
        #expect(task.state.name.hasPrefix("authenticationFailed"))
        await authenticator.cancelled.wait()
    }

    @Test func aReleasedSessionIsNotKeptAliveByItsRefresh() async throws {
        let authenticator = CancellationAwareAuthenticator()
        let clock = TestClock()
        weak var released: APIAuthentication?
        do {
            let authentication = APIAuthentication(authenticator: authenticator, clock: clock)
            released = authentication
            authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
            let transport = MockTransport(clock: clock)
            transport.stub(nil, "/me", .json("{}", status: 401))
            let manager = TestManager(
                engine: APIEngine(
                    transport: transport, clock: clock, delivery: .inline, execution: .inline,
                    authentication: authentication))
            let task = manager.send(TestRequest("/me"))
            await authenticator.started.wait()
            #expect(task.state.name == "running")
        }
        #expect(released == nil)
        await authenticator.cancelled.wait()  // releasing the session cancelled its refresh
    }

    /// A sign-in races a refresh whose store write is slow: the store must end with what the
    /// session uses, written in one step each time.
    @Test(.timeLimit(.minutes(1)))
    func theStoreEndsWithTheCredentialTheSessionUses() async throws {
        let store = SlowStore()
        let authenticator = MockAuthenticator(holdsRefreshes: true)
        let clock = TestClock()
        let authentication = APIAuthentication(authenticator: authenticator, store: store, clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
        let harness = Harness(clock: clock, authentication: authentication)
        harness.transport.stub(nil, "/me", .json("{}", status: 401), .json(#"{"value":"ok"}"#))
        harness.send(TestRequest("/me"))
        #expect(authenticator.heldCount == 1)

        store.blocksNextWrite()
        let refreshEnded = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            authenticator.release()  // the refresh ends on this thread and writes token-1, slowly
            refreshEnded.signal()
        }
        await store.writeStarted.wait()
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "other-account"))  // does not wait
        #expect(authentication.credential?.accessToken == "other-account")
        store.unblock()
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                refreshEnded.wait()
                continuation.resume()
            }
        }
        #expect(store.headers(forOrigin: authentication.storageKey)["access_token"] == "other-account")
        #expect(store.calls.withLock { $0 } == ["replace expired", "replace token-1", "replace other-account"])
        let relaunched = APIAuthentication(authenticator: MockAuthenticator(), store: store)
        #expect(relaunched.credential?.accessToken == "other-account")
    }

    /// Two engines share a session; the refresh one starts ends on the test's thread. The other
    /// engine's waiting attempt goes on on its own work queue.
    @Test(.timeLimit(.minutes(1)))
    func aWaitingRequestGoesOnWhereItsOwnEngineSays() async throws {
        let marker = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "refresh-tests.engine-b")
        queue.setSpecific(key: marker, value: "engine B")
        let auth = AuthHarness()
        let threads = Locked<[String]>([])
        auth.transport.stub(nil, "/b") { request in
            threads.withLock { $0.append(DispatchQueue.getSpecific(key: marker) ?? "elsewhere") }
            return .json(#"{"value":"b"}"#)
        }
        let other = TestManager(
            engine: APIEngine(
                transport: auth.transport, clock: auth.clock, delivery: .inline, execution: .queue(queue),
                authentication: auth.authentication))
        auth.send()  // engine A: refused, starts the refresh (held)
        let waiting = other.send(TestRequest("/b"))
        await waitForState(of: waiting, toBe: "running")
        #expect(threads.withLock { $0 }.isEmpty)
        auth.authenticator.release()  // ends on this thread
        _ = try? await other.response(for: TestRequest("/b"))
        #expect(threads.withLock { $0 } == ["engine B", "engine B"])
    }

    @Test func anInspectorSeesTheRefusalTheAuthenticationAnswers() {
        let seen = Locked<[Int]>([])
        let inspector = ClosureInterceptor(onInspect: { response, _ in
            seen.withLock { $0.append(response.statusCode) }
            return .proceed
        })
        let authenticator = MockAuthenticator()
        let clock = TestClock()
        let authentication = APIAuthentication(authenticator: authenticator, clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
        let harness = Harness(clock: clock, interceptors: [inspector], authentication: authentication)
        harness.transport.stub(nil, "/me") { request in
            request.value(forHTTPHeaderField: "Authorization") == "Bearer token-1"
                ? .json(#"{"value":"ok"}"#) : .json("{}", status: 401)
        }
        let task = harness.send(TestRequest("/me"))
        #expect(task.state.name == "finished")
        #expect(seen.withLock { $0 } == [401, 200])
        #expect(authenticator.refreshCount == 1)
    }

    @Test func anInspectorAskingToRetryARefusalDecidesBeforeTheAuthentication() {
        let inspector = ClosureInterceptor(onInspect: { response, _ in
            response.statusCode == 401 ? .retry(after: 1) : .proceed
        })
        let authenticator = MockAuthenticator()
        let clock = TestClock()
        let authentication = APIAuthentication(authenticator: authenticator, clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired"))
        let harness = Harness(clock: clock, interceptors: [inspector], authentication: authentication)
        harness.transport.stub(nil, "/me", .json("{}", status: 401), .json(#"{"value":"ok"}"#))
        let task = harness.send(TestRequest("/me"))
        #expect(task.state.name == "waitingForRetry")
        #expect(authenticator.refreshCount == 0)
        clock.advance(by: 1)
        #expect(task.state.name == "finished")
    }
}

/// Awaits (without sleeping) until the task is in the state named.
func waitForState(of task: AnyAPITask, toBe name: String) async {
    while task.state.name != name { await Task.yield() }
}

/// A one-shot signal an async test can await.
final class Signal: Sendable {
    private let state = Locked<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.fired = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let fired = state.withLock { state -> Bool in
                if !state.fired { state.waiters.append(continuation) }
                return state.fired
            }
            if fired { continuation.resume() }
        }
    }
}

/// A refresh that never returns until cancelled, and says when it started and was cancelled.
final class CancellationAwareAuthenticator: APIAuthentication.Authenticator {
    let started = Signal()
    let cancelled = Signal()

    func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
        started.fire()
        let cancelled = self.cancelled
        let parked = Locked<CheckedContinuation<Void, Never>?>(nil)
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                parked.withLock { $0 = continuation }
                if Task.isCancelled { parked.withLock { $0.take() }?.resume() }
            }
        } onCancel: {
            cancelled.fire()
            parked.withLock { $0.take() }?.resume()
        }
        throw CancellationError()
    }
}

/// A store whose next write can be held until the test unblocks it, and which records its calls.
final class SlowStore: APIAuthentication.CredentialStore {
    private let stored = APIAuthentication.InMemoryCredentialStore()
    let calls = Locked<[String]>([])
    let writeStarted = Signal()
    private let gate = DispatchSemaphore(value: 0)
    private let blocksNext = Locked(false)

    func blocksNextWrite() { blocksNext.withLock { $0 = true } }
    func unblock() { gate.signal() }

    func headers(forOrigin origin: String) -> [String: String] { stored.headers(forOrigin: origin) }

    func save(_ headers: [String: String], forOrigin origin: String) {
        calls.withLock { $0.append("save \(headers["access_token"] ?? "-")") }
        stored.save(headers, forOrigin: origin)
    }

    func removeHeaders(forOrigin origin: String) {
        calls.withLock { $0.append("remove") }
        stored.removeHeaders(forOrigin: origin)
    }

    func replaceHeaders(_ headers: [String: String], forOrigin origin: String) {
        calls.withLock { $0.append("replace \(headers["access_token"] ?? "-")") }
        if blocksNext.withLock({ blocks in
            defer { blocks = false }
            return blocks
        }) {
            writeStarted.fire()
            gate.wait()
        }
        stored.replaceHeaders(headers, forOrigin: origin)
    }
}
