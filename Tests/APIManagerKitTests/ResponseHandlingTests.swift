import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct ItemNames: APIResponse, Decodable, Equatable {
    static var keyPath: String? { "data.items" }
    let names: [String]
    init(from decoder: any Decoder) throws {
        var list = try decoder.unkeyedContainer()
        var names: [String] = []
        while !list.isAtEnd {
            names.append(
                try list.nestedContainer(keyedBy: AnyCodingKey.self).decode(String.self, forKey: AnyCodingKey("name")))
        }
        self.names = names
    }
}

struct FirstName: APIResponse, Decodable, Equatable {
    static var keyPath: String? { "items.1.name" }
    let value: String
    init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(String.self) }
}

struct Stamped: APIResponse, Decodable, Equatable {
    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
    let createdAt: Date
}

struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A manager over `Response`, on the harness's mock transport.
final class GenericManager<Response: APIResponse>: APIManager {
    typealias Request = TestRequest
    let engine: APIEngine
    let messageOverride: (@Sendable (APIRawResponse) -> String?)?
    init(engine: APIEngine, messageOverride: (@Sendable (APIRawResponse) -> String?)? = nil) {
        self.engine = engine
        self.messageOverride = messageOverride
    }
    func errorMessage(in response: APIRawResponse) -> String? {
        messageOverride.map { $0(response) } ?? APIRawResponse.ServerMessage.find(in: response)
    }
}

func outcome<Response: APIResponse>(
    _ type: Response.Type, _ reply: MockTransport.Reply,
    message: (@Sendable (APIRawResponse) -> String?)? = nil
) async -> Result<Response, APIError> {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(nil, "/r", reply)
    let manager = GenericManager<Response>(
        engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline),
        messageOverride: message)
    do {
        return .success(try await manager.response(for: TestRequest("/r")))
    } catch {
        return .failure(error)
    }
}

@Suite("Response handling", .timeLimit(.minutes(1)))
struct ResponseHandlingTests {
    @Test func aKeyPathSelectsTheValueToDecode() async throws {
        let body = #"{"data":{"items":[{"name":"a"},{"name":"b"}],"total":2}}"#
        #expect(try await outcome(ItemNames.self, .json(body)).get().names == ["a", "b"])
        let indexed = #"{"items":[{"name":"first"},{"name":"second"}]}"#
        #expect(try await outcome(FirstName.self, .json(indexed)).get().value == "second")
    }

    @Test func aMissingKeyPathComponentIsADecodingErrorWithItsPathAndBody() async {
        let result = await outcome(ItemNames.self, .json(#"{"data":{"things":[]}}"#))
        guard case .failure(.decoding(let error, let response)) = result else {
            Issue.record("expected a decoding error, got \(result)")
            return
        }
        #expect(String(data: response.body, encoding: .utf8) == #"{"data":{"things":[]}}"#)
        guard case .keyNotFound(let key, let context) = error as? DecodingError else {
            Issue.record("expected keyNotFound, got \(error)")
            return
        }
        #expect(key.stringValue == "items")
        #expect(context.codingPath.map(\.stringValue) == ["data"])
        #expect(
            APIError.decoding(underlying: error, response: response).description.contains("at data: the key \"items\""))
    }

    @Test func anIndexPastTheEndIsADecodingError() async {
        let result = await outcome(FirstName.self, .json(#"{"items":[{"name":"only"}]}"#))
        guard case .failure(.decoding(let error, _)) = result, case .valueNotFound = error as? DecodingError else {
            Issue.record("expected valueNotFound, got \(result)")
            return
        }
    }

    @Test func aTypeMismatchDeepInsideNamesTheFullCodingPath() async {
        let result = await outcome(ItemNames.self, .json(#"{"data":{"items":[{"name":"a"},{"name":5}]}}"#))
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.description.contains("data.items[1].name"))
    }

    @Test func theResponseTypesDecoderIsUsed() async throws {
        #expect(
            try await outcome(Stamped.self, .json(#"{"created_at":86400}"#)).get().createdAt
                == Date(timeIntervalSince1970: 86400))
    }

    @Test func anEmptyBodyIsAnEmptyResponseAndAnAllOptionalDecodable() async throws {
        #expect(try await outcome(APIEmptyResponse.self, .status(204)).get() == APIEmptyResponse())
        #expect(try await outcome(Echo.self, .status(204)).get() == Echo(value: nil))
    }

    @Test(arguments: [
        (#"{"message":"Item not found"}"#, "Item not found"),
        (#"{"msg":"bad msg"}"#, "bad msg"),
        (#"{"error":"invalid_grant","error_description":"expired"}"#, "invalid_grant"),
        (#"{"err":"short"}"#, "short"),
        (#"{"error_description":"described"}"#, "described"),
        (#"{"errors":[{"message":"first of many"},{"message":"second"}]}"#, "first of many"),
        (#"{"error":{"message":"nested"}}"#, "nested"),
    ])
    func theServerMessageIsFoundUnderTheUsualKeys(body: String, message: String) async {
        let result = await outcome(Echo.self, .json(body, status: 422))
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.serverMessage == message)
        #expect(error.statusCode == 422)
        #expect(
            error.description
                == "The server answered 422 (unprocessable entity): \(message)")
    }

    @Test func bodiesWithoutAMessageGiveNone() async {
        for body in ["", "<html>oops</html>", #"{"detail":1}"#, "[1]"] {
            let result = await outcome(Echo.self, .status(500, body: Data(body.utf8)))
            guard case .failure(.unacceptableStatus(let response, let message)) = result else {
                Issue.record("expected unacceptableStatus for \(body)")
                continue
            }
            #expect(message == nil)
            #expect(response.body == Data(body.utf8))
        }
    }

    @Test func aManagerCanReplaceTheMessageLookup() async {
        let result = await outcome(
            Echo.self, .json(#"{"problem":{"title":"Out of stock"}}"#, status: 409),
            message: { response in
                let object = try? JSONDecoder().decode([String: [String: String]].self, from: response.body)
                return object?["problem"]?["title"]
            })
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.serverMessage == "Out of stock")
    }

    @Test func transportErrorsKeepTheURLErrorAndReadWell() async {
        let result = await outcome(Echo.self, .failure(.cannotConnectToHost))
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect((error.underlyingError as? URLError)?.code == .cannotConnectToHost)
        #expect(error.localizedDescription.hasPrefix("The request failed to reach the server"))
    }

    @Test func decodableResponsesAskForJSON() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/r", .json("{}"))
        let manager = GenericManager<Echo>(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        _ = try await manager.response(for: TestRequest("/r"))
        var custom = TestRequest("/r")
        custom.headers = ["Accept": "application/vnd.test+json"]
        _ = try await manager.response(for: custom)
        let raw = GenericManager<APIRawResponse>(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        _ = try await raw.response(for: TestRequest("/r"))
        #expect(
            transport.requests.map { $0.value(forHTTPHeaderField: "Accept") }
                == ["application/json", "application/vnd.test+json", nil])
    }
}
