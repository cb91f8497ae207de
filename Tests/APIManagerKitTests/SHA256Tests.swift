import Foundation
import Testing

@testable import APIManagerKit

/// The library's own SHA-256 (cache keys, body digests, the durable records' checksums) against the
/// FIPS 180-4 examples NIST publishes, whole and fed in pieces of every shape.
@Suite("SHA-256", .timeLimit(.minutes(1)))
struct SHA256Tests {
    /// NIST's examples (FIPS 180-4, "SHA256.pdf" and the short-message vectors): message, digest.
    static let vectors: [(String, String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        ),
    ]

    @Test(arguments: 0..<vectors.count)
    func theNISTExamplesHashToTheirDigestsWholeAndInPieces(index: Int) {
        let (message, digest) = Self.vectors[index]
        let bytes = Array(message.utf8)
        #expect(SHA256.hex(bytes) == digest)
        #expect(SHA256.hex(Data(bytes)) == digest)
        #expect(SHA256.hex(AnySequence(bytes)) == digest, "a sequence without contiguous storage")
        for split in 0...bytes.count {
            var hasher = SHA256()
            hasher.update(bytes[..<split])
            hasher.update(AnySequence(bytes[split...]))
            #expect(hasher.finalize().hexString == digest, "split at \(split)")
        }
    }

    @Test func aMillionAsHashToNISTsDigestInBlocksOfEveryOddSize() {
        let digest = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hex(million) == digest)
        for piece in [1, 63, 65, 4_097] {
            var hasher = SHA256()
            var offset = 0
            while offset < million.count {
                let end = min(offset + piece, million.count)
                if piece == 1 && offset > 1_000 {
                    hasher.update(million[offset...])
                    break
                }
                hasher.update(million[offset..<end])
                offset = end
            }
            #expect(hasher.finalize().hexString == digest, "pieces of \(piece)")
        }
    }
}
