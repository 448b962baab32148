//! Reporters: every one reads recorded data ([`model`]) and nothing else, the way vegeta's
//! reporters all read one result stream.

pub mod text;
