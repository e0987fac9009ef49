import HostSupport

/// Attribute keys for `scrub-attribute-keys` (SPEC T-5): keys that name a secret, as a word in
/// snake, kebab or camel case, whose whole value must go; and keys that only hold such a word
/// inside another word, whose value must stay. Relay's key rule removes 10 of the first 11,
/// and also the values of `author`, `secretary` and `tokenizer`.
package enum SecretKeys {
    package static let secret = [
        "password", "db_password", "x-api-key", "apiKey", "set-cookie", "Authorization", "sessionToken", "client_secret",
        "access_token", "private_key", "credentials", "passwd", "pwd", "api_key", "Cookie", "session_token",
        "AWS_SECRET_ACCESS_KEY", "MYSQL_PWD", "sessionId", "X-CSRF-Token", "refreshToken", "GITHUB_TOKEN",
    ]
    package static let innocent = [
        "author", "secretary", "tokenizer", "passage", "keyboard", "monkey", "cookbook", "max_tokens", "token_count",
        "authored_by", "keyId", "monkeypatch",
    ]

    /// One `key: value` line a key, every key once in an order drawn from `seed`: values of
    /// secret keys are planted (kind `secret_key`), values of the others are decoys. No value
    /// has a form a scrubber could know it by: only its key tells.
    package static func document(seed: UInt64) -> ScrubCorpus.Document {
        var random = SplitMix64(seed: seed)
        var keys = secret.map { ($0, true) } + innocent.map { ($0, false) }
        for index in keys.indices.reversed() { keys.swapAt(index, random.int(0..<(index + 1))) }
        var text = ""
        var spans: [ScrubCorpus.Span] = []
        for (key, isSecret) in keys {
            text += "\(key): "
            let start = text.utf8.count
            text += isSecret ? random.word() + String(random.int(10..<100)) + random.word() : random.word() + "-" + random.word()
            spans.append(ScrubCorpus.Span(
                start: start, end: text.utf8.count, kind: isSecret ? ScrubCorpus.secretKeyKind : ScrubCorpus.decoyKind,
                label: isSecret ? nil : "value of an innocent key"))
            text += "\n"
        }
        return ScrubCorpus.Document(text: text, spans: spans)
    }
}

extension SplitMix64 {
    fileprivate mutating func word() -> String {
        pick(["amber", "delta", "harbor", "maple", "orbit", "quartz", "saffron", "tundra", "velvet", "willow"])
    }
}
