import Host
import HostSupport

/// Generated personal data for the scrubbing checks (`check --scrub`, SPEC I-8), each value
/// made here from the seed (no data files): the same seed gives the same values, so a
/// failure is reproduced with `--seed`.
package struct PersonalData: Sendable {
    /// One planted value: `text` is what is placed in a field, `secret` the part of it that
    /// must not survive (a scrubber may keep `token=` and replace what follows). `kind` is the
    /// SPEC T-4 name (`email`, `card`, …; `none` for a decoy), `name` what a person reads.
    package struct Item: Sendable, Equatable {
        package var kind: String
        package var name: String
        package var text: String
        package var secret: String
        /// Where `secret` starts in `text`, in bytes; nil: it ends the text.
        package var secretStart: Int? = nil
    }

    /// Every kind the checks plant, one value each.
    package var items: [Item]
    /// Values that are not personal data and must survive: a scrubber that destroys them
    /// destroys what makes a report useful (a warning).
    package var decoys: [Item]

    package init(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        items = [
            Item(kind: "email", name: "e-mail address", text: random.email()),
            Item(kind: "card", name: "card number", text: random.cardNumber()),
            Item(kind: "ipv4", name: "IPv4 address", text: random.ipv4()),
            Item(kind: "ipv6", name: "IPv6 address", text: random.ipv6()),
            Item(kind: "phone", name: "phone number", text: random.phoneNumber()),
            random.tokenAssignment(),
            random.bearerToken(),
            Item(kind: "aws_key", name: "AWS access key", text: "AKIA" + random.characters(16, from: PersonalData.upperAlphanumeric)),
            Item(kind: "jwt", name: "JWT", text: random.jwt()),
        ] + OutsideKind.kinds.map { kind in OutsideKind.item(kind, random: &random) }
        // What scrubbers are known to take for personal data (Sentry's tracker: an order id
        // taken for a card, "auth" in prose and in host names, `True`/`False`, `cc` in
        // `Accept`), and the ids, digests and versions every report is full of.
        decoys = [
            Item(decoy: "version", "\(random.int(1..<30)).\(random.int(0..<50)).\(random.int(0..<200))"),
            Item(decoy: "timestamp", random.timestamp()),
            Item(decoy: "UUID", random.uuid()),
            Item(decoy: "hex id", "0x" + random.characters(8, from: PersonalData.hexDigits)),
            Item(decoy: "order id", "ord_" + random.luhnDigits(16)),
            Item(decoy: "Luhn-valid build number", "build " + random.luhnDigits(10)),
            Item(decoy: "Unix time", "at " + String(random.int(1_500_000_000..<1_999_999_999))),
            Item(decoy: "prose with auth words", random.pick(PersonalData.authProse)),
            Item(decoy: "host name with auth", random.pick(["auth", "oauth2", "authz-gateway", "sso-auth"]) + "." + random.pick(["example.com", "internal.example.net", "corp.example.org"])),
            Item(decoy: "sha256 digest", random.characters(64, from: PersonalData.hexDigits)),
            Item(decoy: "git commit", random.characters(40, from: PersonalData.hexDigits)),
            Item(decoy: "semantic version", "v\(random.int(1..<20)).\(random.int(0..<40)).\(random.int(0..<100))" + random.pick(["", "-beta.2", "-rc.1"])),
            Item(decoy: "boolean", random.pick(["retry", "cached", "enabled", "dry_run"]) + random.pick(["=", ": "]) + random.pick(["True", "False"])),
            Item(decoy: "IPv4-looking version", "version \(random.int(1..<10)).\(random.int(0..<10)).\(random.int(0..<20)).\(random.int(0..<300))"),
            Item(decoy: "phone-looking duration", "took \(random.int(201..<990)) \(random.int(200..<990)) \(random.digits(4)) " + random.pick(["ns", "µs", "bytes"])),
            Item(decoy: "base64 image name", random.characters(22, from: PersonalData.base64URL.filter { $0 != "-" && $0 != "_" }) + random.pick([".png", ".jpg", ".webp"])),
            Item(decoy: "Accept header", "Accept: " + random.pick(["text/html,application/json", "application/vnd.api+json", "image/avif,image/webp"])),
            Item(decoy: "word with a token's prefix", random.pick(["ghp_config_path", "xoxb-setup.md", "sk_live_mode", "glpat-docs.html", "npm_package_version", "AIza.js"])),
            Item(decoy: "placeholder", random.pick(["<YOUR_GITHUB_TOKEN>", "${SLACK_BOT_TOKEN}", "sk_test_...", "ghp_XXXX", "REPLACE_ME", "$NPM_TOKEN"])),
        ]
    }

    /// Sentences that use secret words as ordinary words.
    static let authProse = [
        "User authenticated after the session refresh", "the secret to fast builds is caching",
        "password reset page loaded in 2 s", "token bucket drained, backing off", "Authorization header missing from the retry",
    ]

    /// Every item and decoy in running text, the way they appear in real reports.
    package var text: String { document.text }

    static let upperAlphanumeric = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    static let alphanumeric = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    static let hexDigits = Array("0123456789abcdef")
    static let base64URL = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
}

