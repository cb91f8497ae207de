// The circuit breaker and the retry budget as part of the scheduling machine, driven alone: the
// event that says a request is built admits it or ends its task with `circuitOpen`; the event that
// says an attempt ended records its outcome, spends the budget on its retry or refuses it; what the
// event monitor is told and the shared flight to leave come back as actions.
import Foundation
import Testing

@testable import APIManagerKit

private typealias Machine = SchedulingMachine
private let origin = "https://api.example:"
private let transportFailure = APIError.transport(underlying: URLError(.timedOut))

private func network(at now: Double) -> Machine.NetworkContext { Machine.NetworkContext(origin: origin, now: now) }

private func sentEnd(at now: Double, sharedAnswer: SharedAnswer? = nil, boardedFlight: Bool = false)
    -> Machine.AttemptEnd
{
    Machine.AttemptEnd(
        sent: true, sharedAnswer: sharedAnswer, boardedFlight: boardedFlight, isMonitored: true,
        network: network(at: now))
}

@Suite("Scheduling machine: the circuit breaker and the retry budget", .timeLimit(.minutes(1)))
struct SchedulingMachineResilienceTests {
    /// A machine whose circuit opens after `threshold` transient failures, for 30 s.
    private func harness(threshold: Int = 1, budget: APIEngine.RetryBudget? = nil) -> MachineHarness {
        var h = MachineHarness()
        h.machine = SchedulingMachine(
            circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: threshold, openInterval: 30), retryBudget: budget
        )
        return h
    }

    /// Sends a task and fails its first attempt on the network at `now`.
    private func failOnce(_ h: inout MachineHarness, at now: Double) -> (AnyAPITask, Machine.Actions) {
        let task = h.send(.default)
        #expect(
            Array(h.run { $0.requestBuilt(task, attempt: 1, network: network(at: now)) }) == [.send(task, attempt: 1)])
        let ended = h.run {
            $0.attemptEnded(
                task, attempt: 1, outcome: .failure(transportFailure), source: .network, retryDelay: nil,
                end: sentEnd(at: now))
        }
        return (task, ended)
    }

    @Test func aFailureThatOpensTheCircuitIsReportedAfterItsTaskEnds() {
        var h = harness()
        let (task, actions) = failOnce(&h, at: 0)
        #expect(Array(actions) == [.report(.circuitOpened(origin: origin, closesIn: 30))])
        #expect(task.phase == .ended)
        #expect(h.machine.resilience.circuit(of: origin) == .open(until: 30))
    }

    @Test func aRequestBuiltWhileTheCircuitIsOpenEndsItsTaskWithCircuitOpenAndSendsNothing() {
        var h = harness()
        _ = failOnce(&h, at: 0)
        let task = h.send(.default)
        let actions = h.run { $0.requestBuilt(task, attempt: 1, network: network(at: 5), isMonitored: true) }
        let refusal = APIError.circuitOpen(origin: origin, closesIn: 25)
        #expect(Array(actions) == [.report(.failedUnsent(refusal))], "no send: the request never goes")
        #expect(task.phase == .ended)
        #expect(h.events(of: task).last == "failed \(MachineHarness.describeError(refusal))")
    }

    @Test func aRefusalIsNotReportedWithoutAMonitor() {
        var h = harness()
        _ = failOnce(&h, at: 0)
        let task = h.send(.default)
        #expect(Array(h.run { $0.requestBuilt(task, attempt: 1, network: network(at: 5)) }) == [])
        #expect(task.phase == .ended)
    }

    @Test func theProbeAfterTheOpenIntervalClosesTheCircuitWhenItSucceeds() throws {
        var h = harness()
        _ = failOnce(&h, at: 0)
        let probe = h.send(.default)
        #expect(
            Array(h.run { $0.requestBuilt(probe, attempt: 1, network: network(at: 31)) }) == [.send(probe, attempt: 1)])
        let response = AnyAPITask.BuiltResponse { _ in }
        let actions = h.run {
            $0.attemptEnded(
                probe, attempt: 1, outcome: .success(response), source: .network, retryDelay: nil,
                end: sentEnd(at: 32))
        }
        #expect(Array(actions) == [.report(.circuitClosed(origin: origin))])
        #expect(h.machine.resilience.circuit(of: origin) == .closed(failures: 0))
    }

    @Test func aProbeEndedWhileItsRequestWasBuiltGivesItsAdmissionBack() {
        var h = harness()
        _ = failOnce(&h, at: 0)
        let probe = h.send(.default)
        h.run { $0.cancel(probe, reason: .explicit) }
        #expect(Array(h.run { $0.requestBuilt(probe, attempt: 1, network: network(at: 31)) }) == [])
        // Without the probe given back, the circuit would refuse every other task until 61.
        let next = h.send(.default)
        #expect(
            Array(h.run { $0.requestBuilt(next, attempt: 1, network: network(at: 31)) }) == [.send(next, attempt: 1)])
    }

    @Test func aRetryTheBudgetRefusesEndsTheTaskAndIsReported() {
        var h = harness(threshold: 100, budget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 1, window: 10))
        var scheduled: [Bool] = []
        for round in 0..<2 {
            let task = h.send(.default)
            h.run { $0.requestBuilt(task, attempt: 1, network: network(at: Double(round))) }
            let actions = h.run {
                $0.attemptEnded(
                    task, attempt: 1, outcome: .failure(transportFailure), source: .network, retryDelay: 2,
                    end: sentEnd(at: Double(round), boardedFlight: true))
            }
            scheduled.append(Array(actions).contains(.scheduleRetry(task, attempt: 1, after: 2)))
            if round == 1 {
                #expect(
                    Array(actions) == [.report(.retryRefused(transportFailure))],
                    "refused: the task ends, rests no flight, and the monitor hears why")
                #expect(task.phase == .ended)
            } else {
                #expect(
                    Array(actions) == [.restFlight(task), .scheduleRetry(task, attempt: 1, after: 2)],
                    "a retry's wait rests the flight its attempt was on, before its timer is set")
            }
        }
        #expect(scheduled == [true, false], "one retry fits the budget's minimum, the second does not")
    }

    @Test func aSharedAnswerCountsOnceForTheCircuit() {
        var h = harness(threshold: 2)
        let shared = SharedAnswer()
        for _ in 0..<2 {
            let task = h.send(.default)
            h.run { $0.requestBuilt(task, attempt: 1, network: network(at: 0)) }
            let actions = h.run {
                $0.attemptEnded(
                    task, attempt: 1, outcome: .failure(transportFailure), source: .network, retryDelay: nil,
                    end: sentEnd(at: 0, sharedAnswer: shared))
            }
            #expect(Array(actions).allSatisfy { if case .report = $0 { false } else { true } })
        }
        #expect(h.machine.resilience.circuit(of: origin) == .closed(failures: 1), "two tasks, one network failure")
    }

    @Test func aLateAnswerOfAnEndedTaskStillCountsForItsOrigin() {
        var h = harness()
        let task = h.send(.default)
        h.start(task, attempt: 1, handle: NamedHandle())
        h.run { $0.requestBuilt(task, attempt: 1, network: network(at: 0)) }
        h.run { $0.cancel(task, reason: .explicit) }
        let actions = h.run {
            $0.attemptEnded(
                task, attempt: 1, outcome: .failure(transportFailure), source: .network, retryDelay: nil,
                end: sentEnd(at: 1))
        }
        #expect(Array(actions) == [.report(.circuitOpened(origin: origin, closesIn: 30))])
    }

    @Test func aFailureBeforeSendingIsReportedWithoutCountingForTheCircuit() {
        var h = harness()
        let task = h.send(.default)
        let unsent = Machine.AttemptEnd(sent: false, isMonitored: true, network: network(at: 0))
        let error = APIError.invalidRequest(reason: "no URL", underlying: nil)
        let actions = h.run {
            $0.attemptEnded(task, attempt: 1, outcome: .failure(error), source: .network, retryDelay: nil, end: unsent)
        }
        #expect(Array(actions) == [.report(.failedUnsent(error))])
        #expect(h.machine.resilience.circuit(of: origin) == .closed(failures: 0))
    }

    /// Random sequences of sends, built requests, network answers (success or transient failure,
    /// some asking for a retry), retry timers, cancellations and time passing, against a machine
    /// with a circuit breaker and a retry budget. After every event: a request built while its
    /// origin's circuit is open is never sent and its task ends with `circuitOpen`; a report that
    /// the circuit opened leaves it open; every task ends exactly once by the end.
    @Test(arguments: [UInt64(1), 7, 42, 2026, 99_991])
    func theCircuitAndTheBudgetHoldUnderRandomEventSequences(seed: UInt64) {
        var random = SplitMix64(state: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        var h = harness(threshold: 2, budget: APIEngine.RetryBudget(ratio: 0.5, minimumRetries: 1, window: 20))
        var now = 0.0
        var sent: Set<ObjectIdentifier> = []
        for step in 0..<400 {
            let place = "seed \(seed) step \(step)"
            let live = h.tasks.filter { $0.phase != .ended }
            switch pick(8) {
            case 0, 1:
                h.send([.default, .waitUntilDone, .limited][pick(3)], scope: [nil, "cart"][pick(2)])
            case 2, 3:
                guard let task = live.filter({ $0.phase == .running }).randomElement(using: &random) else { break }
                let attempt = task.attemptNumber
                let wasOpen: Bool
                if case .open(let until) = h.machine.resilience.circuit(of: origin), now < until {
                    wasOpen = true
                } else {
                    wasOpen = false
                }
                let actions = h.run {
                    $0.requestBuilt(task, attempt: attempt, network: network(at: now), isMonitored: true)
                }
                let sends = Array(actions).contains(.send(task, attempt: attempt))
                if sends { sent.insert(ObjectIdentifier(task)) }
                if wasOpen {
                    #expect(!sends, "\(place): a request went out through an open circuit")
                    #expect(task.phase == .ended, "\(place): a refused task did not end")
                    if case .failed(.circuitOpen) = h.machine.state(of: task) {
                    } else {
                        Issue.record("\(place): a refused task ended \(h.machine.state(of: task))")
                    }
                }
            case 4, 5:
                guard
                    let task = live.filter({ $0.phase == .running && sent.contains(ObjectIdentifier($0)) })
                        .randomElement(using: &random)
                else { break }
                sent.remove(ObjectIdentifier(task))
                let attempt = task.attemptNumber
                let fails = pick(3) > 0
                let outcome: Result<AnyAPITask.BuiltResponse, APIError> =
                    fails ? .failure(transportFailure) : .success(AnyAPITask.BuiltResponse { _ in })
                let actions = h.run {
                    $0.attemptEnded(
                        task, attempt: attempt, outcome: outcome, source: .network,
                        retryDelay: fails && pick(2) == 0 ? 3 : nil, end: sentEnd(at: now))
                }
                if Array(actions).contains(where: { if case .report(.circuitOpened) = $0 { true } else { false } }) {
                    guard case .open = h.machine.resilience.circuit(of: origin) else {
                        Issue.record("\(place): the circuit was reported open but is not")
                        break
                    }
                }
            case 6:
                guard let task = live.filter({ $0.phase == .waitingForRetry }).randomElement(using: &random) else {
                    break
                }
                let attempt = task.attemptNumber
                h.run { $0.retryTimerFired(task, attempt: attempt) }
            default:
                if pick(4) == 0, let task = live.randomElement(using: &random) {
                    h.run { $0.cancel(task, reason: .explicit) }
                } else {
                    now += Double(pick(8))
                }
            }
        }
        h.cancelAll()
        for task in h.tasks {
            let terminal = h.events(of: task).filter { $0.hasPrefix("finished") || $0.hasPrefix("failed") }.count
            #expect(terminal == 1, "seed \(seed): task \(task.identifier) ended \(terminal) times")
        }
        #expect(h.machine.inFlightCount == 0)
    }
}
