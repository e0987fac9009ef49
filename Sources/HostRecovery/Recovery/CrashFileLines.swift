import FoundationEssentials
import Glibc
import HostSupport

/// Reading a crash file's lines: a line's key, its fields and its numbers, as bytes.
extension CrashFile {
    /// The keys whose values the writer encodes (%XX for control bytes, DEL and '%').
    static let encodedFields: Set<String> = ["session", "attachment", "plugin_path", "plugin_digest", "plugin_name", "callback"]

    /// One line after the header: its key, up to the first space, says what its value is.
    mutating func read(_ line: UnsafeRawBufferPointer, pluginFields: inout [String: String], now: Date, fallbackTime: Date) {
        // Cut at the first space as bytes: a String subscript would round a cut before a
        // combining mark to a Character boundary.
        let space = line.offset(of: UInt8(ascii: " "), from: 0)
        let keyBytes = UnsafeRawBufferPointer(rebasing: line[..<(space ?? line.count)])
        let rawBytes = UnsafeRawBufferPointer(rebasing: line[(space.map { $0 + 1 } ?? line.count)...])
        // The lines of every file, first and without a String for the line.
        if keyBytes.holds("module") {
            let fields = Self.fieldRanges(rawBytes, limit: 3)
            if modules.count < Self.maxModules, fields.count == 3, let start = Self.hex(UnsafeRawBufferPointer(rebasing: rawBytes[fields[0]])),
                let end = Self.hex(UnsafeRawBufferPointer(rebasing: rawBytes[fields[1]]))
            {
                modules.append(Module(start: start, end: end, path: PercentEncoding.decoded(String(decoding: rawBytes[fields[2]], as: UTF8.self))))
            }
            return
        }
        if keyBytes.holds("build_id") {
            if !modules.isEmpty, modules[modules.count - 1].buildID == nil, Self.isBuildID(rawBytes) {
                modules[modules.count - 1].buildID = String(decoding: rawBytes, as: UTF8.self)
            }
            return
        }
        if keyBytes.holds("frame") {
            if frames.count < Self.maxFrames, let address = Self.hex(rawBytes) { frames.append(address) }
            return
        }
        let key = String(decoding: keyBytes, as: UTF8.self)
        let raw = String(decoding: rawBytes, as: UTF8.self)
        let value = Self.encodedFields.contains(key) ? PercentEncoding.decoded(raw) : raw
        switch key {
        case "session": session = value
        case "signal": signal = Int32(value) ?? 0
        case "code": code = Int64(value).map { $0 > Int64(UInt32.max) ? 0 : Int64(Int32(truncatingIfNeeded: $0)) } ?? 0
        case "sender_pid": senderPID = Int32(value)
        case "sender_uid": senderUID = UInt32(value)
        case "address": address = value
        case "thread": thread = Int64(value) ?? 0
        case "pid": processID = Int32(value)
        case "time": time = Self.plausibleTime(value, now: now) ?? fallbackTime
        case "register":
            let pair = Self.fields(value)
            if pair.count == 2 { registers.append((pair[0], pair[1])) }
        // The writer's map of what is mapped at the crash replaces the one taken before.
        case "modules_at_crash": modules = []
        case "attribute":
            // Split before decoding: an encoded key holds no '='.
            if let equals = raw.firstIndex(of: "=") {
                attributes[PercentEncoding.decoded(String(raw[..<equals]))] = PercentEncoding.decoded(String(raw[raw.index(after: equals)...]))
            }
        case "attachment":
            if attachmentPaths.count < Self.maxAttachments { attachmentPaths.append(value) } else { ignoredAttachments += 1 }
        case "plugin_path", "plugin_digest", "plugin_name", "callback": pluginFields[key] = value
        case "end": complete = true
        default: break
        }
    }

    /// 2 to 128 lowercase hex digits, an even number.
    package static func isBuildID(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isBuildID(UnsafeRawBufferPointer($0)) }
    }

    package static func isBuildID(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard (2...128).contains(bytes.count), bytes.count % 2 == 0 else { return false }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
            default: return false
            }
        }
        return true
    }

    /// `text` cut at spaces into at most `limit` fields, as String's `split(separator: " ",
    /// maxSplits: limit - 1)` cuts it: runs of spaces cut once, no empty field, and the last
    /// field the rest from just after its space. As bytes: `split` compares Characters, and a
    /// backlog's module and register lines are most of its lines.
    package static func fields(_ text: String, limit: Int = .max) -> [String] {
        var text = text
        return text.withUTF8 { utf8 in
            let bytes = UnsafeRawBufferPointer(utf8)
            return fieldRanges(bytes, limit: limit).map { String(decoding: bytes[$0], as: UTF8.self) }
        }
    }

    package static func hex(_ text: String) -> UInt64? {
        text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text, radix: 16)
    }

    /// `hex` of text given as bytes: 1 to 16 hex digits after an optional `0x` are read here,
    /// anything else as `hex` reads it.
    package static func hex(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        let prefixed = bytes.count > 2 && bytes[0] == UInt8(ascii: "0") && bytes[1] == UInt8(ascii: "x")
        let digits = UnsafeRawBufferPointer(rebasing: bytes[(prefixed ? 2 : 0)...])
        guard (1...16).contains(digits.count) else { return hex(String(decoding: bytes, as: UTF8.self)) }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return hex(String(decoding: bytes, as: UTF8.self))
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    /// Where `fields` cuts `bytes`, as ranges of `bytes`.
    package static func fieldRanges(_ bytes: UnsafeRawBufferPointer, limit: Int) -> [Range<Int>] {
        let space = UInt8(ascii: " ")
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(min(limit, 4))
        var at = 0
        while true {
            let last = ranges.count == limit - 1
            if !last { while at < bytes.count && bytes[at] == space { at += 1 } }
            guard at < bytes.count else { return ranges }
            guard !last, let end = bytes.offset(of: space, from: at) else {
                ranges.append(at..<bytes.count)
                return ranges
            }
            ranges.append(at..<end)
            at = end + 1
        }
    }
}

/// Finding bytes in a crash file's lines with libc's `memchr` and `memcmp`: the generic
/// `firstIndex(of:)` of a slice and `elementsEqual` against a String's UTF-8 view walked a
/// byte at a time, a third of a backlog's reading.
extension UnsafeRawBufferPointer {
    /// Where the first `byte` at or after `start` is, if anywhere.
    func offset(of byte: UInt8, from start: Int) -> Int? {
        guard start < count, let base = baseAddress, let found = memchr(base + start, Int32(byte), count - start) else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }

    /// Whether these bytes are `text`'s, and nothing more.
    func holds(_ text: StaticString) -> Bool {
        guard count == text.utf8CodeUnitCount else { return false }
        guard count > 0, let base = baseAddress else { return true }
        return memcmp(base, text.utf8Start, count) == 0
    }
}
