import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

/// The names of before 1.0 still compile for one release (deprecated forwards, `Core/Renamed.swift`)
/// and are the same types as the new ones.
@Suite("Names of before 1.0")
struct RenamedTests {
    @available(*, deprecated, message: "uses the names of before 1.0 on purpose")
    @Test func theOldNamesAreTheNewTypes() throws {
        let key: APICacheKey = APIResponseCache.Key(
            method: "GET", url: "https://a.example/", bodyDigest: "", partition: "")
        let entry = APICacheEntry(
            key: key, response: APIRawResponse(statusCode: 200), storedAt: Date(timeIntervalSince1970: 0))
        #expect(entry.key == key)
        let option: APICacheOption = .cacheOnly
        #expect(option == APIResponseCache.Option.cacheOnly)
        let hasher: APICacheHasher = .sha256
        _ = hasher
        let event: APICacheEvent? = nil
        #expect(event == nil)
        let credential = APICredential(accessToken: "a", refreshToken: "r")
        #expect(credential.refreshToken == "r")
        let store: any APICredentialStore = APIInMemoryCredentialStore()
        store.save(["Authorization": "Bearer a"], forOrigin: "https://a.example:443")
        #expect(store.headers(forOrigin: "https://a.example:443") == ["Authorization": "Bearer a"])
        #expect(APIFileCredentialStore.self == APIAuthentication.FileCredentialStore.self)
    }

    @available(*, deprecated, message: "uses the names of before 1.0 on purpose")
    @Test func theEngineSettingsKeepTheirOldNames() {
        let delivery: APIDelivery = .immediate
        guard case .inline = delivery else {
            Issue.record("`.immediate` is `.inline`")
            return
        }
        let execution: APIExecution = .inline
        let lanes = APIWorkLanes(label: "renamed", count: 1)
        #expect(lanes.queues.count == 1)
        let engine = APIEngine(
            transport: MockTransport(), delivery: delivery, execution: execution,
            defaultHeaders: APIDefaultHeaders.none)
        #expect(engine.defaultHeaders == APIEngine.DefaultHeaders.none)
        let mode: APIThrottleMode = .ignore
        #expect(mode == APIConcurrencyPolicy.ThrottleMode.ignore)
        let cookie: APICookie? = nil
        #expect(cookie == nil)
    }

    @available(*, deprecated, message: "uses the names of before 1.0 on purpose")
    @Test func theStreamingAndMappingNamesKeepTheirOldNames() {
        var parser = APIServerSentEventParser()
        #expect((try? parser.parse(Data("data: one\n\n".utf8)))?.map(\.data) == ["one"])
        let reconnection = APIReconnection(maxAttempts: 2)
        #expect(reconnection == APIServerSentEvent.Reconnection(maxAttempts: 2))
        #expect(APIMapContext.self == APIMap.Context.self)
        let reporter: APIProgressReporter = { _, _, _ in }
        reporter(.download, 1, nil)
    }

    @available(*, deprecated, message: "uses the names of before 1.0 on purpose")
    @Test func eventDeliveryIsDelivery() {
        let manager = TestManager(engine: APIEngine(transport: MockTransport(), delivery: .inline, execution: .inline))
        manager.eventDelivery = .queue(.global())
        guard case .queue = manager.delivery, case .queue = manager.engine.eventDelivery else {
            Issue.record("eventDelivery does not set delivery")
            return
        }
    }

    @available(*, deprecated, message: "uses the names of before 1.0 on purpose")
    @Test func thePolicyEncodingAndAuthenticationNamesKeepTheirOldNames() {
        let limit = APILineLimit(maxLength: 3)
        #expect(limit == APIConcurrencyPolicy.LineLimit(maxLength: 3))
        let sharing: APIRequestSharing = .always
        #expect(sharing == APIConcurrencyPolicy.Sharing.always)
        let group = APIConcurrencyGroup(limit: 2)
        #expect(group.limit == 2)
        #expect(APIQueryEncoding(arrays: .indexed) == APIParameters.QueryEncoding(arrays: .indexed))
        let body: APIBodyEncoding = .form(APIQueryEncoding.default)
        #expect(body.contentType == APIParameters.BodyEncoding.form.contentType)
        #expect(APIBodyWriter.self == APIRequestBody.Writer.self)
        let authorization: APIAuthorization = .bearer("a")
        #expect(authorization == APIAuthentication.Authorization.bearer("a"))
        #expect(APIPersistedHeaders(names: ["uid"]).names == APIAuthentication.PersistedHeaders(names: ["uid"]).names)
        #expect((any APIAuthenticator).self == (any APIAuthentication.Authenticator).self)
        let breaker = APICircuitBreaker(failureThreshold: 2)
        #expect(breaker == APIEngine.CircuitBreaker(failureThreshold: 2))
        #expect(APIRetryBudget(ratio: 0.5) == APIEngine.RetryBudget(ratio: 0.5))
    }

    @available(*, deprecated, message: "uses the names of before 1.0 on purpose")
    @Test func theResponseMappingAndRetryNamesKeepTheirOldNames() {
        let source: APIResponseSource = .revalidated
        #expect(source == APIResponseCache.Source.revalidated)
        #expect(APISourcedResponse<APIEmptyResponse>.self == APIResponseCache.SourcedResponse<APIEmptyResponse>.self)
        let format: APIDateFormat = .secondsSince1970
        #expect(format == APIMap.DateFormat.secondsSince1970)
        let random: any APIRandomSource = SystemRandomSource()
        #expect((0..<1).contains(random.nextUnitInterval()))
        let codes: any APIStatusCodesConvertible = 200..<300
        #expect(codes.statusCodes == APIStatusCodes(200..<300))
        let message = APIServerMessage.find(in: APIRawResponse(statusCode: 400, body: Data(#"{"message":"no"}"#.utf8)))
        #expect(message == "no")
        #expect(APIServerSentEventStream.self == APIServerSentEvent.Stream.self)
    }
}
