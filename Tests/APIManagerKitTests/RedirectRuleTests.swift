import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `APITransportOptions.redirectRequest(_:from:)`: the one rule both transports apply to each hop.
@Suite("The redirect rule shared by every transport")
struct RedirectRuleTests {
    let origin = URL(string: "https://api.example.com/v1/items")!

    func redirected(to url: String, method: String = "GET", body: Data? = nil, headers: [String: String]) -> URLRequest
    {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    let credentials = [
        "Authorization": "Bearer t", "Cookie": "s=1", "X-Session-Id": "9", "X-Api-Key": "k", "X-Trace": "kept",
    ]

    @Test func credentialsAreDroppedWhenTheRedirectLeavesTheOrigin() {
        let next = APITransportOptions().redirectRequest(
            redirected(to: "https://cdn.example.com/items", headers: credentials), from: origin)
        #expect(next.allHTTPHeaderFields == ["X-Trace": "kept"])
    }

    @Test(arguments: ["http://api.example.com/items", "https://api.example.com:8443/items"])
    func anotherSchemeOrPortIsAnotherOrigin(target: String) {
        let next = APITransportOptions().redirectRequest(redirected(to: target, headers: credentials), from: origin)
        #expect(next.value(forHTTPHeaderField: "Authorization") == nil)
    }

    @Test func credentialsStayWithinTheOrigin() {
        let next = APITransportOptions().redirectRequest(
            redirected(to: "https://api.example.com/v2/items", headers: credentials), from: origin)
        #expect(next.allHTTPHeaderFields == credentials)
    }

    @Test func aHeaderMarkedSensitiveIsDroppedToo() {
        let next = APITransportOptions(sensitiveHeaders: ["X-Trace"]).redirectRequest(
            redirected(to: "https://cdn.example.com/items", headers: ["X-Trace": "t", "Accept": "*/*"]), from: origin)
        #expect(next.allHTTPHeaderFields == ["Accept": "*/*"])
    }

    @Test func aRedirectThatBecameABodylessGetLosesTheBodysHeaders() {
        let headers = [
            "Content-Type": "application/json", "Content-Length": "7", "Content-Encoding": "gzip",
            "Content-Language": "en", "Content-Location": "/x", "Accept": "*/*",
        ]
        let next = APITransportOptions().redirectRequest(
            redirected(to: "https://api.example.com/done", headers: headers), from: origin)
        #expect(next.allHTTPHeaderFields == ["Accept": "*/*"])
    }

    @Test func aRedirectThatKeepsItsBodyKeepsItsContentType() {
        // A 307 or 308 repeats the method and the body.
        let next = APITransportOptions().redirectRequest(
            redirected(
                to: "https://api.example.com/moved", method: "POST", body: Data("{}".utf8),
                headers: ["Content-Type": "application/json"]),
            from: origin)
        #expect(next.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(next.httpBody == Data("{}".utf8))
    }
}
