// The scheduling machine driven by random event sequences, its invariants checked after each event:
// what hand-picked sequences miss (issue 20, item 2).
import Foundation
import Testing

@testable import APIManagerKit

@Suite("The scheduling machine under random event sequences", .timeLimit(.minutes(1)))
struct SchedulingMachineRandomTests {
    /// One random run: `steps` events among sends (every policy, three scopes), attempt ends
    /// (success, or failure with a retry), claims, retry timers, deadlines and cancellations.
    @discardableResult
    private func run(seed: UInt64, steps: Int) -> [String] {
        var random = SplitMix64(state: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        var harness = MachineHarness()
        var sendOrder: [UInt64: Int] = [:]
        var replayed: Set<UInt64> = []
        for step in 0..<steps {
            let live = harness.tasks.filter { $0.phase != .ended }
            switch pick(15) {
            case 0, 1, 2:
                let policy = APIConcurrencyPolicy.allCases[pick(APIConcurrencyPolicy.allCases.count)]
                let scope = [nil, "a", "b"][pick(3)]
                let priority = [0, 0, 0, 2, -1][pick(5)]
                let task = harness.send(policy, scope: scope, priority: priority)
                sendOrder[task.identifier] = step
            case 3, 4:
                if let task = live.filter({ $0.phase == .running }).randomElement(using: &random) {
                    let attempt = task.attemptNumber
                    harness.run { machine in machine.requestBuilt(task, attempt: attempt) }
                    harness.finish(task)
                }
            case 5:
                if let task = live.filter({ $0.phase == .running }).randomElement(using: &random) {
                    harness.failForRetry(task, delay: 1)
                }
            case 6:
                if let task = live.filter({ $0.phase == .waitingForRetry }).randomElement(using: &random) {
                    let attempt = task.attemptNumber
                    harness.run { machine in machine.retryTimerFired(task, attempt: attempt) }
                }
            case 7:
                if let task = live.randomElement(using: &random) {
                    harness.run { machine in machine.cancel(task, reason: .explicit) }
                }
            case 8:
                if let task = live.filter({ $0.phase != .created }).randomElement(using: &random) {
                    harness.run { machine in machine.deadlineFired(task, deadline: 5) }
                }
            case 10:
                // The engine makes the attempt and the transport takes it; sometimes the task is
                // cancelled in between: the attempt is told exactly when the task ended without it.
                if let task = live.filter({ $0.phase == .running }).randomElement(using: &random) {
                    let attempt = task.attemptNumber
                    let handle = NamedHandle()
                    #expect(harness.start(task, attempt: attempt, handle: handle) != nil, "seed \(seed) step \(step)")
                    var told = false
                    if pick(3) == 0 {
                        let actions = harness.run { machine in machine.cancel(task, reason: .explicit) }
                        told = actions.contains(.cancel(SchedulingMachine.Handle(handle)))
                    }
                    let actions = harness.run { machine in machine.requestBuilt(task, attempt: attempt) }
                    #expect(actions.contains(.send(task, attempt: attempt)) == (task.phase != .ended))
                    if pick(2) == 0, task.phase != .ended {
                        let actions = harness.run { machine in machine.cancel(task, reason: .explicit) }
                        told = actions.contains(.cancel(SchedulingMachine.Handle(handle)))
                    }
                    #expect(told == (task.phase == .ended), "seed \(seed) step \(step): an attempt told or not")
                }
            case 11:
                // A refused credential, replayed at most once per task.
                if let task = live.filter({ $0.phase == .running }).randomElement(using: &random) {
                    let attempt = task.attemptNumber
                    let actions = harness.run { machine in
                        machine.credentialRefused(task, attempt: attempt)
                    }
                    if actions.contains(.replay(task, attempt: attempt)) {
                        #expect(replayed.insert(task.identifier).inserted, "seed \(seed): replayed twice")
                    }
                }
            case 12:
                // A stored response: ahead of the network, or as the answer.
                if let task = live.filter({ $0.phase == .running }).randomElement(using: &random) {
                    let attempt = task.attemptNumber
                    let terminal = pick(2) == 0
                    harness.run { machine in
                        machine.cachedResponse(
                            task, attempt: attempt, response: AnyAPITask.BuiltResponse { _ in }, terminal: terminal)
                    }
                    #expect((task.phase == .ended) == terminal, "seed \(seed) step \(step): a cached answer")
                }
            case 13:
                // An attempt is made, or a retry timer set; kept only while it is needed.
                if let task = harness.tasks.randomElement(using: &random) {
                    let attempt = task.attemptNumber
                    let handle = NamedHandle()
                    if task.phase == .waitingForRetry {
                        harness.run { machine in machine.retryTimerSet(task, attempt: attempt, timer: handle) }
                    } else {
                        let counted = harness.start(task, attempt: attempt, handle: handle)
                        #expect(
                            (counted != nil) == (task.phase == .running),
                            "seed \(seed) step \(step): an attempt kept or not")
                    }
                }
            case 14:
                // A debounced or throttled task's quiet wait ends.
                if let task = live.filter({ $0.record.membership == .quiet }).randomElement(using: &random) {
                    harness.run { machine in machine.quietEnded(task) }
                    #expect(task.phase == .running, "seed \(seed) step \(step): a quiet task did not start")
                }
            default:
                // A late answer for an attempt that is no longer current changes nothing.
                if let task = harness.tasks.randomElement(using: &random) {
                    let before = harness.events.count
                    let stale = task.attemptNumber - 1
                    harness.run { machine in
                        machine.attemptEnded(
                            task, attempt: stale, outcome: .failure(.transport(underlying: URLError(.timedOut))),
                            source: .network, retryDelay: nil)
                    }
                    #expect(harness.events.count == before, "seed \(seed) step \(step): a stale answer changed state")
                }
            }
            check(harness, seed: seed, step: step)
        }
        harness.cancelAll()
        check(harness, seed: seed, step: steps)
        // Every task has ended, exactly once.
        for task in harness.tasks {
            let terminal = terminalEvents(of: task, in: harness)
            #expect(terminal == 1, "seed \(seed): task \(task.identifier) ended \(terminal) times")
        }
        #expect(harness.machine.inFlightCount == 0)
        return harness.events
    }

