import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

@Suite("Acceptable status codes: ranges, single codes, both")
struct StatusCodesTests {
    @Test func rangesAndSingleCodesMergeIntoSortedDisjointRanges() {
        let codes = APIStatusCodes(200..<300).union([304, 409, 301, 299, 300])
        #expect(codes.ranges == [200..<302, 304..<305, 409..<410])
        #expect(codes.description == "[200..<302, 304, 409]")
        #expect(
            [199, 200, 301, 302, 303, 304, 409, 410].map(codes.contains) == [
                false, true, true, false, false, true, true, false,
            ])
    }

    @Test func theDefaultIsTheSuccessRange() {
        #expect(TestRequest("/ok").acceptableStatusCodes == .success)
        #expect(APIStatusCodes.success.description == "200..<300")
        #expect(APIStatusCodes(200...299) == .success)
    }

    @Test func emptyAndExtremeInputsDoNotCrash() {
        #expect(APIStatusCodes([]).ranges.isEmpty)
        #expect(APIStatusCodes(5..<5).ranges.isEmpty)
        #expect(APIStatusCodes(Int.min...Int.max).contains(0))
        #expect(APIStatusCodes([Int.max]).ranges.isEmpty)
    }

    @Test func aRequestAcceptingIndividualCodesTakesThemAndRefusesTheRest() {
        struct ConflictTolerant: APIRequest {
            let url = testBaseURL
            var path: String
            var acceptableStatusCodes: APIStatusCodes { [200, 409] }
        }
        final class API: APIManager {
            typealias Request = ConflictTolerant
            typealias Response = APIRawResponse
            let engine: APIEngine
            init(engine: APIEngine) { self.engine = engine }
        }
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/conflict", .status(409))
        transport.stub(nil, "/created", .status(201))
        let api = API(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        #expect(api.send(ConflictTolerant(path: "conflict")).state.description == "finished")
        #expect(api.send(ConflictTolerant(path: "created")).state.name == "status(201)")
    }

    /// The first release declared `acceptableStatusCodes` as `Range<Int>`; such a declaration (and
    /// the other collections of codes) is read, not silently replaced by the default.
    @Test func aRequestDeclaringItsCodesAsARangeOrCollectionIsHeard() {
        struct AsRange: APIRequest {
            let url = testBaseURL
            var path: String
            var acceptableStatusCodes: Range<Int> { 200..<202 }
        }
        struct AsClosedRange: APIRequest {
            let url = testBaseURL
            var path: String
            var acceptableStatusCodes: ClosedRange<Int> { 200...201 }
        }
        struct AsArray: APIRequest {
            let url = testBaseURL
            var path: String
            var acceptableStatusCodes: [Int] { [200, 201] }
        }
        struct AsSet: APIRequest {
            let url = testBaseURL
            var path: String
            var acceptableStatusCodes: Set<Int> { [200, 201] }
        }
        func outcomes<Request: APIRequest>(_ make: (String) -> Request) -> [String] {
            let clock = TestClock()
            let transport = MockTransport(clock: clock)
            transport.stub(nil, "/created", .status(201))
            transport.stub(nil, "/accepted", .status(202))
            let api = RawAPI<Request>(
                engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
            return ["created", "accepted"].map { api.send(make($0)).state.name }
        }
        let expected = ["finished", "status(202)"]
        #expect(outcomes { AsRange(path: $0) } == expected)
        #expect(outcomes { AsClosedRange(path: $0) } == expected)
        #expect(outcomes { AsArray(path: $0) } == expected)
        #expect(outcomes { AsSet(path: $0) } == expected)
        #expect(AsRange(path: "").acceptableStatusCodes.statusCodes == APIStatusCodes(200..<202))
    }
}

/// A manager of any request type whose response is the raw response.
final class RawAPI<Request: APIRequest>: APIManager {
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}
