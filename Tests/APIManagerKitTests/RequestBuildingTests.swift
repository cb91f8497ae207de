import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request whose every building input is a stored property.
struct BuildRequest: APIRequest {
    var url = URL(string: "https://api.test/v1")!
    var path = ""
    var method: HTTPMethod = .get
    var headers: [String: String] = [:]
    var parameters: APIParameters = .none
    var bodyEncoding: APIParameters.BodyEncoding = .json
    var queryEncoding: APIParameters.QueryEncoding = .default
    var body: APIRequestBody?
    var authorization: APIAuthentication.Authorization?
    var configureError: (any Error & Sendable)?

    func configure(_ urlRequest: inout URLRequest) throws {
        if let configureError { throw configureError }
        urlRequest.setValue("configured", forHTTPHeaderField: "X-Configured")
    }
}

func bodyJSON(_ request: URLRequest) throws -> [String: APIValue] {
    try JSONDecoder().decode([String: APIValue].self, from: request.httpBody ?? Data())
}

func invalidReason(_ build: () throws(APIError) -> URLRequest) -> String? {
    do {
        _ = try build()
        return nil
    } catch {
        if case .invalidRequest(let reason, _) = error { return reason }
        return "not invalidRequest: \(error)"
    }
}

@Suite("Request building")
struct RequestBuildingTests {
    @Test func pathTemplatesAreFilledAndEachValueIsOneEncodedSegment() throws {
        let request = BuildRequest(path: "users/{id}/files/{name}", parameters: ["id": 42, "name": "a b/c?.txt"])
        #expect(try request.resolvedURL().absoluteString == "https://api.test/v1/users/42/files/a%20b%2Fc%3F.txt")
    }

    @Test func aTemplateValueIsNotAlsoSentAsAQueryParameter() throws {
        let request = BuildRequest(path: "items/{id}", parameters: ["id": 7, "expand": true])
        #expect(try request.resolvedURL().absoluteString == "https://api.test/v1/items/7?expand=true")
    }

