/// The few DER (X.690) reads the trust rules need: a certificate's SubjectPublicKeyInfo, the bytes a
/// public-key pin hashes. Every read is bounds-checked; bytes that are not a certificate give `nil`,
/// never a trap (the fuzz target `FuzzCertificate` feeds it anything).
enum DER {
    /// One tag-length-value: its tag, its contents and the whole element, as offsets in the input.
    struct Element: Equatable {
        var tag: UInt8
        var contents: Range<Int>
        var whole: Range<Int>
    }

    static let sequence: UInt8 = 0x30
    static let integer: UInt8 = 0x02
    static let bitString: UInt8 = 0x03
    /// `[0] EXPLICIT`: the certificate's version, when it is not v1.
    static let explicitZero: UInt8 = 0xA0

    /// The element that starts at `start` and ends at or before `end`; `nil` for a high tag number,
    /// an indefinite or non-minimal length, or one that runs past `end`.
    static func element(in bytes: [UInt8], at start: Int, end: Int) -> Element? {
        guard start >= 0, end <= bytes.count, end - start >= 2 else { return nil }
        let tag = bytes[start]
        guard tag & 0x1F != 0x1F else { return nil }
        var index = start + 1
        let first = bytes[index]
        index += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            // 0x80 is BER's indefinite length; more than four length bytes is no certificate.
            guard count >= 1, count <= 4, end - index >= count, bytes[index] != 0 || count == 1 else { return nil }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
            guard length >= 0x80 else { return nil }
        }
        guard length <= end - index else { return nil }
        return Element(tag: tag, contents: index..<(index + length), whole: start..<(index + length))
    }

    /// The elements inside `parent`, in order; `nil` when its contents are not whole elements.
    static func children(of parent: Element, in bytes: [UInt8]) -> [Element]? {
        var children: [Element] = []
        var index = parent.contents.lowerBound
        while index < parent.contents.upperBound {
            guard let child = element(in: bytes, at: index, end: parent.contents.upperBound) else { return nil }
            children.append(child)
            index = child.whole.upperBound
        }
        return children
    }

    /// The DER of the certificate's `subjectPublicKeyInfo` (RFC 5280, 4.1): the seventh field of
    /// `tbsCertificate`, or the sixth when the version is left out (v1).
    static func subjectPublicKeyInfo(ofCertificate bytes: [UInt8]) -> ArraySlice<UInt8>? {
        guard let certificate = element(in: bytes, at: 0, end: bytes.count), certificate.tag == sequence,
            certificate.whole.upperBound == bytes.count,
            let parts = children(of: certificate, in: bytes), parts.count == 3, parts[0].tag == sequence,
            var fields = children(of: parts[0], in: bytes)
        else { return nil }
        if fields.first?.tag == explicitZero { fields.removeFirst() }
        // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo.
        guard fields.count >= 6, fields[0].tag == integer, fields[1...5].allSatisfy({ $0.tag == sequence }),
            let key = children(of: fields[5], in: bytes), key.count == 2, key[0].tag == sequence,
            key[1].tag == bitString
        else { return nil }
        return bytes[fields[5].whole]
    }
}
