// The scheduling machine alone, event by event: each test feeds one event and compares the actions
// it returns with the expected ones (issue 20, items 1 and 2), in the style of AsyncHTTPClient's
// state-machine tests.
import Foundation
import Testing

@testable import APIManagerKit

private typealias Action = SchedulingMachine.Action

private func cancel(_ handle: NamedHandle) -> Action { .cancel(SchedulingMachine.Handle(handle)) }

private let transportFailure = APIError.transport(underlying: URLError(.timedOut))

@Suite("Scheduling machine: each event's actions", .timeLimit(.minutes(1)))
struct SchedulingMachineEventTests {
    @Test func aSendStartsTheFirstAttemptAndGivesTheIdentifier() {
        var h = MachineHarness()
        let task = h.send(.default)
        #expect(Array(h.lastActions) == [.start(task, attempt: 1)])
        #expect(h.lastActions.deliverEvents, "the started event is queued and its delivery asked for")
        #expect(task.identifier == 1)
        #expect(task.phase == .running)
        let second = h.send(.default)
        #expect(second.identifier == 2)
    }

    @Test func aWaitingTaskHasNoActionButItsEvent() {
        var h = MachineHarness()
        h.send(.default)
        let queued = h.send(.waitUntilDone)
        #expect(Array(h.lastActions) == [])
        #expect(h.events(of: queued) == ["waiting"])
        #expect(queued.phase == .waiting)
    }

