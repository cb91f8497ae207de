import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

/// A header source that counts how often it is asked for all its fields.
final class CountingHeaderSource: APIHeaderSource, @unchecked Sendable {
    // @unchecked: `calls` is only touched while holding `lock`.
    let fields: [String: String]
    private let lock = NSLock()
    private var calls = 0

    init(_ fields: [String: String]) { self.fields = fields }

    var allFieldsCalls: Int { lock.withLock { calls } }

    func allFields() -> [String: String] {
        lock.withLock { calls += 1 }
        return fields
    }

    func value(forHeader name: String) -> String? {
        fields.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

@Suite("Raw response headers read lazily from a transport")
struct RawResponseHeadersTests {
    let fields = ["Content-Type": "application/json", "ETag": "\"v1\""]

    @Test func headersAreNotReadUntilAskedFor() {
        let source = CountingHeaderSource(fields)
        let response = APIRawResponse(statusCode: 200, headerSource: source, body: Data("{}".utf8), url: nil)
        #expect(response.statusCode == 200)
        #expect(source.allFieldsCalls == 0)
        #expect(response.headers == fields)
        #expect(source.allFieldsCalls == 1)
    }

    @Test func oneHeaderIsLookedUpWithoutReadingThemAll() {
        let source = CountingHeaderSource(fields)
        let response = APIRawResponse(statusCode: 200, headerSource: source, body: Data(), url: nil)
        #expect(response.value(forHeader: "etag") == "\"v1\"")
        #expect(response.value(forHeader: "X-Missing") == nil)
        #expect(source.allFieldsCalls == 0)
    }

    @Test func manyThreadsReadingAtOnceSeeOneDictionary() {
        let source = CountingHeaderSource(fields)
        let response = APIRawResponse(statusCode: 200, headerSource: source, body: Data(), url: nil)
        let mismatches = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            if response.headers != fields { mismatches.withLock { $0 += 1 } }
        }
        #expect(mismatches.withLock { $0 } == 0)
        // Racing first readers may each build the dictionary, but once one has stored it, no more.
        let callsAfterRace = source.allFieldsCalls
        _ = response.headers
        #expect(source.allFieldsCalls == callsAfterRace)
        #expect(callsAfterRace >= 1)
    }

    @Test func aLazyResponseEqualsAndHashesLikeItsDictionaryForm() {
        let lazy = APIRawResponse(
            statusCode: 404, headerSource: CountingHeaderSource(fields), body: Data("gone".utf8),
            url: URL(string: "http://127.0.0.1/x"))
        let stored = APIRawResponse(
            statusCode: 404, headers: fields, body: Data("gone".utf8), url: URL(string: "http://127.0.0.1/x"))
        #expect(lazy == stored)
        #expect(lazy.hashValue == stored.hashValue)
        var changed = stored
        changed.headers["ETag"] = "\"v2\""
        #expect(lazy != changed)
    }

    @Test func settingHeadersReplacesTheSource() {
        let source = CountingHeaderSource(fields)
        var response = APIRawResponse(statusCode: 200, headerSource: source, body: Data(), url: nil)
        response.headers["X-Added"] = "1"
        #expect(response.headers["X-Added"] == "1")
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.value(forHeader: "x-added") == "1")
    }

    @Test func aLazyResponseEncodesLikeItsDictionaryForm() throws {
        let lazy = APIRawResponse(
            statusCode: 201, headerSource: CountingHeaderSource(fields), body: Data([1, 2, 3]), url: nil)
        let decoded = try JSONDecoder().decode(APIRawResponse.self, from: JSONEncoder().encode(lazy))
        #expect(decoded == lazy)
        #expect(decoded.headers == fields)
    }
}

@Suite("Raw response headers given as a list of fields")
struct RawResponseHeaderFieldListTests {
    let fields: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Set-Cookie", "a=1"), ("ETag", "\"v1\""), ("set-cookie", "b=2"),
    ]

    @Test func aNameIsMatchedWithoutRegardToCase() {
        let response = APIRawResponse(statusCode: 200, headerFields: fields)
        #expect(response.value(forHeader: "content-type") == "application/json")
        #expect(response.value(forHeader: "ETAG") == "\"v1\"")
        #expect(response.value(forHeader: "Content-Typf") == nil)
        #expect(response.value(forHeader: "Content-Typ") == nil)
        #expect(response.value(forHeader: "X-Missing") == nil)
    }

    @Test func namesThatDifferInANonLetterDoNotMatch() {
        // '@' and '`' differ only in the bit that separates upper from lower case letters.
        let response = APIRawResponse(statusCode: 200, headerFields: [("X@", "at")])
        #expect(response.value(forHeader: "X`") == nil)
        #expect(response.value(forHeader: "x@") == "at")
    }

    @Test func repeatedFieldsAreJoinedInOrderWhenLookedUp() {
        let response = APIRawResponse(statusCode: 200, headerFields: fields)
        #expect(response.value(forHeader: "Set-Cookie") == "a=1, b=2")
    }

    @Test func theDictionaryJoinsRepeatsOfTheSameSpelling() {
        let response = APIRawResponse(
            statusCode: 200, headerFields: [("Vary", "Accept"), ("Vary", "Origin"), ("Age", "3")])
        #expect(response.headers == ["Vary": "Accept, Origin", "Age": "3"])
    }

    @Test func itEqualsTheSameResponseMadeFromADictionary() {
        let listed = APIRawResponse(statusCode: 201, headerFields: [("A", "1"), ("B", "2")], body: Data("x".utf8))
        let fromDictionary = APIRawResponse(statusCode: 201, headers: ["A": "1", "B": "2"], body: Data("x".utf8))
        #expect(listed == fromDictionary)
        #expect(listed.hashValue == fromDictionary.hashValue)
    }

    @Test func settingTheHeadersReplacesTheList() {
        var response = APIRawResponse(statusCode: 200, headerFields: fields)
        response.headers = ["Only": "this"]
        #expect(response.value(forHeader: "content-type") == nil)
        #expect(response.value(forHeader: "only") == "this")
    }
}
