//! The emulated upstream fleet that stands behind every proxy under test.
