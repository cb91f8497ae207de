// A refresh credential the server rejects signs the session out once (issue 43, item 7): the
// credential is forgotten, the app and the observers are told once, and the waiting requests fail
// with that reason. On the refresh machine alone, then through engines sharing the session.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

private let expired = APIAuthentication.Credential(accessToken: "expired", refreshToken: "r")
private let rejected = APIAuthentication.CredentialRejected(reason: "invalid_grant")

@Suite("A rejected refresh credential signs the session out", .timeLimit(.minutes(1)))
struct SignOutTests {
    // MARK: On the machine

    @Test func theMachineForgetsTheCredentialWritesTellsOnceThenTheWaiters() {
        var machine = RefreshMachine(credential: expired)
        var actions: [RefreshMachine.Action] = []
        _ = machine.confirmedRefusal(
            of: expired, seen: 0, now: 0, limit: .default, resume: { _ in }, into: &actions)
        _ = machine.refused(sentWith: 0, resume: { _ in })
        actions = []
        machine.refreshEnded(1, outcome: .failure(rejected), into: &actions)
        #expect(actions.map(\.description) == ["write", "signed out: invalid_grant", "resume 2 with \(failure)"])
        #expect(machine.credential == nil)
        #expect(machine.takeWrite() == .some(nil), "the store forgets it too")
        // A request sent with the rejected credential and refused later fails the same way.
        guard case .decided(.now(.failure(let error))) = machine.refused(sentWith: 0, resume: { _ in }) else {
            Issue.record("a late refusal of the rejected credential is not failed with the sign-out")
            return
        }
        #expect("\(error)" == "\(failure)")
        // One sent without a credential (after the sign-out) is an ordinary response.
        guard case .ordinary = machine.refused(sentWith: machine.generation, resume: { _ in }) else {
            Issue.record("a refusal after the sign-out is not ordinary")
            return
        }
        // A sign-in ends it.
        actions = []
        machine.replace(with: APIAuthentication.Credential(accessToken: "fresh"), into: &actions)
        guard case .askAuthenticator = machine.refused(sentWith: machine.generation, resume: { _ in }) else {
            Issue.record("after a sign-in a refusal is the authenticator's again")
            return
        }
    }

    @Test func anyOtherRefreshFailureKeepsTheSessionSignedIn() {
        var machine = RefreshMachine(credential: expired)
        var actions: [RefreshMachine.Action] = []
        _ = machine.confirmedRefusal(of: expired, seen: 0, now: 0, limit: .default, resume: { _ in }, into: &actions)
        actions = []
        machine.refreshEnded(1, outcome: .failure(URLError(.notConnectedToInternet)), into: &actions)
        #expect(!actions.map(\.description).contains { $0.hasPrefix("signed out") })
        #expect(machine.credential == expired)
    }

    private var failure: APIError { .authenticationFailed(underlying: rejected) }

    // MARK: Through engines sharing the session

    /// Two engines (with an observer each) sharing a session whose one refresh is rejected.
    private struct Setup {
        let clock = TestClock()
        let transport: MockTransport
        let store = APIAuthentication.InMemoryCredentialStore()
        let authenticator: MockAuthenticator
        let session: APIAuthentication
        let recorders = [NoticeRecorder(), NoticeRecorder()]
        let managers: [TestManager]
        let signOuts = Locked<[String]>([])

        init(reply: MockAuthenticator.Reply = .failure(rejected), execution: APIEngine.Execution = .inline) {
            transport = MockTransport(clock: clock)
            transport.stub(nil, "/me") { request in
                request.value(forHTTPHeaderField: "Authorization") == nil ? .status(401) : .status(401)
            }
            authenticator = MockAuthenticator(replies: [reply], holdsRefreshes: true)
            session = APIAuthentication(authenticator: authenticator, store: store, clock: clock)
            session.signIn(with: expired)
            var managers: [TestManager] = []
            for recorder in recorders {
                var configuration = APIEngine.Configuration()
                configuration.transport = transport
                configuration.clock = clock
                configuration.delivery = .inline
                configuration.execution = execution
                configuration.authentication = session
                configuration.observers = [recorder]
                managers.append(TestManager(engine: APIEngine(configuration: configuration)))
            }
            self.managers = managers
            let signOuts = self.signOuts
            session.onSignOut = { rejection in signOuts.withLock { $0.append(rejection.reason ?? "") } }
        }
    }

    @Test func theWaitingRequestsFailWithTheReasonAndTheAppAndEveryEngineAreToldOnce() {
        let setup = Setup()
        let tasks = setup.managers.flatMap { manager in (0..<2).map { _ in manager.send(TestRequest("/me")) } }
        #expect(setup.authenticator.refreshCount == 1, "one refresh for the four refusals")
        #expect(setup.authenticator.release())
        for task in tasks {
            #expect(task.state == .failed(failure))
        }
        #expect(setup.signOuts.withLock { $0 } == ["invalid_grant"], "the app is told once")
        for recorder in setup.recorders {
            let notices = recorder.notices.withLock { $0 }
            #expect(notices.map(\.kind) == [.signedOut], "each engine's observers are told once")
            #expect(notices.first?.description.contains("invalid_grant") == true)
        }
        #expect(setup.session.credential == nil)
        #expect(setup.store.headers(forOrigin: setup.session.storageKey).isEmpty, "forgotten in the store")
        // Afterwards requests go without a credential, and a refusal is an ordinary answer.
        let later = setup.managers[0].send(TestRequest("/me"))
        #expect(later.state.name == "status(401)")
        #expect(setup.transport.records.last?.request.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(setup.authenticator.refreshCount == 1, "no refresh without a credential")
        #expect(setup.signOuts.withLock { $0 }.count == 1)
    }

    @Test func aRefreshThatFailsOnTheNetworkDoesNotSignOut() {
        let setup = Setup(reply: .failure(URLError(.notConnectedToInternet)))
        let task = setup.managers[0].send(TestRequest("/me"))
        #expect(setup.authenticator.release())
        #expect(task.state.name.hasPrefix("authenticationFailed"))
        #expect(setup.session.credential == expired)
        #expect(setup.signOuts.withLock { $0 }.isEmpty)
        #expect(setup.recorders[0].notices.withLock { $0 }.isEmpty)
    }

    @Test func onTheEnginesWorkQueuesTheAsyncCallerGetsTheReason() async {
        let setup = Setup(execution: .concurrent(label: "sign-out"))
        let waiting = Task.detached { () -> APIError? in
            do {
                _ = try await setup.managers[1].response(for: TestRequest("/me"))
                return nil
            } catch {
                return error as? APIError
            }
        }
        while setup.authenticator.heldCount == 0 { await Task.yield() }
        #expect(setup.authenticator.release())
        let error = await waiting.value
        guard case .authenticationFailed(let underlying)? = error else {
            Issue.record("expected authenticationFailed, got \(String(describing: error))")
            return
        }
        #expect(underlying as? APIAuthentication.CredentialRejected == rejected)
        #expect(setup.signOuts.withLock { $0 } == ["invalid_grant"])
    }
}
