//! Token counting behind a small trait: a real BPE tokenizer, or an estimate.

/// Counts the tokens of a text.
pub trait TokenCounter: Send + Sync {
    /// The number of tokens `text` takes.
    fn count(&self, text: &str) -> usize;
    /// A short name for reports, e.g. `cl100k_base`.
    fn name(&self) -> &str;
}

/// OpenAI's `cl100k_base` encoding (tiktoken-rs; the vocabulary ships in the crate, no network).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cl100k;

impl TokenCounter for Cl100k {
    fn count(&self, text: &str) -> usize {
        tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len()
    }
    fn name(&self) -> &str {
        "cl100k_base"
    }
}

/// A cheap estimate: one token per four characters, rounded up.
#[derive(Clone, Copy, Debug, Default)]
pub struct CharEstimate;

impl TokenCounter for CharEstimate {
    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
    fn name(&self) -> &str {
        "chars/4"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tokenizer_is_real() {
        assert_eq!(Cl100k.count(""), 0);
        assert_eq!(Cl100k.count("hello world"), 2);
        assert!(Cl100k.count("def main(): return runner()") > 3);
        assert_eq!(CharEstimate.count("abcdefgh1"), 3);
    }
}
