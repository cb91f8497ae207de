import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// RFC 6265 in `APICookieStore`: parsing, the storage rules, which requests get which cookies, expiry
/// on the engine's clock, persistence, and the engine sending and capturing them.
@Suite("Cookies (RFC 6265)", .timeLimit(.minutes(1)))
struct CookieStoreTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)  // 2023-11-14 22:13:20 UTC
    let store = APICookieStore()

    private func url(_ text: String) -> URL { URL(string: text)! }

    private func set(_ values: String..., from origin: String = "https://api.example.com/v1/login") {
        store.store(setCookie: values, from: url(origin), at: Self.now)
    }

    private func header(_ target: String, at date: Date = now) -> String? {
        store.cookieHeader(for: url(target), at: date)
    }

    @Test func everyAttributeIsKept() throws {
        set("sid=abc; Domain=example.com; Path=/v1; Secure; HttpOnly; Max-Age=60; SameSite=Lax")
        let cookie = try #require(store.allCookies.first)
        #expect(cookie.name == "sid" && cookie.value == "abc")
        #expect(cookie.domain == "example.com" && !cookie.isHostOnly)
        #expect(cookie.path == "/v1" && cookie.isSecure && cookie.isHTTPOnly)
        #expect(cookie.expires == Self.now.addingTimeInterval(60))
        #expect(cookie.sameSite == .lax)
    }

    @Test func withoutDomainOrPathTheCookieIsHostOnlyOnTheRequestsDirectory() throws {
        set("sid=abc")
        let cookie = try #require(store.allCookies.first)
        #expect(cookie.isHostOnly && cookie.domain == "api.example.com" && cookie.path == "/v1")
        #expect(cookie.expires == nil)  // a session cookie
        #expect(header("https://api.example.com/v1/items") == "sid=abc")
        #expect(header("https://api.example.com/v2/items") == nil)  // another path
        #expect(header("https://sub.api.example.com/v1/items") == nil)  // host-only
    }

    @Test func aDomainCookieReachesTheDomainAndEveryHostBelowIt() {
        set("a=1; Domain=.Example.COM; Path=/")
        #expect(header("https://example.com/") == "a=1")
        #expect(header("https://deep.api.example.com/x") == "a=1")
        #expect(header("https://notexample.com/") == nil)
        #expect(header("https://example.com.evil.test/") == nil)
    }

    /// Never a `Domain` broader than the host that set it allows (RFC 6265 §5.3 step 5–6).
    @Test(arguments: [
        ("https://api.example.com/", "other.com"), ("https://api.example.com/", "com"),
        ("https://shop.example.co.uk/", "co.uk"), ("https://me.github.io/", "github.io"),
        ("https://api.example.com/", "sub.api.example.com"), ("http://127.0.0.1/", "0.0.1"),
        ("http://127.0.0.1/", "1"),
    ])
    func aDomainBroaderThanTheHostAllowsIsRefused(origin: String, domain: String) {
        set("x=1; Domain=\(domain)", from: origin)
        #expect(store.allCookies.isEmpty)
    }

    @Test func aDomainEqualToAnIPHostOrASingleLabelHostIsHostOnly() {
        set("x=1; Domain=127.0.0.1", from: "http://127.0.0.1:8080/")
        set("y=2; Domain=localhost", from: "http://localhost/")
        #expect(store.allCookies.map(\.isHostOnly) == [true, true])
        #expect(header("http://127.0.0.1:9000/") == "x=1")
    }

    @Test func secureCookiesComeFromAndGoToHTTPSOnly() {
        set("s=1; Secure", from: "http://api.example.com/")
        #expect(store.allCookies.isEmpty)
        set("s=1; Secure; Path=/")
        #expect(header("https://api.example.com/") == "s=1")
        #expect(header("http://api.example.com/") == nil)
    }

    @Test func cookiePrefixesAreEnforced() {
        set("__Secure-a=1; Path=/")  // no Secure
        set("__Host-b=2; Secure; Path=/; Domain=example.com")  // a Domain
        set("__Host-c=3; Secure; Path=/v1")  // not Path=/
        set("__Host-d=4; Secure; Path=/", "__Secure-e=5; Secure; Path=/")
        #expect(store.allCookies.map(\.name).sorted() == ["__Host-d", "__Secure-e"])
    }

    /// RFC 6265 §5.1.4: `/docs` matches `/docs`, `/docs/`, `/docs/web`, not `/docsets`.
    @Test func pathsMatchByWholeSegments() {
        set("p=1; Path=/docs")
        #expect(header("https://api.example.com/docs") == "p=1")
        #expect(header("https://api.example.com/docs/web") == "p=1")
        #expect(header("https://api.example.com/docsets") == nil)
        #expect(header("https://api.example.com/") == nil)
    }

    @Test func longerPathsComeFirstThenOlderCookies() {
        store.store(setCookie: ["a=1; Path=/"], from: url("https://api.example.com/"), at: Self.now)
        store.store(
            setCookie: ["b=2; Path=/v1/items"], from: url("https://api.example.com/"),
            at: Self.now.addingTimeInterval(1))
        store.store(
            setCookie: ["c=3; Path=/"], from: url("https://api.example.com/"), at: Self.now.addingTimeInterval(2))
        #expect(header("https://api.example.com/v1/items/3", at: Self.now.addingTimeInterval(3)) == "b=2; a=1; c=3")
    }

    /// Go's net/http and Python http.cookiejar cases for the lenient cookie-date of §5.1.1.
    @Test(
        arguments: [
            ("Wed, 21 Oct 2015 07:28:00 GMT", 1_445_412_480), ("Wed, 21-Oct-15 07:28:00 GMT", 1_445_412_480),
            ("Wed Oct 21 07:28:00 2015", 1_445_412_480), ("21 Oct 2015 07:28:00", 1_445_412_480),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0), ("Fri, 31 Dec 1999 23:59:59 GMT", 946_684_799),
            ("Sat, 01-Jan-00 00:00:00 GMT", 946_684_800), ("Tue, 19 Jan 2038 03:14:08 GMT", 2_147_483_648),
        ] as [(String, Int)])
    func cookieDatesAreReadLeniently(text: String, seconds: Int) throws {
        // Expires is capped at 400 days from now: judge the dates from a `now` before them all.
        let past = Date(timeIntervalSince1970: -86_400)
        store.store(setCookie: ["d=1; Expires=\(text)"], from: url("https://a.test/"), at: past)
        let stored = store.allCookies.first?.expires
        let expected = min(Date(timeIntervalSince1970: TimeInterval(seconds)), past.addingTimeInterval(400 * 86_400))
        #expect(stored == expected)
    }

    @Test(arguments: [
        "Wed, 32 Oct 2015 07:28:00 GMT", "Wed, 21 Foo 2015 07:28:00 GMT", "Wed, 21 Oct 2015 24:00:00 GMT",
        "Wed, 21 Oct 1600 07:28:00 GMT", "Mon, 30 Feb 2015 07:28:00 GMT", "tomorrow", "", "99999999999",
    ])
    func anUnreadableExpiresIsIgnored(text: String) {
        set("d=1; Expires=\(text)")
        #expect(store.allCookies.first?.expires == nil)  // kept, as a session cookie
    }

    @Test func maxAgeWinsOverExpiresAndZeroOrLessRemovesTheCookie() throws {
        set("m=1; Expires=Wed, 21 Oct 2099 07:28:00 GMT; Max-Age=30")
        #expect(store.allCookies.first?.expires == Self.now.addingTimeInterval(30))
        set("m=2; Max-Age=0")
        #expect(store.allCookies.isEmpty)
        set("n=1", "n=2; Expires=Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(store.allCookies.isEmpty)
        set("o=1; Max-Age=abc")  // ignored attribute: a session cookie
        #expect(store.allCookies.first?.expires == nil)
    }

    @Test func aNewValueReplacesTheCookieAndKeepsItsCreationTime() throws {
        store.store(setCookie: ["r=1"], from: url("https://api.example.com/v1/x"), at: Self.now)
        store.store(setCookie: ["r=2"], from: url("https://api.example.com/v1/y"), at: Self.now.addingTimeInterval(5))
        let cookie = try #require(store.allCookies.first)
        #expect(store.allCookies.count == 1 && cookie.value == "2" && cookie.created == Self.now)
    }

    @Test(arguments: ["novalue", "=value", "   =x", "", ";", "a\u{0}b=1"])
    func aSetCookieWithoutANameIsIgnored(value: String) {
        set(value)
        #expect(store.allCookies.isEmpty)
    }

    @Test func aCookieLargerThan4KiBIsIgnored() {
        set("big=" + String(repeating: "x", count: 4_100))
        #expect(store.allCookies.isEmpty)
    }

    /// Header dictionaries (URLSession's) join several `Set-Cookie` fields with `", "`; `Expires` has a
    /// comma too, and a quoted value or an attribute may hold one.
    @Test(
        arguments: [
            ("a=1; Expires=Wed, 21 Oct 2099 07:28:00 GMT; Path=/, b=2; Path=/, c=3", ["a", "b", "c"]),
            (#"foo="bar, baz=qux""#, ["foo"]), ("foo=bar; b,az=qux", ["foo"]), ("a=1, b=2", ["a", "b"]),
            ("a=1,b=2", ["a"]), (#"a="x, y=1", b=2"#, ["a", "b"]), ("a=1; Comment=one, two", ["a"]),
        ] as [(String, [String])])
    func aJoinedValueIsSplitOnlyWhereAJoinCanBeToldApart(joined: String, names: [String]) {
        let fields = CookieRules.splitJoined(joined)
        #expect(fields.compactMap { CookieRules.parse($0)?.name } == names, "\(fields)")
    }

    @Test func oneFieldIsOneCookieWhateverCommasItHolds() {
        set("foo=bar; b,az=qux", #"quoted="bar, baz=qux""#, "a=1, b=2")
        #expect(store.allCookies.map(\.name).sorted() == ["a", "foo", "quoted"])
        #expect(store.allCookies.first { $0.name == "quoted" }?.value == #""bar, baz=qux""#)
        #expect(store.allCookies.first { $0.name == "a" }?.value == "1, b=2")
    }

    @Test func aResponseThatKeepsFieldsApartGivesThemOneByOne() {
        let raw = APIRawResponse(
            statusCode: 200,
            headerFields: [
                ("Set-Cookie", "foo=bar; b,az=qux"), ("Content-Type", "text/plain"),
                ("set-cookie", #"quoted="bar, baz=qux""#),
            ])
        #expect(raw.setCookieFields == ["foo=bar; b,az=qux", #"quoted="bar, baz=qux""#])
        #expect(raw.values(forHeader: "SET-COOKIE") == ["foo=bar; b,az=qux", #"quoted="bar, baz=qux""#])
        let joined = APIRawResponse(statusCode: 200, headers: ["Set-Cookie": "a=1, b=2"])
        #expect(joined.values(forHeader: "set-cookie") == ["a=1, b=2"], "a dictionary has one joined value")
        #expect(joined.setCookieFields == ["a=1", "b=2"])
    }

    /// RFC 6265bis §5.7 step 16.
    @Test func aCookieFromHTTPLeavesASecureCookieAlone() throws {
        set("sid=secure; Secure; Path=/", from: "https://api.example.com/")
        set("sid=forged; Path=/", from: "http://api.example.com/")
        set("sid=deeper; Path=/v1", from: "http://api.example.com/")
        set("sid=wider; Domain=example.com; Path=/", from: "http://api.example.com/")
        #expect(store.allCookies.map(\.value) == ["secure"], "not set, not shadowed")
        set("other=1; Path=/", from: "http://api.example.com/")
        set("other=2; Path=/", from: "http://api.example.com/")
        #expect(store.allCookies.first { $0.name == "other" }?.value == "2", "a cookie that is not Secure is replaced")
        set("sid=renewed; Secure; Path=/", from: "https://api.example.com/")
        #expect(store.allCookies.filter { $0.name == "sid" }.map(\.value) == ["renewed"], "https may replace it")
    }

    /// RFC 6265bis §5.7 steps 20–21: the prefixes are matched without regard to case.
    @Test(arguments: [
        ("__SECURE-id=1", "http://api.example.com/"), ("__secure-id=1", "https://api.example.com/"),
        ("__host-id=1; Secure; Path=/; Domain=api.example.com", "https://api.example.com/"),
        ("__HOST-id=1; Secure; Path=/v1", "https://api.example.com/"),
        ("__Host-id=1; Path=/", "https://api.example.com/"),
    ])
    func prefixedCookiesThatBreakTheirRulesAreRefusedWhateverTheirCase(field: String, origin: String) {
        set(field, from: origin)
        #expect(store.allCookies.isEmpty)
    }

    @Test func prefixedCookiesThatKeepTheirRulesAreTaken() {
        set("__host-id=1; Secure; Path=/", "__SECURE-sid=2; Secure", from: "https://api.example.com/")
        #expect(store.allCookies.map(\.name).sorted() == ["__SECURE-sid", "__host-id"])
    }

    /// RFC 6265 §5.3 (last-access time) and §5.4 step 3.
    @Test func theLeastRecentlyUsedCookieIsEvictedFirst() {
        let small = APICookieStore(maxCookiesPerDomain: 3)
        for index in 0..<3 {
            small.store(
                setCookie: ["c\(index)=1; Path=/c\(index)"], from: url("https://a.test/"),
                at: Self.now.addingTimeInterval(Double(index)))
        }
        #expect(small.cookies(for: url("https://a.test/c0"), at: Self.now.addingTimeInterval(10)).count == 1)
        small.store(setCookie: ["c3=1; Path=/"], from: url("https://a.test/"), at: Self.now.addingTimeInterval(20))
        #expect(
            small.allCookies.map(\.name).sorted() == ["c0", "c2", "c3"],
            "c1 was used least recently; c0, the oldest, was sent at 10 s")
    }

    @Test func theLimitsDropTheOldestCookies() {
        let small = APICookieStore(maxCookiesPerDomain: 3, maxCookies: 5)
        for index in 0..<4 {
            small.store(
                setCookie: ["c\(index)=1; Path=/"], from: url("https://a.test/"),
                at: Self.now.addingTimeInterval(Double(index)))
        }
        #expect(small.allCookies.map(\.name).sorted() == ["c1", "c2", "c3"])
        for index in 0..<4 {
            small.store(
                setCookie: ["d\(index)=1; Path=/"], from: url("https://b.test/"),
                at: Self.now.addingTimeInterval(10 + Double(index)))
        }
        #expect(small.allCookies.count == 5)
        #expect(!small.allCookies.contains { $0.name == "c1" })
    }

    @Test func persistentCookiesSurviveARestartInAnOwnerOnlyFileAndSessionCookiesDoNot() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let file = directory.url.appendingPathComponent("cookies.json")
        let first = APICookieStore(fileURL: file)
        first.store(
            setCookie: ["keep=1; Max-Age=3600; Path=/", "session=2; Path=/"], from: url("https://a.test/"), at: Self.now
        )
        #expect(first.lastWriteError == nil)
        var info = stat()
        #expect(stat(file.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let second = APICookieStore(fileURL: file)
        #expect(second.allCookies.map(\.name) == ["keep"])
        second.removeAll()
        #expect(APICookieStore(fileURL: file).allCookies.isEmpty)
    }

    @Test func randomSetCookieValuesNeverCrash() {
        var generator = SplitMix64(state: 6265)
        let alphabet = Array("a=; ,.-/:\"\\éxpiresMaxAgeDomainPath0123456789GMTSecureHttpOnly\t\u{0}".unicodeScalars)
        for _ in 0..<2_000 {
            let length = Int(generator.next() % 60)
            var text = String.UnicodeScalarView()
            for _ in 0..<length { text.append(alphabet[Int(generator.next() % UInt64(alphabet.count))]) }
            store.store(setCookie: [String(text)], from: url("https://a.b.test/x/y"), at: Self.now)
        }
        #expect(store.allCookies.allSatisfy { !$0.name.isEmpty && $0.domain.hasSuffix("b.test") })
    }
}

/// The engine with a cookie store: it sends and captures cookies, on its own clock.
@Suite("Cookies through the engine", .timeLimit(.minutes(1)))
struct EngineCookieTests {
    let clock = TestClock()
    let transport: MockTransport
    let cookies = APICookieStore()
    let manager: TestManager

    init() {
        transport = MockTransport(clock: clock)
        manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline, cookies: cookies))
    }

    private var sentCookies: [String?] { transport.requests.map { $0.value(forHTTPHeaderField: "Cookie") } }

    @Test func aSetCookieIsSentBackToTheSameOriginOnly() {
        transport.stub(nil, "/login", .json("{}", headers: ["Set-Cookie": "sid=abc; Path=/; HttpOnly"]))
        transport.stub(nil, "/me", .json("{}"))
        manager.send(TestRequest("/login", method: .post))
        manager.send(TestRequest("/me"))
        var elsewhere = TestRequest("/me")
        elsewhere.url = URL(string: "https://other.test")!
        manager.send(elsewhere)
        #expect(sentCookies == [nil, "sid=abc", nil])
    }

    @Test func theRequestsOwnCookieHeaderWins() {
        transport.stub(nil, "/login", .json("{}", headers: ["Set-Cookie": "sid=abc; Path=/"]))
        transport.stub(nil, "/me", .json("{}"))
        manager.send(TestRequest("/login"))
        var own = TestRequest("/me")
        own.headers = ["Cookie": "mine=1"]
        manager.send(own)
        #expect(sentCookies.last == "mine=1")
    }

    @Test func expiryIsJudgedOnTheEnginesClock() {
        transport.stub(nil, "/login", .json("{}", headers: ["Set-Cookie": "sid=abc; Path=/; Max-Age=60"]))
        transport.stub(nil, "/me", .json("{}"))
        manager.send(TestRequest("/login"))
        clock.advance(by: 59)
        manager.send(TestRequest("/me"))
        clock.advance(by: 1)
        manager.send(TestRequest("/me"))
        #expect(sentCookies == [nil, "sid=abc", nil])
    }

    @Test func aRefusedResponseStillSetsItsCookies() {
        transport.stub(nil, "/login", .json("{}", status: 401, headers: ["Set-Cookie": "csrf=t0k; Path=/"]))
        transport.stub(nil, "/me", .json("{}"))
        manager.send(TestRequest("/login"))
        manager.send(TestRequest("/me"))
        #expect(sentCookies.last == "csrf=t0k")
    }

    @Test func aRequestCarryingCookiesCountsAsAuthenticatedForTheCache() {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil, clock: clock)
        let cached = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline, cache: cache,
                cookies: cookies))
        transport.stub(nil, "/login", .json("{}", headers: ["Set-Cookie": "sid=abc; Path=/"]))
        transport.stub(nil, "/feed", .json(#"{"value":"mine"}"#))
        var feed = TestRequest("/feed")
        feed.cacheOption = .both
        cached.send(feed)
        #expect(cache.memoryCount == 1)  // no cookie yet: stored
        cached.send(TestRequest("/login"))
        cache.removeAll()
        cached.send(feed)
        #expect(cache.memoryCount == 0)  // carried a cookie: not stored without cachesAuthenticatedResponses
    }

    @Test func theCookieHeaderIsRedactedInEvents() {
        transport.stub(nil, "/login", .json("{}", headers: ["Set-Cookie": "sid=s3cr3t; Path=/"]))
        transport.stub(nil, "/me", .json("{}"))
        let events = Locked<[APIEvent]>([])
        manager.engine.eventMonitor = { event in events.withLock { $0.append(event) } }
        manager.send(TestRequest("/login"))
        manager.send(TestRequest("/me"))
        let curl = events.withLock { $0 }.last?.cURLDescription() ?? ""
        #expect(curl.contains("'Cookie: ***'") && !curl.contains("s3cr3t"))
    }

    /// The redirect rule every transport applies per hop: the redirect's `Set-Cookie` is stored, and
    /// the next hop carries its own URL's cookies.
    @Test func aRedirectHopStoresItsCookiesAndTheNextHopCarriesThem() {
        let options = APITransportOptions(cookies: cookies, cookieDate: clock.date)
        var next = URLRequest(url: URL(string: "https://api.test/home")!)
        next.setValue("stale=1", forHTTPHeaderField: "Cookie")
        let redirect = APIRawResponse(
            statusCode: 302, headers: ["Set-Cookie": "sid=abc; Path=/", "Location": "/home"],
            url: URL(string: "https://api.test/login"))
        let followed = options.redirectRequest(
            next, from: URL(string: "https://api.test/login"), redirectResponse: redirect)
        #expect(followed.value(forHTTPHeaderField: "Cookie") == "sid=abc")
        var away = URLRequest(url: URL(string: "https://elsewhere.test/")!)
        away.setValue("sid=abc", forHTTPHeaderField: "Cookie")
        let crossing = options.redirectRequest(away, from: URL(string: "https://api.test/login"), redirectResponse: nil)
        #expect(crossing.value(forHTTPHeaderField: "Cookie") == nil)
    }
}
