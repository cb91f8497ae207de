// The refresh machine alone, event by event (issue 20, item 4): no authenticator, store, clock or
// engine. Actions are compared through their descriptions, which name what each does.
import Foundation
import Testing

@testable import APIManagerKit

/// Records what each waiter was told.
private final class Told: @unchecked Sendable {
    // @unchecked: the machine's tests run on one thread.
    var lines: [String] = []

    func waiter(_ name: String) -> RefreshMachine.Waiter {
        { [self] result in
            switch result {
            case .success(let grant): lines.append("\(name): \(grant.credential?.accessToken ?? "none")")
            case .failure: lines.append("\(name): failed")
            }
        }
    }
}

private let old = APIAuthentication.Credential(accessToken: "old", refreshToken: "r")
private let new = APIAuthentication.Credential(accessToken: "new", refreshToken: "r2")
private let limit = APIAuthentication.RefreshLimit(maxRefreshes: 2, window: 60)

private func describe(_ actions: [RefreshMachine.Action]) -> [String] { actions.map(\.description) }

private func describe(_ access: RefreshMachine.Access) -> String {
    switch access {
    case .now(.success(let grant)): return "now \(grant.credential?.accessToken ?? "none") #\(grant.generation)"
    case .now(.failure(let error)): return "now failed \(error)"
    case .waiting: return "waiting"
    }
}

/// Starts a refresh of `old` (generation 0) for one refused request.
private func startRefresh(_ machine: inout RefreshMachine, told: Told, now: TimeInterval = 0) -> [String] {
    var actions: [RefreshMachine.Action] = []
    let access = machine.confirmedRefusal(
        of: old, seen: machine.generation, now: now, limit: limit, resume: told.waiter("first"), into: &actions)
    return [describe(access)] + describe(actions)
}

@Suite("Refresh machine: each event's actions", .timeLimit(.minutes(1)))
struct RefreshMachineTests {
    @Test func signedInRequestsGetTheCredentialAtOnce() {
        var machine = RefreshMachine(credential: old)
        #expect(describe(machine.access(resume: Told().waiter("a"))) == "now old #0")
        #expect(machine.isCurrent(APIAuthentication.Grant(credential: old, generation: 0)))
    }

    @Test func signedOutARefusalIsAnOrdinaryResponse() {
        var machine = RefreshMachine(credential: nil)
        guard case .ordinary = machine.refused(sentWith: 0, resume: Told().waiter("a")) else {
            Issue.record("a refusal without a credential is not the machine's")
            return
        }
    }

    @Test func aRefusalOfTheCurrentCredentialAsksTheAuthenticator() {
        var machine = RefreshMachine(credential: old)
        guard
            case .askAuthenticator(let credential, let generation) = machine.refused(
                sentWith: 0, resume: Told().waiter("a"))
        else {
            Issue.record("expected to ask the authenticator")
            return
        }
        #expect(credential == old && generation == 0)
    }

    @Test func aConfirmedRefusalStartsOneRefreshThatOthersJoin() {
        var machine = RefreshMachine(credential: old)
        let told = Told()
        #expect(startRefresh(&machine, told: told) == ["waiting", "refresh old #1"])
        #expect(machine.isRefreshing)
        #expect(describe(machine.access(resume: told.waiter("second"))) == "waiting", "a new attempt waits")
        guard case .decided(.waiting) = machine.refused(sentWith: 0, resume: told.waiter("third")) else {
            Issue.record("a refusal during the refresh joins it")
            return
        }
        var actions: [RefreshMachine.Action] = []
        machine.refreshEnded(1, outcome: .success(new), into: &actions)
        #expect(describe(actions) == ["write", "resume 3 with new #1"])
        for case .resume(let waiters, let result) in actions {
            for resume in waiters { resume(result) }
        }
        #expect(told.lines == ["first: new", "second: new", "third: new"], "in the order they came")
        #expect(machine.credential == new)
        #expect(machine.takeWrite() == .some(new))
    }

    @Test func theRefreshsHandlesAreKeptAndCancelledWhenItEnds() {
        var machine = RefreshMachine(credential: old)
        _ = startRefresh(&machine, told: Told())
        let work = NamedHandle()
        let timer = NamedHandle()
        var actions: [RefreshMachine.Action] = []
        machine.refreshStarted(1, work: work, timer: timer, into: &actions)
        #expect(actions.isEmpty)
        machine.refreshEnded(1, outcome: .failure(URLError(.timedOut)), into: &actions)
        #expect(describe(actions).prefix(2) == ["cancel", "cancel"])
        #expect(describe(actions).last?.hasPrefix("resume 1 with The server refused the credential") == true)
        let late = NamedHandle()
        actions = []
        machine.refreshStarted(1, work: late, timer: nil, into: &actions)
        #expect(describe(actions) == ["cancel"], "a handle of an ended refresh is cancelled")
    }