    private func terminalEvents(of task: AnyAPITask, in harness: MachineHarness) -> Int {
        harness.events.filter {
            $0.hasPrefix("\(task.identifier) finished") || $0.hasPrefix("\(task.identifier) failed")
        }
        .count
    }

    private func check(_ harness: MachineHarness, seed: UInt64, step: Int) {
        let place = "seed \(seed) step \(step)"
        // A limited task never starts while its limit (4, the default) of the scope's tasks run, so at
        // most four limited tasks of a scope run at once.
        for scope in [nil, "a", "b"] as [String?] {
            let runningLimited = harness.tasks.filter {
                $0.concurrencyPolicy == .limited && $0.concurrencyScope == scope
                    && ($0.phase == .running || $0.phase == .waitingForRetry)
            }
            #expect(runningLimited.count <= 4, "\(place): \(runningLimited.count) limited tasks run")
        }
        // No task both waiting and running: a task in a line waits, a started one runs or waits for a retry.
        for task in harness.tasks {
            switch task.record.membership {
            case .line, .lineFront, .lineRestored, .quiet:
                #expect(task.phase == .waiting, "\(place): task \(task.identifier) in line but \(task.phase)")
            case .started, .startedFromLine:
                #expect(
                    task.phase == .running || task.phase == .waitingForRetry,
                    "\(place): task \(task.identifier) started but \(task.phase)")
            case .none:
                #expect(task.phase == .ended || task.phase == .created, "\(place): task \(task.identifier) unlisted")
            }
        }
        let inFlight = harness.machine.inFlightTasks
        // Scope counts match, and no task is in flight twice (both waiting and running).
        #expect(harness.machine.inFlightCount == inFlight.count, "\(place): counts differ")
        #expect(Set(inFlight.map(\.identifier)).count == inFlight.count, "\(place): a task is listed twice")
        for task in harness.tasks {
            let listed = inFlight.contains { $0 === task }
            let ended = task.phase == .ended
            // In flight exactly when it has not ended (a task is sent at once here).
            #expect(listed != ended, "\(place): task \(task.identifier) listed \(listed), ended \(ended)")
            // Never more than one terminal event, and nothing after it.
            let lines = harness.events.filter { $0.hasPrefix("\(task.identifier) ") }
            let terminal = terminalEvents(of: task, in: harness)
            #expect(terminal <= 1, "\(place): task \(task.identifier) ended twice")
            if terminal == 1, let last = lines.last {
                #expect(last.contains("finished") || last.contains("failed"), "\(place): an event after the end")
            }
        }
        // waitUntilDone lines are FIFO per priority: within a scope, such tasks of one priority start
        // in the order they were sent.
        for scope in [nil, "a", "b"] as [String?] {
            for priority in [0, 2, -1] {
                let waitingLine = harness.tasks.filter {
                    $0.concurrencyPolicy == .waitUntilDone && $0.concurrencyScope == scope && $0.priority == priority
                }
                let startOrder = harness.starts.compactMap { start -> UInt64? in
                    guard start.hasSuffix("#1"), let identifier = UInt64(start.dropLast(2)) else { return nil }
                    return waitingLine.contains { $0.identifier == identifier } ? identifier : nil
                }
                #expect(startOrder == startOrder.sorted(), "\(place): waitUntilDone started out of order \(startOrder)")
            }
        }
    }

    @Test(arguments: 1...25)
    func randomSequencesKeepEveryInvariant(seed: Int) {
        run(seed: UInt64(seed), steps: 100)
    }

    /// The runs reach the states worth checking: lines, retries, policy cancellations, ignores.
    @Test func theRunsCoverWaitingRetriesCancellationsAndIgnores() {
        let events = (1...25).flatMap { run(seed: UInt64($0), steps: 100) }
        for kind in [
            "waiting", "retry", "started 2", "failed cancelled(policy)", "failed ignored", "finished", "cached",
            "failed cancelled(explicit)",
        ] {
            #expect(events.contains { $0.contains(kind) }, "no \(kind) in 25 runs")
        }
    }
}
