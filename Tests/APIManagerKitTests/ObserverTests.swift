// The engine's observers (APIEngine.Observer): every step of every task, typed, in order, with the
// engine clock's times; the sent step on the sender's thread; the log observer's lines and levels,
// never a secret.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

/// Records every observation, as `"7 sent"`, `"7 attemptEnded 1 200 1.0"`, with its time.
final class RecordingObserver: APIEngine.Observer {
    let observations = Locked<[APIEngine.Observation]>([])

    func observe(_ observation: APIEngine.Observation) {
        observations.withLock { $0.append(observation) }
    }

    /// The observations of `task` (all when `nil`), described.
    func lines(of task: AnyAPITask? = nil) -> [String] {
        observations.withLock { $0 }.filter { task == nil || $0.task === task }.map(Self.describe)
    }

    static func describe(_ observation: APIEngine.Observation) -> String {
        let id = observation.task.identifier
        switch observation.kind {
        case .sent: return "\(id) sent"
        case .waiting(let ahead): return "\(id) waiting \(ahead.map(String.init) ?? "-")"
        case .waitingForNetwork: return "\(id) waitingForNetwork"
        case .started(let attempt): return "\(id) started \(attempt)"
        case .attemptSent(let attempt, let request, let sharedWith):
            return "\(id) attemptSent \(attempt) \(request.url?.path ?? "")"
                + (sharedWith.map { " with \($0)" } ?? "")
        case .attemptEnded(let report):
            let outcome = report.statusCode.map(String.init) ?? "failed"
            return "\(id) attemptEnded \(report.attempt) \(outcome) \(report.transportDuration)"
        case .renewingCredential(let attempt): return "\(id) renewing \(attempt)"
        case .responseBuilt(let attempt, _): return "\(id) responseBuilt \(attempt)"
        case .cachedCopy: return "\(id) cachedCopy"
        case .retryScheduled(let delay, let error): return "\(id) retry \(delay) \(describe(error))"
        case .ended(.success(let source)): return "\(id) ended \(source)"
        case .ended(.failure(let error)): return "\(id) ended \(APIManagerKitTests.describe(error))"
        }
    }

    private static func describe(_ error: APIError) -> String { APIManagerKitTests.describe(error) }
}

