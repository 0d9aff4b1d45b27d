//! Instants as RFC 3339 text in UTC, without a date library: the store
//! writes them (the schema history's `applied_on`) and the command prints
//! them (a plan's first and last activity, from its ULIDs).

/// `secs` seconds and `nanos` nanoseconds after the Unix epoch as
/// `YYYY-MM-DDTHH:MM:SS.fffZ`, with `digits` digits of the fraction (0 to 9;
/// none and no point for 0).
///
/// ```
/// use decision_store::time::utc;
/// assert_eq!(utc(951_782_400, 123_000_000, 3), "2000-02-29T00:00:00.123Z");
/// assert_eq!(utc(0, 0, 0), "1970-01-01T00:00:00Z");
/// ```
pub fn utc(secs: u64, nanos: u32, digits: u32) -> String {
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let clock = format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    match digits.min(9) {
        0 => format!("{clock}Z"),
        d => {
            let fraction = nanos / 10u32.pow(9 - d);
            format!("{clock}.{fraction:0width$}Z", width = d as usize)
        }
    }
}

/// Milliseconds after the epoch, to the millisecond.
pub fn utc_ms(ms: u64) -> String {
    utc(ms / 1000, (ms % 1000) as u32 * 1_000_000, 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_fractions() {
        assert_eq!(utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_ms(1_735_689_600_123), "2025-01-01T00:00:00.123Z");
        assert_eq!(utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(1_796_095_799, 0, 9), "2026-12-01T03:29:59.000000000Z");
        assert_eq!(utc(4_107_542_400, 0, 0), "2100-03-01T00:00:00Z");
        assert_eq!(utc(1, 875_296_042, 9), "1970-01-01T00:00:01.875296042Z");
    }
}
