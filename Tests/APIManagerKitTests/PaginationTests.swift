import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Link headers (RFC 8288)", .timeLimit(.minutes(1)))
struct LinkHeaderTests {
    let base = URL(string: "https://api.example.com/repos/1/issues?page=1")!

    @Test func severalLinksWithQuotedParametersAndRelativeTargets() {
        let links = APILink.parse(
            #"<https://api.example.com/repos/1/issues?page=2>; rel="next", </repos/1/issues?page=5>; rel=last; title="a, b; c""#
                + #", <?page=1>;rel="first prev" ; REL=ignored"#,
            relativeTo: base)
        #expect(
            links.map(\.target.absoluteString) == [
                "https://api.example.com/repos/1/issues?page=2", "https://api.example.com/repos/1/issues?page=5",
                "https://api.example.com/repos/1/issues?page=1",
            ])
        #expect(links.map(\.relations) == [["next"], ["last"], ["first", "prev"]])
        #expect(links[1].parameters["title"] == "a, b; c")
        #expect(links[2].parameters["rel"] == "first prev")  // the first rel wins
    }

    @Test func quotedStringsUndoTheirEscapes() {
        let links = APILink.parse(#"<https://x.test/a>; rel="next"; title="say \"hi\"""#)
        #expect(links.first?.parameters["title"] == #"say "hi""#)
    }

    @Test(
        arguments: [
            ("garbage, <https://x.test/ok>; rel=next", ["https://x.test/ok"]),
            ("<https://x.test/a>; rel=next; =bad, <https://x.test/b>; rel=next", ["https://x.test/b"]),
            ("<https://x.test/a> junk, <https://x.test/b>; rel=next", ["https://x.test/b"]),
            (#"<https://x.test/a>; title="never ends, <https://x.test/b>"#, []),
            ("<https://x.test/a", []),
            ("<>; rel=next", []),
            ("", []),
            (",,, ,", []),
            ("<https://x.test/a,b>; rel=next", ["https://x.test/a,b"]),
        ] as [(String, [String])])
    func malformedLinksAreLeftOutAndTheRestIsRead(header: String, targets: [String]) {
        #expect(APILink.parse(header).map(\.target.absoluteString) == targets)
    }

    /// Python requests' `test_parse_header_links` and RFC 8288 Appendix B: a bare `;` is an empty
    /// parameter, dropped; the link stays (losing it would end pagination silently).
    @Test(
        arguments: [
            (#"<https://x.test/items?page=2>; rel="next";"#, [["next"]]),
            ("<https://x.test/a>;; rel=next ;", [["next"]]),
            ("<https://x.test/a>; ; rel=next, <https://x.test/b>;", [["next"], []]),
            ("<https://x.test/a>;", [[]]),
        ] as [(String, [[String]])])
    func anEmptyParameterIsDroppedAndTheLinkKept(header: String, relations: [[String]]) {
        #expect(APILink.parse(header).map(\.relations) == relations)
    }

    @Test func aRelativeTargetWithoutABaseIsLeftOut() {
        #expect(APILink.parse("</page/2>; rel=next").isEmpty)
    }

    @Test func theRawResponseFindsItsLinksAgainstItsOwnURL() {
        let raw = APIRawResponse(
            statusCode: 200, headers: ["Link": #"</items?page=3>; rel="NEXT""#],
            url: URL(string: "https://a.test/v1/items")!)
        #expect(raw.link(relation: "next")?.absoluteString == "https://a.test/items?page=3")
        #expect(raw.link(relation: "prev") == nil)
        #expect(APIRawResponse(statusCode: 200).links.isEmpty)
    }

    @Test func randomInputNeverCrashes() {
        var generator = SplitMix64(state: 8288)
        let alphabet = Array(#"<>;,="\ \#trelnxt:/?.ab1"#.unicodeScalars) + ["é", "\u{0}", "\u{10FFFF}"]
        for _ in 0..<5_000 {
            let length = Int(generator.next() % 80)
            var text = String.UnicodeScalarView()
            for _ in 0..<length { text.append(alphabet[Int(generator.next() % UInt64(alphabet.count))]) }
            let links = APILink.parse(String(text), relativeTo: URL(string: "https://base.test/x"))
            #expect(links.allSatisfy { $0.target.scheme != nil })
        }
    }
}

struct PageRequest: APIRequest {
    var url: URL
    var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 2, baseDelay: 0, jitter: .none) }
}

struct Items: APIResponse, Decodable, Equatable {
    let items: [Int]
}

final class PagesAPI: APIManager {
    typealias Request = PageRequest
    typealias Response = Items
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

@Suite("Pagination through the Link header", .timeLimit(.minutes(1)))
struct PaginationTests {
    /// `/items?page=N` of `total` pages, each linking to the next with a relative URL.
    func makeAPI(total: Int, loopBackAt: Int? = nil) -> (PagesAPI, MockTransport) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items") { request in
            let page =
                URLComponents(url: request.url!, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "page" }?.value.flatMap(Int.init) ?? 1
            var headers: [String: String] = [:]
            if page < total {
                headers["Link"] = #"</items?page=\#(page + 1)>; rel="next", </items?page=\#(total)>; rel="last""#
            }
            if page == loopBackAt { headers["Link"] = #"</items?page=1>; rel="next""# }
            return .json(#"{"items":[\#(page * 10), \#(page * 10 + 1)]}"#, headers: headers)
        }
        let api = PagesAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        return (api, transport)
    }

    func collect(_ pages: APIPages<PagesAPI>, limit: Int = 100) async -> ([APIPage<Items>], APIError?) {
        var collected: [APIPage<Items>] = []
        do {
            for try await page in pages {
                collected.append(page)
                if collected.count == limit { break }
            }
            return (collected, nil)
        } catch {
            return (collected, error)
        }
    }

    @Test func everyPageIsFetchedInOrderUntilThereIsNoNextLink() async {
        let (api, transport) = makeAPI(total: 3)
        let first = PageRequest(url: URL(string: "https://api.test/items")!)
        let (pages, error) = await collect(api.pages(from: first) { url, _ in PageRequest(url: url) })
        #expect(error == nil)
        #expect(pages.map(\.response.items) == [[10, 11], [20, 21], [30, 31]])
        #expect(pages.map(\.number) == [1, 2, 3])
        #expect(pages.first?.link(relation: "last")?.absoluteString == "https://api.test/items?page=3")
        #expect(
            transport.requests.map { $0.url?.absoluteString } == [
                "https://api.test/items", "https://api.test/items?page=2", "https://api.test/items?page=3",
            ])
    }

    /// A `next` link to another origin follows the redirect rule: nothing secret leaves the first
    /// page's origin (the request's authorization, an API-key default header, the session's
    /// credential), and a 401 from there starts no refresh, unless the caller trusts that origin.
    @Test(arguments: [false, true])
    func aLinkToAnotherOriginGoesWithoutCredentialsUnlessTrusted(trusted: Bool) async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items") { request in
            request.url?.host == "api.test"
                ? .json(#"{"items":[1]}"#, headers: ["Link": #"<https://other.test/items?page=2>; rel="next""#])
                : .json(#"{"items":[2]}"#, status: trusted ? 200 : 401)
        }
        let authenticator = MockAuthenticator()
        let session = APIAuthentication(authenticator: authenticator, clock: clock)
        session.signIn(with: APIAuthentication.Credential(accessToken: "t0k"))
        var defaults = APIEngine.DefaultHeaders.none
        defaults["X-API-Key"] = "k3y"
        let api = PagesAPI(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                authentication: session, defaultHeaders: defaults))
        let first = PageRequest(url: URL(string: "https://api.test/items")!)
        let pages = api.pages(
            from: first, credentialOrigins: trusted ? [URL(string: "https://other.test")!] : []
        ) { url, _ in PageRequest(url: url) }
        let (collected, error) = await collect(pages)
        #expect(transport.requests.count == 2)
        let (home, other) = (transport.requests[0], transport.requests[1])
        #expect(home.value(forHTTPHeaderField: "Authorization") == "Bearer t0k")
        #expect(home.value(forHTTPHeaderField: "X-API-Key") == "k3y")
        #expect(other.url?.host == "other.test")
        #expect(other.value(forHTTPHeaderField: "Authorization") == (trusted ? "Bearer t0k" : nil))
        #expect(other.value(forHTTPHeaderField: "X-API-Key") == (trusted ? "k3y" : nil))
        #expect(authenticator.refreshCount == 0)
        #expect(collected.count == (trusted ? 2 : 1))
        #expect((error?.statusCode) == (trusted ? nil : 401))
    }

    /// The page on another origin is retried (a 503, then a 200): every attempt goes without the
    /// credentials, a name the engine marks secret among them.
    @Test func aRetriedPageOnAnotherOriginStaysWithoutCredentials() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items") { request in
            request.url?.host == "api.test"
                ? .json(#"{"items":[1]}"#, headers: ["Link": #"<https://other.test/items?page=2>; rel="next""#])
                : .json(#"{"items":[2]}"#)
        }
        transport.stub(nil, "/other-items", .status(503), .json(#"{"items":[2]}"#))
        var defaults = APIEngine.DefaultHeaders.none
        defaults["X-Tenant-Pin"] = "4242"
        let api = PagesAPI(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                defaultHeaders: defaults))
        api.engine.secretNames = ["X-Tenant-Pin"]
        let first = PageRequest(url: URL(string: "https://api.test/items")!)
        let pages = api.pages(from: first) { _, _ in PageRequest(url: URL(string: "https://other.test/other-items")!) }
        let (collected, error) = await collect(pages)
        #expect(error == nil && collected.count == 2)
        let pins = transport.requests.map { $0.value(forHTTPHeaderField: "X-Tenant-Pin") }
        #expect(pins == ["4242", nil, nil])  // the first page, then both attempts on the other origin
    }

    @Test func leavingTheLoopSendsNothingMore() async {
        let (api, transport) = makeAPI(total: 10)
        let first = PageRequest(url: URL(string: "https://api.test/items")!)
        let (pages, _) = await collect(api.pages(from: first) { url, _ in PageRequest(url: url) }, limit: 2)
        #expect(pages.count == 2)
        #expect(transport.requests.count == 2)
    }

    @Test func aLinkBackToAPageAlreadyReadEndsWithATypedErrorAfterThatPage() async {
        let (api, _) = makeAPI(total: 5, loopBackAt: 3)
        let first = PageRequest(url: URL(string: "https://api.test/items?page=1")!)
        let (pages, error) = await collect(api.pages(from: first) { url, _ in PageRequest(url: url) })
        #expect(pages.map(\.number) == [1, 2, 3])
        guard case .rejected(let underlying, let response)? = error else {
            Issue.record("expected rejected, got \(String(describing: error))")
            return
        }
        #expect(underlying as? APIPaginationError == .loop(URL(string: "https://api.test/items?page=1")!))
        #expect(response.url?.absoluteString == "https://api.test/items?page=3")
    }

    @Test func aFailingPageEndsTheSequenceWithItsErrorAfterItsRetries() async {
        let (api, transport) = makeAPI(total: 3)
        transport.stub(nil, "/broken", .status(503))
        let first = PageRequest(url: URL(string: "https://api.test/items?page=1")!)
        let (pages, error) = await collect(
            api.pages(from: first) { url, _ in
                url.query == "page=2"
                    ? PageRequest(url: URL(string: "https://api.test/broken")!) : PageRequest(url: url)
            })
        #expect(pages.count == 1)
        #expect(error?.statusCode == 503)
        #expect(transport.records.filter { $0.path == "/broken" }.count == 2)  // the request's retry policy
    }

    @Test func cancellingTheIteratingTaskCancelsThePageBeingFetched() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        // Awaited, not waited for: blocking a thread of the cooperative pool could starve the
        // iterating task.
        let (sent, sentSignal) = AsyncStream<Void>.makeStream()
        transport.stub(nil, "/held") { _ in
            sentSignal.yield()
            return MockTransport.Reply.json(#"{"items":[]}"#).held()
        }
        let api = PagesAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let pages = api.pages(from: PageRequest(url: URL(string: "https://api.test/held")!)) { url, _ in
            PageRequest(url: url)
        }
        let iterating = Task { () -> APIError? in
            do {
                for try await _ in pages {}
                return nil
            } catch {
                return error as? APIError
            }
        }
        var arrivals = sent.makeAsyncIterator()
        _ = await arrivals.next()
        iterating.cancel()
        let error = await iterating.value
        #expect(error.map(describe) == "cancelled(concurrency)")
        #expect(transport.records.map(\.outcome) == [.cancelled])
    }

    @Test func nextReturningNilEndsTheSequence() async {
        let (api, transport) = makeAPI(total: 3)
        let first = PageRequest(url: URL(string: "https://api.test/items")!)
        let (pages, error) = await collect(api.pages(from: first) { _, _ in nil })
        #expect(pages.count == 1 && error == nil)
        #expect(transport.requests.count == 1)
    }

    @Test func aCustomRelationIsFollowed() async {
        let (api, _) = makeAPI(total: 3)
        let first = PageRequest(url: URL(string: "https://api.test/items?page=1")!)
        let (pages, _) = await collect(api.pages(from: first, following: "LAST") { url, _ in PageRequest(url: url) })
        #expect(pages.map(\.response.items) == [[10, 11], [30, 31]])
    }
}
