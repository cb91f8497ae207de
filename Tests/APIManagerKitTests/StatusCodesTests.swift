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
        let api = API(engine: APIEngine(transport: transport, clock: clock, delivery: .immediate, execution: .inline))
        #expect(api.send(ConflictTolerant(path: "conflict")).state.description == "finished")
        #expect(api.send(ConflictTolerant(path: "created")).state.name == "status(201)")
    }
}
