import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

/// Hears the engine's notices.
final class NoticeRecorder: APIEngine.Observer {
    let notices = Locked<[APIEngine.Notice]>([])
    func observe(_ observation: APIEngine.Observation) {}
    func notice(_ notice: APIEngine.Notice) { notices.withLock { $0.append(notice) } }
}

// Delegate events queued on a delivery queue nobody runs (a command-line tool's main queue) are
// said once, not lost in silence.
@Suite struct DeliveryWatchTests {
    /// A manager delivering on `queue`, on a virtual clock, with a notice recorder.
    private func makeManager(delivery: APIEngine.Delivery) -> (TestManager, TestClock, NoticeRecorder) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let recorder = NoticeRecorder()
        let engine = observedEngine([recorder], transport: transport, clock: clock, delivery: delivery)
        return (TestManager(engine: engine), clock, recorder)
    }

    @Test func eventsWaitingOnAQueueNobodyRunsAreSaidOnceAfterFiveSeconds() {
        let queue = DispatchQueue(label: "never run")
        queue.suspend()
        defer { queue.resume() }
        let (manager, clock, recorder) = makeManager(delivery: .queue(queue))
        manager.send(TestRequest("/ok"))
        clock.advance(by: 4.9)
        #expect(recorder.notices.withLock { $0 }.isEmpty)
        clock.advance(by: 0.1)
        let notices = recorder.notices.withLock { $0 }
        #expect(notices.map(\.kind) == [.deliveryStalled])
        #expect(notices.first?.description.contains(#"the queue "never run""#) == true)
        #expect(notices.first?.description.contains(".inline") == true)
        #expect(clock.pendingTimerCount == 0)  // once said, never watched again

        manager.send(TestRequest("/ok"))
        clock.advance(by: 60)
        #expect(recorder.notices.withLock { $0 }.count == 1)
    }

    @Test func theMainQueueIsNamedAsSuch() {
        let notice = APIEngine.Notice.deliveryStalled(on: .main, for: 5)
        #expect(notice.description.hasPrefix("delegate events have waited 5 s on the main queue"))
    }

    @Test func aQueueThatRunsIsNeverSaidToStall() {
        let queue = DispatchQueue(label: "running")
        let (manager, clock, recorder) = makeManager(delivery: .queue(queue))
        for _ in 0..<3 {
            manager.send(TestRequest("/ok"))
            queue.sync {}  // the run delivered
            clock.advance(by: 5)
        }
        #expect(recorder.notices.withLock { $0 }.isEmpty)
        #expect(clock.pendingTimerCount == 0)  // nothing waits: the watch rests
    }

    @Test func aBusyQueueThatKeepsDeliveringIsWatchedAgainNotSaid() {
        let queue = DispatchQueue(label: "busy")
        let (manager, clock, recorder) = makeManager(delivery: .queue(queue))
        queue.suspend()
        manager.send(TestRequest("/ok"))
        queue.resume()
        queue.sync {}
        queue.suspend()  // a run was taken; now another waits when the watch looks
        manager.send(TestRequest("/ok"))
        clock.advance(by: 5)
        #expect(recorder.notices.withLock { $0 }.isEmpty)
        #expect(clock.pendingTimerCount == 1)  // looks again
        clock.advance(by: 5)  // the second run never taken: said now
        #expect(recorder.notices.withLock { $0 }.map(\.kind) == [.deliveryStalled])
        queue.resume()
    }

    @Test func inlineDeliverySetsNoWatch() {
        let (manager, clock, recorder) = makeManager(delivery: .inline)
        manager.send(TestRequest("/ok"))
        #expect(clock.pendingTimerCount == 0)
        clock.advance(by: 10)
        #expect(recorder.notices.withLock { $0 }.isEmpty)
    }

    @Test func theWatchDecidesFromTheOutboxAlone() {
        var watch = APIEngine.DeliveryWatch()
        var verdicts: [APIEngine.DeliveryWatch.Verdict] = []
        var armed: [Bool] = []
        verdicts.append(watch.look(isRunScheduled: true, takes: 0))  // not set
        armed.append(watch.arm(takes: 3))
        armed.append(watch.arm(takes: 3))  // one timer at a time
        verdicts.append(watch.look(isRunScheduled: true, takes: 4))  // runs took events
        verdicts.append(watch.look(isRunScheduled: false, takes: 4))  // nothing waits
        armed.append(watch.arm(takes: 4))
        verdicts.append(watch.look(isRunScheduled: true, takes: 4))  // none taken meanwhile
        armed.append(watch.arm(takes: 4))  // said once: never set again
        #expect(verdicts == [.rest, .lookAgain, .rest, .stalled])
        #expect(armed == [true, false, true, false])
    }

    @Test func theLogObserverWritesANoticeAsAWarning() {
        let lines = Locked<[String]>([])
        let log = APIEngine.LogObserver(minimumLevel: .warning) { level, line in
            lines.withLock { $0.append("[\(level)] \(line)") }
        }
        log.notice(APIEngine.Notice.deliveryStalled(on: .main, for: 5))
        #expect(lines.withLock { $0 }.count == 1)
        #expect(lines.withLock { $0 }.first?.hasPrefix("[warning] delegate events have waited 5 s") == true)
    }
}
