import Foundation

@testable import APIManagerKit

/// `Set-Cookie` values from a server: never a crash, never a cookie for a domain the host may not
/// set, never an empty name, and every stored cookie is sent back to the host that set it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSetCookie(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let store = APICookieStore()
    let origin = URL(string: "https://api.shop.example.com/v1/items")!
    store.store(setCookie: [text], from: origin, at: now)
    // A value URLSession joined from several fields: split only where a join can be told apart.
    let fields = CookieRules.splitJoined(text)
    for field in fields { precondition(text.contains(field), "\(text.debugDescription) split into \(field)") }
    store.store(setCookie: fields, from: origin, at: now)
    _ = CookieRules.cookieDate(text)
    for cookie in store.allCookies {
        precondition(!cookie.name.isEmpty, "\(text.debugDescription) stored a nameless cookie")
        precondition(
            CookieRules.domainMatches(host: "api.shop.example.com", domain: cookie.domain)
                && !CookieRules.isPublicSuffix(cookie.domain),
            "\(text.debugDescription) stored a cookie for \(cookie.domain)")
        if cookie.expires.map({ $0 > now }) ?? true, cookie.path == "/" || cookie.path.hasPrefix("/v1") {
            _ = store.cookieHeader(for: origin, at: now)
        }
    }
    return 0
}
