import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

@Suite("Lenient mapping of loosely typed JSON")
struct LenientMappingTests {
    func map(_ json: String) throws -> APIMap { try APIMap(json: Data(json.utf8)) }

    @Test(
        arguments: [
            ("true", true), ("false", false), (#""true""#, true), (#""FALSE""#, false), (#""1""#, true),
            (#""0""#, false),
            ("1", true), ("0", false),
        ] as [(String, Bool)])
    func booleansComeInManyShapes(json: String, expected: Bool) throws {
        #expect(try map(#"{"v":\#(json)}"#).value("v", as: Bool.self) == expected)
    }

    @Test(arguments: ["2", #""yes""#, "null", "[]", "0.5"])
    func otherValuesAreNotBooleans(json: String) throws {
        let map = try map(#"{"v":\#(json)}"#)
        #expect(throws: APIMappingError.self) { try map.value("v", as: Bool.self) }
    }

    @Test func numbersAndStringsConvertBothWays() throws {
        let map = try map(#"{"a":"42","b":42.0,"c":" 7 ","d":"2.5","e":3,"f":12,"g":1.5,"h":true,"i":"1e3"}"#)
        #expect(try map.value("a", as: Int.self) == 42)
        #expect(try map.value("b", as: Int.self) == 42)
        #expect(try map.value("c", as: Int.self) == 7)
        #expect(try map.value("d", as: Double.self) == 2.5)
        #expect(try map.value("e", as: Double.self) == 3)
        #expect(try map.value("f", as: String.self) == "12")
        #expect(try map.value("g", as: String.self) == "1.5")
        #expect(try map.value("h", as: String.self) == "true")
        #expect(try map.value("i", as: Int.self) == 1000)
        #expect(throws: APIMappingError.self) { try map.value("d", as: Int.self) }
    }

    @Test func datesFromISO8601TimestampsAndPatterns() throws {
        let map = try map(
            #"{"iso":"2026-11-23T10:00:00Z","frac":"2026-11-23T10:00:00.250+01:00","s":1795000000,"ms":"1795000000123","#
                + #""day":"23.11.2026 10:30","bad":"2026-02-31T00:00:00Z","text":"soon"}"#)
        let iso = try map.value("iso", as: Date.self)
        #expect(iso.timeIntervalSince1970 == 1_795_428_000)
        #expect(try map.value("frac", as: Date.self).timeIntervalSince1970 == 1_795_428_000 - 3_600 + 0.25)
        #expect(try map.value("s", as: Date.self).timeIntervalSince1970 == 1_795_000_000)
        #expect(try map.value("ms", as: Date.self).timeIntervalSince1970 == 1_795_000_000.123)
        let day = try map.value("day", as: Date.self, dateFormat: .pattern("dd.MM.yyyy HH:mm"))
        #expect(day.timeIntervalSince1970 == 1_795_428_000 + 1_800)
        #expect(throws: APIMappingError.self) { try map.value("bad", as: Date.self) }
        #expect(throws: APIMappingError.self) { try map.value("text", as: Date.self) }
        #expect(throws: APIMappingError.self) { try map.value("s", as: Date.self, dateFormat: .iso8601) }
    }

    /// BetterCodable's and Go's strconv cases: a number that does not fit the asked type fails
    /// with its key path, never a silently different value (`Int.min`, `0`).
    @Test(
        arguments: [
            ("-9223372036854775809", "Int"), ("9223372036854775808", "Int"), ("1e-400", "Int"), ("1e400", "Int"),
            ("1e-400", "Double"), ("1e400", "Double"), ("-1e-400", "Double"), (#""-9223372036854775809""#, "Int"),
            (#""1e-400""#, "Double"), (#""1e-400""#, "Int"), (#""1e400""#, "Double"), ("1e19", "Int"),
            ("1e400", "String"), ("1e-400", "String"), ("1e400", "Date"),
        ] as [(String, String)])
    func aNumberThatDoesNotFitIsAnErrorAtItsKeyPath(json: String, type: String) throws {
        let map = try map(#"{"data":{"items":[{"n":\#(json)}]}}"#)
        let error = #expect(throws: APIMappingError.self) {
            switch type {
            case "Int": _ = try map.value("data.items.0.n", as: Int.self)
            case "Double": _ = try map.value("data.items.0.n", as: Double.self)
            case "Date": _ = try map.value("data.items.0.n", as: Date.self)
            default: _ = try map.value("data.items.0.n", as: String.self)
            }
        }
        #expect(error?.keyPath == "data.items.0.n")
    }

    @Test func numbersAtTheEdgeOfTheirTypeStillFit() throws {
        let map = try map(
            #"{"min":-9223372036854775808,"max":9223372036854775807,"tiny":5e-324,"zero":0e-400,"big":1e308,"#
                + #""exact":9007199254740992.0,"text":"0.000e5"}"#)
        #expect(try map.value("min", as: Int.self) == Int.min)
        #expect(try map.value("max", as: Int.self) == Int.max)
        #expect(try map.value("tiny", as: Double.self) == 5e-324)
        #expect(try map.value("zero", as: Double.self) == 0)
        #expect(try map.value("big", as: Double.self) == 1e308)
        #expect(try map.value("exact", as: Int.self) == 9_007_199_254_740_992)
        #expect(try map.value("text", as: Double.self) == 0)
    }

    /// A run of 19 letters made the digit reader overflow and trap; any pattern is refused with a
    /// reason, never a crash.
    @Test(arguments: [
        String(repeating: "y", count: 19), String(repeating: "S", count: 40), "yyyy-'MM", "dd.MMMMMMMMMM",
    ])
    func aPatternThatReadsNoDateIsAClearError(pattern: String) throws {
        let map = try map(#"{"d":"\#(String(repeating: "1", count: 30))"}"#)
        let error = #expect(throws: APIMappingError.self) {
            try map.value("d", as: Date.self, dateFormat: .pattern(pattern))
        }
        #expect(error?.expected.contains("reads none") == true)
        #expect(error?.keyPath == "d")
    }

    enum Role: String, APILenientValue { case admin, member }
    enum Level: Int, APILenientValue {
        case low = 1
        case high = 2
    }

    @Test func urlsAndEnumsFromRawValues() throws {
        let map = try map(#"{"u":"https://a.test/x","rel":"/x","role":"admin","level":"2","nope":"owner"}"#)
        #expect(try map.value("u", as: URL.self).absoluteString == "https://a.test/x")
        #expect(throws: APIMappingError.self) { try map.value("rel", as: URL.self) }
        #expect(try map.value("role", as: Role.self) == .admin)
        #expect(try map.value("level", as: Level.self) == .high)
        #expect(throws: APIMappingError.self) { try map.value("nope", as: Role.self) }
    }

    struct User: APIMappable, Equatable {
        let name: String
        let age: Int?
        let tags: [String]
        init(map: APIMap) throws(APIMappingError) {
            name = try map.value("name")
            age = try map.value("age")
            tags = try map.value("tags")
        }
    }

    @Test func keyPathsArraysNestedObjectsAndOptionals() throws {
        let map = try map(
            #"{"data":{"users":[{"name":"Ada","age":"36","tags":[1,"x"]},{"name":7,"age":null,"tags":[]}]}}"#)
        #expect(try map.value("data.users.0.name", as: String.self) == "Ada")
        let users = try map.value("data.users", as: [User].self)
        #expect(users.map(\.name) == ["Ada", "7"])
        #expect(users.map(\.age) == [36, nil])
        #expect(users[0].tags == ["1", "x"])
        #expect(try map.value("data.missing", as: Int?.self) == nil)
        #expect(try map.value("data.users.9.name", as: String?.self) == nil)
        #expect(map.contains("data.users.1") && !map.contains("data.users.1.age"))
    }

    @Test func aFailureNamesTheFullKeyPathAndWhatWasFound() throws {
        let map = try map(#"{"data":{"users":[{"name":"Ada","age":"old","tags":[]}]}}"#)
        do {
            _ = try map.value("data.users", as: [User].self)
            Issue.record("expected a failure")
        } catch {
            #expect(error.keyPath == "data.users.0.age")
            #expect(error.description == #"at data.users.0.age: expected Int, found the string "old""#)
        }
        #expect(throws: APIMappingError(keyPath: "data.users.0.email", expected: "String", found: "nothing")) {
            try map.value("data.users.0.email", as: String.self)
        }
        #expect(throws: APIMappingError(keyPath: "", expected: "a JSON document", found: "3 bytes that are not JSON")) {
            try APIMap(json: Data("{{{".utf8))
        }
    }

    struct Profile: APIResponse, APIMappable {
        let user: User
        let admin: Bool
        init(map: APIMap) throws(APIMappingError) {
            user = try map.value("data.user")
            admin = try map.value("data.admin")
        }
    }

    final class ProfileMappingAPI: APIManager {
        typealias Request = TestRequest
        typealias Response = Profile
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test func aMappableResponseIsBuiltByTheManagerAndAFailureIsADecodingError() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/good", .json(#"{"data":{"user":{"name":"Ada","tags":[]},"admin":"1"}}"#))
        transport.stub(nil, "/bad", .json(#"{"data":{"user":{"name":"Ada","tags":{}},"admin":"1"}}"#))
        let api = ProfileMappingAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let profile = try await api.response(for: TestRequest("/good"))
        #expect(profile.user.name == "Ada" && profile.admin)
        do {
            _ = try await api.response(for: TestRequest("/bad"))
            Issue.record("expected a decoding error")
        } catch {
            guard case .decoding(let underlying as APIMappingError, _) = error else {
                Issue.record("expected decoding, got \(error)")
                return
            }
            #expect(underlying.keyPath == "data.user.tags")
            #expect(error.description.contains("at data.user.tags: expected an array of String, found an object"))
        }
    }

    struct Product: APIResponse, Decodable {
        let name: String
        @Lenient var price: Double
        @Lenient var inStock: Bool
        @Lenient var rating: Int?
        @Lenient var added: Date
    }

    @Test func lenientPropertiesOfADecodableType() throws {
        let products = try JSONDecoder().decode(
            [Product].self,
            from: Data(
                (#"[{"name":"a","price":"9.5","inStock":1,"rating":"4","added":1795000000},"#
                    + #"{"name":"b","price":3,"inStock":"false","rating":null,"added":"2026-11-23T10:00:00Z"}]"#).utf8))
        #expect(products.map(\.price) == [9.5, 3])
        #expect(products.map(\.inStock) == [true, false])
        #expect(products.map(\.rating) == [4, nil])
        let missing = try JSONDecoder().decode(
            Product.self, from: Data(#"{"name":"c","price":1,"inStock":true,"added":0}"#.utf8))
        #expect(missing.rating == nil)
        do {
            _ = try JSONDecoder().decode(
                [Product].self, from: Data(#"[{"name":"a","price":"cheap","inStock":1,"added":0}]"#.utf8))
            Issue.record("expected a failure")
        } catch let error as APIMappingError {
            #expect(error.keyPath == "0.price")
        }
    }

    @Test func randomJSONNeverCrashesAndEveryFailureIsAMappingError() {
        var generator = SplitMix64(state: 42)
        func randomValue(depth: Int) -> APIValue {
            switch generator.next() % (depth > 3 ? 5 : 7) {
            case 0: return .null
            case 1: return .bool(generator.next() % 2 == 0)
            case 2: return .int(Int(truncatingIfNeeded: generator.next()) >> Int(generator.next() % 64))
            case 3: return .double(Double(bitPattern: generator.next()))
            case 4:
                let pool = [
                    "", "1", "0", "true", "2026-11-23T10:00:00Z", "1e308", "-0", "nan", "https://x.test", "é\u{0}",
                ]
                return .string(pool[Int(generator.next() % UInt64(pool.count))])
            case 5: return .array((0..<Int(generator.next() % 4)).map { _ in randomValue(depth: depth + 1) })
            default:
                let keys = ["a", "b", "0", "1"]
                var object: [String: APIValue] = [:]
                for key in keys where generator.next() % 2 == 0 { object[key] = randomValue(depth: depth + 1) }
                return .object(object)
            }
        }
        let paths = ["", "a", "a.b", "0", "a.0", "b.1.a", "a.a.a.a", "1..", "."]
        var converted = 0
        for _ in 0..<3_000 {
            let map = APIMap(randomValue(depth: 0))
            for path in paths {
                if (try? map.value(path, as: Bool.self)) != nil { converted += 1 }
                _ = try? map.value(path, as: Int?.self)
                _ = try? map.value(path, as: [Double].self)
                _ = try? map.value(path, as: String.self)
                _ = try? map.value(path, as: Date.self)
                _ = try? map.value(path, as: [User?].self)
                _ = try? map.value(path, as: Date.self, dateFormat: .pattern("yyyy-MM-dd'T'HH:mm:ssZ"))
            }
        }
        #expect(converted > 0)
    }
}

// MARK: article "Talking HTTP", "Lenient mapping of loosely typed JSON"

struct ReadmeProfile: APIResponse, APIMappable {  // built from the body's JSON through init(map:)
    let name: String
    let age: Int?
    let isAdmin: Bool
    let joined: Date
    init(map: APIMap) throws(APIMappingError) {
        name = try map.value("data.user.0.name")
        age = try map.value("data.user.0.age")  // nil when missing or null
        isAdmin = try map.value("data.user.0.admin")  // true, "true", "1" or 1
        joined = try map.value("data.user.0.joined")  // ISO 8601 or a Unix timestamp
    }
}

@Test func theReadmeProfileMapsALooselyTypedBody() throws {
    let raw = APIRawResponse(
        statusCode: 200, body: Data(#"{"data":{"user":[{"name":"Ada","admin":"1","joined":"1795000000000"}]}}"#.utf8))
    let profile = try ReadmeProfile(from: raw)
    #expect(profile.name == "Ada" && profile.age == nil && profile.isAdmin)
    #expect(profile.joined.timeIntervalSince1970 == 1_795_000_000)
}
