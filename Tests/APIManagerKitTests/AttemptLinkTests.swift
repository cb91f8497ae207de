import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A handle that counts its cancellations (from any thread).
final class CountedHandle: APICancellable, @unchecked Sendable {
    // @unchecked: `count` is guarded by `lock`.
    private let lock = NSLock()
    private var count = 0
    var cancellations: Int { lock.withLock { count } }
    func cancel() { lock.withLock { count += 1 } }
}

@Suite("Attempt link: each event", .timeLimit(.minutes(1)))
struct AttemptLinkTests {
    private func cancel(_ handle: any APICancellable) -> AttemptLink.Action {
        .cancel(SchedulingMachine.Handle(handle))
    }

    @Test func whatTheAttemptWaitsOnIsCancelledWhenItEndsAndOnlyOnce() {
        var link = AttemptLink()
        let step = NamedHandle()
        #expect(link.wait(on: step) == .none)
        #expect(!link.isOver)
        #expect(link.end() == cancel(step))
        #expect(link.isOver)
        #expect(link.end() == .none, "once")
    }

    @Test func anAttemptThatWaitsOnNothingEndsWithNothingToCancel() {
        var link = AttemptLink()
        #expect(link.end() == .none)
        #expect(link.isOver)
    }

    @Test func whatAnAttemptThatIsOverWaitsOnIsCancelledAtOnce() {
        var link = AttemptLink()
        _ = link.end()
        let step = NamedHandle()
        #expect(link.wait(on: step) == cancel(step))
        let transport = NamedHandle()
        #expect(link.sent(transport) == cancel(transport))
        #expect(link.end() == .none, "nothing kept")
    }

    @Test func onlyTheLatestWaitIsKept() {
        var link = AttemptLink()
        let transport = NamedHandle()
        let step = NamedHandle()
        #expect(link.sent(transport) == .none)
        let answered = link.answer()
        #expect(answered)
        #expect(link.wait(on: step) == .none, "an inspector after the answer")
        #expect(link.end() == cancel(step))
    }

    @Test func theTransportsHandleGivenAfterItsAnswerDoesNotReplaceAStepWaitedOnSince() {
        // An inline transport answers inside `send`: the attempt runs on to an inspector that
        // waits, and only then does `send` return its handle.
        var link = AttemptLink()
        let answered = link.answer()
        #expect(answered)
        let step = NamedHandle()
        #expect(link.wait(on: step) == .none)
        #expect(link.sent(NamedHandle()) == .none, "not kept")
        #expect(link.end() == cancel(step))
    }

    @Test func onlyTheFirstAnswerIsTakenEvenWhenTheAttemptIsOver() {
        var link = AttemptLink()
        _ = link.end()
        let answers = [link.answer(), link.answer(), link.answer()]
        #expect(
            answers == [true, false, false], "an attempt that is over still hears its answer: its origin counts it")
    }

    @Test func linksAreComparedByWhatTheyHold() {
        var one = AttemptLink()
        var other = AttemptLink()
        #expect(one == other)
        _ = one.end()
        #expect(one != other)
        _ = other.end()
        #expect(one == other)
    }

    /// The attempt's thread waits on steps, sends and takes answers while other threads end it and
    /// answer too, on one locked link: every handle is cancelled at most once; a handle waited on
    /// after the end, or the one waited on when the end came, is cancelled exactly once; one
    /// answer only is taken; and nothing else is cancelled.
    @Test(arguments: 0..<4)
    func aRandomizedDriverFromManyThreadsKeepsTheRules(seed: UInt64) {
        var random = SplitMix64(state: seed &+ 0x51ED)
        for _ in 0..<200 {
            let link = LockedAttemptLink()
            let attemptSteps = Int(random.next() % 6) + 1
            let enders = Int(random.next() % 3) + 1
            let answerers = Int(random.next() % 3)
            let handles = (0..<attemptSteps).map { _ in CountedHandle() }
            let kinds = (0..<attemptSteps).map { _ in random.next() % 2 == 0 }
            let answersTaken = LockedCounter()
            // Before each of the attempt's steps: was the link over when that step was given?
            let results = LockedList<AttemptLink.Action>()
            DispatchQueue.concurrentPerform(iterations: 1 + enders + answerers) { worker in
                if worker == 0 {
                    for (handle, isTransport) in zip(handles, kinds) {
                        let action =
                            isTransport ? link.withLock { $0.sent(handle) } : link.withLock { $0.wait(on: handle) }
                        results.append(action)
                        if case .cancel(let given) = action { given.cancellable.cancel() }
                    }
                } else if worker <= enders {
                    link.cancel()
                } else if link.withLock({ $0.answer() }) {
                    answersTaken.increment()
                }
            }
            let isOver = link.withLock { $0.isOver }
            #expect(isOver, "ended by its enders")
            #expect(answersTaken.value == (answerers > 0 ? 1 : 0), "seed \(seed): answers taken")
            #expect(handles.allSatisfy { $0.cancellations <= 1 }, "seed \(seed): a handle cancelled twice")
            // Cancelled at once: those given after the end.
            let cancelledAtOnce = results.values.filter { $0 != .none }.count
            let cancelledInAll = handles.reduce(0) { $0 + $1.cancellations }
            // At most one more: the one the attempt waited on when the end came (none when the
            // attempt had given nothing yet, or its last was a transport handle given after an answer).
            #expect(cancelledInAll - cancelledAtOnce <= 1, "seed \(seed): more than the latest wait cancelled")
            #expect(cancelledInAll >= cancelledAtOnce, "seed \(seed): a handle given after the end kept")
            if answerers == 0, cancelledAtOnce < attemptSteps {
                // With no answer, the attempt's last handle before the end was kept, and cancelled by it.
                #expect(cancelledInAll == cancelledAtOnce + 1, "seed \(seed): the latest wait not cancelled")
            }
        }
    }
}

