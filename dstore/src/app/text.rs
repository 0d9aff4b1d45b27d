//! Numbers as the command and the web view show them to a person.

/// A figure to three decimals, or `-`.
pub fn figure(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.3}"))
}

/// A confidence score, or `-`.
pub fn confidence(c: Option<f64>) -> String {
    c.map_or_else(|| "-".into(), |c| format!("{c:.2}"))
}

/// `n` of a thing in words, singular for one: "1 decision", "3 decisions".
pub fn count(n: impl Into<u64>, thing: &str) -> String {
    match n.into() {
        1 => format!("1 {thing}"),
        n => format!("{n} {thing}s"),
    }
}
