//! JSON Lines import and export.
