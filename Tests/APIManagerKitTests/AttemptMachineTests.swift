// One attempt's state as a value (issue 42, item 4): each event alone, then a randomized driver
// that plays the stages, the transport (answering once, twice, or late) and the driver's ends
// against it and checks its rules after every event; and, on an engine, a transport that completes
// twice, inline and on the lanes.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

private let request = URLRequest(url: URL(string: "https://api.test/items")!)
private let ok = APIRawResponse(statusCode: 200, body: Data("first".utf8))
private let later = APIRawResponse(statusCode: 500, body: Data("second".utf8))

private func statusCode(_ answer: Result<APIRawResponse, any Error>?) -> Int? {
    guard case .success(let raw)? = answer else { return nil }
    return raw.statusCode
}

@Suite("Attempt machine: each event", .timeLimit(.minutes(1)))
struct AttemptMachineTests {
    @Test func anAttemptGoesFromItsRequestToItsResponse() {
        var machine = AttemptMachine()
        #expect(machine.phase == .unbuilt)
        let taken1 = machine.built(request, sensitiveHeaders: ["X-Key"], bodyFile: nil)
        #expect(taken1)
        #expect(machine.phase == .preparing)
        #expect(machine.request.url == request.url)
        #expect(machine.sensitiveHeaders == ["X-Key"])
        let taken2 = machine.sending(APITransportOptions(), at: 2)
        #expect(taken2)
        #expect(machine.phase == .sending)
        #expect(machine.sent?.at == 2)
        let taken3 = machine.answered(.success(ok))
        #expect(taken3)
        #expect(machine.phase == .answered)
        let taken4 = machine.takeAnswer()
        #expect(statusCode(taken4) == 200)
        #expect(machine.phase == .responding)
        machine.received(ok)
        #expect(machine.response?.statusCode == 200)
        machine.end()
        #expect(machine.phase == .over)
    }

    @Test func theRequestIsBuiltOnce() {
        var machine = AttemptMachine()
        machine.built(request, sensitiveHeaders: [], bodyFile: nil)
        let other = URLRequest(url: URL(string: "https://api.test/other")!)
        let taken5 = machine.built(other, sensitiveHeaders: ["Cookie"], bodyFile: nil)
        #expect(!taken5)
        #expect(machine.request.url == request.url && machine.sensitiveHeaders.isEmpty)
    }

    @Test func aSecondAnswerIsNotHeardAndTheFirstIsTakenOnce() {
        var machine = AttemptMachine()
        machine.built(request, sensitiveHeaders: [], bodyFile: nil)
        machine.sending(APITransportOptions(), at: 0)
        let taken6 = machine.answered(.success(ok))
        #expect(taken6)
        let taken7 = machine.answered(.success(later))
        #expect(!taken7, "a transport that completes twice")
        let taken8 = machine.takeAnswer()
        #expect(statusCode(taken8) == 200, "the first answer")
        let taken9 = machine.takeAnswer()
        #expect(taken9 == nil, "taken once")
        let taken10 = machine.answered(.success(later))
        #expect(!taken10, "nor after it was taken")
    }

    @Test func noAnswerIsHeardBeforeTheRequestIsSentOrAfterTheAttemptIsOver() {
        var machine = AttemptMachine()
        let taken11 = machine.answered(.success(ok))
        #expect(!taken11, "unbuilt")
        machine.built(request, sensitiveHeaders: [], bodyFile: nil)
        let taken12 = machine.answered(.success(ok))
        #expect(!taken12, "not sent yet")
        let taken13 = machine.takeAnswer()
        #expect(taken13 == nil)
        machine.sending(APITransportOptions(), at: 0)
        machine.end()
        let taken14 = machine.answered(.success(ok))
        #expect(!taken14, "a late answer to an attempt that is over")
        let taken15 = machine.takeAnswer()
        #expect(taken15 == nil)
        let taken16 = machine.sending(APITransportOptions(), at: 1)
        #expect(!taken16, "and it is not sent again")
    }

    @Test func aResponseIsKeptOnlyForAnAnswerTaken() {
        var machine = AttemptMachine()
        machine.built(request, sensitiveHeaders: [], bodyFile: nil)
        machine.received(ok)
        #expect(machine.response == nil)
    }
}

@Suite("Attempt machine: its rules under random events", .timeLimit(.minutes(1)))
struct AttemptMachineRandomTests {
    private enum Event: CaseIterable {
        case build, send, answer, take, receive, end
    }

