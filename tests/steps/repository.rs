//! Repository steps (filled in with features/repository.feature).