    @Test func aSignInOverrulesTheRefreshAndItsWaitersGoOnWithTheNewCredential() {
        var machine = RefreshMachine(credential: old)
        let told = Told()
        _ = startRefresh(&machine, told: told)
        let work = NamedHandle()
        var actions: [RefreshMachine.Action] = []
        machine.refreshStarted(1, work: work, timer: nil, into: &actions)
        machine.replace(with: new, into: &actions)
        #expect(describe(actions) == ["cancel", "write", "resume 1 with new #1"])
        actions = []
        machine.refreshEnded(1, outcome: .success(old), into: &actions)
        #expect(actions.isEmpty, "what the overruled refresh returns is dropped")
        #expect(machine.credential == new)
        #expect(describe(machine.access(resume: told.waiter("later"))) == "now new #1", "later requests do not wait")
    }

    @Test func aSignOutDuringTheRefreshLetsItsWaitersGoWithoutCredential() {
        var machine = RefreshMachine(credential: old)
        _ = startRefresh(&machine, told: Told())
        var actions: [RefreshMachine.Action] = []
        machine.replace(with: nil, into: &actions)
        #expect(describe(actions) == ["write", "resume 1 with none #1"])
        #expect(machine.takeWrite() == .some(nil))
    }

    @Test func aLateRefusalOfARequestSentBeforeTheFailedRefreshFailsWithItsError() {
        var machine = RefreshMachine(credential: old)
        _ = startRefresh(&machine, told: Told())
        var actions: [RefreshMachine.Action] = []
        machine.refreshEnded(1, outcome: .failure(URLError(.userAuthenticationRequired)), into: &actions)
        guard
            case .decided(.now(.failure(.authenticationFailed))) = machine.refused(
                sentWith: 0, resume: Told().waiter("late"))
        else {
            Issue.record("refused together with the others: fails with the refresh's error")
            return
        }
        // A request sent after the failure may try again.
        guard case .askAuthenticator = machine.refused(sentWith: machine.generation, resume: Told().waiter("new"))
        else {
            Issue.record("a request sent after the failure may start another refresh")
            return
        }
    }

    @Test func aRefusalOfACredentialReplacedMeanwhileIsSentAgainWithTheCurrentOne() {
        var machine = RefreshMachine(credential: old)
        var actions: [RefreshMachine.Action] = []
        machine.replace(with: new, into: &actions)
        guard case .decided(.now(.success(let grant))) = machine.refused(sentWith: 0, resume: Told().waiter("a")) else {
            Issue.record("expected the current credential at once")
            return
        }
        #expect(grant.credential == new && grant.generation == 1)
        let confirmed = machine.confirmedRefusal(
            of: old, seen: 0, now: 0, limit: limit, resume: Told().waiter("b"), into: &actions)
        #expect(describe(confirmed) == "now new #1", "replaced between the question and the answer")
    }

    @Test func refreshesPastTheLimitFailAtOnce() {
        var machine = RefreshMachine(credential: old)
        for round in 0..<2 {
            _ = startRefresh(&machine, told: Told(), now: Double(round))
            var actions: [RefreshMachine.Action] = []
            machine.refreshEnded(UInt64(round + 1), outcome: .success(old), into: &actions)
        }
        let refused = startRefresh(&machine, told: Told(), now: 10)
        #expect(refused.first?.contains("credential refreshes already started") == true)
        #expect(machine.refreshes == 2)
        let later = startRefresh(&machine, told: Told(), now: 70)
        #expect(later == ["waiting", "refresh old #3"], "the window moved on")
    }

    @Test func aWaiterThatLeavesIsNotTold() {
        var machine = RefreshMachine(credential: old)
        let told = Told()
        _ = startRefresh(&machine, told: told)
        guard case .waiting(let key) = machine.access(resume: told.waiter("leaving")) else {
            Issue.record("expected to wait")
            return
        }
        machine.waiterLeft(key)
        var actions: [RefreshMachine.Action] = []
        machine.refreshEnded(1, outcome: .success(new), into: &actions)
        #expect(describe(actions) == ["write", "resume 1 with new #1"])
    }

    @Test func storeWritesAreOneAtATimeAndTheLastChangeWins() {
        var machine = RefreshMachine(credential: nil)
        var actions: [RefreshMachine.Action] = []
        machine.replace(with: old, into: &actions)
        #expect(machine.takeWrite() == .some(old))
        machine.replace(with: new, into: &actions)
        #expect(machine.takeWrite() == nil, "another thread is writing: it writes this change next")
        machine.writeDone()
        #expect(machine.takeWrite() == .some(new))
        machine.writeDone()
        #expect(machine.takeWrite() == nil)
    }
}
