import APIManagerKit
import Foundation

struct TemplateRequest: APIRequest {
    var url: URL
    var path: String
    var parameters: APIParameters
}

private let base = URL(string: "https://api.test/v1")

/// A path template and its values from bytes (template, then `name=value` lines): filling never
/// crashes, and a filled URL stays under the base path: no value climbs out of its segment.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPathTemplate(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard let base else { return 0 }
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    let template = lines.first.map(String.init) ?? ""
    var values: [String: APIValue] = [:]
    for line in lines.dropFirst() {
        let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        values[String(parts[0])] = .string(parts.count > 1 ? String(parts[1]) : "")
    }
    let request = TemplateRequest(url: base, path: template, parameters: .path(values))
    guard let url = try? request.resolvedURL() else { return 0 }
    // The path as sent: `url.path` would decode a value's `%2F` into a separator.
    let path = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? ""
    let segments = path.split(separator: "/", omittingEmptySubsequences: false)
    // The template's own literal text may hold dot segments; values may not.
    if !template.contains(".") {
        precondition(!segments.contains("..") && !segments.contains("."), "dot segment in \(url)")
        precondition(path.hasPrefix("/v1"), "left the base path: \(url)")
    }
    _ = try? request.makeURLRequest()
    return 0
}