@Suite("Observers", .timeLimit(.minutes(1)))
struct ObserverTests {
    @Test func aTaskIsObservedStepByStepInOrderWithTheClocksTimes() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        h.clock.advance(by: 10)
        let task = h.send(TestRequest("/slow"))
        #expect(
            observer.lines(of: task) == [
                "\(task.identifier) sent", "\(task.identifier) started 1", "\(task.identifier) attemptSent 1 /slow",
            ])
        h.clock.advance(by: 1)
        #expect(
            observer.lines(of: task) == [
                "\(task.identifier) sent", "\(task.identifier) started 1", "\(task.identifier) attemptSent 1 /slow",
                "\(task.identifier) attemptEnded 1 200 1.0", "\(task.identifier) responseBuilt 1",
                "\(task.identifier) ended network",
            ])
        let observations = observer.observations.withLock { $0 }
        #expect(observations.map(\.time) == [10, 10, 10, 11, 11, 11])
        guard case .attemptEnded(let report) = observations[3].kind else {
            Issue.record("no attempt report")
            return
        }
        #expect(report.started == 10)
        #expect(report.sent == 10)
        #expect(report.answered == 11)
        #expect(report.headReceived == 11, "the mock transport's head arrives with its answer")
        #expect(report.timeToFirstByte == 1)
        #expect(report.method == "GET")
        #expect(report.redactedURL.hasSuffix("/slow"))
    }

    @Test func theTransportsPhasesReachTheAttemptsReport() {
        let observer = RecordingObserver()
        var configuration = APIEngine.Configuration()
        configuration.transport = PhasedTransport()
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.observers = [observer]
        let manager = TestManager(engine: APIEngine(configuration: configuration))
        manager.send(TestRequest("/ok"))
        let reports = observer.observations.withLock { $0 }.compactMap { observation -> APIEngine.AttemptReport? in
            if case .attemptEnded(let report) = observation.kind { return report }
            return nil
        }
        #expect(reports.map(\.phases) == [PhasedTransport.phases])
        #expect(reports.first?.headReceived != nil)
    }

    @Test func aFailedAttemptHasNoHeadAndItsReportSaysWhy() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        h.transport.stub(nil, "/down", .failure(.cannotConnectToHost))
        h.send(TestRequest("/down"))
        let reports = observer.observations.withLock { $0 }.compactMap { observation -> APIEngine.AttemptReport? in
            if case .attemptEnded(let report) = observation.kind { return report }
            return nil
        }
        #expect(reports.count == 1)
        #expect(reports.first?.headReceived == nil)
        #expect(reports.first?.timeToFirstByte == nil)
        #expect(reports.first?.statusCode == nil)
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aWaitingTaskIsToldHowManyAreAheadOfIt(scope: String?) {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        let first = h.send(TestRequest("/held", .waitUntilDone, scope: scope))
        let second = h.send(TestRequest("/held", .waitUntilDone, scope: scope))
        let third = h.send(TestRequest("/held", .waitUntilDone, scope: scope))
        var urgent = TestRequest("/held", .waitUntilDoneHighPriority, scope: scope)
        urgent.priority = 0
        let fourth = h.send(urgent)
        #expect(observer.lines(of: first).contains("\(first.identifier) started 1"))
        #expect(observer.lines(of: second) == ["\(second.identifier) sent", "\(second.identifier) waiting 0"])
        #expect(observer.lines(of: third) == ["\(third.identifier) sent", "\(third.identifier) waiting 1"])
        #expect(observer.lines(of: fourth) == ["\(fourth.identifier) sent", "\(fourth.identifier) waiting 0"])
        h.transport.releaseAll()
    }

    @Test func aRetryIsObservedWithItsDelayAndEachAttemptWithItsReport() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        h.transport.stub(nil, "/flaky", .status(503), .json(#"{"value":"ok"}"#))
        let task = h.send(
            TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 2, jitter: .none)))
        h.clock.advance(by: 2)
        let id = task.identifier
        #expect(
            observer.lines(of: task) == [
                "\(id) sent", "\(id) started 1", "\(id) attemptSent 1 /flaky", "\(id) attemptEnded 1 503 0.0",
                "\(id) responseBuilt 1", "\(id) retry 2.0 status(503)", "\(id) started 2", "\(id) attemptSent 2 /flaky",
                "\(id) attemptEnded 2 200 0.0", "\(id) responseBuilt 2", "\(id) ended network",
            ])
    }

    @Test func aRefusedCredentialIsObservedAndTheAttemptGoesAgainWithItsNumber() {
        let observer = RecordingObserver()
        let auth = AuthHarness(observers: [observer])
        let task = auth.send()
        auth.authenticator.release()
        let id = task.identifier
        #expect(
            observer.lines(of: task) == [
                "\(id) sent", "\(id) started 1", "\(id) attemptSent 1 /me", "\(id) attemptEnded 1 401 0.0",
                "\(id) renewing 1", "\(id) started 1", "\(id) attemptSent 1 /me", "\(id) attemptEnded 1 200 0.0",
                "\(id) responseBuilt 1", "\(id) ended network",
            ])
    }

    @Test func aTaskWaitingForTheNetworkIsObservedEachTimeItWaits() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        h.transport.stub(nil, "/cart", .failure(.notConnectedToInternet), .json(#"{"value":"saved"}"#))
        var request = TestRequest("/cart")
        request.connectivityWait = .infinity
        let task = h.send(request)
        h.clock.advance(by: 2)
        let id = task.identifier
        #expect(
            observer.lines(of: task) == [
                "\(id) sent", "\(id) started 1", "\(id) attemptSent 1 /cart", "\(id) attemptEnded 1 failed 0.0",
                "\(id) waitingForNetwork", "\(id) started 2", "\(id) attemptSent 2 /cart",
                "\(id) attemptEnded 2 200 0.0",
                "\(id) responseBuilt 2", "\(id) ended network",
            ])
        #expect(h.recorder.events(of: task) == ["start 1", "start 2", "finished"], "the delegate is not told")
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aTaskCancelledWhileWaitingOrRetryingEndsWithNoAttemptAfter(scope: String?) {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        h.transport.stub(nil, "/flaky", .status(503), .json(#"{"value":"ok"}"#))
        let retrying = h.send(
            TestRequest(
                "/flaky", .waitUntilDone, scope: scope,
                retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 2, jitter: .none)))
        let waiting = h.send(TestRequest("/ok", .waitUntilDone, scope: scope))
        waiting.cancel()
        retrying.cancel()
        h.clock.advance(by: 5)
        let (w, r) = (waiting.identifier, retrying.identifier)
        #expect(observer.lines(of: waiting) == ["\(w) sent", "\(w) waiting 0", "\(w) ended cancelled(explicit)"])
        #expect(
            observer.lines(of: retrying).suffix(2) == ["\(r) retry 2.0 status(503)", "\(r) ended cancelled(explicit)"])
        #expect(observer.lines(of: retrying).filter { $0.contains("started") } == ["\(r) started 1"])
    }

    @Test func ignoredAndPolicyCancelledTasksAreObservedToo() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        let running = h.send(TestRequest("/held", .ignoreCurrent, scope: "refresh"))
        let ignored = h.send(TestRequest("/held", .ignoreCurrent, scope: "refresh"))
        #expect(observer.lines(of: ignored) == ["\(ignored.identifier) sent", "\(ignored.identifier) ended ignored"])
        let replacing = h.send(TestRequest("/ok", .cancelOthers, scope: "refresh"))
        #expect(observer.lines(of: running).last == "\(running.identifier) ended cancelled(policy)")
        #expect(
            !observer.lines(of: running).contains { $0.contains("attemptEnded") },
            "its attempt, cancelled on the wire, has no report")
        #expect(observer.lines(of: replacing).last == "\(replacing.identifier) ended network")
    }

    @Test func aStoredCopyAndAnAnswerFromTheCacheAreObserved() {
        let observer = RecordingObserver()
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#, headers: ["Cache-Control": "max-age=60"]))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.cache = APIResponseCache(disk: nil, clock: clock)
        configuration.observers = [observer]
        let manager = TestManager(engine: APIEngine(configuration: configuration))
        var request = TestRequest("/ok")
        request.cacheOption = .cacheOnly
        manager.send(request)
        let cached = manager.send(request)
        #expect(
            observer.lines(of: cached) == [
                "\(cached.identifier) sent", "\(cached.identifier) started 1", "\(cached.identifier) ended cache",
            ])
        request.cacheOption = .both
        let both = manager.send(request)
        #expect(observer.lines(of: both).contains("\(both.identifier) cachedCopy"))
        #expect(observer.lines(of: both).last == "\(both.identifier) ended network")
    }

    @Test func theSentStepIsToldOnTheSendersThreadWithItsTaskLocalsAndItsIdentifier() async {
        let seen = Locked<[(UInt64, String?)]>([])
        struct ContextReader: APIEngine.Observer {
            let seen: Locked<[(UInt64, String?)]>
            func observe(_ observation: APIEngine.Observation) {
                guard case .sent = observation.kind else { return }
                seen.withLock { $0.append((observation.task.identifier, TraceContext.current)) }
            }
        }
        let h = Harness(observers: [ContextReader(seen: seen)])
        let task = TraceContext.$current.withValue("trace-42") { h.send(TestRequest("/ok")) }
        let durable = TraceContext.$current.withValue("trace-43") { h.send(TestRequest("/ok", .durable)) }
        let observed = seen.withLock { $0 }
        #expect(observed.map(\.0) == [task.identifier, durable.identifier])
        #expect(observed.allSatisfy { $0.0 != 0 })
        #expect(observed.map(\.1) == ["trace-42", "trace-43"])
    }

    @Test func aRestoredTaskIsObservedAsSentWhenItsLineIsReplayed() throws {
        let folder = TemporaryFolder()
        do {
            let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
            h.send(durableEdit("/held"))
        }
        let observer = RecordingObserver()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url), observers: [observer])
        try h.manager.replayDurableTasks(inScope: "cart")
        let restored = h.manager.inFlightTasks
        #expect(restored.count == 1)
        #expect(observer.lines().first == "\(restored[0].identifier) sent")
        h.transport.releaseAll()
        #expect(observer.lines().last == "\(restored[0].identifier) ended network")
    }

    @Test func aSharedAttemptNamesTheTaskWhoseRequestItJoined() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        var request = TestRequest("/held")
        request.sharing = .always
        let leader = h.send(request)
        let member = h.send(request)
        #expect(
            observer.lines(of: member).contains("\(member.identifier) attemptSent 1 /held with \(leader.identifier)"))
        h.transport.releaseAll()
        #expect(observer.lines(of: member).last == "\(member.identifier) ended network")
    }

    @Test(arguments: ["1.1", "2", nil] as [String?])
    func theHTTPVersionATransportTellsReachesTheAttemptsReport(version: String?) throws {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        h.transport.protocolVersion = version
        h.send(TestRequest("/ok"))
        let report = try #require(
            observer.observations.withLock { $0 }.compactMap { observation -> APIEngine.AttemptReport? in
                if case .attemptEnded(let report) = observation.kind { return report }
                return nil
            }.first)
        #expect(report.protocolVersion == version)
    }

    /// The ALPN names of IANA's registry that Apple's metrics give, as OpenTelemetry's
    /// `network.protocol.version` writes them.
    @Test(
        arguments: [
            ("http/1.0", "1.0"), ("http/1.1", "1.1"), ("HTTP/1.1", "1.1"), ("h2", "2"), ("h2c", "2"), ("h3", "3"),
            ("h3-29", "3"), ("spdy/3", nil), ("", nil), (nil, nil),
        ] as [(String?, String?)])
    func anALPNNameIsTheConventionsVersion(name: String?, version: String?) {
        #expect(SessionDelegate.protocolVersion(name) == version)
    }

    @Test(arguments: ["cart", nil] as [String?])
    func tasksInFlightWhenTheManagerIsReleasedAreObservedToEnd(scope: String?) {
        let observer = RecordingObserver()
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        var identifiers: [UInt64] = []
        do {
            let manager = TestManager(engine: observedEngine([observer], transport: transport, clock: clock))
            identifiers.append(manager.send(TestRequest("/held", .waitUntilDone, scope: scope)).identifier)
            identifiers.append(manager.send(TestRequest("/held", .waitUntilDone, scope: scope)).identifier)
        }
        for identifier in identifiers {
            #expect(
                observer.lines().filter { $0.hasPrefix("\(identifier) ended") } == [
                    "\(identifier) ended cancelled(managerReleased)"
                ])
        }
    }

    @Test func observersAreToldFromManyThreadsWithoutLosingAStep() {
        let observer = RecordingObserver()
        let h = Harness(observers: [observer])
        DispatchQueue.concurrentPerform(iterations: 50) { _ in h.send(TestRequest("/ok")) }
        let lines = observer.lines()
        #expect(lines.filter { $0.hasSuffix(" sent") }.count == 50)
        #expect(lines.filter { $0.hasSuffix(" ended network") }.count == 50)
        #expect(lines.filter { $0.contains("attemptEnded 1 200") }.count == 50)
    }
}

