// The names of before 1.0, kept for one release as deprecated forwards: code that uses them
// compiles, with a warning that names the new one. "Migrating to 1.0" in the README lists them.

/// The name of ``APIResponseCache/Key`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.Key")
public typealias APICacheKey = APIResponseCache.Key

/// The name of ``APIResponseCache/Entry`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.Entry")
public typealias APICacheEntry = APIResponseCache.Entry

/// The name of ``APIResponseCache/Event`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.Event")
public typealias APICacheEvent = APIResponseCache.Event

/// The name of ``APIResponseCache/KeyHasher`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.KeyHasher")
public typealias APICacheHasher = APIResponseCache.KeyHasher

/// The name of ``APIResponseCache/Option`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.Option")
public typealias APICacheOption = APIResponseCache.Option

/// The name of ``APIAuthentication/Credential`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.Credential")
public typealias APICredential = APIAuthentication.Credential

/// The name of ``APIAuthentication/CredentialStore`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.CredentialStore")
public typealias APICredentialStore = APIAuthentication.CredentialStore

/// The name of ``APIAuthentication/InMemoryCredentialStore`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.InMemoryCredentialStore")
public typealias APIInMemoryCredentialStore = APIAuthentication.InMemoryCredentialStore

/// The name of ``APIAuthentication/FileCredentialStore`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.FileCredentialStore")
public typealias APIFileCredentialStore = APIAuthentication.FileCredentialStore

/// The name of ``APIEngine/Delivery`` before 1.0.
@available(*, deprecated, renamed: "APIEngine.Delivery")
public typealias APIDelivery = APIEngine.Delivery

/// The name of ``APIEngine/Execution`` before 1.0.
@available(*, deprecated, renamed: "APIEngine.Execution")
public typealias APIExecution = APIEngine.Execution

/// The name of ``APIEngine/WorkLanes`` before 1.0.
@available(*, deprecated, renamed: "APIEngine.WorkLanes")
public typealias APIWorkLanes = APIEngine.WorkLanes

/// The name of ``APIEngine/DefaultHeaders`` before 1.0.
@available(*, deprecated, renamed: "APIEngine.DefaultHeaders")
public typealias APIDefaultHeaders = APIEngine.DefaultHeaders

/// The name of ``APIConcurrencyPolicy/ThrottleMode`` before 1.0.
@available(*, deprecated, renamed: "APIConcurrencyPolicy.ThrottleMode")
public typealias APIThrottleMode = APIConcurrencyPolicy.ThrottleMode

/// The name of ``APICookieStore/Cookie`` before 1.0.
@available(*, deprecated, renamed: "APICookieStore.Cookie")
public typealias APICookie = APICookieStore.Cookie

/// The name of ``APIServerSentEvent/Parser`` before 1.0.
@available(*, deprecated, renamed: "APIServerSentEvent.Parser")
public typealias APIServerSentEventParser = APIServerSentEvent.Parser

/// The name of ``APIServerSentEvent/Reconnection`` before 1.0.
@available(*, deprecated, renamed: "APIServerSentEvent.Reconnection")
public typealias APIReconnection = APIServerSentEvent.Reconnection

/// The name of ``APIMap/Context`` before 1.0.
@available(*, deprecated, renamed: "APIMap.Context")
public typealias APIMapContext = APIMap.Context

/// The name of ``APITransferProgress/Reporter`` before 1.0.
@available(*, deprecated, renamed: "APITransferProgress.Reporter")
public typealias APIProgressReporter = APITransferProgress.Reporter

/// The name of ``APIServerSentEvent/Stream`` before 1.0.
@available(*, deprecated, renamed: "APIServerSentEvent.Stream")
public typealias APIServerSentEventStream = APIServerSentEvent.Stream

/// The name of ``APIStatusCodes/Convertible`` before 1.0.
@available(*, deprecated, renamed: "APIStatusCodes.Convertible")
public typealias APIStatusCodesConvertible = APIStatusCodes.Convertible