    @Test func aMissingTemplateValueIsAnErrorNamingTheKey() {
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(path: "users/{userID}", parameters: ["id": 1]).makeURLRequest()
        }
        #expect(reason?.contains("{userID}") == true)
    }

    @Test func aPathValueWithoutATemplateIsAnError() {
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(path: "users", parameters: .path(["id": 1])).makeURLRequest()
        }
        #expect(reason?.contains("\"id\" matches no") == true)
    }

    @Test func anUnclosedBraceAndANonScalarValueAreErrors() {
        let unclosed = invalidReason { () throws(APIError) in
            try BuildRequest(path: "users/{id", parameters: ["id": 1]).makeURLRequest()
        }
        #expect(unclosed?.contains("without a closing") == true)
        let array = invalidReason { () throws(APIError) in
            try BuildRequest(path: "users/{id}", parameters: ["id": [1, 2]]).makeURLRequest()
        }
        #expect(array?.contains("{id}") == true)
    }

    @Test func getParametersGoInTheQuerySortedWithNestedObjectsAndArrays() throws {
        let request = BuildRequest(
            parameters: ["q": "swift & co", "page": 2, "exact": false, "tags": ["a", "b"], "filter": ["min": 1.5]])
        let url = try request.resolvedURL().absoluteString
        #expect(
            url
                == "https://api.test/v1?exact=false&filter%5Bmin%5D=1.5&page=2&q=swift%20%26%20co&tags%5B%5D=a&tags%5B%5D=b"
        )
        #expect(try request.makeURLRequest().httpBody == nil)
    }

    @Test func queryParametersAreAddedToTheURLsOwnQuery() throws {
        let request = BuildRequest(url: URL(string: "https://api.test/v1?key=1")!, parameters: ["page": 2])
        #expect(try request.resolvedURL().absoluteString == "https://api.test/v1?key=1&page=2")
    }

    @Test(arguments: [HTTPMethod.get, .head, .delete])
    func getHeadAndDeletePutParametersInTheQuery(method: HTTPMethod) throws {
        let request = try BuildRequest(method: method, parameters: ["a": 1]).makeURLRequest()
        #expect(request.url?.query == "a=1")
        #expect(request.httpBody == nil)
    }

    @Test(arguments: [HTTPMethod.post, .put, .patch])
    func otherMethodsPutParametersInAJSONBody(method: HTTPMethod) throws {
        let request = try BuildRequest(method: method, parameters: ["a": 1, "b": ["c": nil]]).makeURLRequest()
        #expect(request.url?.query == nil)
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(String(data: request.httpBody ?? Data(), encoding: .utf8) == #"{"a":1,"b":{"c":null}}"#)
    }

    @Test func arraysBoolsAndNullsFollowTheQueryEncoding() throws {
        let parameters: APIParameters = ["tags": ["a", "b"], "on": true, "gone": nil]
        let repeated = BuildRequest(
            parameters: parameters, queryEncoding: APIParameters.QueryEncoding(arrays: .repeatedKey, bools: .numeric))
        #expect(try repeated.resolvedURL().query == "on=1&tags=a&tags=b")
        let indexed = BuildRequest(
            parameters: parameters, queryEncoding: APIParameters.QueryEncoding(arrays: .indexed, nulls: .emptyValue))
        #expect(try indexed.resolvedURL().query == "gone=&on=true&tags%5B0%5D=a&tags%5B1%5D=b")
        let keyOnly = BuildRequest(parameters: parameters, queryEncoding: APIParameters.QueryEncoding(nulls: .keyOnly))
        #expect(try keyOnly.resolvedURL().query?.hasPrefix("gone&") == true)
    }

    @Test func aFormBodyIsURLEncodedWithItsContentType() throws {
        let request = try BuildRequest(
            method: .post, parameters: ["name": "Ada Lovelace", "langs": ["en", "fr"]], bodyEncoding: .form
        ).makeURLRequest()
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded")
        #expect(
            String(data: request.httpBody ?? Data(), encoding: .utf8)
                == "langs%5B%5D=en&langs%5B%5D=fr&name=Ada%20Lovelace")
    }

    @Test func composableParametersPlaceEachPartWhateverTheMethod() throws {
        let request = try BuildRequest(
            path: "carts/{cart}/items", method: .post,
            parameters: [.path(["cart": "c-1"]), .query(["notify": true]), .json(["sku": "A1"]), .json(["qty": 3])]
        ).makeURLRequest()
        #expect(request.url?.absoluteString == "https://api.test/v1/carts/c-1/items?notify=true")
        #expect(try bodyJSON(request) == ["qty": 3, "sku": "A1"])
    }

    @Test func aJSONBodyOnAGetAndParametersByMethodMerge() throws {
        let request = try BuildRequest(parameters: ["page": 1] + .json(["filter": "x"])).makeURLRequest()
        #expect(request.url?.query == "page=1")
        #expect(try bodyJSON(request) == ["filter": "x"])
        let post = try BuildRequest(method: .post, parameters: ["a": 1] + .json(["b": 2])).makeURLRequest()
        #expect(try bodyJSON(post) == ["a": 1, "b": 2])
    }

    @Test func twoBodiesThatCannotMergeAreAnError() {
        let formAndJSON = invalidReason { () throws(APIError) in
            try BuildRequest(method: .post, parameters: .json(["a": 1]) + .form(["b": 2])).makeURLRequest()
        }
        #expect(formAndJSON?.contains("two bodies") == true)
        let rawAndParameters = invalidReason { () throws(APIError) in
            try BuildRequest(
                method: .post, parameters: ["a": 1],
                body: APIRequestBody(data: Data("x".utf8), contentType: "text/plain")
            ).makeURLRequest()
        }
        #expect(rawAndParameters?.contains("both a raw body") == true)
    }

    @Test func aRawBodyKeepsItsBytesAndContentType() throws {
        let bytes = Data([0, 1, 2, 255])
        let request = try BuildRequest(method: .put, parameters: .raw(bytes, contentType: "application/octet-stream"))
            .makeURLRequest()
        #expect(request.httpBody == bytes)
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/octet-stream")
    }

    @Test func aCustomBodyEncodingIsUsedForParametersByMethod() throws {
        let lines = APIParameters.BodyEncoding.custom(contentType: "text/plain") { value in
            Data((value.objectValueForTests ?? [:]).keys.sorted().joined(separator: "\n").utf8)
        }
        let request = try BuildRequest(method: .post, parameters: ["b": 1, "a": 2], bodyEncoding: lines)
            .makeURLRequest()
        #expect(String(data: request.httpBody ?? Data(), encoding: .utf8) == "a\nb")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "text/plain")
    }

    @Test func anHeaderContentTypeWinsOverTheEncodings() throws {
        let request = try BuildRequest(
            method: .post, headers: ["Content-Type": "application/vnd.api+json"], parameters: ["a": 1]
        ).makeURLRequest()
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/vnd.api+json")
    }

    @Test func authorizationIsSentAsItsHeader() throws {
        let bearer = try BuildRequest(authorization: .bearer("t0k")).makeURLRequest()
        #expect(bearer.value(forHTTPHeaderField: "Authorization") == "Bearer t0k")
        let basic = try BuildRequest(authorization: .basic(username: "ada", password: "pässword")).makeURLRequest()
        #expect(basic.value(forHTTPHeaderField: "Authorization") == "Basic YWRhOnDDpHNzd29yZA==")
        let custom = try BuildRequest(authorization: .custom(header: "X-API-Key", value: "k")).makeURLRequest()
        #expect(custom.value(forHTTPHeaderField: "X-API-Key") == "k")
    }

    @Test func configureRunsLastAndItsErrorIsCarried() throws {
        #expect(try BuildRequest().makeURLRequest().value(forHTTPHeaderField: "X-Configured") == "configured")
        struct Refused: Error {}
        do {
            _ = try BuildRequest(configureError: Refused()).makeURLRequest()
            Issue.record("configure's error was swallowed")
        } catch {
            guard case .invalidRequest(let reason, let underlying) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(reason.contains("configure"))
            #expect(underlying is Refused)
        }
    }

    @Test func anEncodableRequestIsItsOwnParameters() throws {
        struct Search: APIRequest, Encodable {
            var url: URL { URL(string: "https://api.test/search")! }
            var method: HTTPMethod { .post }
            let query: String
            let limit: Int
            let filter: Filter
            struct Filter: Encodable {
                let tags: [String]
                let since: Int?
            }
        }
        let request = Search(query: "swift", limit: 5, filter: .init(tags: ["a"], since: nil))
        #expect(
            try bodyJSON(request.makeURLRequest()) == ["query": "swift", "limit": 5, "filter": ["tags": ["a"]]])
        struct Lookup: APIRequest, Encodable {
            var url: URL { URL(string: "https://api.test/lookup")! }
            let ids: [Int]
            let options: [String: Bool]
        }
        #expect(
            try Lookup(ids: [1, 2], options: ["deep": true]).resolvedURL().query
                == "ids%5B%5D=1&ids%5B%5D=2&options%5Bdeep%5D=true")
    }

    @Test func anEncodableJSONBodyUsesItsEncoder() throws {
        struct Payload: Encodable, Sendable { let createdAt: Date }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let request = try BuildRequest(
            method: .post,
            parameters: .json(encoding: Payload(createdAt: Date(timeIntervalSince1970: 10)), encoder: encoder)
        ).makeURLRequest()
        #expect(String(data: request.httpBody ?? Data(), encoding: .utf8) == #"{"created_at":10}"#)
    }

    @Test func aParameterValueThatFailsToEncodeIsAClearError() {
        struct Bad: Encodable, Sendable {
            func encode(to encoder: any Encoder) throws {
                throw EncodingError.invalidValue(0, .init(codingPath: [], debugDescription: "no"))
            }
        }
        let reason = invalidReason { () throws(APIError) in
            try BuildRequest(parameters: .encoding(Bad())).makeURLRequest()
        }
        #expect(reason?.contains("Bad") == true)
        let scalar = invalidReason { () throws(APIError) in
            try BuildRequest(parameters: .encoding(3)).makeURLRequest()
        }
        #expect(scalar?.contains("object") == true)
    }

    @Test func theCURLDescriptionRedactsSecretsUnlessAsked() throws {
        let request = BuildRequest(
            method: .post, headers: ["X-Session-Token": "s3", "Accept": "application/json"],
            parameters: ["it's": 1], authorization: .custom(header: "X-Key", value: "k3y"))
        let redacted = try request.cURLDescription()
        #expect(redacted.contains("-X POST"))
        #expect(redacted.contains("'X-Key: ***'"))
        #expect(redacted.contains("'X-Session-Token: ***'"))
        #expect(redacted.contains("'Accept: application/json'"))
        #expect(redacted.contains(#"--data-raw '{"it'\''s":1}'"#))
        #expect(!redacted.contains("k3y") && !redacted.contains("s3"))
        let revealed = try request.cURLDescription(revealingSecrets: true)
        #expect(revealed.contains("'X-Key: k3y'"))
        let withPassword = URLRequest(url: URL(string: "https://ada:secret@api.test/")!).cURLDescription()
        #expect(
            withPassword.contains("***:***@api.test") && !withPassword.contains("secret")
                && !withPassword.contains("ada"))
    }

    @Test func aFileBodyIsReadByCurlFromItsFileAndAStreamFromStandardInput() throws {
        let directory = ScratchDirectory()
        let file = directory.url.appendingPathComponent("it's a photo.jpg")
        try Data([0xFF, 0xD8, 0xFF]).write(to: file)
        let upload = try BuildRequest(method: .put, body: .file(file)).cURLDescription()
        #expect(upload.contains("-X PUT"))
        #expect(upload.contains("--data-binary @'" + file.path.replacingOccurrences(of: "'", with: #"'\''"#) + "'"))
        let streamed = try BuildRequest(body: .stream(length: 3) { InputStream(data: Data([1, 2, 3])) })
            .cURLDescription()
        #expect(streamed.contains("-X GET"), "curl would send a body with GET only when told")
        #expect(streamed.contains("--data-binary @-"))
        #expect(streamed.contains("'Content-Length: 3'"))
        #expect(!streamed.contains("--head"))
    }
}

extension APIValue {
    var objectValueForTests: [String: APIValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}
