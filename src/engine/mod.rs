//! The embedded A2A task engine (in progress).