/// The name of ``APIRetryPolicy/RandomSource`` before 1.0.
@available(*, deprecated, renamed: "APIRetryPolicy.RandomSource")
public typealias APIRandomSource = APIRetryPolicy.RandomSource

/// The name of ``APIRetryPolicy/SystemRandomSource`` before 1.0.
@available(*, deprecated, renamed: "APIRetryPolicy.SystemRandomSource")
public typealias SystemRandomSource = APIRetryPolicy.SystemRandomSource

/// The name of ``APIParameters/QueryEncoding`` before 1.0.
@available(*, deprecated, renamed: "APIParameters.QueryEncoding")
public typealias APIQueryEncoding = APIParameters.QueryEncoding

/// The name of ``APIParameters/BodyEncoding`` before 1.0.
@available(*, deprecated, renamed: "APIParameters.BodyEncoding")
public typealias APIBodyEncoding = APIParameters.BodyEncoding

/// The name of ``APIRequestBody/Writer`` before 1.0.
@available(*, deprecated, renamed: "APIRequestBody.Writer")
public typealias APIBodyWriter = APIRequestBody.Writer

/// The name of ``APIConcurrencyPolicy/LineLimit`` before 1.0.
@available(*, deprecated, renamed: "APIConcurrencyPolicy.LineLimit")
public typealias APILineLimit = APIConcurrencyPolicy.LineLimit

/// The name of ``APIConcurrencyPolicy/Sharing`` before 1.0.
@available(*, deprecated, renamed: "APIConcurrencyPolicy.Sharing")
public typealias APIRequestSharing = APIConcurrencyPolicy.Sharing

/// The name of ``APIConcurrencyPolicy/Group`` before 1.0.
@available(*, deprecated, renamed: "APIConcurrencyPolicy.Group")
public typealias APIConcurrencyGroup = APIConcurrencyPolicy.Group

/// The name of ``APIResponseCache/Source`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.Source")
public typealias APIResponseSource = APIResponseCache.Source

/// The name of ``APIResponseCache/SourcedResponse`` before 1.0.
@available(*, deprecated, renamed: "APIResponseCache.SourcedResponse")
public typealias APISourcedResponse = APIResponseCache.SourcedResponse

/// The name of ``APIAuthentication/Authorization`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.Authorization")
public typealias APIAuthorization = APIAuthentication.Authorization

/// The name of ``APIAuthentication/Authenticator`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.Authenticator")
public typealias APIAuthenticator = APIAuthentication.Authenticator

/// The name of ``APIAuthentication/PersistedHeaders`` before 1.0.
@available(*, deprecated, renamed: "APIAuthentication.PersistedHeaders")
public typealias APIPersistedHeaders = APIAuthentication.PersistedHeaders

/// The name of ``APIMap/DateFormat`` before 1.0.
@available(*, deprecated, renamed: "APIMap.DateFormat")
public typealias APIDateFormat = APIMap.DateFormat

/// The name of ``APIEngine/CircuitBreaker`` before 1.0.
@available(*, deprecated, renamed: "APIEngine.CircuitBreaker")
public typealias APICircuitBreaker = APIEngine.CircuitBreaker

/// The name of ``APIEngine/RetryBudget`` before 1.0.
@available(*, deprecated, renamed: "APIEngine.RetryBudget")
public typealias APIRetryBudget = APIEngine.RetryBudget

/// The name of ``APIRawResponse/ServerMessage`` before 1.0.
@available(*, deprecated, renamed: "APIRawResponse.ServerMessage")
public typealias APIServerMessage = APIRawResponse.ServerMessage

/// The name of ``APIByteStream/JSONLinesSplitter`` in 1.0.
@available(*, deprecated, renamed: "APIByteStream.JSONLinesSplitter")
public typealias APIJSONLinesSplitter = APIByteStream.JSONLinesSplitter
