import Foundation

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Header fields from a caller, and the request value a transport gets: the name is the input up to
/// its first `:`, the value the rest. Never a crash; the name and value checks agree with RFC 9110's
/// grammar written out plainly (token = 1*tchar; no CR, LF or NUL in a value); a request built with
/// the field fails exactly when the checks refuse it; a request value finds the field whatever its
/// case and keeps it through `urlRequest`; the redirect rule drops it on leaving the origin exactly
/// when it is a credential.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHeaderFields(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
    let name = String(parts[0])
    let value = parts.count > 1 ? String(parts[1]) : ""
    let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    let nameIsToken = !name.utf8.isEmpty && name.utf8.allSatisfy(tchar.contains)
    let valueIsClean = !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    precondition(HTTPFieldValidation.isValidName(name) == nameIsToken, "name \(name.debugDescription)")
    precondition(HTTPFieldValidation.isValidValue(value) == valueIsClean, "value \(value.debugDescription)")

    let built = try? FuzzRequest(headers: [name: value]).makeURLRequest()
    precondition((built != nil) == (nameIsToken && valueIsClean), "\(text.debugDescription) built: \(built != nil)")
    guard nameIsToken, valueIsClean else { return 0 }

    var request = APIHTTPRequest(url: URL(string: "https://api.example.com/v1")!)
    request.setValue(value, forHeaderField: name)
    precondition(request.value(forHeaderField: name.uppercased()) == value, "\(name.debugDescription) not found")
    let other = APIHTTPRequest(
        method: .post, url: request.url, headerFields: request.headerFields + [.init(name: "X-Other", value: "1")])
    precondition(other.value(forHeaderField: name.lowercased()) == value)
    // A value that Foundation trims (leading or trailing space) is compared trimmed.
    let sent = request.urlRequest.value(forHTTPHeaderField: name)
    precondition(
        sent?.trimmingCharacters(in: .whitespaces) == value.trimmingCharacters(in: .whitespaces),
        "\(name.debugDescription) became \(sent.debugDescription)")
    let hop = APITransportOptions().redirectRequest(
        APIHTTPRequest(url: URL(string: "https://cdn.example.net/x")!, headerFields: request.headerFields),
        from: request.url)
    // The hop is a GET without a body: the fields that described a body go too (Fetch).
    let describesBody = ["content-type", "content-length", "content-encoding", "content-language", "content-location"]
        .contains(name.lowercased())
    precondition(
        (hop.value(forHeaderField: name) == nil) == (APISecrets.isSecret(name, additionalNames: []) || describesBody),
        "\(name.debugDescription) after a cross-origin redirect")
    return 0
}

private struct FuzzRequest: APIRequest {
    let url = URL(string: "https://api.example.com")!
    var headers: [String: String]
}