    @Test func aStoredCopyGivenWithTheBuiltRequestIsToldBeforeTheSendAndDroppedAfterTheEnd() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, policy: .default, scope: "feed")
        h.tasks.append(task)
        h.run { $0.send(task, observed: true) }
        let copy = AnyAPITask.BuiltResponse { _ in }
        let actions = h.run { $0.requestBuilt(task, attempt: 1, cachedCopy: copy) }
        #expect(Array(actions) == [.tell(task, .cached(copy)), .send(task, attempt: 1)])
        #expect(h.events(of: task).contains("cached"))
        let late = AnyAPITask(identifier: 2, policy: .default)
        h.tasks.append(late)
        h.run { $0.send(late, observed: true) }
        h.run { $0.cancel(late, reason: .explicit) }
        #expect(Array(h.run { $0.requestBuilt(late, attempt: 1, cachedCopy: copy) }) == [])
        #expect(!h.events(of: late).contains("cached"), "a task that ended hears of no stored copy")
    }

    @Test func aDeadlineIsScheduledWithTheSendAndRecordedWhenSet() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, settings: .init(policy: .default, deadline: 5), engine: nil)
        h.tasks.append(task)
        let sent = h.run { machine in machine.send(task, observed: false) }
        #expect(Array(sent) == [.scheduleDeadline(task, after: 5), .start(task, attempt: 1)])
        let timer = NamedHandle()
        #expect(Array(h.run { $0.deadlineTimerSet(task, timer: timer) }) == [])
        let ended = h.run { $0.cancel(task, reason: .explicit) }
        #expect(Array(ended) == [cancel(timer)], "ending the task cancels its deadline")
        let late = NamedHandle()
        #expect(Array(h.run { $0.deadlineTimerSet(task, timer: late) }) == [cancel(late)])
    }

    @Test func anIgnoredTaskSchedulesNoDeadline() {
        var h = MachineHarness()
        h.send(.default)
        let task = AnyAPITask(identifier: 2, settings: .init(policy: .ignoreCurrent, deadline: 5), engine: nil)
        let actions = h.run { $0.send(task, observed: true) }
        #expect(Array(actions) == [.tell(task, .ended(.failure(.ignored), nil))])
    }

    @Test func aTaskCancelledBeforeItIsSentEndsWhenSentWithoutStarting() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, policy: .default)
        #expect(Array(h.run { $0.cancel(task, reason: .concurrency) }) == [])
        #expect(task.phase == .created)
        let actions = h.run { $0.send(task, observed: true) }
        #expect(Array(actions) == [.tell(task, .ended(.failure(.cancelled(reason: .concurrency)), nil))])
        #expect(h.events == ["1 failed cancelled(concurrency)"])
    }

    @Test func aBuiltRequestIsSentOnlyForTheCurrentAttempt() {
        var h = MachineHarness()
        let task = h.send(.default)
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 1) }) == [.send(task, attempt: 1)])
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 2) }) == [], "a stale attempt")
    }

    @Test func aSentAttemptIsCancelledThroughItsHandle() {
        var h = MachineHarness()
        let task = h.send(.default)
        let handle = NamedHandle()
        #expect(h.start(task, attempt: 1, handle: handle) == 1)
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 1) }) == [.send(task, attempt: 1)])
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [cancel(handle)])
    }

    @Test func anAttemptAbandonedWhileBeingBuiltIsToldAndNeverSent() {
        var h = MachineHarness()
        let task = h.send(.default)
        let handle = NamedHandle()
        h.start(task, attempt: 1, handle: handle)
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [cancel(handle)], "the attempt is told")
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 1) }) == [], "not handed to the transport")
    }

    @Test func anAttemptMadeAfterItsTaskEndedIsNotKeptAndNeverRuns() {
        var h = MachineHarness()
        let task = h.send(.default)
        h.run { $0.cancel(task, reason: .explicit) }
        let handle = NamedHandle()
        #expect(h.start(task, attempt: 1, handle: handle) == nil)
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [], "nothing kept")
    }

    @Test func aStaleAttemptIsNotKept() {
        var h = MachineHarness()
        let task = h.send(.default)
        let current = NamedHandle()
        h.start(task, attempt: 1, handle: current)
        #expect(h.start(task, attempt: 2, handle: NamedHandle()) == nil, "not yet begun")
        #expect(h.start(task, attempt: 0, handle: NamedHandle()) == nil, "an earlier one")
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [cancel(current)])
    }

    @Test func anAttemptThatEndedItsTaskIsNotCancelled() {
        var h = MachineHarness()
        let task = h.send(.default)
        let handle = NamedHandle()
        h.start(task, attempt: 1, handle: handle)
        h.run { $0.requestBuilt(task, attempt: 1) }
        h.finish(task)
        #expect(!h.lastActions.contains(cancel(handle)))
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [])
    }

    @Test func aReplayTakesThePlaceOfTheAttemptItReplays() {
        var h = MachineHarness()
        let task = h.send(.default)
        let first = NamedHandle()
        h.start(task, attempt: 1, handle: first)
        h.run { $0.requestBuilt(task, attempt: 1) }
        #expect(Array(h.run { $0.credentialRefused(task, attempt: 1) }) == [.replay(task, attempt: 1)])
        let replay = NamedHandle()
        #expect(h.start(task, attempt: 1, handle: replay) == 1)
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [cancel(replay)], "building: told, not sent")
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 1) }) == [])
    }

    @Test func aRefusedCredentialIsReplayedOncePerTask() {
        var h = MachineHarness()
        let task = h.send(.default)
        #expect(Array(h.run { $0.credentialRefused(task, attempt: 1) }) == [.replay(task, attempt: 1)])
        #expect(Array(h.run { $0.credentialRefused(task, attempt: 1) }) == [])
        #expect(Array(h.run { $0.credentialRefused(task, attempt: 2) }) == [], "a stale attempt")
    }

    @Test func aFailureToRetrySchedulesTheTimerAndItsFiringStartsTheNextAttempt() {
        var h = MachineHarness()
        let task = h.send(.default)
        let handle = NamedHandle()
        h.start(task, attempt: 1, handle: handle)
        h.failForRetry(task, delay: 2)
        #expect(Array(h.lastActions) == [.scheduleRetry(task, attempt: 1, after: 2)], "the attempt ended itself")
        #expect(task.phase == .waitingForRetry)
        let timer = NamedHandle()
        #expect(Array(h.run { $0.retryTimerSet(task, attempt: 1, timer: timer) }) == [])
        #expect(Array(h.run { $0.retryTimerFired(task, attempt: 1) }) == [.start(task, attempt: 2)])
        #expect(Array(h.run { $0.retryTimerFired(task, attempt: 1) }) == [], "fires once")
        #expect(h.events(of: task) == ["started 1", "retry 2.0", "started 2"])
    }

    @Test func aRetryWithoutDelayStartsAtOnce() {
        var h = MachineHarness()
        let task = h.send(.default)
        h.failForRetry(task, delay: 0)
        #expect(Array(h.lastActions) == [.start(task, attempt: 2)])
    }

    @Test func cancellingDuringTheRetryDelayCancelsTheTimerAndALateTimerIsCancelledToo() {
        var h = MachineHarness()
        let task = h.send(.default)
        h.failForRetry(task, delay: 2)
        let timer = NamedHandle()
        h.run { $0.retryTimerSet(task, attempt: 1, timer: timer) }
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [cancel(timer)])

        var other = MachineHarness()
        let flaky = other.send(.default)
        other.failForRetry(flaky, delay: 2)
        other.run { $0.cancel(flaky, reason: .explicit) }
        let late = NamedHandle()
        #expect(Array(other.run { $0.retryTimerSet(flaky, attempt: 1, timer: late) }) == [cancel(late)])
    }

    @Test func aDeadlineThatFiresEndsTheTaskAndCancelsWhatItRuns() {
        var h = MachineHarness()
        let task = h.send(.default)
        let handle = NamedHandle()
        h.start(task, attempt: 1, handle: handle)
        h.run { $0.requestBuilt(task, attempt: 1) }
        #expect(Array(h.run { $0.deadlineFired(task, deadline: 5) }) == [cancel(handle)])
        #expect(task.state.isTerminal)
        #expect(Array(h.run { $0.deadlineFired(task, deadline: 5) }) == [], "once")
    }

    @Test func anObservedTaskTellsItsCallerTheEndOnce() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, policy: .default)
        h.tasks.append(task)
        h.run { $0.send(task, observed: true) }
        h.finish(task)
        #expect(Array(h.lastActions) == [.tell(task, .ended(.success(AnyAPITask.BuiltResponse { _ in }), .network))])
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [])
    }

    @Test func aCachedAnswerEndsTheTaskFromTheCache() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, policy: .default)
        h.tasks.append(task)
        h.run { $0.send(task, observed: true) }
        let stored = AnyAPITask.BuiltResponse { _ in }
        let actions = h.run { $0.cachedResponse(task, attempt: 1, response: stored, terminal: true) }
        #expect(Array(actions) == [.tell(task, .ended(.success(stored), .cache))])
        #expect(task.responseSource == .cache)
        #expect(h.events(of: task) == ["started 1", "finished"])
    }

    @Test func aCachedCopyAheadOfTheNetworkIsToldAndTheAttemptGoesOn() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, policy: .default)
        h.tasks.append(task)
        h.run { $0.send(task, observed: true) }
        let stored = AnyAPITask.BuiltResponse { _ in }
        let actions = h.run { $0.cachedResponse(task, attempt: 1, response: stored, terminal: false) }
        #expect(Array(actions) == [.tell(task, .cached(stored))])
        #expect(task.phase == .running)
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 1) }) == [.send(task, attempt: 1)])
        let stale = h.run { $0.cachedResponse(task, attempt: 2, response: stored, terminal: true) }
        #expect(Array(stale) == [], "a stale attempt's cached answer changes nothing")
    }

    @Test func anEndedTaskStartsTheHeadOfItsLineAfterItsTerminalEvent() {
        var h = MachineHarness()
        let first = h.send(.waitUntilDone, scope: "cart")
        let second = h.send(.waitUntilDone, scope: "cart")
        let handle = NamedHandle()
        h.start(first, attempt: 1, handle: handle)
        h.run { $0.requestBuilt(first, attempt: 1) }
        let actions = h.run { $0.cancel(first, reason: .explicit) }
        #expect(Array(actions) == [cancel(handle), .start(second, attempt: 1)])
    }

    @Test func releaseCancelsEverythingAndTellsCallersWithoutEvents() {
        var h = MachineHarness()
        let task = AnyAPITask(identifier: 1, policy: .default)
        h.tasks.append(task)
        h.run { $0.send(task, observed: true) }
        let handle = NamedHandle()
        h.start(task, attempt: 1, handle: handle)
        h.run { $0.requestBuilt(task, attempt: 1) }
        let before = h.events.count
        let actions = h.run { $0.release() }
        #expect(
            Array(actions) == [
                cancel(handle), .tell(task, .ended(.failure(.cancelled(reason: .managerReleased)), nil)),
            ])
        #expect(h.events.count == before)
    }

    @Test func aStaleAnswerChangesNothing() {
        var h = MachineHarness()
        let task = h.send(.default)
        h.failForRetry(task, delay: 0)
        let actions = h.run {
            $0.attemptEnded(
                task, attempt: 1, outcome: .failure(transportFailure), source: .network, retryDelay: nil)
        }
        #expect(Array(actions) == [])
        #expect(task.phase == .running)
    }
}