/// A count behind a lock.
final class LockedCounter: @unchecked Sendable {
    // @unchecked: `count` is guarded by `lock`.
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}

/// A list behind a lock.
final class LockedList<Element>: @unchecked Sendable {
    // @unchecked: `list` is guarded by `lock`.
    private let lock = NSLock()
    private var list: [Element] = []
    var values: [Element] { lock.withLock { list } }
    func append(_ element: Element) { lock.withLock { list.append(element) } }
}

@Suite("Attempt link on an engine: what another thread does to an attempt", .timeLimit(.minutes(1)))
struct AttemptLinkEngineTests {
    /// Answers every request twice at the same moment, on two threads: a `200` and a `500`; counts
    /// the requests it answered both times.
    struct RacingTransport: OptionsTransport {
        let answered = LockedCounter()
        func send(
            _ request: URLRequest, options: APITransportOptions,
            completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            DispatchQueue.global().async {
                DispatchQueue.concurrentPerform(iterations: 2) { index in
                    let status = index == 0 ? 200 : 500
                    completion(.success(APIRawResponse(statusCode: status, body: Data("\"\(status)\"".utf8))))
                }
                answered.increment()
            }
            return NothingToCancel()
        }
    }

    /// The manager of `TransportCompletingTwiceTests`, answered with strings.
    typealias Words = TransportCompletingTwiceTests.Words

    @Test(arguments: [APIEngine.Execution.inline, .concurrent()])
    func aTransportAnsweringTwiceAtOnceOnTwoThreadsIsHeardOnce(execution: APIEngine.Execution) async throws {
        let transport = RacingTransport()
        let words = Words(
            engine: APIEngine(transport: transport, clock: TestClock(), delivery: .inline, execution: execution))
        let recorder = EventRecorder()
        words.delegate = recorder
        var tasks: [APITask<TestRequest>] = []
        for _ in 0..<100 { tasks.append(words.send(TestRequest("/word"))) }
        let isEnd = { (event: String) in event == "finished" || event.hasPrefix("failed") }
        // Both answers given to every request, and every task told its end (after the lock).
        while transport.answered.value < tasks.count { await Task.yield() }
        for task in tasks {
            while !recorder.events(of: task).contains(where: isEnd) { await Task.yield() }
        }
        for task in tasks {
            let events = recorder.events(of: task)
            #expect(events.filter(isEnd).count == 1, "\(events)")
            #expect(events.first == "start 1")
        }
    }

    /// Holds the request until told, then answers `200`; counts the cancellations of its handles.
    final class HeldTransport: OptionsTransport, @unchecked Sendable {
        // @unchecked: `held` and `handles` are guarded by `lock`.
        private let lock = NSLock()
        private var held: [@Sendable (Result<APIRawResponse, any Error>) -> Void] = []
        private var handles: [CountedHandle] = []
        var cancellations: Int { lock.withLock { handles.reduce(0) { $0 + $1.cancellations } } }
        var waiting: Int { lock.withLock { held.count } }
        func send(
            _ request: URLRequest, options: APITransportOptions,
            completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            let handle = CountedHandle()
            lock.withLock {
                held.append(completion)
                handles.append(handle)
            }
            return handle
        }
        func answerAll() {
            let all = lock.withLock { held }
            for completion in all { completion(.success(APIRawResponse(statusCode: 200, body: Data("\"late\"".utf8)))) }
        }
    }

    final class CountingWords: APIManager {
        typealias Request = TestRequest
        typealias Response = CountedWord
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    /// Counts how many responses were built (the manager's response hook ran).
    struct CountedWord: APIResponse, Decodable {
        static let built = LockedCounter()
        init(from decoder: any Decoder) throws {
            Self.built.increment()
            _ = try decoder.singleValueContainer().decode(String.self)
        }
    }

    @Test(arguments: [nil, "search"] as [String?])
    func aTaskCancelledFromAnotherThreadWhileItsTransportHoldsItCancelsTheTransportAndBuildsNoLateResponse(
        scope: String?
    ) async throws {
        let transport = HeldTransport()
        let words = CountingWords(
            engine: APIEngine(transport: transport, clock: TestClock(), delivery: .inline, execution: .inline))
        let recorder = EventRecorder()
        words.delegate = recorder
        var request = TestRequest("/word")
        request.concurrencyScope = scope
        let before = CountedWord.built.value
        let task = words.send(request)
        while transport.waiting == 0 { await Task.yield() }
        await Task.detached { task.cancel() }.value
        #expect(task.state.isTerminal)
        #expect(transport.cancellations == 1, "the transport's handle, through the attempt's link")
        transport.answerAll()
        #expect(CountedWord.built.value == before, "a late answer runs no hook")
        while !recorder.events(of: task).contains(where: { $0.hasPrefix("failed") }) { await Task.yield() }
        #expect(recorder.events(of: task).filter { $0.hasPrefix("failed") }.count == 1)
    }
}
