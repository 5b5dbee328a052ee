//! Miners as validators see them: the reference policies our loopback miners answer
//! with (`policy`). The OpenAI-compatible HTTP client and server come with the rest of
//! issue 4.

pub mod policy;
