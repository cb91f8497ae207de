import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Integration: request encoding", .enabled(if: Server.isAvailable, Server.skipReason), .timeLimit(.minutes(2)))
struct EncodingIntegrationTests {
    let client = Client<Echoed>()

    @Test func queryParametersRoundTripThroughTheServersParser() async throws {
        let echoed = try await client.response(
            for: HTTPRequest(
                "get",
                parameters: [
                    "q": "swift & ünïcode = 100%", "page": 2, "exact": true, "tags": ["a b", "c"],
                    "filter": ["min": 1.5, "kind": "x/y"], "gone": nil,
                ]))
        #expect(echoed.args?["q"] == "swift & ünïcode = 100%")
        #expect(echoed.args?["page"] == "2")
        #expect(echoed.args?["exact"] == "true")
        #expect(echoed.args?["tags[]"] == ["a b", "c"])
        #expect(echoed.args?["filter[min]"] == "1.5")
        #expect(echoed.args?["filter[kind]"] == "x/y")
        #expect(echoed.args?["gone"] == nil)
    }

    @Test func aJSONBodyRoundTrips() async throws {
        let parameters: [String: APIValue] = [
            "name": "Ada", "age": 36, "ratio": 0.25, "admin": false, "tags": ["x", "y"], "address": ["city": "London"],
            "nothing": nil,
        ]
        let echoed = try await client.response(
            for: HTTPRequest("anything", method: .post, parameters: .init(parameters)))
        #expect(echoed.json == .object(parameters))
        #expect(echoed.header("Content-Type") == "application/json")
        #expect(echoed.header("Accept") == "application/json")
    }

    @Test func aFormBodyRoundTrips() async throws {
        var request = HTTPRequest(
            "anything", method: .put, parameters: ["name": "Ada Lovelace", "langs": ["en", "fr"], "note": "a&b=c"])
        request.bodyEncoding = .form
        let echoed = try await client.response(for: request)
        #expect(echoed.form?["name"] == "Ada Lovelace")
        #expect(echoed.form?["langs[]"] == ["en", "fr"])
        #expect(echoed.form?["note"] == "a&b=c")
        #expect(echoed.header("Content-Type") == "application/x-www-form-urlencoded")
    }

    @Test func queryAndBodyTogetherAndARawBody() async throws {
        let both = try await client.response(
            for: HTTPRequest("anything", method: .post, parameters: [.query(["page": 3]), .json(["a": 1])]))
        #expect(both.args?["page"] == "3")
        #expect(both.json == ["a": 1])
        var raw = HTTPRequest("anything", method: .post)
        raw.body = APIRequestBody(data: Data("plain text body".utf8), contentType: "text/plain")
        let echoed = try await client.response(for: raw)
        #expect(echoed.data == "plain text body")
        #expect(echoed.header("Content-Type") == "text/plain")
    }

    @Test func anEncodableRequestRoundTripsAsJSONAndAsAQuery() async throws {
        struct NewOrder: APIRequest, Encodable {
            var url: URL { Server.url }
            var path: String { "anything/orders" }
            var method: HTTPMethod { .post }
            let sku: String
            let quantity: Int
            let options: Options
            struct Options: Encodable {
                let giftWrap: Bool
                let notes: [String]
            }
        }
        final class Orders: APIManager {
            typealias Request = NewOrder
            typealias Response = Echoed
            let engine = APIEngine(transport: Shared.transport, delivery: .inline)
        }
        let echoed = try await Orders().response(
            for: NewOrder(sku: "A-1", quantity: 2, options: .init(giftWrap: true, notes: ["fragile"])))
        #expect(echoed.json == ["sku": "A-1", "quantity": 2, "options": ["giftWrap": true, "notes": ["fragile"]]])
    }

    @Test func pathTemplatesAreFilledAndEncoded() async throws {
        let echoed = try await client.response(
            for: HTTPRequest("anything/users/{id}/files/{name}", parameters: ["id": 42, "name": "a b?c"]))
        #expect(echoed.url?.hasSuffix("/anything/users/42/files/a%20b%3Fc") == true)
    }

    @Test func gzipBodiesAreDecompressed() async throws {
        struct Gzipped: APIResponse, Decodable { let gzipped: Bool }
        #expect(try await Client<Gzipped>().response(for: HTTPRequest("gzip")).gzipped)
    }
}
