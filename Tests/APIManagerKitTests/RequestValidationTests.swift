import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Hostile caller input: every way into a request that could change it behind the caller's back is
/// a typed error instead.
@Suite("Request validation: hostile caller input")
struct RequestValidationTests {
    static let injectedNames = ["X-Probe\r\nX-Injected: yes\r\nX-Other", "X-Probe\nX-Injected", "Bad Name", "", "X:Y"]

    @Test(arguments: injectedNames)
    func aHeaderNameThatIsNotATokenIsAnInvalidRequest(name: String) {
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(headers: [name: "1"]).makeURLRequest()
        }
        #expect(reason?.contains("not a valid HTTP field name") == true, "\(String(describing: reason))")
    }

    @Test(arguments: ["a\r\nX-Injected: yes", "a\nb", "a\rb", "a\u{0}b"])
    func aHeaderValueWithCROrLFIsAnInvalidRequestNotADroppedHeader(value: String) {
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(headers: ["X-Probe": value]).makeURLRequest()
        }
        #expect(reason?.contains("contains CR, LF or NUL") == true, "\(String(describing: reason))")
    }

    @Test func anAuthorizationWithALineBreakIsAnInvalidRequest() {
        let bearer = invalidReason { () throws(APIError) in
            try BuildRequest(authorization: .bearer("token\r\nX-Injected: yes")).makeURLRequest()
        }
        #expect(bearer?.contains("Authorization") == true)
        let custom = invalidReason { () throws(APIError) in
            try BuildRequest(authorization: .custom(header: "X-Key\r\nX", value: "k")).makeURLRequest()
        }
        #expect(custom?.contains("not a valid HTTP field name") == true)
    }

    /// RFC 9110 §5.6.2: `token = 1*tchar`, `tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
    /// "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA`. Every ASCII character, and a few
    /// beyond, in a name: accepted exactly when the grammar says.
    @Test func aHeaderNameIsAcceptedExactlyWhenEveryCharacterIsATcharOfRFC9110() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".unicodeScalars)
        let scalars = (0..<128).compactMap(Unicode.Scalar.init) + ["\u{80}", "é", "\u{FF}", "\u{2028}", "☃"]
        var wrong: [String] = []
        for scalar in scalars {
            let name = "X-" + String(Character(scalar)) + "a"
            let refused = invalidReason { () throws(APIError) in
                try BuildRequest(headers: [name: "1"]).makeURLRequest()
            }
            if (refused == nil) != tchar.contains(scalar) { wrong.append("U+\(String(scalar.value, radix: 16))") }
        }
        #expect(wrong.isEmpty, "accepted or refused against the grammar: \(wrong)")
    }

    /// RFC 9110 §5.5: a field value is any visible character, space, tab or obs-text; CR, LF and NUL
    /// are what this library refuses (they would split the header or end it). Every other
    /// character passes.
    @Test func aHeaderValueIsRefusedExactlyForCROrLFOrNUL() {
        let scalars = (0..<128).compactMap(Unicode.Scalar.init) + ["\u{80}", "é", "\u{FF}", "☃"]
        var wrong: [String] = []
        for scalar in scalars {
            let refused = invalidReason { () throws(APIError) in
                try BuildRequest(headers: ["X-Probe": "a" + String(Character(scalar)) + "b"]).makeURLRequest()
            }
            if (refused != nil) != [0x00, 0x0A, 0x0D].contains(scalar.value) {
                wrong.append("U+\(String(scalar.value, radix: 16))")
            }
        }
        #expect(wrong.isEmpty, "accepted or refused against the rule: \(wrong)")
    }

    @Test func ordinaryHeadersStillPass() throws {
        let request = try BuildRequest(headers: ["X-Trace-Id": "a b; c=\"d\"", "Accept": "*/*"]).makeURLRequest()
        #expect(request.value(forHTTPHeaderField: "X-Trace-Id") == "a b; c=\"d\"")
    }

    /// A header set by `configure(_:)` or `urlRequest(for:)` is checked by the engine before sending.
    @Test func aBadHeaderNameFromAManagersOwnURLRequestFailsTheTaskAndIsNeverSent() {
        let h = Harness()
        let manager = RequestHookManager(h) { task in
            var request = try task.request.makeURLRequest()
            request.setValue("yes", forHTTPHeaderField: "X-Probe\r\nX-Injected: yes\r\nX-Other")
            return request
        }
        let task = manager.send(TestRequest("/ok"))
        #expect(task.state.name == "invalidRequest")
        #expect(h.transport.records.isEmpty)
    }

    @Test(
        arguments: [
            ("users/{id}/items", ["id": ".."]), ("{a}/{b}/admin", ["a": "..", "b": ".."]), ("users/{id}", ["id": "."]),
        ] as [(String, [String: String])])
    func aDotOrDotDotPathValueIsAnInvalidRequest(path: String, values: [String: String]) {
        let parameters = APIParameters.path(values.mapValues { APIValue.string($0) })
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(path: path, parameters: parameters).makeURLRequest()
        }
        #expect(reason?.contains("would move the path") == true, "\(String(describing: reason))")
    }

    @Test func dotsInsideAPathValueStayOneSegment() throws {
        let ok = BuildRequest(path: "files/{name}/{other}", parameters: .path(["name": "...", "other": "a..b"]))
        #expect(try ok.resolvedURL().absoluteString == "https://api.test/v1/files/.../a..b")
        let slashes = BuildRequest(path: "files/{name}", parameters: .path(["name": "../admin"]))
        #expect(try slashes.resolvedURL().absoluteString == "https://api.test/v1/files/..%2Fadmin")
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func aNonFiniteNumberInTheQueryIsAnInvalidRequest(number: Double) {
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(parameters: .query(["x": .double(number), "nested": ["y": .double(number)]]))
                .makeURLRequest()
        }
        #expect(reason?.contains("\"nested[y]\"") == true, "\(String(describing: reason))")
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func aNonFiniteNumberInAFormBodyIsAnInvalidRequest(number: Double) {
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(method: .post, parameters: .form(["x": .double(number)])).makeURLRequest()
        }
        #expect(reason?.contains("\"x\"") == true, "\(String(describing: reason))")
    }

    @Test func theQueryEncoderThrowsForNonFiniteNumbersAndEncodesFiniteOnes() throws {
        #expect(throws: APIError.self) { try APIParameters.QueryEncoding.default.encode(["x": [1.5, .double(.nan)]]) }
        #expect(try APIParameters.QueryEncoding.default.encode(["x": 1.5, "y": -0.25]) == "x=1.5&y=-0.25")
    }

    @Test(arguments: [
        (404, "The server answered 404 (not found)."), (422, "The server answered 422 (unprocessable entity)."),
        (503, "The server answered 503 (service unavailable)."), (299, "The server answered 299 (success)."),
        (799, "The server answered 799 (unknown status)."),
    ])
    func theStatusSentenceIsTheSameOnEveryPlatform(status: Int, sentence: String) {
        let error = APIError.unacceptableStatus(APIRawResponse(statusCode: status))
        #expect(error.description == sentence)
    }
}
