import APIManagerKit
import Foundation
import Testing

/// The HTTP rules both transports call (`APIHTTPRules`), row by row.
@Suite("HTTP rules shared by the transports")
struct HTTPRulesTests {
    @Test(arguments: [
        ("https://a.test/x", true), ("HTTP://a.test", true), ("ftp://a.test/f", false), ("file:///etc/passwd", false),
        ("data:text/plain,hi", false), ("a.test/x", false),
    ])
    func onlyHTTPAndHTTPSAreSent(url: String, sendable: Bool) {
        #expect(APIHTTPRules.isSendable(URL(string: url)) == sendable)
    }

    @Test(
        arguments: [
            ("HEAD", 200, true), ("head", 404, true), ("GET", 100, true), ("GET", 204, true), ("GET", 304, true),
            ("GET", 200, false), ("POST", 201, false), (nil, 205, false),
        ] as [(String?, Int, Bool)])
    func theseAnswersHaveNoBody(method: String?, status: Int, bodiless: Bool) {
        #expect(APIHTTPRules.hasNoBody(method: method, status: status) == bodiless)
    }

    @Test(
        arguments: [
            (303, "POST", true), (303, "GET", true), (303, "HEAD", false), (302, "POST", true), (301, "POST", true),
            (302, "PUT", false), (307, "POST", false), (308, "POST", false), (302, nil, false),
        ] as [(Int, String?, Bool)])
    func theseRedirectsGoOnAsGET(status: Int, method: String?, becomesGET: Bool) {
        #expect(APIHTTPRules.redirectBecomesGET(status: status, method: method) == becomesGET)
    }

    @Test func contentCodingsAndTheLengthRefusedAtTheHead() {
        #expect(APIHTTPRules.contentCodings("gzip, Identity ,BR") == ["gzip", "br"])
        #expect(APIHTTPRules.contentCodings(nil).isEmpty)
        #expect(APIHTTPRules.isRefusedAtHead(announcedLength: 101, codings: [], limit: 100))
        #expect(!APIHTTPRules.isRefusedAtHead(announcedLength: 100, codings: [], limit: 100))
        #expect(!APIHTTPRules.isRefusedAtHead(announcedLength: 1 << 40, codings: ["gzip"], limit: 100))
        #expect(!APIHTTPRules.isRefusedAtHead(announcedLength: 1 << 40, codings: [], limit: nil))
    }
}
