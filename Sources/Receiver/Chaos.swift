import Host
import HostSupport

/// Faults the receiver answers submissions with at random, for testing a client's retry
/// rules (SPEC T-2, `--chaos 429:0.2,503:0.1,reset:0.05,slow:0.1 --chaos-seed N`).
///
/// Each submission draws once: a fault with its probability, or none with what is left.
/// The same seed gives the same answers to the same sequence of submissions.
package struct Chaos: Sendable {
    package enum Fault: Sendable, Equatable {
        /// Answer with this status (429 and 503 carry Retry-After); the report is not stored.
        case status(Int)
        /// Close the connection with a TCP reset; the report is not stored.
        case reset
        /// Answer as usual, after `slowMs`.
        case slow

        /// As `--chaos` names it.
        package var word: String {
            switch self {
            case .status(let code): String(code)
            case .reset: "reset"
            case .slow: "slow"
            }
        }
    }

    package static let statuses = [408, 413, 425, 429, 500, 502, 503]
    /// How long a `slow` answer waits.
    package static let slowMs = 3_000

    package let faults: [(fault: Fault, probability: Double)]
    private var random: SplitMix64

    /// A `--chaos` word that is not `CODE:P`, a known fault or a probability in [0, 1], or
    /// probabilities that add up past 1.
    package struct SpecError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Parses `CODE:P[,CODE:P…]`.
    package init(_ text: String, seed: UInt64) throws(SpecError) {
        var faults: [(Fault, Double)] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: ":", omittingEmptySubsequences: false).map { $0.trimmed.lowercased() }
            guard parts.count == 2 else { throw SpecError(description: "--chaos '\(text)': '\(item)' is not CODE:P (e.g. 503:0.1)") }
            let fault: Fault
            switch parts[0] {
            case "reset": fault = .reset
            case "slow": fault = .slow
            case let word:
                guard let code = Int(word), Self.statuses.contains(code) else {
                    throw SpecError(description: "--chaos '\(text)': '\(word)' is not a chaos fault (one of \(Self.statuses.map(String.init).joined(separator: ", ")), reset, slow)")
                }
                fault = .status(code)
            }
            guard let probability = Double(parts[1]), probability >= 0, probability <= 1 else {
                throw SpecError(description: "--chaos '\(text)': probability '\(parts[1])' of \(parts[0]) is not a number from 0 to 1")
            }
            faults.append((fault, probability))
        }
        let total = faults.reduce(0) { $0 + $1.1 }
        guard total <= 1 + 1e-9 else {
            throw SpecError(description: "--chaos '\(text)': the probabilities add up to \(total), more than 1")
        }
        self.faults = faults
        random = SplitMix64(seed: seed)
    }

    /// The fault for the next submission, or nil to answer it as usual.
    package mutating func draw() -> Fault? {
        let roll = Double(random.next() >> 11) / Double(1 << 53)
        var below = 0.0
        for (fault, probability) in faults {
            below += probability
            if roll < below { return fault }
        }
        return nil
    }
}
