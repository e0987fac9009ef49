import HostSupport
/// Why a report operation did nothing. Raw values are the ABI's `RH_ERR_*`.
package enum ReportError: Int32, Error, Sendable {
    /// The handle is closed or unknown: nothing changed.
    case closed = -1
    /// A value is missing where one is required, or is not valid UTF-8.
    case invalid = -2
    /// No such attribute, label or attachment, or the field is absent.
    case notFound = -3
    /// The caller's buffer is too small.
    case truncated = -4
    /// Severity outside 1...5: ignored and logged.
    case range = -5
    /// Attachment empty, over 3 MB or past its source's third: dropped and logged.
    case dropped = -6
}