/// A transport that measures phases, as URLSessionTransport does on Apple platforms.
private struct PhasedTransport: APITransport {
    static let phases = APIEngine.AttemptReport.Phases(
        domainLookup: 0.001, connect: 0.002, secureConnection: 0.0015, request: 0.0001, waiting: 0.03,
        response: 0.004, reusedConnection: false)

    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        options.headReceived?()
        options.phasesMeasured?(Self.phases)
        completion(.success(APIRawResponse(statusCode: 200, body: Data(#"{"value":"ok"}"#.utf8))))
        return NothingToCancel()
    }

    private struct NothingToCancel: APICancellable { func cancel() {} }
}

enum TraceContext {
    @TaskLocal static var current: String?
}

@Suite("Log observer")
struct LogObserverTests {
    private static func logged(
        minimumLevel: APIEngine.LogObserver.Level = .debug, bodyBytes: Int = 0,
        _ body: (Harness) -> Void
    ) -> [(APIEngine.LogObserver.Level, String)] {
        let lines = Locked<[(APIEngine.LogObserver.Level, String)]>([])
        let observer = APIEngine.LogObserver(minimumLevel: minimumLevel, bodyBytes: bodyBytes) { level, line in
            lines.withLock { $0.append((level, line)) }
        }
        let h = Harness(observers: [observer])
        body(h)
        return lines.withLock { $0 }
    }

    @Test func oneLinePerAttemptAtInfoWithItsContextAndFailuresAtWarning() {
        let lines = Self.logged(minimumLevel: .info) { h in
            h.transport.stub(nil, "/gone", .status(404))
            h.send(TestRequest("/ok", .waitUntilDone, scope: "cart"))
            h.send(TestRequest("/gone"))
        }
        #expect(lines.count == 3)
        #expect(lines[0].0 == .info)
        #expect(lines[0].1.hasPrefix("← 200 GET "))
        #expect(lines[0].1.contains("/ok in 0.0 ms"))
        #expect(lines[0].1.hasSuffix("(task 1, attempt 1, waitUntilDone, scope \"cart\")"))
        #expect(lines[1].0 == .warning)
        #expect(lines[1].1.hasPrefix("✕ 404 GET "))
        #expect(lines[2].0 == .warning, "the task's failure")
        #expect(lines[2].1.hasPrefix("■ task 2 failed: status 404"))
    }

    @Test func debugShowsEveryStepAndCancellationsAreRoutine() {
        let lines = Self.logged { h in
            let task = h.send(TestRequest("/held"))
            task.cancel()
        }
        #expect(lines.map(\.0) == [.debug, .debug, .debug])
        #expect(lines.map { String($0.1.prefix(1)) } == ["→", "▷", "■"])
    }

    @Test func noSecretIsWrittenInAURLOrABodyEvenCut() {
        let lines = Self.logged(bodyBytes: 40) { h in
            h.transport.stub(
                nil, "/login",
                .json(
                    #"{"access_token":"s3cr3t-response","user":"ada","padding":"\#(String(repeating: "x", count: 80))"}"#
                ))
            var request = TestRequest("/login", method: .post)
            request.url = URL(string: "https://api.example.com?api_key=s3cr3t-query&page=2") ?? testBaseURL
            request.headers = ["Authorization": "Bearer s3cr3t-header", "Content-Type": "application/json"]
            h.send(request)
        }
        let text = lines.map(\.1).joined(separator: "\n")
        #expect(!text.contains("s3cr3t"), "\(text)")
        #expect(text.contains("api_key=***"))
        #expect(text.contains("response body of task 1: "))
        #expect(text.contains("\"access_token\":\"***\"") || text.contains("\"access_token\" : \"***\""))
        #expect(text.contains("bytes)"), "the body was cut")
        let bodyLine = lines.first { $0.1.contains("response body") }?.1 ?? ""
        let shown = bodyLine.components(separatedBy: "response body of task 1: ").last ?? ""
        #expect(shown.utf8.count <= 40 + " … (200 bytes)".utf8.count + 10)
    }

    @Test func aFailureIsSummedUpWithoutWhatTheServerOrTheErrorWrote() {
        let lines = Self.logged(minimumLevel: .warning) { h in
            h.transport.stub(nil, "/refused", .json(#"{"message":"token s3cr3t-echo is not valid"}"#, status: 403))
            h.transport.stub(nil, "/down", .failure(.cannotConnectToHost))
            h.send(TestRequest("/refused"))
            h.send(TestRequest("/down"))
        }
        let text = lines.map(\.1).joined(separator: "\n")
        #expect(!text.contains("s3cr3t"), "\(text)")
        #expect(text.contains("failed: status 403"))
        #expect(text.contains("transport error (URLError \(URLError.Code.cannotConnectToHost.rawValue))"))
    }

    @Test func aBodyIsWrittenOnlyWhenAskedFor() {
        let lines = Self.logged { h in h.send(TestRequest("/ok")) }
        #expect(!lines.contains { $0.1.contains("body") })
    }
}

/// A request whose JSON body holds a value only the engine's secret names call secret.
private struct VerifyRequest: APIRequest {
    var url = testBaseURL
    var path = "/verify"
    var method: HTTPMethod = .post
    var parameters: APIParameters { .json(["otp": "462913", "name": "ada"]) }
}

private final class VerifyManager: APIManager {
    typealias Request = VerifyRequest
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

@Suite("Log observer: the engine's own secret names")
struct LogObserverSecretNamesTests {
    @Test func aRequestBodyShownAtDebugHidesTheEnginesSecretNames() {
        let lines = Locked<[String]>([])
        let transport = MockTransport()
        transport.stub(nil, "/verify", .json(#"{"value":"ok"}"#))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.observers = [
            APIEngine.LogObserver(minimumLevel: .debug, bodyBytes: 200) { _, line in lines.withLock { $0.append(line) }
            }
        ]
        let manager = VerifyManager(engine: APIEngine(configuration: configuration))
        manager.engine.secretNames = ["otp"]
        let task = manager.send(VerifyRequest())
        #expect(task.state.name == "finished")
        let text = lines.withLock { $0.joined(separator: "\n") }
        #expect(text.contains("request body of task 1"), "\(text)")
        #expect(text.contains("ada"), "the body is shown")
        #expect(!text.contains("462913"), "\(text)")
    }
}