extension PersonalData.Item {
    init(kind: String, name: String, text: String) { self.init(kind: kind, name: name, text: text, secret: text) }
    /// Text that is not personal data and must survive.
    init(decoy name: String, _ text: String) { self.init(kind: ScrubCorpus.decoyKind, name: name, text: text, secret: text) }
}

extension SplitMix64 {
    mutating func pick<T>(_ list: [T]) -> T { list[int(0..<list.count)] }

    /// `count` digits passing the Luhn check (what a card's digits also pass).
    fileprivate mutating func luhnDigits(_ count: Int) -> String {
        let body = String(int(1..<10)) + digits(count - 2)
        return body + String(Self.luhnCheckDigit(body))
    }

    fileprivate mutating func characters(_ count: Int, from alphabet: [Character]) -> String {
        String((0..<count).map { _ in pick(alphabet) })
    }

    mutating func digits(_ count: Int) -> String { (0..<count).map { _ in String(int(0..<10)) }.joined() }

    fileprivate mutating func email() -> String {
        let first = pick(["jane", "omar", "li", "maria", "kwame", "anna", "yuki", "pedro"])
        let last = pick(["doe", "haddad", "wei", "silva", "mensah", "novak", "tanaka", "gomez"])
        let domain = pick(["example.org", "mail.example.com", "corp.example.net", "example.io"])
        return "\(first)\(pick([".", "_", ""]))\(last)\(int(1..<100))@\(domain)"
    }

    /// A card number that passes the Luhn check, grouped as cards are written.
    fileprivate mutating func cardNumber() -> String {
        let (prefix, length) = pick([("4", 16), ("5\(int(1..<6))", 16), ("3\(pick(["4", "7"]))", 15), ("6011", 16)])
        var number = prefix + digits(length - prefix.count - 1)
        number += String(Self.luhnCheckDigit(number))
        let separator = pick([" ", "-", ""])
        let groups = length == 15 ? [4, 6, 5] : [4, 4, 4, 4]
        var parts: [String] = []
        var rest = Substring(number)
        for size in groups {
            parts.append(String(rest.prefix(size)))
            rest = rest.dropFirst(size)
        }
        return parts.joined(separator: separator)
    }

    static func luhnCheckDigit(_ digits: String) -> Int {
        var sum = 0
        for (index, character) in digits.reversed().enumerated() {
            var digit = Int(String(character)) ?? 0
            if index % 2 == 0 {
                digit *= 2
                if digit > 9 { digit -= 9 }
            }
            sum += digit
        }
        return (10 - sum % 10) % 10
    }

    fileprivate mutating func ipv4() -> String {
        "\(pick([10, 81, 172, 192, 203]))" + (0..<3).map { _ in ".\(int(1..<255))" }.joined()
    }

    fileprivate mutating func ipv6() -> String {
        let groups = (0..<8).map { _ in String(int(1..<0x10000), radix: 16) }
        // Full, or compressed with `::` where two groups are zero.
        return int(0..<2) == 0
            ? "2001:db8:" + groups[2...7].joined(separator: ":")
            : "2001:db8::" + groups[5...7].joined(separator: ":")
    }

    fileprivate mutating func phoneNumber() -> String {
        let (area, exchange, line) = (int(201..<990), int(200..<990), digits(4))
        switch int(0..<5) {
        case 0: return "+1 \(area) \(exchange) \(line)"
        case 1: return "(\(area)) \(exchange)-\(line)"
        case 2: return "\(area)-\(exchange)-\(line)"
        case 3: return "+44 20 \(int(7000..<8000)) \(digits(4))"
        default: return "+49 30 \(digits(8))"
        }
    }

    fileprivate mutating func tokenAssignment() -> PersonalData.Item {
        let name = pick(["token", "api_key", "access_token", "client_secret", "password"])
        let value = characters(24, from: PersonalData.alphanumeric)
        return PersonalData.Item(kind: "secret", name: "secret assignment", text: "\(name)=\(value)", secret: value)
    }

    fileprivate mutating func bearerToken() -> PersonalData.Item {
        let value = characters(32, from: PersonalData.alphanumeric)
        return PersonalData.Item(kind: "bearer", name: "bearer token", text: "Authorization: Bearer \(value)", secret: value)
    }

    fileprivate mutating func jwt() -> String {
        let header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
        return header + "." + "eyJ" + characters(40, from: PersonalData.base64URL) + "." + characters(43, from: PersonalData.base64URL)
    }

    fileprivate mutating func timestamp() -> String {
        let (month, day, hour, minute, second) = (int(1..<13), int(1..<29), int(0..<24), int(0..<60), int(0..<60))
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "20\(int(20..<30))-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(second))Z"
    }

    fileprivate mutating func uuid() -> String {
        [8, 4, 4, 4, 12].map { characters($0, from: PersonalData.hexDigits) }.joined(separator: "-")
    }
}