    /// Random events, many of them out of turn: after each, the phase only moves forward, an
    /// answer is heard at most once per attempt and only while it is sent, the answer taken is the
    /// first one heard and is taken once, the request and what was sent stay as first given, and
    /// nothing changes once the attempt is over.
    @Test(arguments: 0..<4)
    func theRulesHoldAfterEveryEvent(seed: UInt64) {
        var random = SplitMix64(state: 42_000 + seed)
        let order: [AttemptMachine.Phase] = [.unbuilt, .preparing, .sending, .answered, .responding, .over]
        for run in 0..<400 {
            var machine = AttemptMachine()
            var heard: Int?
            var taken = 0
            var wasBuilt = false
            var responded = false
            var answers = 0
            for step in 0..<Int.random(in: 1...14, using: &random) {
                let before = machine.phase
                let place = "run \(run), step \(step), in \(before)"
                switch Event.allCases.randomElement(using: &random)! {
                case .build:
                    let kept = machine.built(request, sensitiveHeaders: ["S\(step)"], bodyFile: nil)
                    #expect(kept == (before == .unbuilt), "\(place)")
                    if kept { wasBuilt = true }
                case .send:
                    let kept = machine.sending(APITransportOptions(), at: Double(step))
                    #expect(kept == (before == .preparing), "\(place)")
                case .answer:
                    answers += 1
                    let code = 200 + answers
                    let kept = machine.answered(.success(APIRawResponse(statusCode: code)))
                    #expect(kept == (before == .sending), "\(place)")
                    if kept {
                        #expect(heard == nil, "\(place): a second answer was heard")
                        heard = code
                    }
                case .take:
                    let answer = machine.takeAnswer()
                    #expect((answer != nil) == (before == .answered), "\(place)")
                    if let answer {
                        taken += 1
                        #expect(statusCode(answer) == heard, "\(place): not the first answer heard")
                    }
                case .receive:
                    machine.received(ok)
                    if before == .responding { responded = true }
                    #expect((machine.response != nil) == responded, "\(place): a response kept out of turn")
                case .end:
                    machine.end()
                }
                let after = machine.phase
                let moved = order.firstIndex(of: after)! >= order.firstIndex(of: before)!
                #expect(moved, "\(place): went back to \(after)")
                if before == .over { #expect(after == .over, "\(place): changed after the end") }
                #expect(taken <= 1, "\(place): the answer was taken twice")
                if wasBuilt {
                    #expect(machine.request.url == request.url)
                    #expect(machine.sensitiveHeaders.count == 1, "\(place): built twice")
                }
            }
        }
    }
}

@Suite("Attempt machine on an engine: a transport that completes twice", .timeLimit(.minutes(1)))
struct TransportCompletingTwiceTests {
    /// Answers every request twice, the second time with a `500`, one after the other: inside
    /// `send`, or on another thread. (A transport must complete once; in order, the second answer
    /// is not heard. Twice at the same moment on two threads: `AttemptLinkEngineTests`.)
    struct TwiceTransport: APITransport {
        let fromAnotherThread: Bool
        func send(
            _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            let answers: @Sendable () -> Void = {
                completion(.success(APIRawResponse(statusCode: 200, body: Data("\"first\"".utf8))))
                completion(.success(APIRawResponse(statusCode: 500, body: Data("\"second\"".utf8))))
            }
            if fromAnotherThread { DispatchQueue.global().async(execute: answers) } else { answers() }
            return NothingToCancel()
        }
    }

    struct Word: APIResponse, Decodable {
        let value: String
        init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(String.self) }
    }

    final class Words: APIManager {
        typealias Request = TestRequest
        typealias Response = Word
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test(arguments: [false, true])
    func theFirstAnswerEndsTheTaskAndTheSecondIsNotHeard(fromAnotherThread: Bool) async throws {
        let words = Words(
            engine: APIEngine(
                transport: TwiceTransport(fromAnotherThread: fromAnotherThread), clock: TestClock(),
                delivery: .inline, execution: .inline))
        let recorder = EventRecorder()
        words.delegate = recorder
        for _ in 0..<20 {
            let word = try await words.response(for: TestRequest("/word"))
            #expect(word.value == "first")
        }
        let task = words.send(TestRequest("/word"))
        #expect(try await words.response(for: TestRequest("/word")).value == "first")
        // The state is terminal before the delegate is told (after the lock): wait for the event.
        while !recorder.events(of: task).contains("finished") { await Task.yield() }
        #expect(task.state == .finished)
        #expect(recorder.events(of: task) == ["start 1", "finished"], "one end, the first answer's")
    }
}
