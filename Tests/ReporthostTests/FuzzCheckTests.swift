import Foundation
@testable import Conformance
import Host
import HostTestSupport
import Testing

/// `check --fuzz` judges the plugin, not the host's limits: its inputs stay within them, and
/// the samples pass 200 cases.
@Suite struct FuzzCheckTests {
    @Test("I-8: --fuzz inputs stay within the host's documented limits, with room for the plugin's additions")
    func inputsWithinLimits() {
        for seed in Catalogue.fuzzSeeds(count: 100, seed: 7) {
            let request = FuzzCase(seed: seed).request
            #expect(request.labels.count <= 900 && request.attributes.count <= 900, "case \(seed)")
            #expect(request.attachments.allSatisfy { !$0.data.isEmpty && $0.data.count <= ReportContent.attachmentMaxBytes }, "case \(seed)")
            #expect(request.labels.allSatisfy { $0.count <= 60 } && request.attributes.values.allSatisfy { $0.count <= 1_000 }, "case \(seed)")
        }
    }

    @Test("I-8: every sample plugin passes check --fuzz 200", arguments: [
        ("libscrub-pii.so", "handler"), ("libwrapper-sim.so", "wrapper"), ("libaccount-context.so", "handler"), ("libasync-example.so", "handler"),
    ])
    func samplesPassFuzz(_ library: String, _ slot: String) async throws {
        let result = try await offPool {
            try ChildProcess.reporthost(
                ["check", Products.directory.appendingPathComponent(library).path, "--slot", slot, "--fuzz", "200", "--include", "^fuzz$"])
        }
        #expect(result.status == 0, "\(library): \(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("200 generated report(s), no crash, hang or limit breach"), "\(result.stdout)")
    }
}
