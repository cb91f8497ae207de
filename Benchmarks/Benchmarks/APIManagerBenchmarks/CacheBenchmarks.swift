import APIManagerKit
import Benchmark
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Cache benchmarks: each iteration performs `operations` cache operations (or requests); divide by
// it for the per-operation cost (the README's table does).

func temporaryCacheDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("APIManagerKitBench-\(UUID().uuidString)")
}

func cacheKey(_ index: Int) -> APIResponseCache.Key {
    APIResponseCache.Key(method: "GET", url: "https://api.example.com/items/\(index)?page=1")
}

func response(bytes: Int) -> APIRawResponse {
    APIRawResponse(
        statusCode: 200, headers: ["Content-Type": "application/json"], body: Data(repeating: 0x61, count: bytes))
}

struct EchoResponse: APIResponse, Decodable { var value: String? }

struct CachedRequest: APIRequest {
    let url: URL
    var cacheOption: APIResponseCache.Option
}

final class CachedAPI: APIManager {
    typealias Request = CachedRequest
    typealias Response = EchoResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

func registerCacheBenchmarks() {
    let operations = 1_000

    Benchmark("cache: memory hit, 1 KiB (\(operations) lookups)") { benchmark in
        let cache = APIResponseCache(disk: nil)
        let keys = (0..<100).map(cacheKey)
        for key in keys { cache.store(response(bytes: 1_024), for: key) }
        benchmark.startMeasurement()
        for index in 0..<operations { blackHole(cache.entry(for: keys[index % keys.count])) }
        benchmark.stopMeasurement()
    }

    for bytes in [1_024, 1 << 20] {
        let count = bytes > 1_024 ? 20 : operations
        Benchmark("cache: disk hit, \(bytes / 1_024) KiB (\(count) lookups)") { benchmark in
            let directory = temporaryCacheDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let cache = APIResponseCache(memoryBudget: 0, disk: .init(directory: directory))
            let keys = (0..<10).map(cacheKey)
            for key in keys { cache.store(response(bytes: bytes), for: key) }
            benchmark.startMeasurement()
            for index in 0..<count { blackHole(cache.entry(for: keys[index % keys.count])) }
            benchmark.stopMeasurement()
        }
    }

    Benchmark("cache: store 1 KiB, memory and disk (\(operations) stores)") { benchmark in
        let directory = temporaryCacheDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = APIResponseCache(disk: .init(directory: directory))
        let keys = (0..<operations).map(cacheKey)
        let stored = response(bytes: 1_024)
        benchmark.startMeasurement()
        for key in keys { cache.store(stored, for: key) }
        benchmark.stopMeasurement()
    }

    Benchmark("cache: warm start over 10000 entries") { benchmark in
        let directory = temporaryCacheDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = APIResponseCache(memoryBudget: 0, disk: .init(directory: directory))
        for index in 0..<10_000 { writer.store(response(bytes: 512), for: cacheKey(index)) }
        benchmark.startMeasurement()
        let warm = APIResponseCache(disk: .init(directory: directory))
        benchmark.stopMeasurement()
        precondition(warm.memoryCount > 0 && warm.diskUsage > 0)
    }

    // The same request through a manager: answered from the cache, or over loopback HTTP.
    let requests = 200
    Benchmark("manager: cacheOnly hit (\(requests) requests)") { benchmark in
        guard let server = LoopbackServer(), let url = URL(string: "http://127.0.0.1:\(server.port)/item") else {
            fatalError("cannot start the loopback server")
        }
        let api = CachedAPI(
            engine: APIEngine(delivery: .inline, execution: .inline, cache: APIResponseCache(disk: nil)))
        _ = try await api.response(for: CachedRequest(url: url, cacheOption: .networkOnly))
        benchmark.startMeasurement()
        for _ in 0..<requests {
            blackHole(try await api.response(for: CachedRequest(url: url, cacheOption: .cacheOnly)))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("manager: loopback HTTP, keep-alive (\(requests) requests)") { benchmark in
        guard let server = LoopbackServer(), let url = URL(string: "http://127.0.0.1:\(server.port)/item") else {
            fatalError("cannot start the loopback server")
        }
        let api = CachedAPI(engine: APIEngine(delivery: .inline, execution: .inline))
        _ = try await api.response(for: CachedRequest(url: url, cacheOption: .networkOnly))
        benchmark.startMeasurement()
        for _ in 0..<requests {
            blackHole(try await api.response(for: CachedRequest(url: url, cacheOption: .networkOnly)))
        }
        benchmark.stopMeasurement()
    }
}
