import Foundation
import Testing

@testable import APIManagerKit

@Suite("Durable line: the record on disk", .timeLimit(.minutes(1)))
struct DurableRecordTests {
    let record = DurableRecord(
        sequence: 42, idempotencyKey: "8e03978e-40d5-43e8-bc93-6894a57f9324", requestType: "Shop.CartRequest",
        request: Data(#"{"add":{"item":"tea","count":2}}"#.utf8))

    @Test func aRecordReadsBackAsItWasWrittenWithAKeyAndWithout() throws {
        #expect(try DurableRecord(bytes: record.bytes) == record)
        var keyless = record
        keyless.idempotencyKey = nil
        keyless.request = Data()
        #expect(try DurableRecord(bytes: keyless.bytes) == keyless)
        var unicode = record
        unicode.idempotencyKey = "clé-☕️"
        #expect(try DurableRecord(bytes: unicode.bytes) == unicode)
    }

    @Test func theBytesFollowTheDocumentedLayout() {
        let bytes = [UInt8](record.bytes)
        #expect(Array(bytes[0..<8]) == Array("APIMKDL1".utf8))
        #expect(Array(bytes[8..<16]) == [0, 0, 0, 0, 0, 0, 0, 42])
        #expect(bytes[16] == 1)
        #expect(Array(bytes[17..<21]) == [0, 0, 0, 36])
        var hash = SHA256()
        hash.update(bytes.dropLast(32))
        #expect(Array(bytes.suffix(32)) == hash.finalize())
    }

    @Test func everyRecordCutShortIsRefusedNeverHalfRead() {
        let bytes = record.bytes
        for length in 0..<bytes.count {
            #expect(throws: DurableRecord.ReadError.self, "cut to \(length) bytes") {
                try DurableRecord(bytes: bytes.prefix(length))
            }
        }
    }

    @Test func everyChangedByteIsRefused() {
        let bytes = record.bytes
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x5A
            #expect(throws: DurableRecord.ReadError.self, "byte \(index) changed") {
                try DurableRecord(bytes: changed)
            }
        }
    }

    @Test func bytesAfterTheChecksumAndAnotherMagicAreRefused() {
        #expect(throws: DurableRecord.ReadError.malformed) { try DurableRecord(bytes: record.bytes + [0]) }
        var other = record.bytes
        other[7] = UInt8(ascii: "2")
        #expect(throws: DurableRecord.ReadError.notARecord) { try DurableRecord(bytes: other) }
        var flipped = record.bytes
        flipped[flipped.count - 40] ^= 1
        #expect(throws: DurableRecord.ReadError.checksumMismatch) { try DurableRecord(bytes: flipped) }
    }

    @Test func randomBytesNeverCrashTheReader() {
        var generator = SplitMix64(state: 7)
        for _ in 0..<2_000 {
            let count = Int(generator.next() % 96)
            var bytes = Data((0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            // Half of them start as a record does, so the reader gets past the magic.
            if generator.next() % 2 == 0 { bytes = Data("APIMKDL1".utf8) + bytes }
            _ = try? DurableRecord(bytes: bytes)
        }
        // Lengths that claim more than there is, up to the largest.
        var huge = Data("APIMKDL1".utf8) + Data(repeating: 0, count: 8) + [0] + [0xFF, 0xFF, 0xFF, 0xFF]
        #expect(throws: DurableRecord.ReadError.truncated) { try DurableRecord(bytes: huge) }
        huge = Data("APIMKDL1".utf8) + Data(repeating: 0, count: 8) + [0, 0, 0, 0, 0] + Data(repeating: 0xFF, count: 8)
        #expect(throws: DurableRecord.ReadError.truncated) { try DurableRecord(bytes: huge) }
    }
}
