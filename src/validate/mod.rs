//! Pure request validators: each rule is a function over parsed values (and, for workspace
//! and file parts, the filesystem), returning an `RpcError` with a reason code.

pub mod base64_check;
pub mod fields;
pub mod media;
pub mod metadata;
pub mod names;
pub mod parts;
pub mod push_url;
pub mod request;
pub mod service;
pub mod workspace;
